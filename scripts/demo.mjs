#!/usr/bin/env node
// `npm run demo`: a realistic run against the relay you started with
// `scripts/run --test-build` (or any relay, with --url and --token).
//
// Order sources (one per shop) keep per-customer targets up to date: every
// order event enqueues the order's rows for its customer. One customer
// fails for a while (the test fault switch) and recovers. A progress bar
// shows rows delivered of rows sent, the rate, the oldest undelivered
// row's age and the parked and failing targets; at the end every target is
// audited: it must hold exactly the keys and values that were sent.
//
//   npm run demo -- [--url http://localhost:8787] [--token T] [--rows 3000]
//                   [--sources 16] [--customers 64] [--fail-ms 6000]

import { readFileSync } from "node:fs";
import { join, dirname } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");
/** Rows per enqueue request: one order event touches a few keys. */
const ROWS_PER_EVENT = 4;
/** The customer that fails for a while. */
const FAILING = 7;
/** Keys read per page in the final audit (the relay's MAX_KEYS_PER_PAGE). */
const KEYS_PAGE = 1000;
/** How often the progress bar redraws. */
const TICK_MS = 400;
/** The demo gives up when nothing is delivered for this long. */
const STALL_MS = 120_000;

function args(argv) {
  const o = { url: "http://localhost:8787", token: null, rows: 3000, sources: 16, customers: 64, failMs: 6000 };
  for (let i = 0; i < argv.length; i++) {
    const v = () => argv[++i];
    if (argv[i] === "--url") o.url = v();
    else if (argv[i] === "--token") o.token = v();
    else if (argv[i] === "--rows") o.rows = Number(v());
    else if (argv[i] === "--sources") o.sources = Number(v());
    else if (argv[i] === "--customers") o.customers = Number(v());
    else if (argv[i] === "--fail-ms") o.failMs = Number(v());
    else throw new Error(`unknown argument ${argv[i]}`);
  }
  o.token ??= process.env.RELAY_TOKEN ?? readFileSync(join(ROOT, ".dev.vars"), "utf8").match(/^RELAY_TOKEN=(.*)$/m)?.[1];
  if (!o.token) throw new Error("no token: pass --token or run scripts/bootstrap (it writes .dev.vars)");
  if (!(o.customers > FAILING)) throw new Error(`--customers must be more than ${FAILING}`);
  return o;
}

const opts = args(process.argv.slice(2));
const run = `demo-${Date.now().toString(36)}`;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function api(method, path, body) {
  const r = await fetch(opts.url + path, {
    method,
    headers: { authorization: `Bearer ${opts.token}` },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const json = await r.json().catch(() => null);
  if (!r.ok) throw new Error(`${method} ${path}: ${r.status} ${JSON.stringify(json)}`);
  return json;
}

const shops = Array.from({ length: opts.sources }, (_, i) => `${run}-shop-${i}`);
const customer = (i) => `${run}-customer-${i}`;
const failing = customer(FAILING);

/** Every row the demo sends: [shop, customer, key, value], in sending order per shop. */
function plan() {
  const events = [];
  let n = 0;
  while (n < opts.rows) {
    const shop = events.length % opts.sources;
    const who = (events.length * 7 + 3) % opts.customers;
    const order = `order-${events.length}`;
    const rows = [];
    for (let k = 0; k < ROWS_PER_EVENT && n < opts.rows; k++, n++) {
      const key = k === 0 ? `${order}` : `${order}.line-${k}`;
      rows.push({ target: customer(who), puts: [[key, { shop, order: events.length, line: k, cents: 100 + ((n * 37) % 9000) }]] });
    }
    events.push({ shop: shops[shop], rows });
  }
  return events;
}

function bar(done, total, width = 30) {
  const full = Math.round((width * done) / Math.max(1, total));
  return `[${"#".repeat(full)}${".".repeat(width - full)}]`;
}

async function figures() {
  const st = await Promise.all(shops.map((s) => api("GET", `/v1/sources/${s}/status`)));
  const sum = (f) => st.reduce((a, s) => a + f(s), 0);
  const oldest = Math.max(0, ...st.map((s) => s.oldest_row_age_ms ?? 0));
  const parked = new Set(st.flatMap((s) => Object.keys(s.parked_targets)));
  const failingNow = new Set(st.flatMap((s) => Object.keys(s.failing_targets)));
  return { delivered: sum((s) => s.delivered_rows), queued: sum((s) => s.queued_rows), parked: sum((s) => s.parked_rows), oldest, parkedTargets: parked, failingTargets: failingNow, alarms: sum((s) => s.alarms), calls: sum((s) => s.subrequests) };
}

/** JSON text with object keys sorted, as the relay stores values (canonical form). */
function canon(v) {
  if (Array.isArray(v)) return `[${v.map(canon).join(",")}]`;
  if (v && typeof v === "object") return `{${Object.keys(v).sort().map((k) => `${JSON.stringify(k)}:${canon(v[k])}`).join(",")}}`;
  return JSON.stringify(v);
}

async function audit(events) {
  const want = new Map();
  for (const e of events) for (const r of e.rows) {
    if (!want.has(r.target)) want.set(r.target, new Map());
    want.get(r.target).set(r.puts[0][0], canon(r.puts[0][1]));
  }
  let keys = 0, missing = 0, wrong = 0, extra = 0;
  for (const [target, expected] of want) {
    const got = new Map();
    let after = "";
    for (;;) {
      const page = await api("GET", `/v1/targets/${target}/keys?limit=${KEYS_PAGE}&after=${encodeURIComponent(after)}`);
      for (const kv of page.keys) got.set(kv.key, canon(kv.value));
      if (!page.next) break;
      after = page.next;
    }
    for (const [k, v] of expected) {
      keys += 1;
      if (!got.has(k)) missing += 1;
      else if (got.get(k) !== v) wrong += 1;
    }
    extra += [...got.keys()].filter((k) => !expected.has(k)).length;
  }
  return { targets: want.size, keys, missing, wrong, extra };
}

async function main() {
  const health = await api("GET", "/v1/health").catch((e) => {
    throw new Error(`no relay at ${opts.url} (${e.message}); start it with scripts/run --test-build`);
  });
  const canFail = health.test_faults === true;
  const events = plan();
  const total = events.reduce((a, e) => a + e.rows.length, 0);
  console.log(`demo ${run}: ${total} rows from ${opts.sources} shops to ${opts.customers} customers, plan ${health.plan}`);
  console.log(`console: ${opts.url}/  (token in .dev.vars)`);
  if (canFail) {
    await api("POST", `/v1/targets/${failing}/faults`, { reject: true });
    console.log(`${failing} rejects every call for the first ${opts.failMs / 1000} s`);
  } else {
    console.log("this relay has no test fault switch (start it with scripts/run --test-build): no customer will fail");
  }

  const t0 = Date.now();
  let sent = 0;
  let sendError = null;
  const byShop = new Map(shops.map((s) => [s, []]));
  for (const e of events) byShop.get(e.shop).push(e);
  const sending = Promise.all(
    [...byShop.values()].map(async (list) => {
      for (const e of list) {
        await api("POST", `/v1/sources/${e.shop}/enqueue`, { rows: e.rows });
        sent += e.rows.length;
      }
    }),
  ).catch((e) => (sendError = e));
  let healed = !canFail;
  let last = { delivered: -1, at: Date.now() };
  let f;
  for (;;) {
    await sleep(TICK_MS);
    if (sendError) throw sendError;
    if (!healed && Date.now() - t0 >= opts.failMs) {
      await api("POST", `/v1/targets/${failing}/faults`, { reject: false });
      healed = true;
      process.stderr.write(`\n${failing} recovered after ${((Date.now() - t0) / 1000).toFixed(1)} s\n`);
    }
    f = await figures();
    const secs = (Date.now() - t0) / 1000;
    const line = `${bar(f.delivered, total)} delivered ${f.delivered}/${sent} sent of ${total} · ${(f.delivered / secs).toFixed(0)} rows/s · oldest ${(f.oldest / 1000).toFixed(1)} s · parked ${f.parked}${f.failingTargets.size ? ` · failing ${[...f.failingTargets].join(",")}` : ""}`;
    process.stderr.write(process.stderr.isTTY ? `\r\x1b[K${line}` : `${line}\n`);
    if (f.delivered !== last.delivered) last = { delivered: f.delivered, at: Date.now() };
    if (Date.now() - last.at > STALL_MS) throw new Error(`no delivery for ${STALL_MS / 1000} s`);
    if (healed && sent === total && f.delivered === total && f.queued === 0) break;
  }
  await sending;
  const secs = (Date.now() - t0) / 1000;
  process.stderr.write("\n");
  console.log(`delivered ${total} rows in ${secs.toFixed(1)} s (${(total / secs).toFixed(0)} rows/s) in ${f.alarms} alarms and ${f.calls} target calls`);
  const a = await audit(events);
  const ok = a.missing === 0 && a.wrong === 0 && a.extra === 0;
  console.log(`audit: ${a.targets} customers hold ${a.keys} keys: ${a.missing} missing, ${a.wrong} different from what was sent, ${a.extra} unexpected${ok ? ": every target holds exactly what was sent" : ""}`);
  if (!ok) process.exit(1);
}

main().catch((e) => {
  console.error(`demo: ${e.message}`);
  process.exit(1);
});
