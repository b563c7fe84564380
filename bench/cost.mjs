// What a row costs: the work each system did per row (counted by the
// isolate: GET /v1/bench/work), what a million rows would cost on the
// Workers Paid plan from the counters each run measured, and the profile's
// tables (bench/profile.mjs).
//
// The price list is written down here, with where it came from, so a
// report can be recomputed when prices change (`npm run bench -- --render`).

/**
 * Workers Paid prices used by the cost table, USD, past the monthly
 * allowance (the table is the marginal cost of a million more rows).
 * Looked up on 2026-12-01 in Cloudflare's pricing pages for Workers,
 * Durable Objects (requests, duration, SQLite storage rows) and Queues.
 */
export const PRICES = {
  checked_on: "2026-12-01",
  /** Per million Worker requests (front-door calls, queue consumer invocations). */
  worker_request_per_m: 0.3,
  /** Per million CPU milliseconds. */
  cpu_ms_per_m: 0.02,
  /** Per million Durable Object requests (fetches, RPC sessions, alarm invocations). */
  do_request_per_m: 0.15,
  /** Per million GB-seconds of Durable Object duration (128 MB per object). */
  do_gb_s_per_m: 12.5,
  /** Per million SQLite rows read. */
  sqlite_read_per_m: 0.001,
  /** Per million SQLite rows written. */
  sqlite_written_per_m: 1.0,
  /** Per million Queues operations (each 64 KB written, read or deleted). */
  queue_op_per_m: 0.4,
};

/** A Durable Object's memory for duration billing, GB. */
const DO_GB = 0.128;
/** Queues operations per message delivered once: a write, a read and a delete. */
const QUEUE_OPS_PER_MESSAGE = 3;
/** Rows per million. */
const MILLION = 1_000_000;

/** The Free plan's CPU per invocation, ms: what the profile's per-alarm figure is compared with. */
export const FREE_CPU_MS = 10;

const fmt = (x, d = 2) => (x === null || x === undefined || Number.isNaN(x) ? "—" : Number(x).toFixed(d));

/** The difference of two /v1/bench/work readings (work counts only). */
export function workDelta(before, after) {
  if (!before?.work || !after?.work) return null;
  return Object.fromEntries(Object.keys(after.work).map((k) => [k, after.work[k] - (before.work[k] ?? 0)]));
}

/**
 * The billable counters of one run, per row: requests of each kind, rows
 * read and written, queue operations, CPU and the alarm duration measured.
 */
export function billable(m) {
  const rows = m.rows;
  const requests = m.requests ?? rows;
  const perRow = (x) => (x === null || x === undefined ? null : x / rows);
  const b = {
    // The front door: one Worker request per enqueue request.
    worker_requests: perRow(requests),
    // Each enqueue reaches a Durable Object (the relay's source or the bench's), then the target calls.
    do_requests: perRow(requests + (m.target_calls ?? 0)),
    sqlite_rows_written: (m.source_sql_rows_per_row ?? 0) + (m.target_sql_rows_per_row ?? 0),
    sqlite_rows_read: m.work ? perRow(m.work.sql_rows_read) : null,
    queue_ops: 0,
    cpu_ms: m.cpu_ms_per_row ?? null,
    do_gb_s: null,
  };
  if (m.system === "queues" || m.invocation_kind === "consumer batches") {
    // Consumer invocations are Worker invocations; each message is written, read and deleted once, a retry reads it again.
    b.worker_requests += perRow(m.invocations);
    b.queue_ops = QUEUE_OPS_PER_MESSAGE + perRow(m.failed_target_calls ?? 0);
  }
  if (m.invocation_kind === "alarms") {
    b.do_requests += perRow(m.invocations);
    b.do_gb_s = m.alarm_busy_ms ? perRow((m.alarm_busy_ms / 1000) * DO_GB) : null;
  }
  return b;
}

/** USD per million rows from per-row counters `b`, item by item and in all. */
export function costPerMillion(b) {
  const items = {
    worker_requests: b.worker_requests * PRICES.worker_request_per_m,
    do_requests: b.do_requests * PRICES.do_request_per_m,
    sqlite_rows_written: b.sqlite_rows_written * PRICES.sqlite_written_per_m,
    sqlite_rows_read: (b.sqlite_rows_read ?? 0) * PRICES.sqlite_read_per_m,
    queue_ops: b.queue_ops * PRICES.queue_op_per_m,
    cpu: (b.cpu_ms ?? 0) * PRICES.cpu_ms_per_m,
    alarm_duration: (b.do_gb_s ?? 0) * PRICES.do_gb_s_per_m,
  };
  // Per-row counts times a price per million is the price of a million rows.
  return { items, total: Object.values(items).reduce((a, x) => a + x, 0), rows: MILLION };
}

/** The per-row work table: what each system asked of the platform. */
export function workTable(bySystem, workloads) {
  const lines = [
    "| workload | system | SQL statements | SQLite rows read | SQLite rows written | JSON bytes in / out | target calls | log lines / bytes | worker CPU ms |",
    "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
  ];
  for (const w of workloads) {
    for (const [system, ws] of Object.entries(bySystem)) {
      const m = ws[w.id];
      if (!m?.work) continue;
      const r = (x) => x / m.rows;
      const k = m.work;
      lines.push(
        `| ${w.id} | ${system} | ${fmt(r(k.sql_statements), 1)} | ${fmt(r(k.sql_rows_read), 1)} | ${fmt(r(k.sql_rows_written), 2)} | ${fmt(r(k.json_bytes_in), 0)} / ${fmt(r(k.json_bytes_out), 0)} | ${fmt(m.target_calls_per_row, 3)} | ${fmt(r(k.log_lines), 3)} / ${fmt(r(k.log_bytes), 0)} | ${fmt(m.cpu_ms_per_row, 2)} |`,
      );
    }
  }
  return lines.length > 2 ? lines.join("\n") : "_no work counts in this run_";
}

/** The cost table: USD per million rows on Workers Paid, per workload and system. */
export function costTable(bySystem, workloads) {
  const lines = [
    "| workload | system | Worker requests | DO requests | SQLite rows written | SQLite rows read | Queues ops | CPU | alarm duration | total USD per million rows |",
    "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
  ];
  for (const w of workloads) {
    for (const [system, ws] of Object.entries(bySystem)) {
      const m = ws[w.id];
      if (!m) continue;
      const { items, total } = costPerMillion(billable(m));
      const c = (x) => fmt(x, 3);
      lines.push(
        `| ${w.id} | ${system} | ${c(items.worker_requests)} | ${c(items.do_requests)} | ${c(items.sqlite_rows_written)} | ${c(items.sqlite_rows_read)} | ${c(items.queue_ops)} | ${m.cpu_ms_per_row === undefined ? "—" : c(items.cpu)} | ${c(items.alarm_duration)} | **${c(total)}** |`,
      );
    }
  }
  return lines.join("\n");
}

/** The price list as the report states it. */
export function priceNote() {
  const p = PRICES;
  return `Prices (Workers Paid, past the monthly allowance, looked up ${p.checked_on}): Worker requests $${p.worker_request_per_m}/M, CPU $${p.cpu_ms_per_m}/M ms, Durable Object requests (fetches, RPC sessions and alarm invocations) $${p.do_request_per_m}/M, duration $${p.do_gb_s_per_m}/M GB-s at 128 MB, SQLite rows read $${p.sqlite_read_per_m}/M, written $${p.sqlite_written_per_m}/M, Queues $${p.queue_op_per_m}/M operations (a write, a read and a delete per message). What each row is charged comes from the counters this run measured: requests sent, target calls, alarms or consumer batches, the SQLite rows the relay's and the bench's own counters saw written, the rows SQLite read (isolate count, including the driver's status reads), and CPU (the wrangler and workerd processes, W5 only: an upper bound on billed CPU, which counts the isolate alone). Duration is priced for the relay's alarms only (their wall time is logged); local workerd reports no wall time for the other requests, so every system's request duration is left out.`;
}

/** The profile's full Free alarm, as the report states it. */
/** The lone row's sampled CPU by object: the source's one invocation (enqueue and in-turn delivery) is what Free bounds. */
function invocationNote(by) {
  if (!by) return "";
  const over = by.source > FREE_CPU_MS;
  return `By object, per row: the source's invocation (the enqueue with the in-turn delivery it starts) **${fmt(by.source, 2)} ms**, the target's apply ${fmt(by.target, 2)} ms, other runtime work ${fmt(by.other, 2)} ms; Free allows ${FREE_CPU_MS} ms per invocation${over ? ": **warning: the source's invocation is over it**" : ", and the source's invocation is under it"}.`;
}

function freeAlarmNote(a) {
  if (!a) return "";
  const s = a.sampled_ms;
  const perAlarm = a.alarm_ms_per_alarm;
  const over = perAlarm !== null && perAlarm > FREE_CPU_MS;
  return `
The Free alarms of a ${a.rows}-row load to ${a.targets} targets (all due at once; warm targets), sampled the same way: ${a.alarms} alarms (${a.cuts} cut by the work budget; ${a.work_total} work units, at most ${a.work_max} in one), the source's alarms **${fmt(perAlarm, 1)} ms per alarm** (${fmt(s.alarm, 1)} ms in all), the target applies ${fmt(s.target, 1)} ms, runtime work not attributable to either ${fmt(s.other, 1)} ms. Unprofiled, the wrangler and workerd processes spent ${fmt(a.process_cpu_ms, 0)} ms per load with its applies (/proc, 10 ms ticks, less an idle window). The Free plan allows ${FREE_CPU_MS} ms of CPU per invocation${over ? `: **warning: the sampled alarm is over it; recalibrate with \`node bench/profile.mjs --calibrate\` (see docs/limits.md)**` : ": the sampled alarm is under it"}.`;
}

/** The profile's tables: per-row counts by phase, and where the CPU went. */
export function profileSection(profile) {
  if (!profile) return "_not run_";
  const phases = ["enqueue", "delivery", "cycle"];
  const keys = [
    ["sql_statements", "SQL statements", 1],
    ["sql_rows_read", "SQLite rows read", 1],
    ["sql_rows_written", "SQLite rows written", 1],
    ["sql_rows_returned", "rows returned to wasm", 1],
    ["json_bytes_in", "JSON bytes in", 0],
    ["json_bytes_out", "JSON bytes out", 0],
    ["stub_calls", "calls to other objects", 1],
    ["log_lines", "log lines", 2],
    ["log_bytes", "log bytes", 0],
    ["boundary_imports", "calls wasm → JS", 0],
    ["boundary_exports", "calls JS → wasm", 0],
  ];
  const counts = [
    `| per lone row | ${phases.join(" | ")} |`,
    `| --- | ${phases.map(() => "---:").join(" | ")} |`,
    ...keys.map(([k, label, d]) => `| ${label} | ${phases.map((p) => fmt(profile.counts[p]?.[k], d)).join(" | ")} |`),
  ];
  const calls = Object.entries(profile.counts.cycle ?? {})
    .filter(([k, v]) => k.startsWith("call: ") && v)
    .sort((a, b) => b[1] - a[1])
    .slice(0, 10)
    .map(([k, v]) => `${k.slice(6)} ${fmt(v, 0)}`)
    .join(", ");
  const cpu = profile.cpu;
  const shares = Object.entries(cpu.ms_per_row).map(([k, v]) => `${k} ${fmt(v, 2)} ms`).join(", ");
  const byObject = invocationNote(cpu.invocation_ms_per_row);
  const top = cpu.top_functions.map((f) => `| ${f.name.replaceAll("|", "\\|")} | ${fmt(f.ms_per_row, 3)} |`);
  return `${profile.rows} lone rows on a warm source (Free preset): the enqueue is counted apart from its delivery by delaying each row ${profile.split_delay_ms} ms; \`cycle\` is the same row undelayed. Counts are per row and include the front door, the source and the target in one isolate; the statements each phase ran are in \`results.json\` (\`profile.counts\`).

${counts.join("\n")}

The most frequent boundary calls of a cycle, by name: ${calls || "—"}.

CPU, sampled by V8 through the inspector over ${cpu.rows} undelayed rows (sampling inflates the absolute figures; read them as shares): ${shares}; wasm ${fmt(100 * cpu.wasm_share, 0)}% of the busy time. ${byObject} JS time is mostly the runtime's work inside the imports the wasm calls (the SQL \`exec\` above all), which the profiler charges to the JS function that made the call.

| function (self time) | ms per row |
| --- | ---: |
${top.join("\n")}
${freeAlarmNote(profile.free_alarm)}`;
}
