// The relay beside Queues and direct writes, one line per workload and
// system, every figure a user compares when order matters: throughput, CPU,
// the platform work per row (statements, rows read, rows written at each
// end), the price of a million rows on Paid and how many rows one Free
// account's daily write allowance delivers. Ratios are to Queues in the
// same run. Also the aims the relay is held to beside Queues.

import { billable, costPerMillion } from "./cost.mjs";

/** Workers Free's SQLite rows written per account per day. */
export const FREE_ROWS_WRITTEN_PER_DAY = 100_000;

/** The workloads the side-by-side table lists, when the run has them. */
export const SIDE_BY_SIDE_WORKLOADS = ["W5-own-8", "W5-own-32", "W5-shared-32-hot", "W5-lone", "W3"];

/** The systems it lists, in this order, when the run has them. */
const SYSTEMS = ["relay-free", "relay-paid", "relay-free-plain", "relay-paid-plain", "queues", "direct"];

const fmt = (x, d = 2) => (x === null || x === undefined || !Number.isFinite(x) ? "—" : Number(x).toFixed(d));
const ratio = (a, b) => (a === null || a === undefined || !b ? null : a / b);

/** Rows a Free account delivers a day on `m`'s rows written (null for Queues: its limit is in operations). */
export function rowsPerFreeDay(system, m) {
  if (system === "queues") return null;
  const written = (m.source_sql_rows_per_row ?? 0) + (m.target_sql_rows_per_row ?? 0);
  return written > 0 ? FREE_ROWS_WRITTEN_PER_DAY / written : null;
}

/** Statements and SQLite rows read per row, from the isolate's work counts. */
function work(m) {
  const k = m.work;
  return k ? { statements: k.sql_statements / m.rows, read: k.sql_rows_read / m.rows } : { statements: null, read: null };
}

/** The side-by-side table. */
export function sideBySideTable(bySystem) {
  const lines = [
    "| workload | system | accepted req/s (÷ Queues) | CPU ms per row (÷ Queues) | SQL statements per row | SQLite rows read per row | rows written per row, source / target | USD per million on Paid (÷ Queues) | rows per Free day |",
    "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
  ];
  for (const id of SIDE_BY_SIDE_WORKLOADS) {
    const q = bySystem.queues?.[id];
    const qCost = q ? costPerMillion(billable(q)).total : null;
    for (const system of SYSTEMS) {
      const m = bySystem[system]?.[id];
      if (!m) continue;
      const cost = costPerMillion(billable(m)).total;
      const { statements, read } = work(m);
      const rate = m.accepted_per_s === undefined ? "—" : `${fmt(m.accepted_per_s, 0)} (${fmt(ratio(m.accepted_per_s, q?.accepted_per_s))})`;
      const day = rowsPerFreeDay(system, m);
      lines.push(
        `| ${id} | ${system} | ${rate} | ${fmt(m.cpu_ms_per_row)} (${fmt(ratio(m.cpu_ms_per_row, q?.cpu_ms_per_row))}) | ${fmt(statements, 1)} | ${fmt(read, 1)} | ${fmt(m.source_sql_rows_per_row)} / ${fmt(m.target_sql_rows_per_row)} | ${fmt(cost)} (${fmt(ratio(cost, qCost))}) | ${day === null ? "—" : Math.round(day).toLocaleString("en-US")} |`,
      );
    }
  }
  return lines.length > 2 ? lines.join("\n") : "_none of these workloads in this run_";
}

/**
 * The aims where order matters, for the relay's presets: each a ratio to
 * Queues in the same run, or a count per row. `add(aim, system, workload,
 * value, limit, met, detail)`.
 */
export function cheaperThanQueuesAims(bySystem, add) {
  const queues = bySystem.queues ?? {};
  const cost = (m) => costPerMillion(billable(m)).total;
  for (const system of ["relay-free", "relay-paid", "relay-free-plain", "relay-paid-plain"].filter((s) => bySystem[s])) {
    const w = bySystem[system];
    for (const id of ["W5-own-8", "W5-own-32"]) {
      const m = w[id];
      const q = queues[id];
      if (!m || !q) continue;
      const rate = m.accepted_per_s / q.accepted_per_s;
      add("one source per producer: accepted req/s at least Queues'", system, id, rate, 1, rate >= 1, "req/s ÷ Queues' req/s");
      if (m.cpu_ms_per_row && q.cpu_ms_per_row) {
        const cpu = m.cpu_ms_per_row / q.cpu_ms_per_row;
        add("one source per producer: worker CPU per row at most 0.9x Queues'", system, id, cpu, 0.9, cpu <= 0.9, "CPU ms per row ÷ Queues'");
      }
      if (id === "W5-own-8") {
        const c = cost(m) / cost(q);
        add("one source per producer: cost per million rows on Paid at most Queues'", system, id, c, 1, c <= 1, "USD per million ÷ Queues'");
        const day = rowsPerFreeDay(system, m);
        add("rows a Free account delivers a day: at least 33,000", system, id, day, 33_000, day >= 33_000, "100,000 ÷ rows written per row, source + target");
      }
    }
    const lone = w["W5-lone"];
    if (lone) {
      add("a lone row: at most 1.05 source SQLite rows written (setAlarm included)", system, "W5-lone", lone.source_sql_rows_per_row, 1.05, lone.source_sql_rows_per_row <= 1.05, "rows written ÷ rows");
      const q = queues["W5-lone"];
      if (q) {
        const p50 = lone.e2e_p50_ms / Math.max(1, q.e2e_p50_ms);
        add("a lone row: end-to-end p50 at most Queues'", system, "W5-lone", p50, 1, p50 <= 1, "e2e p50 ÷ Queues' (Queues' floored at 1 ms)");
      }
    }
    const hot = w["W5-shared-32-hot"];
    if (hot && queues["W5-shared-32-hot"]) {
      const rate = hot.accepted_per_s / queues["W5-shared-32-hot"].accepted_per_s;
      add("shared source, hot targets: accepted req/s at least Queues'", system, "W5-shared-32-hot", rate, 1, rate >= 1, "req/s ÷ Queues' req/s");
    }
    const burst = w.W3;
    if (burst) {
      add("bursts of 256-row requests: at most 0.05 source SQLite rows written per row", system, "W3", burst.source_sql_rows_per_row, 0.05, burst.source_sql_rows_per_row <= 0.05, "rows written ÷ rows");
      if (queues.W3) {
        const c = cost(burst) / cost(queues.W3);
        add("bursts of 256-row requests: cost per million rows on Paid at most 0.7x Queues'", system, "W3", c, 0.7, c <= 0.7, "USD per million ÷ Queues'");
      }
    }
  }
}
