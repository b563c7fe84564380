// The benchmark's workloads and the systems that run them.
//
// Every system receives the same rows in the same order: each source sends
// its rows in requests of at most MAX_ROWS_PER_REQUEST, one request after
// another; sources send concurrently. Within a source, rows go round-robin
// over its targets, so every request touches many targets (a realistic
// outbox). Each row puts one distinct key (`<source>.<n>`), so every system
// ends with the same keys at the same targets.

/** The relay's MAX_ROWS_PER_ENQUEUE; every system gets requests this size. */
export const MAX_ROWS_PER_REQUEST = 256;

/** Full workloads. */
export const FULL = [
  { id: "W1", short: "1 source, 4,096 rows to 4,096 targets", title: "1 source, 4,096 rows to 4,096 distinct targets", sources: 1, targets: 4096, rowsPerPair: 1, failing: 0 },
  { id: "W2", short: "1 source, 10,000 rows to 1 target", title: "1 source, 10,000 rows to one target", sources: 1, targets: 1, rowsPerPair: 10_000, failing: 0 },
  { id: "W3", short: "16 sources x 64 targets x 20 rows", title: "16 sources x 64 targets, 20 rows per pair, concurrently", sources: 16, targets: 64, rowsPerPair: 20, failing: 0, packs: true },
  { id: "W4", short: "W3, 4 of 64 targets failing at first", title: "W3 with 4 of the 64 targets failing for the first half of the run", sources: 16, targets: 64, rowsPerPair: 20, failing: 4 },
];

/** Quick workloads: the same shapes, small enough for the test command. */
export const QUICK = [
  { id: "W1", short: "1 source, 256 rows to 256 targets", title: "1 source, 256 rows to 256 distinct targets (quick)", sources: 1, targets: 256, rowsPerPair: 1, failing: 0 },
  { id: "W2", short: "1 source, 2,000 rows to 1 target", title: "1 source, 2,000 rows to one target (quick)", sources: 1, targets: 1, rowsPerPair: 2_000, failing: 0 },
  { id: "W3", short: "4 sources x 16 targets x 5 rows", title: "4 sources x 16 targets, 5 rows per pair (quick)", sources: 4, targets: 16, rowsPerPair: 5, failing: 0 },
  { id: "W4", short: "W3, 1 of 16 targets failing at first", title: "quick W3 with 1 of the 16 targets failing for the first half (quick)", sources: 4, targets: 16, rowsPerPair: 5, failing: 1 },
];

/**
 * W5, the streaming workloads: every request enqueues one row.
 * `producers` send concurrently; `shape` "own" gives each producer its own
 * source (as when every order Durable Object is its own outbox), "shared"
 * sends every producer's rows into one source. Producer p's i-th row goes
 * to target (p + i) mod `targets`. `ratePerS` null sends as fast as
 * requests are accepted (each producer waits for its reply); a number
 * paces the producers to that total rate. `slowTargetMs` delays every
 * target call (test fault switch) to see whether enqueues wait behind
 * delivery. `systems` restricts the run to those systems. `alarmOnly` adds
 * the relay with in-turn delivery off (`relay-free-alarm`), so the same run
 * compares delivery in the enqueue's invocation with delivery by alarm.
 */
export const STREAM_FULL = [
  { id: "W5-own-8", stream: true, alarmOnly: true, shape: "own", producers: 8, targets: 64, rows: 2_000, ratePerS: null, short: "8 producers, own sources, 64 targets", title: "W5: 8 producers, one source each, 64 targets, as fast as accepted" },
  { id: "W5-own-32", stream: true, alarmOnly: true, shape: "own", producers: 32, targets: 64, rows: 2_016, ratePerS: null, short: "32 producers, own sources, 64 targets", title: "W5: 32 producers, one source each, 64 targets, as fast as accepted" },
  { id: "W5-shared-8-hot", stream: true, shape: "shared", producers: 8, targets: 4, rows: 2_000, ratePerS: null, coalesce: true, short: "8 producers, 1 source, 4 hot targets", title: "W5: 8 producers into one source, 4 hot targets, as fast as accepted" },
  { id: "W5-shared-32-hot", stream: true, alarmOnly: true, shape: "shared", producers: 32, targets: 4, rows: 2_016, ratePerS: null, coalesce: true, short: "32 producers, 1 source, 4 hot targets", title: "W5: 32 producers into one source, 4 hot targets, as fast as accepted" },
  { id: "W5-shared-32-wide", stream: true, shape: "shared", producers: 32, targets: 64, rows: 2_016, ratePerS: null, short: "32 producers, 1 source, 64 targets", title: "W5: 32 producers into one source, 64 targets, as fast as accepted" },
  { id: "W5-shared-32-100", stream: true, shape: "shared", producers: 32, targets: 64, rows: 2_016, ratePerS: 100, short: "32 producers, 1 source, 64 targets, 100 rows/s", title: "W5: 32 producers into one source, 64 targets, steady 100 rows/s" },
  { id: "W5-lone", stream: true, alarmOnly: true, shape: "own", producers: 1, targets: 1, rows: 40, ratePerS: 4, coalesce: true, short: "a lone row every 250 ms", title: "W5: one row every 250 ms into an idle source (latency of a lone row)" },
  { id: "W5-slow", stream: true, shape: "shared", producers: 8, targets: 4, rows: 2_000, ratePerS: null, slowTargetMs: 100, systems: ["relay-free", "relay-paid", "relay-free-alarm"], short: "W5-shared-8-hot, targets answer after 100 ms", title: "W5: 8 producers into one source, 4 targets that answer after 100 ms (does enqueue wait for delivery?)" },
];

/** W5 small enough for the test command. */
export const STREAM_QUICK = [
  { id: "W5-shared-8-hot", stream: true, shape: "shared", producers: 8, targets: 4, rows: 200, ratePerS: null, coalesce: true, short: "8 producers, 1 source, 4 hot targets", title: "W5: 8 producers into one source, 4 hot targets (quick)" },
  { id: "W5-lone", stream: true, shape: "own", producers: 1, targets: 1, rows: 4, ratePerS: 4, short: "a lone row every 250 ms", title: "W5: one row every 250 ms into an idle source (quick)" },
];

/** The relay budget that keeps every alarm within 50 subrequests on Free while delivering the most per alarm (see docs/benchmarks.md). */
export const FREE_50 = {
  RELAY_PLAN: "free",
  RELAY_TARGETS_PER_FIRE: "25",
  RELAY_FIRES_PER_ALARM: "2",
  RELAY_CALLS_PER_TARGET: "2",
  RELAY_SUBREQUESTS_PER_ALARM: "50",
};

/**
 * The systems. `kind` picks the enqueue route; `vars` start a fresh
 * workerd for each system; `plans` says which `--plan` selections run it.
 */
export const SYSTEMS = [
  { id: "direct", code: "d", kind: "direct", label: "direct writes (floor)", vars: { RELAY_PLAN: "free" }, plans: ["free", "paid"] },
  { id: "queues", code: "q", kind: "queue", label: "Cloudflare Queues (local)", vars: { RELAY_PLAN: "free" }, plans: ["free", "paid"] },
  { id: "relay-free", code: "rf", kind: "relay", label: "relay, Free preset (8x2x2, cap 50)", vars: { RELAY_PLAN: "free" }, plans: ["free"] },
  { id: "relay-free-50", code: "r50", kind: "relay", label: "relay, Free at 50 (25x2x2, cap 50)", vars: FREE_50, plans: ["free"] },
  { id: "relay-paid", code: "rp", kind: "relay", label: "relay, Paid preset (32x8x2)", vars: { RELAY_PLAN: "paid" }, plans: ["paid"] },
  { id: "relay-free-plain", code: "rfn", kind: "relay", label: "relay, Free preset, RELAY_PACK_ROWS=off (each row of a request stored as its own row)", vars: { RELAY_PLAN: "free", RELAY_PACK_ROWS: "off" }, plans: ["free"], optIn: "packs" },
  { id: "relay-paid-plain", code: "rpn", kind: "relay", label: "relay, Paid preset, RELAY_PACK_ROWS=off", vars: { RELAY_PLAN: "paid", RELAY_PACK_ROWS: "off" }, plans: ["paid"], optIn: "packs" },
  { id: "relay-free-alarm", code: "ra", kind: "relay", label: "relay, Free preset, RELAY_IN_TURN=off (the alarm delivers every row)", vars: { RELAY_PLAN: "free", RELAY_IN_TURN: "off" }, plans: ["free"], optIn: "alarmOnly" },
  { id: "relay-coalesce", code: "rc", kind: "relay", label: "relay, Free preset, RELAY_COALESCE_MS=50", vars: { RELAY_PLAN: "free", RELAY_COALESCE_MS: "50" }, plans: ["free"], optIn: "coalesce" },
];

/**
 * Variables the relay's systems add in the streaming workloads: every
 * alarm delivers one or a few rows there, and a log line per alarm is a
 * log line per row, which is what `RELAY_ALARM_LOG=notable` is for. The
 * batch workloads keep every alarm's line (they read calls per alarm from
 * it).
 */
export const STREAM_RELAY_VARS = { RELAY_ALARM_LOG: "notable" };

/** The variables `system` runs `workload` with. */
export function varsFor(system, workload) {
  return workload.stream && system.kind === "relay" ? { ...system.vars, ...STREAM_RELAY_VARS } : system.vars;
}

/** Whether `system` runs `workload`: a workload may name its systems, and an opt-in system runs only where a workload asks for it. */
export function runsOn(system, workload) {
  if (workload.systems) return workload.systems.includes(system.id);
  return !system.optIn || Boolean(workload[system.optIn]);
}

/** Source and target names of `workload` for `system`, and which targets fail. */
export function names(system, workload) {
  const p = `${system.code}-${workload.id.toLowerCase()}`;
  const count = workload.stream ? (workload.shape === "own" ? workload.producers : 1) : workload.sources;
  const sources = Array.from({ length: count }, (_, i) => `${p}-s${i}`);
  const targets = Array.from({ length: workload.targets }, (_, i) => `${p}-t${i}`);
  // Spread the failing targets over the target list.
  const stride = Math.floor(workload.targets / Math.max(1, workload.failing ?? 0));
  const failing = Array.from({ length: workload.failing ?? 0 }, (_, i) => targets[i * stride]);
  return { sources, targets, failing };
}

/** The enqueue requests of one source, in sending order. */
export function requestsFor(source, targets, rowsPerPair) {
  const rows = [];
  let n = 0;
  for (let r = 0; r < rowsPerPair; r++) {
    for (const target of targets) {
      rows.push({ target, puts: [[`${source}.${n}`, { i: n }]] });
      n++;
    }
  }
  const requests = [];
  for (let i = 0; i < rows.length; i += MAX_ROWS_PER_REQUEST) requests.push(rows.slice(i, i + MAX_ROWS_PER_REQUEST));
  return requests;
}

/** Total rows of a workload. */
export const totalRows = (w) => (w.stream ? w.rows : w.sources * w.targets * w.rowsPerPair);
