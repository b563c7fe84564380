// Runs one workload against one system in a running workerd and measures
// it: sends the rows, shows progress, waits for the drain, then reads the
// figures from the sources (status) and from every target's arrival log
// (GET /v1/bench/targets/{t}/stats).
//
// Time to drain is measured at the targets: from the moment the driver
// sends the first request to the latest first arrival of any row, as
// stamped by the target that applied it. Every system is timed by the same
// clock at the same place.

import { names, requestsFor, totalRows } from "./workloads.mjs";
import { sleep } from "../tests/e2e/harness.mjs";
import { workDelta } from "./cost.mjs";

/** Concurrent requests when reading figures after a drain. */
const READ_CONCURRENCY = 16;
/** A drain that makes no progress for this long has failed. Longer than the relay's largest back-off (60 s). */
const STALL_MS = 150_000;
/** How often the drain wait looks at the counters. */
const POLL_MS = 200;
/** Polls between status sweeps of a relay's sources. */
const STATUS_SWEEP_POLLS = 25;
/** Points kept in each rows-remaining curve. */
const CURVE_POINTS = 240;

/** Runs `f` over `items`, at most `n` at a time; returns results in order. */
export async function pool(items, n, f) {
  const out = new Array(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      out[i] = await f(items[i], i);
    }
  };
  await Promise.all(Array.from({ length: Math.min(n, items.length) }, worker));
  return out;
}

export async function getOk(worker, path) {
  const r = await worker.api("GET", path);
  if (r.status !== 200) throw new Error(`GET ${path}: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body;
}

/** The isolate's work counts (GET /v1/bench/work), or null where the build has no such route. */
export async function workReading(worker) {
  const r = await worker.api("GET", "/v1/bench/work");
  return r.status === 200 ? r.body : null;
}

export const ROUTES = {
  relay: (s) => `/v1/sources/${s}/enqueue`,
  queue: (s) => `/v1/bench/queue/${s}/enqueue`,
  direct: (s) => `/v1/bench/direct/${s}/enqueue`,
};

/** Progress on one line: rewritten in place on a terminal, every few seconds otherwise. */
export class Progress {
  constructor(stream = process.stderr) {
    this.stream = stream;
    this.tty = Boolean(stream.isTTY);
    this.lastPrint = 0;
  }
  update(text, force = false) {
    const now = Date.now();
    if (this.tty) {
      this.stream.write(`\r\x1b[K${text}`);
    } else if (force || now - this.lastPrint >= 5_000) {
      this.stream.write(`${text}\n`);
      this.lastPrint = now;
    }
  }
  done(text) {
    if (this.tty) this.stream.write(`\r\x1b[K${text}\n`);
    else this.stream.write(`${text}\n`);
  }
}

/** Rows remaining over time, from every target's first-arrival times. */
function curve(arrivals, total, t0) {
  const times = arrivals.sort((a, b) => a - b);
  const pts = [[0, total]];
  const step = Math.max(1, Math.floor(times.length / CURVE_POINTS));
  for (let i = 0; i < times.length; i += step) pts.push([times[i] - t0, total - (i + 1)]);
  if (times.length) pts.push([times[times.length - 1] - t0, total - times.length]);
  return pts.map(([t, r]) => [Math.max(0, t), r]);
}

/** Counts what the Worker logs for `sources` while a run lasts (alarms, consumer batches). */
export function watch(worker, system, sources) {
  const own = new Set(sources);
  const seen = { alarmBusyMs: 0, firstAlarmAt: null, applied: 0, alarms: 0, deliveries: 0, maxAlarmCalls: 0, alarmErrors: 0, batches: 0, batchCalls: 0, maxBatchCalls: 0, batchFailedCalls: 0, batchErrors: 0 };
  worker.listener = (ev) => {
    if (system.kind === "relay" && (ev.kind === "alarm" || ev.kind === "delivery") && own.has(ev.source)) {
      // An in-turn delivery keeps the object busy as an alarm does (its
      // duration is billed), inside the enqueue's invocation.
      seen.applied += ev.rows_delivered;
      if (ev.kind === "alarm") seen.alarms += 1;
      else seen.deliveries += 1;
      seen.maxAlarmCalls = Math.max(seen.maxAlarmCalls, ev.subrequests);
      seen.alarmBusyMs += ev.duration_ms;
      seen.firstAlarmAt ??= ev.started_at_ms;
    } else if (system.kind === "relay" && ev.kind === "relay_alarm_error") {
      seen.alarmErrors += 1;
    } else if (system.kind === "queue" && ev.kind === "queue_batch") {
      seen.applied += ev.first;
      seen.batches += 1;
      seen.batchCalls += ev.calls;
      seen.batchFailedCalls += ev.failed_calls;
      seen.maxBatchCalls = Math.max(seen.maxBatchCalls, ev.calls);
      if (ev.error) seen.batchErrors += 1;
    }
  };
  return seen;
}

/**
 * Waits until every row is applied: `run.sent`, `run.error` and
 * `run.enqueueMs` (set once every request was answered) are updated by the
 * sender. Shows progress; throws on a send error or a stall.
 */
export async function waitForDrain({ worker, system, sources, total, seen, t0, run, label, progress, workBase = null }) {
  let polls = 0;
  let last = -1;
  let lastChange = Date.now();
  for (;;) {
    if (run.error) throw run.error;
    if (workBase && system.kind === "relay") {
      // Alarms that log only when notable say nothing of routine progress:
      // the isolate's count of rows applied does.
      const now = await workReading(worker);
      if (now) seen.applied = Math.max(seen.applied, now.work.rows_applied - workBase.work.rows_applied);
    }
    const secs = ((Date.now() - t0) / 1000).toFixed(1);
    const extra = system.kind === "relay" ? `, ${seen.alarms} alarms` : system.kind === "queue" ? `, ${seen.batches} consumer batches` : "";
    const applied = Math.min(seen.applied, total);
    progress.update(`bench: ${label.padEnd(18)} sent ${run.sent}/${total}, applied ${applied}/${total} (${Math.floor((100 * applied) / total)}%)${extra}, ${secs} s`);
    if (seen.applied !== last) {
      last = seen.applied;
      lastChange = Date.now();
    }
    polls += 1;
    // The relay's alarm log says when to look; a status sweep now and then
    // covers a log line that never arrived.
    const relayCheck = seen.applied >= total || polls % STATUS_SWEEP_POLLS === 0;
    if (run.enqueueMs !== null && (seen.applied >= total || (system.kind === "relay" && relayCheck))) {
      if (system.kind !== "relay") break;
      const statuses = await Promise.all(sources.map((s) => getOk(worker, `/v1/sources/${s}/status`)));
      if (statuses.every((s) => s.queued_rows === 0)) break;
    }
    if (Date.now() - lastChange > STALL_MS) throw new Error(`${label}: no progress for ${STALL_MS / 1000} s (${seen.applied}/${total})`);
    await sleep(POLL_MS);
  }
  const drainedSeenMs = Date.now() - t0;
  progress.done(`bench: ${label.padEnd(18)} drained ${total} rows in ${(drainedSeenMs / 1000).toFixed(1)} s (as seen by the driver); reading figures`);
}

/**
 * After a drain: reads every target's arrival log and the sources' figures.
 * Returns the measurement common to every workload, plus `stats` (the
 * targets' logs, for callers that need the rows).
 */
export async function readFigures({ worker, system, workload, sources, targets, total, seen, t0 }) {
  const stats = await pool(targets, READ_CONCURRENCY, (t) => getOk(worker, `/v1/bench/targets/${t}/stats`));
  const sum = (f) => stats.reduce((a, s) => a + f(s), 0);
  const arrivals = stats.flatMap((s) => s.first_arrivals);
  const distinct = sum((s) => s.distinct);
  const m = {
    system: system.id,
    workload: workload.id,
    rows: total,
    sources: sources.length,
    targets: targets.length,
    drain_ms: Math.max(...stats.map((s) => s.last_ms ?? 0)) - t0,
    delivered_rows: distinct,
    lost_rows: total - distinct,
    out_of_order: sum((s) => s.out_of_order),
    applied_twice: sum((s) => s.duplicates),
    per_target_last_ms: stats.map((s) => (s.last_ms ?? t0) - t0),
    curve: curve(arrivals, total, t0),
  };
  if (system.kind === "relay") {
    const st = await pool(sources, READ_CONCURRENCY, (s) => getOk(worker, `/v1/sources/${s}/status`));
    m.invocations = st.reduce((a, s) => a + s.alarms, 0);
    m.invocation_kind = "alarms";
    m.fires = st.reduce((a, s) => a + s.fires, 0);
    m.target_calls = st.reduce((a, s) => a + s.subrequests, 0);
    m.max_calls_per_invocation = seen.maxAlarmCalls;
    m.alarms_logged = seen.alarms;
    m.in_turn_logged = seen.deliveries;
    m.alarm_busy_ms = seen.alarmBusyMs;
    m.first_alarm_ms = seen.firstAlarmAt === null ? null : seen.firstAlarmAt - t0;
    m.alarm_errors = seen.alarmErrors;
    m.conflicts = st.reduce((a, s) => a + s.conflicts, 0);
    m.source_sql_rows_written = st.reduce((a, s) => a + s.sql_rows_written, 0);
    m.source_delivered_rows = st.reduce((a, s) => a + s.delivered_rows, 0);
    m.target_sql_rows_written = sum((s) => s.relay_sql_rows_written);
    m.budget = st[0]?.budget;
  } else {
    const st = await pool(sources, READ_CONCURRENCY, (s) => getOk(worker, `/v1/bench/sources/${s}/status`));
    m.source_sql_rows_written = st.reduce((a, s) => a + s.allocation.sql_rows_written, 0);
    m.target_sql_rows_written = sum((s) => s.bench_effect_rows_written);
    if (system.kind === "queue") {
      m.invocations = seen.batches;
      m.invocation_kind = "consumer batches";
      m.target_calls = seen.batchCalls;
      m.failed_target_calls = seen.batchFailedCalls;
      m.max_calls_per_invocation = seen.maxBatchCalls;
      m.queue_sends = st.reduce((a, s) => a + s.counters.queue_sends, 0);
      m.consumer_errors = seen.batchErrors;
    } else {
      m.invocations = st.reduce((a, s) => a + s.counters.requests, 0);
      m.invocation_kind = "enqueue requests";
      m.target_calls = st.reduce((a, s) => a + s.counters.target_calls, 0);
      m.failed_target_calls = st.reduce((a, s) => a + s.counters.failed_calls, 0);
    }
  }
  m.target_calls_per_row = m.target_calls / total;
  m.source_sql_rows_per_row = m.source_sql_rows_written / total;
  m.target_sql_rows_per_row = m.target_sql_rows_written / total;
  return { m, stats };
}

/** The one-line summary printed after a run. */
export function summary(label, m) {
  return `bench: ${label.padEnd(18)} drain ${(m.drain_ms / 1000).toFixed(2)} s at the targets, ${m.invocations} ${m.invocation_kind}, ` +
    `${m.target_calls_per_row.toFixed(4)} calls/row, out of order ${m.out_of_order}, twice ${m.applied_twice}, lost ${m.lost_rows}`;
}

/**
 * Runs `workload` on `system` in `worker`. `healAfterMs` is when W4's
 * failing targets heal, from the start. Returns the measurement.
 */
export async function runWorkload({ worker, system, workload, healAfterMs, progress }) {
  const { sources, targets, failing } = names(system, workload);
  const total = totalRows(workload);
  const label = `${system.id} ${workload.id}`;
  const seen = watch(worker, system, sources);
  for (const t of failing) {
    const r = await worker.api("POST", `/v1/targets/${t}/faults`, { reject: true });
    if (r.status !== 200) throw new Error(`fault switch on ${t}: ${r.status} ${JSON.stringify(r.body)}`);
  }
  const plans = sources.map((s) => ({ source: s, requests: requestsFor(s, targets, workload.rowsPerPair) }));
  const workBefore = await workReading(worker);
  let healedAtMs = null;
  let healTimer = null;
  const t0 = Date.now();
  if (failing.length) {
    healTimer = setTimeout(async () => {
      healedAtMs = Date.now() - t0;
      for (const t of failing) await worker.api("POST", `/v1/targets/${t}/faults`, { reject: false });
    }, healAfterMs);
  }
  const run = { sent: 0, error: null, enqueueMs: null };
  Promise.all(
    plans.map(async ({ source, requests }) => {
      for (const rows of requests) {
        const r = await worker.api("POST", ROUTES[system.kind](source), { rows });
        if (r.status !== 200) throw new Error(`enqueue ${source}: ${r.status} ${JSON.stringify(r.body)}`);
        run.sent += rows.length;
        if (system.kind === "direct") seen.applied += rows.length;
      }
    }),
  ).then(() => (run.enqueueMs = Date.now() - t0), (e) => (run.error = e));

  await waitForDrain({ worker, system, sources, total, seen, t0, run, label, progress });
  clearTimeout(healTimer);
  const workAfter = await workReading(worker);
  const { m } = await readFigures({ worker, system, workload, sources, targets, total, seen, t0 });
  m.work = workDelta(workBefore, workAfter);
  m.requests = plans.reduce((a, p) => a + p.requests.length, 0);
  m.enqueue_ms = run.enqueueMs;
  if (failing.length) {
    const failed = new Set(failing);
    m.failing_targets = failing;
    m.healed_at_ms = healedAtMs;
    m.healthy_drain_ms = Math.max(...m.per_target_last_ms.filter((_, i) => !failed.has(targets[i])));
  }
  progress.done(summary(label, m));
  return m;
}
