// durable-relay console. Plain DOM, no framework, no external assets; every
// figure comes from the relay's own /v1/ API with the bearer token, which
// lives in this tab's sessionStorage only. Text from the relay (names,
// errors) is always set with textContent, never as HTML.
"use strict";

/** sessionStorage key of the token. */
const TOKEN_KEY = "durable-relay-token";
/** How often the open views refresh. */
const REFRESH_MS = 2000;
/** Sources per directory page. */
const PAGE_SOURCES = 50;
/** Keys shown for a target. */
const PAGE_KEYS = 50;
/**
 * Watermarks per page of a target's list: a target can hear from thousands
 * of sources, so the console reads a page at a time ("More watermarks") and
 * each refresh re-reads only the first.
 */
const PAGE_WATERMARKS = 100;
/** Rows older than this raise the lag flag (RELAY_LAG_BOUND_MS). */
const LAG_BOUND_MS = 60000;

const $ = (id) => document.getElementById(id);
const state = {
  sources: [], next: null, selected: null, target: null, timer: null, busy: false,
  watermarks: [], watermarksOf: null, watermarksNext: null,
};

function token() {
  return sessionStorage.getItem(TOKEN_KEY) ?? "";
}

/** Calls the API; throws an Error carrying the relay's code and message. */
async function api(method, path) {
  const r = await fetch(path, { method, headers: { authorization: `Bearer ${token()}` } });
  const body = await r.json().catch(() => null);
  if (r.status === 401) {
    logout("The relay refused that token.");
    throw new Error("unauthorized");
  }
  if (!r.ok) {
    const e = new Error(body?.error ? `${body.error.code}: ${body.error.message}` : `HTTP ${r.status}`);
    e.code = body?.error?.code;
    throw e;
  }
  return body;
}

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") node.className = v;
    else if (k.startsWith("data-")) node.setAttribute(k, v);
    else if (k === "onclick") node.addEventListener("click", v);
    else node[k] = v;
  }
  for (const c of children) node.append(c instanceof Node ? c : document.createTextNode(String(c ?? "")));
  return node;
}

const num = (n) => (n === null || n === undefined ? "—" : Number(n).toLocaleString("en-US"));

function age(ms) {
  if (ms === null || ms === undefined) return "—";
  if (ms < 1000) return `${ms} ms`;
  if (ms < 120000) return `${(ms / 1000).toFixed(1)} s`;
  return `${Math.round(ms / 60000)} min`;
}

function ageCell(ms) {
  const cls = ms === null || ms === undefined ? "muted" : ms > LAG_BOUND_MS ? "bad" : ms > LAG_BOUND_MS / 2 ? "warn" : "ok";
  return el("td", { class: `num ${cls}`, "data-field": "oldest_row_age_ms", title: `lag bound ${LAG_BOUND_MS / 1000} s` }, age(ms));
}

function showError(text) {
  $("error").textContent = text ?? "";
}

// ---- sources -------------------------------------------------------------

async function loadSources() {
  const first = await api("GET", `/v1/sources?limit=${PAGE_SOURCES}`);
  const names = first.sources.map((s) => s.name);
  const extra = state.sources.slice(names.length).map((s) => s.name);
  const all = [...names, ...extra];
  const statuses = await Promise.all(all.map((n) => api("GET", `/v1/sources/${encodeURIComponent(n)}/status`).catch((e) => ({ source: n, error: e.message }))));
  state.sources = statuses.map((s, i) => ({ name: all[i], status: s }));
  await addLogical();
  if (!extra.length) state.next = first.next;
  renderSources();
}

/**
 * Partitions list themselves as `logical:index`; each logical source whose
 * status comes back gathered over its partitions gets a row of its own,
 * ahead of its partitions.
 */
async function addLogical() {
  const logical = [...new Set(state.sources.map((s) => s.name.match(/^(.+):\d+$/)?.[1]).filter(Boolean))];
  const gathered = await Promise.all(logical.map((n) => api("GET", `/v1/sources/${encodeURIComponent(n)}/status`).catch(() => null)));
  gathered.forEach((status, i) => {
    if (!status?.partitions) return;
    const at = state.sources.findIndex((s) => s.name.startsWith(`${logical[i]}:`));
    state.sources.splice(at < 0 ? 0 : at, 0, { name: logical[i], status, logical: true });
  });
}

async function moreSources() {
  if (!state.next) return;
  const page = await api("GET", `/v1/sources?limit=${PAGE_SOURCES}&after=${encodeURIComponent(state.next)}`);
  const statuses = await Promise.all(page.sources.map((s) => api("GET", `/v1/sources/${encodeURIComponent(s.name)}/status`)));
  state.sources.push(...page.sources.map((s, i) => ({ name: s.name, status: statuses[i] })));
  state.next = page.next;
  renderSources();
}

function targetList(obj) {
  const names = Object.keys(obj ?? {});
  return names.length ? names.join(", ") : "";
}

function renderSources() {
  const body = $("sources-table").tBodies[0];
  body.replaceChildren(
    ...state.sources.map(({ name, status: s, logical }) => {
      const parked = targetList(s.parked_targets);
      const failing = targetList(s.failing_targets);
      const row = el(
        "tr",
        { class: `pick${state.selected === name ? " selected" : ""}`, "data-source": name, onclick: () => select(name) },
        el("td", {}, el("code", {}, name), logical ? el("span", { "data-field": "partitions" }, ` · ${s.partitions.length} partitions`) : ""),
        el("td", { class: "num", "data-field": "queued_rows" }, num(s.queued_rows)),
        ageCell(s.oldest_row_age_ms),
        el("td", { class: `num${s.parked_rows ? " bad" : ""}`, "data-field": "parked_rows" }, num(s.parked_rows)),
        el("td", { "data-field": "targets" },
          parked ? el("span", { class: "bad" }, `parked: ${parked}`) : "",
          parked && failing ? " · " : "",
          failing ? el("span", { class: "warn" }, `failing: ${failing}`) : "",
          s.error ? el("span", { class: "bad" }, s.error) : ""),
        el("td", { class: "num", "data-field": "delivered_rows" }, num(s.delivered_rows)),
        el("td", { class: "num", "data-field": "alarms" }, num(s.alarms)),
      );
      return row;
    }),
  );
  $("sources-empty").classList.toggle("hidden", state.sources.length > 0);
  $("sources-more").classList.toggle("hidden", !state.next);
}

// ---- one source ----------------------------------------------------------------

function select(name) {
  state.selected = name;
  $("source").classList.remove("hidden");
  $("source-name").textContent = name;
  renderSources();
  refresh();
}

function figure(label, value, field) {
  return el("div", { class: "figure", "data-figure": field }, el("b", {}, value), el("span", {}, label));
}

async function loadSource(name) {
  const base = `/v1/sources/${encodeURIComponent(name)}`;
  // A partitioned source has no alarm history of its own (each partition has one).
  const noAlarms = () => ({ alarms: [] });
  const [s, alarms, parked] = await Promise.all([api("GET", `${base}/status`), api("GET", `${base}/alarms`).catch(noAlarms), api("GET", `${base}/parked`)]);
  if (state.selected !== name) return;
  if (s.partitions) {
    $("source-figures").replaceChildren(
      figure("partitions", num(s.partitions.length), "partitions"),
      figure("queued rows", num(s.queued_rows), "queued_rows"),
      figure("parked rows", num(s.parked_rows), "parked_rows"),
      figure("delivered rows", num(s.delivered_rows), "delivered_rows"),
      figure("oldest row", age(s.oldest_row_age_ms), "oldest_row_age_ms"),
      figure("lag-bound breaches", num(s.lag_breaches), "lag_breaches"),
      figure("resize", s.resize_settled === undefined ? "none" : s.resize_settled ? "settled" : "settling", "resize"),
    );
  } else $("source-figures").replaceChildren(
    figure("queued rows", num(s.queued_rows), "queued_rows"),
    figure("queued bytes", num(s.queued_bytes), "queued_bytes"),
    figure("parked rows", num(s.parked_rows), "parked_rows"),
    figure("delivered rows", num(s.delivered_rows), "delivered_rows"),
    figure("last sequence", num(s.last_seq), "last_seq"),
    figure("oldest row", age(s.oldest_row_age_ms), "oldest_row_age_ms"),
    figure("lag-bound breaches", num(s.lag_breaches), "lag_breaches"),
    figure("rows written per row", s.sql_rows_written_per_delivered_row === null ? "—" : s.sql_rows_written_per_delivered_row.toFixed(2), "rows_written"),
    figure("capacity used", `${s.capacity.percent_full.toFixed(1)} %`, "capacity"),
    figure(`rows written ${s.rows_written_day} (UTC)`, num(s.rows_written_today), "rows_written_today"),
    figure("projected today / Free allowance", `${num(s.rows_written_projected_today)} / ${num(s.rows_written_free_limit)}`, "rows_written_projected_today"),
  );
  renderChart(alarms.alarms);
  renderTargets(name, parked.targets);
}

/** Alarm slots across the chart: the source keeps this many (ALARM_HISTORY_LEN). */
const CHART_SLOTS = 120;

/** Backlog (line) and rows delivered (bars) per alarm, newest at the right. */
function renderChart(points) {
  const svg = $("chart");
  const ns = "http://www.w3.org/2000/svg";
  const W = 600, H = 160, top = 6, bottom = 4;
  const node = (tag, attrs) => {
    const n = document.createElementNS(ns, tag);
    for (const [k, v] of Object.entries(attrs)) n.setAttribute(k, v);
    return n;
  };
  if (!points.length) {
    svg.replaceChildren();
    $("chart-caption").textContent = "no alarm since this source's object started";
    return;
  }
  const maxQ = Math.max(1, ...points.map((p) => p.queued_rows));
  const maxD = Math.max(1, ...points.map((p) => p.rows_delivered));
  const step = W / Math.max(CHART_SLOTS, points.length);
  const x0 = W - step * points.length;
  const y = (v, max) => top + (H - top - bottom) * (1 - v / max);
  const kids = points.map((p, i) => {
    const h = (H - top - bottom) * (p.rows_delivered / maxD);
    return node("rect", { class: "delivered", x: x0 + i * step + 0.5, y: H - bottom - h, width: Math.max(1, step - 1), height: h });
  });
  const line = points.map((p, i) => `${x0 + (i + 0.5) * step},${y(p.queued_rows, maxQ)}`).join(" ");
  kids.push(node("polyline", { class: "backlog", points: line }));
  svg.replaceChildren(...kids);
  const last = points.at(-1);
  $("chart-caption").textContent =
    `${points.length} alarms · backlog peak ${maxQ.toLocaleString("en-US")} rows (now ${last.queued_rows.toLocaleString("en-US")}) · ` +
    `most delivered in one alarm ${maxD.toLocaleString("en-US")} rows`;
}

/** A failing target's state: its run of failed cycles, and when it is called next. */
function failing(t) {
  const wait = typeof t.retry_at_ms === "number" ? Math.ceil((t.retry_at_ms - Date.now()) / 1000) : 0;
  return `failing (${t.failed_cycles} cycles${wait > 0 ? `, next try in ${wait} s` : ""})`;
}

function renderTargets(source, targets) {
  const body = $("targets-table").tBodies[0];
  body.replaceChildren(
    ...targets.map((t) => {
      const act = (action) => el("button", {
        class: action === "discard" ? "danger" : "",
        type: "button",
        "data-action": action,
        "data-target": t.target,
        onclick: () => operate(source, t.target, action, t.rows),
      }, action === "redrive" ? "Redrive" : "Discard");
      return el(
        "tr",
        { "data-target": t.target },
        el("td", {}, el("code", {}, t.target)),
        el("td", { class: "muted", "data-field": "kind" }, t.target.startsWith("endpoint:") ? "HTTPS endpoint" : "object"),
        el("td", { class: t.parked ? "bad" : "warn", "data-field": "state" }, t.parked ? "parked" : failing(t)),
        el("td", { class: "num", "data-field": "rows" }, num(t.rows)),
        el("td", { class: "muted", "data-field": "reason" }, (t.parked ? t.reason : t.last_error) ?? t.last_error ?? ""),
        el("td", {}, ...(t.parked ? [act("redrive"), " ", act("discard")] : [])),
      );
    }),
  );
  $("targets-empty").classList.toggle("hidden", targets.length > 0);
}

async function operate(source, target, action, rows) {
  const what = action === "redrive"
    ? `Redrive ${rows} parked rows of ${target} from ${source}? They go back in order, before anything newer.`
    : `Discard ${rows} parked rows of ${target} from ${source}? They will never be delivered.`;
  if (!window.confirm(what)) return;
  try {
    const r = await api("POST", `/v1/sources/${encodeURIComponent(source)}/parked/${encodeURIComponent(target)}/${action}`);
    showError("");
    $("updated").textContent = `${action}: ${r.rows} rows`;
  } catch (e) {
    showError(`${action} failed: ${e.message}`);
  }
  refresh();
}

async function retire() {
  const name = state.selected;
  if (!name || !window.confirm(`Retire ${name}? It leaves the directory; it is listed again if it enqueues.`)) return;
  try {
    await api("POST", `/v1/sources/${encodeURIComponent(name)}/retire`);
    state.selected = null;
    state.sources = state.sources.filter((s) => s.name !== name);
    $("source").classList.add("hidden");
    showError("");
  } catch (e) {
    showError(`retire failed: ${e.message}`);
  }
  refresh();
}

// ---- one target ----------------------------------------------------------------

async function loadTarget(name) {
  const base = `/v1/targets/${encodeURIComponent(name)}`;
  const [w, k] = await Promise.all([
    api("GET", `${base}/watermarks?limit=${PAGE_WATERMARKS}`),
    api("GET", `${base}/keys?limit=${PAGE_KEYS}`),
  ]);
  if (state.target !== name) return;
  // Rows a "More watermarks" click added stay as they were read.
  const extra = state.watermarksOf === name ? state.watermarks.slice(w.watermarks.length) : [];
  state.watermarksOf = name;
  state.watermarks = [...w.watermarks, ...extra];
  if (!extra.length) state.watermarksNext = w.next;
  $("target-title").textContent = name;
  renderWatermarks();
  $("keys-table").tBodies[0].replaceChildren(
    ...k.keys.map((kv) => el("tr", {}, el("td", {}, el("code", {}, kv.key)), el("td", {}, el("code", {}, JSON.stringify(kv.value))))),
  );
  $("target-view").classList.remove("hidden");
}

async function moreWatermarks() {
  const name = state.target;
  if (!name || state.watermarksOf !== name || !state.watermarksNext) return;
  const base = `/v1/targets/${encodeURIComponent(name)}`;
  const page = await api("GET", `${base}/watermarks?limit=${PAGE_WATERMARKS}&after=${encodeURIComponent(state.watermarksNext)}`);
  if (state.target !== name) return;
  state.watermarks.push(...page.watermarks);
  state.watermarksNext = page.next;
  renderWatermarks();
}

function renderWatermarks() {
  $("watermarks-table").tBodies[0].replaceChildren(
    ...state.watermarks.map((m) => el("tr", { "data-source": m.source },
      el("td", {}, el("code", {}, m.source)),
      el("td", { class: "num", "data-field": "watermark" }, num(m.watermark)),
      el("td", { class: "num" }, num(m.applied_rows)),
      el("td", { class: "num" }, num(m.batches)),
      el("td", { class: "num" }, num(m.sql_rows_written)))),
  );
  $("watermarks-more").classList.toggle("hidden", !state.watermarksNext);
}

// ---- refresh, login ----------------------------------------------------------------

async function refresh() {
  if (state.busy || !token()) return;
  state.busy = true;
  try {
    await loadSources();
    if (state.selected) await loadSource(state.selected);
    if (state.target) await loadTarget(state.target);
    $("updated").textContent = `updated ${new Date().toLocaleTimeString()}`;
    showError("");
  } catch (e) {
    if (e.message !== "unauthorized") showError(e.message);
  } finally {
    state.busy = false;
  }
}

async function open() {
  try {
    const health = await api("GET", "/v1/health");
    $("plan").textContent = `plan ${health.plan}`;
  } catch (e) {
    if (e.message !== "unauthorized") $("login-error").textContent = e.message;
    return;
  }
  $("login").classList.add("hidden");
  $("app").classList.remove("hidden");
  $("logout").classList.remove("hidden");
  clearInterval(state.timer);
  state.timer = setInterval(refresh, REFRESH_MS);
  refresh();
}

function logout(reason = "") {
  sessionStorage.removeItem(TOKEN_KEY);
  clearInterval(state.timer);
  $("app").classList.add("hidden");
  $("logout").classList.add("hidden");
  $("login").classList.remove("hidden");
  $("login-error").textContent = reason;
}

document.addEventListener("DOMContentLoaded", () => {
  $("login-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    sessionStorage.setItem(TOKEN_KEY, $("token").value.trim());
    $("token").value = "";
    open();
  });
  $("target-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const name = $("target-name").value.trim();
    state.target = name || null;
    if (!name) $("target-view").classList.add("hidden");
    refresh();
  });
  $("logout").addEventListener("click", () => logout());
  $("sources-more").addEventListener("click", () => moreSources().catch((e) => showError(e.message)));
  $("watermarks-more").addEventListener("click", () => moreWatermarks().catch((e) => showError(e.message)));
  $("retire").addEventListener("click", retire);
  if (token()) open();
});
