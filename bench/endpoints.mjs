// W8: rows to an HTTPS endpoint. Producers enqueue single rows addressed
// to `endpoint:bench`; a local webhook receiver (the end-to-end suite's,
// which verifies every signature and keeps each webhook-id's first
// arrival) takes them. The relay delivers them as it delivers to any
// endpoint; the Queues system sends each row as a queue message whose
// consumer POSTs it through the relay's own endpoint client (the same
// signed request, one row per request), so the two differ in how rows
// reach the endpoint, not in the HTTP client.
//
// What it measures, per system, each the median of `runs` runs on fresh
// workerd processes and a fresh receiver:
//
// - accepted rows/s: rows ÷ (last reply − first request), at the driver;
// - delivered rows/s: rows ÷ (last first arrival at the receiver − first
//   request);
// - end-to-end latency: from the `at_ms` the source stamped on the
//   accepted row to its first arrival at the receiver (the workerd and the
//   receiver share this machine's clock);
// - requests the receiver got, how many repeated an id it had already
//   taken, and first arrivals out of order per source (a row whose
//   sequence is below one already taken from its source);
// - the most requests of one source the receiver was answering at once;
// - CPU per row of the wrangler and workerd processes.
//
// A system that loses a row, or whose receiver saw a bad signature, fails
// the run; so does the relay delivering out of order or with two requests
// of one source open at once.

import { randomBytes } from "node:crypto";
import { Receiver } from "../tests/e2e/endpoint/receiver.mjs";
import { sleep } from "../tests/e2e/harness.mjs";
import { snapshot, workerCpuMs } from "./cpu.mjs";
import { ROUTES } from "./measure.mjs";
import { quantile } from "./stream.mjs";
import { startBenchWorker } from "./workerd.mjs";
import { STREAM_RELAY_VARS, SYSTEMS } from "./workloads.mjs";

/** The endpoint's name in `RELAY_ENDPOINTS`, and the target rows name. */
const ENDPOINT = "bench";
/**
 * The shapes: `producers` send concurrently, one row per request, as fast
 * as accepted, each into its own source or, `shared`, all into one; the
 * receiver answers each request after `answer_ms`. `batch` adds the relay
 * with the endpoint taking batches.
 */
const FULL = [
  { id: "W8-1", producers: 1, rows: 200, answer_ms: 0, short: "1 producer, rows to one endpoint" },
  { id: "W8-8", producers: 8, rows: 400, answer_ms: 0, short: "8 producers, own sources, rows to one endpoint" },
  { id: "W8-shared-20ms", producers: 8, rows: 400, answer_ms: 20, shared: true, batch: true, short: "8 producers into one source, an endpoint that answers after 20 ms" },
];
const QUICK = [{ id: "W8-4", producers: 4, rows: 40, answer_ms: 0, short: "4 producers, own sources, rows to one endpoint (quick)" }];
/** The relay, Free preset, with the endpoint taking batches (`"batch": true`). */
const RELAY_BATCH = { id: "relay-free-batch", code: "rb", kind: "relay", label: "relay, Free preset, endpoint batches on", vars: { RELAY_PLAN: "free" }, batch: true };
/** The systems compared (their `vars` as in the other workloads). */
const FULL_SYSTEMS = ["queues", "relay-free", "relay-paid"];
const QUICK_SYSTEMS = ["queues", "relay-free"];
/** A run whose receiver takes no new row for this long has failed (longer than a few back-offs). */
const STALL_MS = 60_000;
/** How often the drain wait looks at the receiver. */
const POLL_MS = 50;

/** The endpoint table both systems are started with. */
function endpointsVar(receiver, secret, batch) {
  return JSON.stringify({ [ENDPOINT]: { url: receiver.url, secret, batch } });
}

/** Sends the rows: each producer one request at a time into its own source. */
async function produce(worker, system, shape, replies) {
  const perProducer = shape.rows / shape.producers;
  await Promise.all(
    Array.from({ length: shape.producers }, async (_, p) => {
      const source = `${system.code}-${shape.id.toLowerCase()}-s${shape.shared ? 0 : p}`;
      for (let i = 0; i < perProducer; i++) {
        const sent = Date.now();
        const row = { target: `endpoint:${ENDPOINT}`, puts: [[`${source}.${p}.${i}`, { i }]] };
        const r = await worker.api("POST", ROUTES[system.kind](source), { rows: [row] });
        if (r.status !== 200) throw new Error(`W8 enqueue ${source}: ${r.status} ${JSON.stringify(r.body)}`);
        replies.push({ source, seq: r.body.seqs[0], at_ms: r.body.at_ms, sent, replied: Date.now() });
      }
    }),
  );
}

/** The rows of each request the receiver took (valid, answered 2xx), in arrival order: one row, or a batch's. */
function arrivals(requests) {
  const out = [];
  for (const q of requests) {
    const status = typeof q.answer === "number" ? q.answer : q.answer?.status;
    if (!q.valid || status !== 200) continue;
    for (const row of [JSON.parse(q.body)].flat()) out.push({ source: row.source, seq: row.seq, at: q.at });
  }
  return out;
}

/** The most requests of one source the receiver was answering at once (over its valid requests). */
function maxOpenPerSource(requests) {
  const bySource = new Map();
  for (const q of requests) {
    if (!q.valid) continue;
    const source = [JSON.parse(q.body)].flat()[0]?.source;
    if (!bySource.has(source)) bySource.set(source, []);
    bySource.get(source).push([q.started, 1], [q.ended ?? Infinity, -1]);
  }
  let most = 0;
  for (const edges of bySource.values()) {
    // An end and a start at the same millisecond do not overlap.
    edges.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
    let open = 0;
    for (const [, d] of edges) most = Math.max(most, (open += d));
  }
  return most;
}

/** Waits until the receiver has taken `rows` distinct rows; throws on a stall or a send error. */
async function drained(receiver, rows, sending) {
  let last = -1;
  let lastChange = Date.now();
  for (;;) {
    if (sending.error) throw sending.error;
    const taken = new Set(arrivals(receiver.requests).map((a) => `${a.source}#${a.seq}`)).size;
    if (taken >= rows) return;
    if (taken !== last) [last, lastChange] = [taken, Date.now()];
    if (Date.now() - lastChange > STALL_MS) throw new Error(`W8: the receiver took ${taken} of ${rows} rows, then nothing for ${STALL_MS} ms`);
    await sleep(POLL_MS);
  }
}

/** The figures of one run from the replies and what the receiver saw. */
export function figures(replies, requests, rows) {
  const all = arrivals(requests);
  const first = new Map();
  for (const a of all) if (!first.has(`${a.source}#${a.seq}`)) first.set(`${a.source}#${a.seq}`, a);
  const highest = new Map();
  let outOfOrder = 0;
  for (const { source, seq } of first.values()) {
    if (seq < (highest.get(source) ?? 0)) outOfOrder++;
    highest.set(source, Math.max(seq, highest.get(source) ?? 0));
  }
  const e2e = replies.map((r) => first.get(`${r.source}#${r.seq}`)?.at - r.at_ms).filter((x) => Number.isFinite(x));
  const t0 = Math.min(...replies.map((r) => r.sent));
  const lastReply = Math.max(...replies.map((r) => r.replied));
  const lastArrival = Math.max(...[...first.values()].map((a) => a.at));
  return {
    rows,
    accepted_per_s: rows / Math.max(0.001, (lastReply - t0) / 1000),
    delivered_per_s: rows / Math.max(0.001, (lastArrival - t0) / 1000),
    enqueue_p50_ms: quantile(replies.map((r) => r.replied - r.sent), 0.5),
    e2e_p50_ms: quantile(e2e, 0.5),
    e2e_p99_ms: quantile(e2e, 0.99),
    requests: requests.length,
    repeats: all.length - first.size,
    out_of_order: outOfOrder,
    bad_signatures: requests.filter((q) => !q.valid).length,
    lost_rows: replies.filter((r) => !first.has(`${r.source}#${r.seq}`)).length,
    max_open_per_source: maxOpenPerSource(requests),
  };
}

/** One run of `shape` on `system`: a fresh receiver and workerd. */
async function runOne(system, shape, say) {
  const secret = `whsec_${randomBytes(32).toString("base64")}`;
  const receiver = await Receiver.start(secret);
  if (shape.answer_ms) receiver.otherwise = { status: 200, delay_ms: shape.answer_ms };
  const relayVars = system.kind === "relay" ? STREAM_RELAY_VARS : {};
  const vars = { ...system.vars, ...relayVars, RELAY_ENDPOINTS: endpointsVar(receiver, secret, Boolean(system.batch)) };
  const worker = await startBenchWorker({ vars });
  try {
    const replies = [];
    const sending = { error: null };
    const cpuBefore = snapshot();
    const producing = produce(worker, system, shape, replies).catch((e) => (sending.error = e));
    await producing;
    await drained(receiver, shape.rows, sending);
    const cpuMs = workerCpuMs(cpuBefore, snapshot());
    // Late repeats (a redelivery already under way) still count.
    await sleep(500);
    const m = figures(replies, receiver.requests, shape.rows);
    m.cpu_ms_per_row = cpuMs === null ? null : cpuMs / shape.rows;
    m.max_in_flight = receiver.maxInFlight;
    say(
      `W8 ${system.id} ${shape.id}: ${m.delivered_per_s.toFixed(0)} rows/s delivered, e2e p50 ${m.e2e_p50_ms} ms p99 ${m.e2e_p99_ms} ms, ` +
        `${m.requests} requests, ${m.repeats} repeats, ${m.out_of_order} out of order`,
    );
    return m;
  } finally {
    await worker.stop();
    await receiver.stop();
  }
}

/** Each number the median of the runs' (the middle one); the broken-promise counts the worst run's. */
function median(runs) {
  const worst = new Set(["lost_rows", "bad_signatures", "out_of_order", "repeats", "max_open_per_source"]);
  const out = { runs: runs.length };
  for (const k of Object.keys(runs[0])) {
    const xs = runs.map((r) => r[k]).filter((x) => typeof x === "number").sort((a, b) => a - b);
    out[k] = worst.has(k) ? xs.at(-1) : xs[Math.floor(xs.length / 2)];
  }
  return out;
}

/** Runs W8: every shape on every system, `runs` times round-robin; returns one entry per shape and system. */
export async function runEndpoints({ quick, runs, systems: only, say }) {
  const shapes = quick ? QUICK : FULL;
  const named = SYSTEMS.filter((s) => (quick ? QUICK_SYSTEMS : FULL_SYSTEMS).includes(s.id));
  const out = [];
  for (const shape of shapes) {
    const systems = [...named, ...(shape.batch ? [RELAY_BATCH] : [])].filter((s) => !only || only.includes(s.id));
    const all = Object.fromEntries(systems.map((s) => [s.id, []]));
    for (let r = 0; r < runs; r++) for (const s of systems) all[s.id].push(await runOne(s, shape, say));
    for (const s of systems) {
      out.push({ workload: shape.id, short: shape.short, producers: shape.producers, answer_ms: shape.answer_ms, system: s.id, ...median(all[s.id]) });
    }
  }
  const queues = (w) => out.find((e) => e.workload === w && e.system === "queues");
  for (const e of out) {
    const q = queues(e.workload);
    if (!q) continue;
    e.delivered_vs_queues = e.delivered_per_s / q.delivered_per_s;
    e.e2e_p50_vs_queues = q.e2e_p50_ms ? e.e2e_p50_ms / q.e2e_p50_ms : null;
  }
  return out;
}

/** What W8 must get right whatever its speed; returns the failures. */
export function endpointFailures(entries) {
  const bad = [];
  for (const e of entries ?? []) {
    const at = `W8 ${e.system} ${e.workload}`;
    if (e.lost_rows) bad.push(`${at}: ${e.lost_rows} rows never reached the receiver`);
    if (e.bad_signatures) bad.push(`${at}: ${e.bad_signatures} requests with a bad signature`);
    if (e.system.startsWith("relay") && e.out_of_order) bad.push(`${at}: ${e.out_of_order} rows out of order`);
    if (e.system.startsWith("relay") && e.max_open_per_source > 1) bad.push(`${at}: ${e.max_open_per_source} requests of one source open at once`);
  }
  return bad;
}
