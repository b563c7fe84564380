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
import { FREE_CPU_MS } from "./cost.mjs";

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
    const by = sampledByInvocation(profile);
    const busy = us.wasm + us.js + us.runtime + us.gc + us.program;
    return {
      rows,
      ms_per_row: Object.fromEntries(Object.entries(us).filter(([k]) => k !== "idle").map(([k, v]) => [k, perRow(v)])),
      wasm_share: busy ? us.wasm / busy : null,
      // The source's frames cover its one invocation per row: the enqueue and the in-turn delivery it starts.
      invocation_ms_per_row: { source: by.alarm / rows, target: by.target / rows, other: by.other / rows },
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

/** The Free load: more rows to more targets than one Free alarm's work budget reads, all due at once. */
const FREE_ALARM = { targets: 16, rows: 512 };
/** How long the load's rows wait (all until one time), so that the first alarm finds them all due, ms. */
const FREE_ALARM_DELAY_MS = 1_500;
/** How long the load may take to be delivered once due, ms. */
const FREE_ALARM_DRAIN_MS = 10_000;
/** How long the profiler samples after the load is due, ms: its alarms run back to back, well within it. */
const FREE_ALARM_SETTLE_MS = 3_000;

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
 * The Free load in wasm, on the worker's preset: 512 rows to 16 targets,
 * all due at once, delivered by as many alarms as the preset's work budget
 * makes, while V8 samples. Samples are split between the source's alarms
 * and the target applies they call (same isolate locally); the alarms'
 * own log lines give their count and work units, so the sampled CPU is
 * read per alarm, the figure the Free plan's 10 ms bounds.
 */
async function freeAlarmPass(worker) {
  // A warm-up load opens the targets, so no measured alarm pays their migrations.
  await enqueueFreeAlarm(worker, "prof-free-alarm-warm");
  await drained(worker, "prof-free-alarm-warm");
  const source = "prof-free-alarm";
  // Enqueued before sampling starts, so the enqueue's own work (also the
  // source's frames) is not read as the alarms'; the rows wait long enough.
  await enqueueFreeAlarm(worker, source);
  const session = await inspector(worker.inspectorPort);
  let profile;
  try {
    await session.call("Profiler.enable");
    await session.call("Profiler.setSamplingInterval", { interval: SAMPLE_US });
    await session.call("Profiler.start");
    // No status reads while sampling: they run in the source too.
    await sleep(FREE_ALARM_DELAY_MS + FREE_ALARM_SETTLE_MS);
    ({ profile } = await session.call("Profiler.stop"));
  } finally {
    session.close();
  }
  await drained(worker, source, 0);
  const ms = sampledByInvocation(profile);
  const alarms = worker.alarmLogs().filter((a) => a.source === source && a.rows_delivered > 0);
  const work = alarms.map((a) => a.work ?? 0);
  return {
    ...FREE_ALARM,
    alarms: alarms.length,
    cuts: alarms.filter((a) => a.cpu_cut).length,
    work_total: work.reduce((x, y) => x + y, 0),
    work_max: Math.max(...work),
    subrequests: alarms.reduce((x, a) => x + (a.subrequests ?? 0), 0),
    sampled_ms: ms,
    alarm_ms_per_alarm: alarms.length ? ms.alarm / alarms.length : null,
    process_cpu_ms: await freeAlarmProcessCpu(worker),
  };
}

/** Sampled, non-idle ms of a profile by invocation: the source's alarms, the targets' applies, the rest. */
function sampledByInvocation(profile) {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parentOf = new Map();
  for (const n of profile.nodes) for (const c of n.children ?? []) parentOf.set(c, n.id);
  const ms = { alarm: 0, target: 0, other: 0 };
  for (let i = 0; i < profile.samples.length; i++) {
    const cat = category(byId.get(profile.samples[i]).callFrame);
    if (cat === "idle") continue;
    ms[invocationOf(profile.samples[i], byId, parentOf)] += sampleWeight(profile, i) / 1000;
  }
  return ms;
}

/** Free loads measured without the profiler. */
const FREE_ALARM_UNPROFILED = 3;

/**
 * CPU of the wrangler and workerd processes per Free load (with its
 * applies), unprofiled: windows holding one load each, less an idle window
 * of the same length. /proc counts in 10 ms ticks, so this is coarse; it
 * bounds how far the sampled figures are inflated.
 */
async function freeAlarmProcessCpu(worker) {
  // The window opens after the enqueue, so only the alarms and their applies (and idling) fall in it.
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
    await drained(worker, source, 0);
  }
  if (idle === null) return null;
  return Math.max(0, busy / FREE_ALARM_UNPROFILED - idle);
}

/** Enqueues the Free load's rows into `source`, all due at one time. */
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

/** Waits until `source` delivered the whole Free load; throws past the drain bound. */
async function drained(worker, source, waitMs = FREE_ALARM_DELAY_MS + FREE_ALARM_DRAIN_MS) {
  const until = Date.now() + waitMs;
  for (;;) {
    const st = await getOk(worker, `/v1/sources/${source}/status`);
    if (st.delivered_rows === FREE_ALARM.rows) return st;
    if (Date.now() >= until) {
      throw new Error(`profile free alarm: ${source} delivered ${st.delivered_rows} of ${FREE_ALARM.rows} rows in ${waitMs} ms`);
    }
    await sleep(100);
  }
}

/** Work budgets the calibration runs the Free load under (`--calibrate`): the preset's, and smaller and larger ones. */
const CALIBRATION_BUDGETS = [120, 240, 480, 960];

/**
 * The Free load under each work budget in `budgets` (one worker each, on
 * the Free preset otherwise), with a least-squares line through the
 * (work units per alarm, sampled ms per alarm) points: the fixed cost of an
 * alarm, ms per unit, and the budget whose alarms would sample
 * FREE_CPU_MS. This is how the Free preset's work figure is chosen.
 */
export async function calibrate({ budgets = CALIBRATION_BUDGETS, log = console.error } = {}) {
  const points = [];
  for (const w of budgets) {
    log(`profile: the Free load under a work budget of ${w} units`);
    const worker = await startBenchWorker({ vars: { RELAY_PLAN: "free", RELAY_WORK_PER_ALARM: String(w) } });
    try {
      const a = await freeAlarmPass(worker);
      points.push({ budget: w, alarms: a.alarms, cuts: a.cuts, work_per_alarm: a.work_total / a.alarms, work_max: a.work_max, alarm_ms_per_alarm: a.alarm_ms_per_alarm });
    } finally {
      await worker.stop();
    }
  }
  const n = points.length;
  const mx = points.reduce((s, p) => s + p.work_per_alarm, 0) / n;
  const my = points.reduce((s, p) => s + p.alarm_ms_per_alarm, 0) / n;
  const sxy = points.reduce((s, p) => s + (p.work_per_alarm - mx) * (p.alarm_ms_per_alarm - my), 0);
  const sxx = points.reduce((s, p) => s + (p.work_per_alarm - mx) ** 2, 0);
  const ms_per_unit = sxx ? sxy / sxx : null;
  const fixed_ms = ms_per_unit === null ? null : my - ms_per_unit * mx;
  const units_within_free_cpu = ms_per_unit > 0 ? Math.floor((FREE_CPU_MS - fixed_ms) / ms_per_unit) : null;
  return { points, fixed_ms, ms_per_unit, units_within_free_cpu };
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
    log(`profile: sampling the Free alarms of ${FREE_ALARM.rows} rows to ${FREE_ALARM.targets} targets`);
    result.free_alarm = await freeAlarmPass(plain);
    const perAlarm = result.free_alarm.alarm_ms_per_alarm;
    if (perAlarm > FREE_CPU_MS) log(`profile: warning: a Free alarm sampled ${perAlarm.toFixed(1)} ms, over the plan's ${FREE_CPU_MS} ms`);
  } finally {
    await plain.stop();
  }
  return result;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  // `node bench/profile.mjs [rows]`, or `node bench/profile.mjs --calibrate [budget...]`.
  const args = process.argv.slice(2);
  const out =
    args[0] === "--calibrate"
      ? await calibrate(args.length > 1 ? { budgets: args.slice(1).map(Number) } : {})
      : await runProfile({ rows: Number(args[0] ?? 20) });
  console.log(JSON.stringify(out, null, 2));
}
