// The profile: where one row's work goes, in local workerd.
//
// A lone row on an idle source costs one enqueue (the front door's fetch
// and the source's), one alarm and one apply (the target's fetch). The
// profile sends rows one at a time and, for each, reads the isolate's work
// counts (GET /v1/bench/work: SQL statements and rows, JSON bytes in and
// out, target calls, log lines and bytes, and calls across the JS/wasm
// boundary) before the enqueue, after its reply and after its delivery.
// Each row is delayed by SPLIT_DELAY_MS so the enqueue and the delivery
// are counted apart; a second pass without the delay checks that the
// delay changed nothing but the timing.
//
// Then, on a Worker without the boundary counter (its wrappers cost time),
// it records a V8 CPU profile over the same lone rows through the inspector
// and splits the sampled time into wasm, JavaScript (the Worker's glue) and
// the runtime (its built-in functions, garbage collection, the rest).
//
// Counts do not move with the machine's load; the milliseconds do, so they
// are read as shares, not as absolute costs.

import { join } from "node:path";
import { readFileSync, writeFileSync, mkdirSync } from "node:fs";
import { ROOT, sleep } from "../tests/e2e/harness.mjs";
import { startBenchWorker } from "./workerd.mjs";
import { getOk } from "./measure.mjs";
import { snapshot, workerCpuMs } from "./cpu.mjs";

/** How long each row of the split pass waits before it is due, ms: long enough that its alarm runs after the enqueue's reply was counted. */
export const SPLIT_DELAY_MS = 400;
/** How long after a row was due the pass waits before counting its delivery, ms. */
const SETTLE_MS = 250;
/** Targets the rows go round, so each apply finds a target that has one source. */
const PROFILE_TARGETS = 4;
/** The V8 sampling interval, µs. */
const SAMPLE_US = 100;
/** Functions named in the report, by self time. */
const TOP_FUNCTIONS = 12;

/** The difference `b - a` of two flat count objects. */
function minus(b, a) {
  return Object.fromEntries(Object.keys(b).map((k) => [k, b[k] - (a?.[k] ?? 0)]));
}

/** One reading of the work counts, flattened: work fields plus boundary_imports/boundary_exports. */
async function counts(worker) {
  const r = await getOk(worker, "/v1/bench/work");
  const statements = Object.fromEntries(Object.entries(r.statements ?? {}).map(([sql, n]) => [`sql: ${sql}`, n]));
  // wasm-bindgen names an import `__wbg_<name>_<hash>`: keep the name.
  const calls = {};
  for (const [name, n] of Object.entries(r.boundary?.by_name ?? {})) {
    const key = `call: ${name.replace(/^__wbg_/, "").replace(/_[0-9a-f]{16}$/, "")}`;
    calls[key] = (calls[key] ?? 0) + n;
  }
  return { ...r.work, boundary_imports: r.boundary?.imports ?? 0, boundary_exports: r.boundary?.exports ?? 0, ...statements, ...calls };
}

/**
 * The cost of a reading itself (the route answers with JSON and crosses the
 * boundary), measured as the difference of two back-to-back readings and
 * subtracted from every difference.
 */
async function readingCost(worker) {
  const a = await counts(worker);
  const b = await counts(worker);
  return minus(b, a);
}

/** Enqueues one row of `source`; `delayMs` makes it due later. */
async function enqueue(worker, source, i, delayMs) {
  const row = { target: `${source}-t${i % PROFILE_TARGETS}`, puts: [[`k${i}`, { i }]] };
  if (delayMs) row.delay_ms = delayMs;
  const r = await worker.api("POST", `/v1/sources/${source}/enqueue`, { rows: [row] });
  if (r.status !== 200) throw new Error(`profile enqueue: ${r.status} ${JSON.stringify(r.body)}`);
}

/** Averages per row of a list of count objects. */
function mean(list) {
  const out = {};
  for (const k of Object.keys(list[0] ?? {})) out[k] = list.reduce((a, x) => a + x[k], 0) / list.length;
  return out;
}

/** The counting passes: per-row counts of the enqueue, the delivery and the whole cycle. */
async function countPasses(worker, rows) {
  // Open every object first: a first call migrates its schema, which is
  // not the steady cost of a row.
  for (const source of ["prof-split", "prof-cycle"]) {
    for (let i = 0; i < PROFILE_TARGETS; i++) await enqueue(worker, source, rows + i, 0);
  }
  await sleep(SETTLE_MS);
  const cost = await readingCost(worker);
  const less = (b, a) => minus(minus(b, a), cost);
  const enqueues = [];
  const deliveries = [];
  const cycles = [];
  for (let i = 0; i < rows; i++) {
    const before = await counts(worker);
    await enqueue(worker, "prof-split", i, SPLIT_DELAY_MS);
    const queued = await counts(worker);
    await sleep(SPLIT_DELAY_MS + SETTLE_MS);
    const after = await counts(worker);
    enqueues.push(less(queued, before));
    deliveries.push(less(after, queued));
  }
  for (let i = 0; i < rows; i++) {
    const before = await counts(worker);
    await enqueue(worker, "prof-cycle", i, 0);
    await sleep(SETTLE_MS);
    cycles.push(less(await counts(worker), before));
  }
  for (const source of ["prof-split", "prof-cycle"]) {
    const st = await getOk(worker, `/v1/sources/${source}/status`);
    const sent = rows + PROFILE_TARGETS;
    if (st.queued_rows !== 0 || st.delivered_rows !== sent) {
      throw new Error(`profile: ${source} delivered ${st.delivered_rows} of ${sent}, ${st.queued_rows} still queued`);
    }
  }
  return { enqueue: mean(enqueues), delivery: mean(deliveries), cycle: mean(cycles) };
}

/** A Chrome DevTools Protocol session with the Worker's inspector. */
export async function inspector(port) {
  const list = await (await fetch(`http://127.0.0.1:${port}/json`)).json();
  // The inspector admits local origins only.
  const ws = new WebSocket(list[0].webSocketDebuggerUrl, { headers: { Origin: "http://127.0.0.1" } });
  await new Promise((resolve, reject) => {
    ws.onopen = resolve;
    ws.onerror = () => reject(new Error("the inspector refused the connection"));
  });
  let id = 0;
  const pending = new Map();
  const session = { onEvent: () => {} };
  ws.onmessage = (m) => {
    const d = JSON.parse(m.data);
    if (d.method) session.onEvent(d);
    if (d.id && pending.has(d.id)) {
      pending.get(d.id)(d);
      pending.delete(d.id);
    }
  };
  const call = (method, params = {}) =>
    new Promise((resolve, reject) => {
      const n = ++id;
      pending.set(n, (d) => (d.error ? reject(new Error(`${method}: ${d.error.message}`)) : resolve(d.result)));
      ws.send(JSON.stringify({ id: n, method, params }));
    });
  return Object.assign(session, { call, close: () => ws.close() });
}

/** Which part of the isolate a profile node's frame belongs to. */
function category(frame) {
  if (frame.url.startsWith("wasm://")) return "wasm";
  if (frame.functionName === "(garbage collector)") return "gc";
  if (frame.functionName === "(idle)" || frame.functionName === "(root)") return "idle";
  if (frame.functionName === "(program)") return "program";
  if (frame.url) return "js";
  return "runtime";
}

/**
 * The time sample `i` of a V8 CPU profile stands for, µs: the gap to the
 * next sample, capped at 4 intervals so a sample that ends an idle stretch
 * is not charged for it.
 */
function sampleWeight(profile, i) {
  return Math.min(4 * SAMPLE_US, profile.timeDeltas[i + 1] ?? SAMPLE_US);
}

/** Self time per category and per function from a V8 CPU profile. */
function splitProfile(profile, sources) {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const us = { wasm: 0, js: 0, runtime: 0, gc: 0, program: 0, idle: 0 };
  const functions = new Map();
  for (let i = 0; i < profile.samples.length; i++) {
    const frame = byId.get(profile.samples[i]).callFrame;
    const weight = sampleWeight(profile, i);
    const cat = category(frame);
    us[cat] += weight;
    if (cat === "wasm" || cat === "js" || cat === "runtime") {
      const key = `${cat} ${frame.functionName || importName(frame, sources) || "(anonymous)"}`;
      functions.set(key, (functions.get(key) ?? 0) + weight);
    }
  }
  const top = [...functions].sort((a, b) => b[1] - a[1]).slice(0, TOP_FUNCTIONS);
  return { us, top };
}

/** The CPU pass: a sampled profile over `rows` lone rows. */
async function cpuPass(worker, rows) {
  const session = await inspector(worker.inspectorPort);
  try {
    const sources = await scriptSources(session);
    await session.call("Profiler.enable");
    await session.call("Profiler.setSamplingInterval", { interval: SAMPLE_US });
    await session.call("Profiler.start");
    for (let i = 0; i < rows; i++) {
      await enqueue(worker, "prof-cpu", i, 0);
      await sleep(SETTLE_MS);
    }
    const { profile } = await session.call("Profiler.stop");
    const { us, top } = splitProfile(profile, sources);
    const perRow = (x) => x / 1000 / rows;
    const busy = us.wasm + us.js + us.runtime + us.gc + us.program;
    return {
      rows,
      ms_per_row: Object.fromEntries(Object.entries(us).filter(([k]) => k !== "idle").map(([k, v]) => [k, perRow(v)])),
      wasm_share: busy ? us.wasm / busy : null,
      top_functions: top.map(([name, v]) => ({ name: shortName(name), ms_per_row: perRow(v) })),
    };
  } finally {
    session.close();
  }
}

/** The Worker's scripts by id, as the inspector announces them when its debugger is enabled. */
async function scriptSources(session) {
  const ids = [];
  session.onEvent = (e) => {
    if (e.method === "Debugger.scriptParsed" && e.params.url.endsWith("entry.js")) ids.push(e.params.scriptId);
  };
  await session.call("Debugger.enable");
  const sources = new Map();
  for (const id of ids) sources.set(id, (await session.call("Debugger.getScriptSource", { scriptId: id })).scriptSource.split("\n"));
  await session.call("Debugger.disable");
  return sources;
}

/**
 * The wasm-bindgen import an anonymous JS frame belongs to: the bundle
 * names each import's function after the import (`__wbg_exec_…`), so the
 * last such name before the frame's column on its line is the import.
 */
function importName(frame, sources) {
  const line = sources.get(frame.scriptId)?.[frame.lineNumber];
  if (!line) return null;
  const names = [...line.slice(0, frame.columnNumber + 1).matchAll(/__wbg_([A-Za-z]+)_[0-9a-f]+/g)];
  return names.length ? `import ${names[names.length - 1][1]}` : null;
}

/** Targets and rows of a Free alarm that fills its budget: 8 targets a fire, two fires, 256 rows a fire. */
const FREE_ALARM = { targets: 16, rows: 512 };
/** How long the full alarm's rows wait (all until one time), so that one alarm finds them all due, ms. */
const FREE_ALARM_DELAY_MS = 1_500;

/** Which invocation a sample belongs to, from the Rust frames on its stack (async continuations keep their future's frames). */
function invocationOf(nodeId, byId, parentOf) {
  for (let id = nodeId; id !== undefined; id = parentOf.get(id)) {
    const name = byId.get(id).callFrame.functionName;
    if (/RelayTarget|target_do|bench::target|durable::target::|store::inbox|durable_relay_core::apply/.test(name)) return "target";
    if (/RelaySource|source_do|store::outbox|durable_relay::source::|durable_relay::driver|DoTargets|StubCall|StubReply|durable_relay_core::/.test(name)) return "alarm";
  }
  return "other";
}

/**
 * The full Free alarm in wasm: 512 rows to 16 targets, all due at once,
 * delivered by one alarm while V8 samples. Samples are split between the
 * source's alarm and the 16 target applies it calls (same isolate locally).
 */
async function freeAlarmPass(worker) {
  // A warm-up alarm opens the targets, so no measured alarm pays their migrations.
  await enqueueFreeAlarm(worker, "prof-free-alarm-warm");
  await sleep(FREE_ALARM_DELAY_MS + FREE_ALARM_SETTLE_MS);
  await checkFreeAlarm(worker, "prof-free-alarm-warm");
  const source = "prof-free-alarm";
  await enqueueFreeAlarm(worker, source);
  const session = await inspector(worker.inspectorPort);
  let profile;
  try {
    await session.call("Profiler.enable");
    await session.call("Profiler.setSamplingInterval", { interval: SAMPLE_US });
    await session.call("Profiler.start");
    await sleep(FREE_ALARM_DELAY_MS + FREE_ALARM_SETTLE_MS);
    ({ profile } = await session.call("Profiler.stop"));
  } finally {
    session.close();
  }
  const last = await checkFreeAlarm(worker, source);
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parentOf = new Map();
  for (const n of profile.nodes) for (const c of n.children ?? []) parentOf.set(c, n.id);
  const ms = { alarm: 0, target: 0, other: 0 };
  for (let i = 0; i < profile.samples.length; i++) {
    const cat = category(byId.get(profile.samples[i]).callFrame);
    if (cat === "idle") continue;
    ms[invocationOf(profile.samples[i], byId, parentOf)] += sampleWeight(profile, i) / 1000;
  }
  return {
    ...FREE_ALARM,
    subrequests: last.subrequests,
    duration_ms: last.duration_ms,
    // The fire's own measure of its work, beside the sampled CPU: what the
    // work budget (RELAY_WORK_PER_ALARM) is compared with.
    work: last.work,
    cpu_cut: last.cpu_cut,
    sampled_ms: ms,
    process_cpu_ms: await freeAlarmProcessCpu(worker),
  };
}

/** Full Free alarms measured without the profiler, each over a window of this many ms. */
const FREE_ALARM_UNPROFILED = 3;
/** How long after the rows are due a window lasts, ms. */
const FREE_ALARM_SETTLE_MS = 1_500;

/**
 * CPU of the wrangler and workerd processes per full Free alarm (with its
 * 16 applies), unprofiled: windows holding one such alarm each, less an
 * idle window of the same length. /proc counts in 10 ms ticks, so this is
 * coarse; it bounds how far the sampled figures are inflated.
 */
async function freeAlarmProcessCpu(worker) {
  // The window opens after the enqueue, so only the alarm and its applies (and idling) fall in it.
  const window = FREE_ALARM_DELAY_MS + FREE_ALARM_SETTLE_MS;
  const idleStart = snapshot();
  await sleep(window);
  const idle = workerCpuMs(idleStart, snapshot());
  let busy = 0;
  for (let i = 0; i < FREE_ALARM_UNPROFILED; i++) {
    const source = `prof-free-alarm-${i}`;
    await enqueueFreeAlarm(worker, source);
    const start = snapshot();
    await sleep(window);
    busy += workerCpuMs(start, snapshot());
    await checkFreeAlarm(worker, source);
  }
  if (idle === null) return null;
  return Math.max(0, busy / FREE_ALARM_UNPROFILED - idle);
}

/** Enqueues the full Free alarm's rows into `source`, all due at one time. */
async function enqueueFreeAlarm(worker, source) {
  // One due time for every row (two requests apart would make two due times).
  const due = Date.now() + FREE_ALARM_DELAY_MS;
  const rows = Array.from({ length: FREE_ALARM.rows }, (_, n) => ({
    // The same 16 targets for every source: opened (migrated) once, by the warm-up.
    target: `prof-free-alarm-t${n % FREE_ALARM.targets}`,
    puts: [[`k${n}`, { i: n }]],
    not_before_ms: due,
  }));
  for (let i = 0; i < rows.length; i += 256) {
    const r = await worker.api("POST", `/v1/sources/${source}/enqueue`, { rows: rows.slice(i, i + 256) });
    if (r.status !== 200) throw new Error(`profile free alarm enqueue: ${r.status} ${JSON.stringify(r.body)}`);
  }
}

/** The last alarm of `source` once its full Free alarm ran: it must have delivered every row. */
async function checkFreeAlarm(worker, source) {
  const st = await getOk(worker, `/v1/sources/${source}/status`);
  // An alarm may wake before the rows are due and find nothing; the last one must deliver them all.
  const last = st.last_alarm ?? {};
  if (st.delivered_rows !== FREE_ALARM.rows || last.rows_delivered !== FREE_ALARM.rows) {
    throw new Error(`profile free alarm: ${st.delivered_rows} rows delivered, the last alarm ${last.rows_delivered}; expected ${FREE_ALARM.rows} in one`);
  }
  return last;
}

/** A Rust symbol without its hash and crate paths, for the report. */
function shortName(name) {
  return name.replace(/::h[0-9a-f]{16}/g, "").replace(/\[[0-9a-f]+\]/g, "").slice(0, 120);
}

/** A config that serves the benchmark build through the boundary counter. */
function countingConfig() {
  const text = readFileSync(join(ROOT, "bench", "wrangler.toml"), "utf8").replace(
    /^main = .*$/m,
    'main = "../bench/profile/entry.mjs"',
  );
  mkdirSync(join(ROOT, ".e2e"), { recursive: true });
  const path = join(ROOT, ".e2e", `profile-${process.pid}.toml`);
  writeFileSync(path, text);
  return path;
}

/**
 * Runs the profile with `rows` lone rows per pass on the relay's Free
 * preset; returns { counts: {enqueue, delivery, cycle}, cpu }.
 */
export async function runProfile({ rows, vars = { RELAY_PLAN: "free" }, log = console.error }) {
  log(`profile: counting ${rows} lone rows, split and whole`);
  const counting = await startBenchWorker({ vars, config: countingConfig() });
  let result;
  try {
    result = { rows, split_delay_ms: SPLIT_DELAY_MS, counts: await countPasses(counting, rows) };
  } finally {
    await counting.stop();
  }
  log(`profile: sampling CPU over ${rows} lone rows`);
  const plain = await startBenchWorker({ vars });
  try {
    result.cpu = await cpuPass(plain, rows);
    log(`profile: sampling one Free alarm of ${FREE_ALARM.rows} rows to ${FREE_ALARM.targets} targets`);
    result.free_alarm = await freeAlarmPass(plain);
  } finally {
    await plain.stop();
  }
  return result;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const rows = Number(process.argv[2] ?? 20);
  const out = await runProfile({ rows });
  console.log(JSON.stringify(out, null, 2));
}
