// W5, the streaming workloads: single-row enqueues from many
// producers, as fast as they are accepted or at a steady rate, against the
// relay, Queues and direct writes in one running workerd.
//
// What it measures, beyond what every workload reports (order, duplicates,
// losses, calls, SQLite rows written):
//
// - accepted requests per second: rows ÷ the time from the first request
//   to the last reply, seen by the driver;
// - enqueue latency: request to reply, seen by the driver;
// - end-to-end latency: from the `at_ms` the source stamped on the
//   accepted row (the relay's commit time, the bench source's allocation
//   time) to the row's first arrival at its target, stamped by the target:
//   both ends on the server's clock, so the driver's scheduling is not in it;
// - CPU per row: CPU time of the wrangler and workerd processes from the
//   first request until the driver saw the drain, ÷ rows.

import { sleep } from "../tests/e2e/harness.mjs";
import { snapshot, workerCpuMs } from "./cpu.mjs";
import { ROUTES, readFigures, summary, waitForDrain, watch, workReading } from "./measure.mjs";
import { workDelta } from "./cost.mjs";
import { names } from "./workloads.mjs";

/** The value at quantile `q` (0..1) of `xs` (nearest rank), null when empty. */
export function quantile(xs, q) {
  if (!xs.length) return null;
  const sorted = [...xs].sort((a, b) => a - b);
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1));
  return sorted[rank];
}

/** The one-row request of producer `p`'s `i`-th row. */
function rowOf(source, targets, p, i) {
  return { target: targets[(p + i) % targets.length], puts: [[`${source}.${p}.${i}`, { i }]] };
}

/**
 * Sends the workload: each producer sends its rows one request at a time;
 * paced producers wait for their slot in the total rate. Every reply is
 * recorded in `replies` as { source, seq, at_ms, sent, replied }.
 */
async function produce({ worker, system, workload, sources, targets, run, replies }) {
  const perProducer = workload.rows / workload.producers;
  const start = Date.now();
  const producer = async (p) => {
    const source = workload.shape === "own" ? sources[p] : sources[0];
    for (let i = 0; i < perProducer; i++) {
      if (workload.ratePerS) {
        const due = start + ((i * workload.producers + p) * 1000) / workload.ratePerS;
        if (due > Date.now()) await sleep(due - Date.now());
      }
      const sent = Date.now();
      const r = await worker.api("POST", ROUTES[system.kind](source), { rows: [rowOf(source, targets, p, i)] });
      const replied = Date.now();
      if (r.status !== 200) throw new Error(`enqueue ${source}: ${r.status} ${JSON.stringify(r.body)}`);
      replies.push({ source, seq: r.body.seqs[0], at_ms: r.body.at_ms, sent, replied });
      run.sent += 1;
    }
  };
  await Promise.all(Array.from({ length: workload.producers }, (_, p) => producer(p)));
}

/** Switches every target's call delay (test fault switch). */
async function delayTargets(worker, targets, delayMs) {
  for (const t of targets) {
    const r = await worker.api("POST", `/v1/targets/${t}/faults`, { delay_ms: delayMs });
    if (r.status !== 200) throw new Error(`fault switch on ${t}: ${r.status} ${JSON.stringify(r.body)}`);
  }
}

/** Latency figures from the replies and the targets' first arrivals. */
function latencies(replies, stats) {
  const arrived = new Map();
  for (const s of stats) for (const [source, seq, at] of s.first_rows ?? []) arrived.set(`${source}:${seq}`, at);
  const enqueue = replies.map((r) => r.replied - r.sent);
  const e2e = [];
  const fromSend = [];
  for (const r of replies) {
    const at = arrived.get(`${r.source}:${r.seq}`);
    if (at === undefined) continue;
    if (typeof r.at_ms === "number") e2e.push(Math.max(0, at - r.at_ms));
    fromSend.push(Math.max(0, at - r.sent));
  }
  const first = Math.min(...replies.map((r) => r.sent));
  const last = Math.max(...replies.map((r) => r.replied));
  return {
    accepted_per_s: replies.length / Math.max(0.001, (last - first) / 1000),
    enqueue_p50_ms: quantile(enqueue, 0.5),
    enqueue_p99_ms: quantile(enqueue, 0.99),
    e2e_p50_ms: quantile(e2e, 0.5),
    e2e_p99_ms: quantile(e2e, 0.99),
    e2e_from_send_p50_ms: quantile(fromSend, 0.5),
    e2e_rows: e2e.length,
  };
}

/** Runs one W5 workload on `system` in `worker`; returns the measurement. */
export async function runStream({ worker, system, workload, progress }) {
  const { sources, targets } = names(system, workload);
  if (workload.rows % workload.producers) throw new Error(`${workload.id}: rows must divide among producers`);
  const total = workload.rows;
  const label = `${system.id} ${workload.id}`;
  const seen = watch(worker, system, sources);
  if (workload.slowTargetMs) await delayTargets(worker, targets, workload.slowTargetMs);
  const replies = [];
  const run = { sent: 0, error: null, enqueueMs: null };
  const workBefore = await workReading(worker);
  const cpuBefore = snapshot();
  const t0 = Date.now();
  produce({ worker, system, workload, sources, targets, run, replies }).then(
    () => (run.enqueueMs = Date.now() - t0),
    (e) => (run.error = e),
  );
  if (system.kind === "direct") {
    // A direct write has applied its row when the reply arrives.
    const tick = setInterval(() => (seen.applied = run.sent), 50);
    try {
      await waitForDrain({ worker, system, sources, total, seen, t0, run, label, progress, workBase: workBefore });
    } finally {
      clearInterval(tick);
    }
  } else {
    await waitForDrain({ worker, system, sources, total, seen, t0, run, label, progress, workBase: workBefore });
  }
  const cpuMs = workerCpuMs(cpuBefore, snapshot());
  const workAfter = await workReading(worker);
  if (workload.slowTargetMs) await delayTargets(worker, targets, 0);
  const { m, stats } = await readFigures({ worker, system, workload, sources, targets, total, seen, t0 });
  m.enqueue_ms = run.enqueueMs;
  m.work = workDelta(workBefore, workAfter);
  m.requests = total;
  Object.assign(m, latencies(replies, stats));
  m.invocations_per_row = m.invocations / total;
  // Every invocation a row costs: its enqueue request, and the alarms or
  // consumer batches (a direct write is its request alone).
  m.all_invocations_per_row = (m.requests + (system.kind === "direct" ? 0 : m.invocations)) / total;
  m.worker_cpu_ms = cpuMs;
  m.cpu_ms_per_row = cpuMs === null ? null : cpuMs / total;
  progress.done(
    `${summary(label, m)}; ${m.accepted_per_s.toFixed(0)} req/s, enqueue p50 ${m.enqueue_p50_ms} ms, e2e p50 ${m.e2e_p50_ms} ms p99 ${m.e2e_p99_ms} ms`,
  );
  return m;
}
