// Turns the measurements into the benchmark's figures: ratios to the
// direct-write floor, the aims (met or missed, by how much), and the
// Markdown report. Absolute times stay in the JSON; the report's headline
// figures are ratios and per-row counts.

import { billable, costPerMillion, costTable, priceNote, profileSection, workTable } from "./cost.mjs";
import { totalRows } from "./workloads.mjs";
import { cheaperThanQueuesAims, sideBySideTable } from "./sidebyside.mjs";

const fmt = (v, digits = 2) => (v === null || v === undefined || Number.isNaN(v) ? "—" : Number(v).toFixed(digits));
const int = (v) => (v === null || v === undefined ? "—" : Number(v).toLocaleString("en-US"));

/** W3's drain time over the targets that stay healthy in W4, per system. */
export function healthyComparison(bySystem) {
  const out = {};
  for (const [system, w] of Object.entries(bySystem)) {
    const w3 = w.W3;
    const w4 = w.W4;
    if (!w3 || !w4 || w4.healthy_drain_ms === undefined) continue;
    const failingIdx = new Set(w4.failing_targets.map((t) => Number(t.slice(t.lastIndexOf("-t") + 2))));
    const w3Healthy = Math.max(...w3.per_target_last_ms.filter((_, i) => !failingIdx.has(i)));
    out[system] = {
      w3_healthy_ms: w3Healthy,
      w4_healthy_ms: w4.healthy_drain_ms,
      ratio: w4.healthy_drain_ms / w3Healthy,
      w4_all_ms: w4.drain_ms,
      healed_at_ms: w4.healed_at_ms,
    };
  }
  return out;
}

/** Adds `drain_vs_direct` to every measurement. */
export function addRatios(bySystem) {
  const direct = bySystem.direct ?? {};
  for (const w of Object.values(bySystem)) {
    for (const [id, m] of Object.entries(w)) {
      const floor = direct[id]?.drain_ms;
      m.drain_vs_direct = floor ? m.drain_ms / floor : null;
    }
  }
}

/** The aims, each with the measured value and whether it is met. */
export function evaluateAims(bySystem, healthy, backlog = []) {
  const aims = [];
  const add = (aim, system, workload, value, limit, met, detail = "") =>
    aims.push({ aim, system, workload, value, limit, met, detail });
  const w1Limits = { "relay-free": 256, "relay-paid": 16, "relay-free-50": 100 };
  for (const [system, limit] of Object.entries(w1Limits)) {
    const m = bySystem[system]?.W1;
    if (m) add("W1 drains within the alarm limit", system, "W1", m.invocations, limit, m.invocations <= limit, "alarms");
  }
  const relays = Object.keys(bySystem).filter((s) => s.startsWith("relay"));
  for (const system of relays) {
    const w = bySystem[system];
    if (w.W2) add("W2: at most one target call per 256 rows", system, "W2", w.W2.target_calls_per_row, 1 / 256, w.W2.target_calls_per_row <= 1 / 256, "target calls per row");
    if (w.W3 && bySystem.queues?.W3) {
      const ratio = w.W3.drain_ms / bySystem.queues.W3.drain_ms;
      add("W3 drains at least as fast as Queues", system, "W3", ratio, 1, ratio <= 1, "drain time ÷ Queues' drain time");
    }
    if (w.W3) {
      const bad = w.W3.out_of_order + w.W3.applied_twice;
      add("W3: zero out of order, zero applied twice", system, "W3", bad, 0, bad === 0, `out of order ${w.W3.out_of_order}, twice ${w.W3.applied_twice}`);
      if (w.W3.drain_vs_direct !== null) add("W3 within 3x of the direct-write floor", system, "W3", w.W3.drain_vs_direct, 3, w.W3.drain_vs_direct <= 3, "drain time ÷ direct");
    }
    for (const [id, m] of Object.entries(w)) {
      if (id.startsWith("W5")) continue;
      add("at most 2.2 SQLite rows written per delivered row at the source", system, id, m.source_sql_rows_per_row, 2.2, m.source_sql_rows_per_row <= 2.2, "rows written ÷ rows delivered");
    }
    if (healthy[system]) {
      const h = healthy[system];
      add("W4's healthy targets drain within 1.5x of their W3 time", system, "W4", h.ratio, 1.5, h.ratio <= 1.5, "healthy targets' drain ÷ the same targets' W3 drain");
    }
  }
  streamAims(bySystem, add);
  // The same alarm and call aims on a backlog, from the simulator.
  const simName = { free: "relay-free", "free-50": "relay-free-50", paid: "relay-paid" };
  for (const d of backlog) {
    const system = `${simName[d.budget] ?? d.budget} (simulated backlog)`;
    if (d.workload === "W1" && w1Limits[simName[d.budget]] !== undefined) {
      const limit = w1Limits[simName[d.budget]];
      add("W1 drains within the alarm limit", system, "W1", d.alarms, limit, d.alarms <= limit, "alarms");
    }
    if (d.workload === "W2") {
      add("W2: at most one target call per 256 rows", system, "W2", d.target_calls_per_row, 1 / 256, d.target_calls_per_row <= 1 / 256, "target calls per row");
    }
  }
  return aims;
}

/** The aims on W5 (workloads absent from the run are skipped). */
function streamAims(bySystem, add) {
  cheaperThanQueuesAims(bySystem, add);
  for (const system of ["relay-free", "relay-paid"].filter((s) => bySystem[s])) {
    const m = bySystem[system]["W5-own-8"];
    const d = bySystem.direct?.["W5-own-8"];
    if (m && d) {
      const rate = m.accepted_per_s / d.accepted_per_s;
      add("one source per producer: accepted req/s at least 0.9x direct writes", system, "W5-own-8", rate, 0.9, rate >= 0.9, "req/s ÷ direct's req/s");
    }
    for (const id of ["W5-own-8", "W5-own-32"]) {
      const o = bySystem[system][id];
      if (o) add("one source per producer: at most 1.1 source invocations per row", system, id, o.all_invocations_per_row, 1.1, o.all_invocations_per_row <= 1.1, "(enqueue requests + alarms) ÷ rows");
    }
  }
  const relays = Object.keys(bySystem).filter((s) => s.startsWith("relay") && s !== "relay-coalesce");
  const queues = bySystem.queues ?? {};
  const ownIds = ["W5-own-8", "W5-own-32"];
  const sharedIds = ["W5-shared-8-hot", "W5-shared-32-hot", "W5-shared-32-wide"];
  for (const system of relays) {
    const w = bySystem[system];
    for (const id of ownIds) {
      const m = w[id];
      if (!m) continue;
      add("W5, one source per producer: at most 3.0 source SQLite rows per row", system, id, m.source_sql_rows_per_row, 3, m.source_sql_rows_per_row <= 3, "rows written ÷ rows");
      add("W5, one row per call: at most 2.0 target SQLite rows per row", system, id, m.target_sql_rows_per_row, 2, m.target_sql_rows_per_row <= 2, "rows written ÷ rows");
    }
    for (const id of sharedIds) {
      const m = w[id];
      if (m) add("W5, producers sharing a source: at most 2.3 source SQLite rows per row", system, id, m.source_sql_rows_per_row, 2.3, m.source_sql_rows_per_row <= 2.3, "rows written ÷ rows");
    }
    for (const id of [...ownIds, ...sharedIds]) {
      const m = w[id];
      const q = queues[id];
      if (!m || !q) continue;
      const ratio = m.accepted_per_s / q.accepted_per_s;
      add("W5: accepted requests per second at least 0.95x Queues", system, id, ratio, 0.95, ratio >= 0.95, "req/s ÷ Queues' req/s");
    }
  }
  const free = bySystem["relay-free"]?.["W5-shared-32-100"];
  const q = queues["W5-shared-32-100"];
  if (free && q) {
    const ratio = free.e2e_p50_ms / Math.max(1, q.e2e_p50_ms);
    add("W5 Free, 32 producers, 64 targets, 100 rows/s: end-to-end p50 within 2x Queues", "relay-free", "W5-shared-32-100", ratio, 2, ratio <= 2, "e2e p50 ÷ Queues' e2e p50 (Queues' floored at 1 ms)");
  }
  for (const system of relays) {
    const slow = bySystem[system]["W5-slow"];
    const plain = bySystem[system]["W5-shared-8-hot"];
    if (!slow || !plain) continue;
    const ratio = slow.enqueue_p50_ms / Math.max(1, plain.enqueue_p50_ms);
    add("W5: enqueues do not wait for target calls (enqueue p50 with 100 ms targets within 1.2x of W5-shared-8-hot's)", system, "W5-slow", ratio, 1.2, ratio <= 1.2, "enqueue p50 ÷ the same system's W5-shared-8-hot enqueue p50");
  }
  for (const id of ["W5-shared-8-hot", "W5-shared-32-hot"]) {
    const m = bySystem["relay-coalesce"]?.[id];
    if (m) add("W5 with RELAY_COALESCE_MS=50, 4 hot targets: at most 0.05 target calls per row", "relay-coalesce", id, m.target_calls_per_row, 0.05, m.target_calls_per_row <= 0.05, "calls per row");
  }
}

/** W5's table: throughput, latency and cost per row for every system. */
function streamTable(bySystem, workloads) {
  const lines = [
    "| workload | system | accepted req/s | ÷ Queues | enqueue p50 / p99 ms | end-to-end p50 / p99 ms | target calls per row | alarms / batches / requests per row | invocations per row, all | source SQLite rows per row | target SQLite rows per row | worker CPU ms per row | USD per million (Paid) | out of order / twice / lost |",
    "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
  ];
  for (const w of workloads.filter((w) => w.stream)) {
    const q = bySystem.queues?.[w.id];
    for (const [system, ws] of Object.entries(bySystem)) {
      const m = ws[w.id];
      if (!m) continue;
      const vsQ = q ? fmt(m.accepted_per_s / q.accepted_per_s) : "—";
      lines.push(
        `| ${w.id} | ${system} | ${fmt(m.accepted_per_s, 0)} | ${vsQ} | ${int(m.enqueue_p50_ms)} / ${int(m.enqueue_p99_ms)} | ${int(m.e2e_p50_ms)} / ${int(m.e2e_p99_ms)} | ${fmt(m.target_calls_per_row, 3)} | ${fmt(m.invocations_per_row, 3)} | ${fmt(m.all_invocations_per_row, 3)} | ${fmt(m.source_sql_rows_per_row, 2)} | ${fmt(m.target_sql_rows_per_row, 2)} | ${fmt(m.cpu_ms_per_row, 2)} | ${fmt(costPerMillion(billable(m)).total, 2)} | ${int(m.out_of_order)} / ${int(m.applied_twice)} / ${int(m.lost_rows)} |`,
      );
    }
  }
  return lines.join("\n");
}

function mainTable(bySystem, workloads) {
  const lines = [
    "| workload | system | drain time ÷ direct | alarms / consumer batches | max target calls per alarm / batch | target calls per row | source SQLite rows per row | target SQLite rows per row | out of order | applied twice | lost |",
    "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
  ];
  for (const w of workloads) {
    for (const [system, ws] of Object.entries(bySystem)) {
      const m = ws[w.id];
      if (!m) continue;
      const inv = m.invocation_kind === "enqueue requests" ? "—" : int(m.invocations);
      lines.push(
        `| ${w.id} | ${system} | ${fmt(m.drain_vs_direct)} | ${inv} | ${m.max_calls_per_invocation ?? "—"} | ${fmt(m.target_calls_per_row, 4)} | ${fmt(m.source_sql_rows_per_row, 3)} | ${fmt(m.target_sql_rows_per_row, 3)} | ${int(m.out_of_order)} | ${int(m.applied_twice)} | ${int(m.lost_rows)} |`,
      );
    }
  }
  return lines.join("\n");
}

function healthyTable(healthy) {
  const lines = [
    "| system | W4 healthy targets' drain ÷ their W3 drain | W4 all targets' drain ÷ healthy targets' W3 drain | heal at (÷ W3 drain) |",
    "| --- | ---: | ---: | ---: |",
  ];
  for (const [system, h] of Object.entries(healthy)) {
    lines.push(`| ${system} | ${fmt(h.ratio)} | ${fmt(h.w4_all_ms / h.w3_healthy_ms)} | ${fmt(h.healed_at_ms / h.w3_healthy_ms)} |`);
  }
  return lines.join("\n");
}

function aimsTable(aims) {
  const lines = ["| aim | system | workload | measured | limit | met |", "| --- | --- | --- | ---: | ---: | --- |"];
  const perRows = (x) => `1 per ${int(Math.round(1 / x))} rows`;
  for (const a of aims) {
    const calls = a.detail === "target calls per row";
    const v = calls ? perRows(a.value) : Number.isInteger(a.value) ? int(a.value) : fmt(a.value, 4);
    const l = calls ? perRows(a.limit) : Number.isInteger(a.limit) ? int(a.limit) : fmt(a.limit, 4);
    lines.push(`| ${a.aim} | ${a.system} | ${a.workload} | ${v} | ${l} | ${a.met ? "yes" : `**no** (${fmt(a.value / a.limit, 3)}x the limit)`} |`);
  }
  return lines.join("\n");
}

function backlogTable(backlog) {
  if (!backlog) return "_not run_";
  const lines = [
    "| workload | budget | rows | alarms | fires | target calls | target calls per row | most calls in one alarm |",
    "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
  ];
  for (const d of backlog) {
    lines.push(`| ${d.workload} | ${d.budget} | ${int(d.rows)} | ${int(d.alarms)} | ${int(d.fires)} | ${int(d.target_calls)} | ${fmt(d.target_calls_per_row, 4)} | ${int(d.max_calls_per_alarm)} |`);
  }
  return lines.join("\n");
}

function machineNote(bySystem) {
  let worst = null;
  for (const [system, ws] of Object.entries(bySystem)) {
    for (const [id, m] of Object.entries(ws)) {
      if (m.cpu_foreign === null || m.cpu_foreign === undefined) continue;
      if (!worst || m.cpu_foreign > worst.share) worst = { share: m.cpu_foreign, system, id };
    }
  }
  if (!worst) return "";
  return `Other processes on the machine used at most ${Math.round(worst.share * 100)}% of its CPUs during any measured run (${worst.system} ${worst.id}); \`cpu_foreign\` in results.json has the figure for every run.`;
}

function coreTable(core) {
  if (!core) return "_not run_";
  const lines = [
    "| shape | budget | rows inspected per fire | rows delivered per fire | calls per fire | ns per delivered row | ns per inspected row | delivered rows per CPU ms |",
    "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
  ];
  for (const c of core) {
    lines.push(`| ${c.shape} | ${c.budget} | ${int(c.inspected_rows_per_fire)} | ${int(c.delivered_rows_per_fire)} | ${c.calls_per_fire} | ${int(c.ns_per_delivered_row)} | ${int(c.ns_per_inspected_row)} | ${int(c.delivered_rows_per_cpu_ms)} |`);
  }
  return lines.join("\n");
}

/** The Markdown report. */
/** W7's table: throughput per partition count. */
function partitionTable(rows) {
  const lines = rows.map((r) => `| ${r.partitions || "plain"} | ${int(r.rows)} | ${r.producers} | ${fmt(r.accepted_per_s, 1)} | ${fmt(r.ratio_to_1, 2)} | ${int(r.enqueue_p50_ms)} | ${int(r.enqueue_p99_ms)} | ${int(r.drain_ms)} | ${r.order_violations} |`);
  return ["| partitions | rows | producers | accepted/s | ÷ 1 partition | enqueue p50 ms | p99 ms | drain ms | order violations |", "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |", ...lines].join("\n");
}

/** W8's table: rows to an HTTPS endpoint, each system against Queues. */
function endpointTable(entries) {
  const ratio = (x) => (typeof x === "number" ? `${fmt(x, 2)}x` : "-");
  const lines = entries.map((e) =>
    `| ${e.workload} | ${e.system} | ${int(e.rows)} | ${fmt(e.accepted_per_s, 0)} | ${fmt(e.delivered_per_s, 0)} | ${ratio(e.delivered_vs_queues)} | ${int(e.enqueue_p50_ms)} | ${int(e.e2e_p50_ms)} | ${ratio(e.e2e_p50_vs_queues)} | ${int(e.e2e_p99_ms)} | ${int(e.requests)} | ${e.repeats} | ${e.out_of_order} | ${e.max_open_per_source ?? "-"} | ${fmt(e.cpu_ms_per_row, 2)} |`,
  );
  return [
    "| workload | system | rows | accepted/s | delivered/s | ÷ Queues | enqueue p50 ms | e2e p50 ms | ÷ Queues | e2e p99 ms | requests | repeats | out of order | open per source | CPU ms/row |",
    "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ...lines,
  ].join("\n");
}

/** W6's table: lateness per delay. */
function delayTable(delays) {
  const rows = delays.map((d) => {
    const l = d.late_ms;
    return `| ${int(d.delay_ms)} | ${d.rows} | ${d.early} | ${d.missing} | ${l ? [l.min, l.p50, l.p90, l.max].map((x) => int(x)).join(" | ") : "- | - | - | -"} |`;
  });
  return ["| delay ms | rows | early | missing | late min ms | p50 | p90 | max |", "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |", ...rows].join("\n");
}

export function renderReport(run) {
  const { meta, workloads, systems, bySystem, healthy, aims, core, upload, startup, delays, partitions, endpoints, profile } = run;
  const sys = systems.map((s) => `- \`${s.id}\`: ${s.label}${s.kind === "relay" ? `; vars ${Object.entries(s.vars).map(([k, v]) => `${k}=${v}`).join(" ")}` : ""}`).join("\n");
  const wl = workloads.map((w) => `- ${w.id}: ${w.title} (${int(totalRows(w))} rows)`).join("\n");
  const missed = aims.filter((a) => !a.met);
  return `# durable-relay benchmark${meta.quick ? " (quick mode)" : ""}

Run ${meta.started_at} on ${meta.cpus} CPUs (${meta.cpu_model}), Node ${meta.node}, wrangler ${meta.wrangler}, all in one local workerd per system (\`wrangler dev\`).
Command: \`${meta.command}\`. Chart: \`chart.svg\`; every figure and the absolute times: \`results.json\`.
${meta.quick ? "\n**Quick mode**: small workloads that exercise every system and route; the figures are not the full workloads and the aims are not judged on them.\n" : ""}
## Systems

${sys}

Queues: one consumer in the same Worker, \`max_batch_size = 100\`, \`max_batch_timeout = 0\` s, \`retry_delay = 1\` s, \`max_retries = 100\` (bench/wrangler.toml).

## Workloads

${wl}

## Results

Time to drain runs from the driver's first request to the last row's first arrival at its target (stamped by the target), divided by the direct-write floor for the same workload. Per-row figures divide by the workload's rows.

${mainTable(bySystem, workloads.filter((w) => !w.stream))}
${workloads.some((w) => w.stream) ? `
### W5: streaming single-row enqueues

Every request enqueues one row. Accepted req/s: rows ÷ (last reply − first request), seen by the driver. Enqueue latency: request to reply, seen by the driver. End-to-end latency: from the \`at_ms\` the source stamped on the accepted row (the relay's commit time, the bench source's allocation time) to the row's first arrival, stamped by its target, so both ends are server clocks. Worker CPU: wrangler and workerd processes from the first request to the drain. Direct writes apply before they answer, so their end-to-end time is inside their enqueue time. The relay's systems run W5 with \`RELAY_ALARM_LOG=notable\` (a routine alarm writes no log line); the batch workloads keep one line per alarm.

${streamTable(bySystem, workloads)}
` : ""}
### Beside Queues, where order matters

One line per workload and system, ratios to Queues in the same run. Statements and rows read count the whole isolate per row (front door, source, target, and the driver's status reads); rows written are the source's and the target's own; rows per Free day is 100,000 ÷ rows written per row, source and target (Queues is held to its operations instead).

${sideBySideTable(bySystem)}

### Work per row

What each system asked of the platform per row, counted by the isolate between the first request and the drain (\`GET /v1/bench/work\`; the driver's own status reads are in it). Counts do not move with the machine's load, so they show what a change did where the milliseconds cannot.

${workTable(bySystem, workloads)}

### Cost per million rows

${costTable(bySystem, workloads)}

${priceNote()}

### Profile: a lone row

${profileSection(profile)}

${partitions ? `### W7: partitioned sources

Single-row enqueues from concurrent producers to one logical source (\`RELAY_PARTITIONS\`), each configuration on a fresh workerd; \`plain\` is an unpartitioned source for reference. Accepted enqueues/s: rows ÷ (last reply − first request). Order: each target's apply log at its home partition against the order its producer's enqueues were accepted. All partitions run in one local workerd process on this machine, so the ratios show the router's cost and the local contention, not production, where each partition is its own object with its own throughput.

${partitionTable(partitions)}
` : ""}
${endpoints ? `### W8: rows to an HTTPS endpoint

Single-row enqueues addressed to \`endpoint:bench\`, from producers that each own a source, taken by a local webhook receiver that verifies every signature (\`tests/e2e/endpoint/receiver.mjs\`). The relay delivers them as it delivers to any endpoint (one row per request); the Queues system sends each row as a message whose consumer POSTs it through the relay's own endpoint client, so both send the same signed request. Each figure is the median of ${endpoints[0]?.runs ?? 1} run(s) on fresh workerd processes. Delivered/s: rows ÷ (last first arrival at the receiver − first request). End-to-end: the source's commit stamp to the first arrival (one machine, one clock). Repeats: requests for an id the receiver had already taken (worst run). Out of order: first arrivals below a sequence already taken from the same source (worst run); the relay must have none. Open per source: the most requests of one source the receiver was answering at once (worst run); the relay must keep it at 1.

${endpointTable(endpoints)}
` : ""}
${delays ? `### W6: delay accuracy

Each row is enqueued alone with \`delay_ms\`; lateness is the target's apply time (its \`relay_apply\` line) minus the row's due time (the enqueue reply's \`due_ms\`). A row applied early fails the run.

${delayTable(delays)}
` : ""}
### W4: healthy targets against W3

${Object.keys(healthy).length ? healthyTable(healthy) : "_W3 and W4 were not both run_"}

${meta.quick ? "" : `## Aims

${aimsTable(aims)}

${missed.length ? `Missed: ${missed.length} of ${aims.length}.` : `All ${aims.length} met.`}
`}
${machineNote(bySystem)}

## Core plan-and-settle cost (native, \`cargo run --release -p durable-relay-sql --features sim --example core_bench\`)

One fire over a full window (1,024 rows), everything the engine does between reading the rows and writing the checkpoint, with no storage or network.

${coreTable(core?.core)}

${core?.free_alarm ? `A whole Free alarm that fills its budget (${core.free_alarm.rows_delivered} rows to ${core.free_alarm.targets} targets), through the simulator (the shipped driver and SQL on native SQLite, the targets' applies included): **${fmt(core.free_alarm.median_us / 1000, 2)} ms** (median of ${core.free_alarm.runs}). In wasm, see the profile's Free alarm above.` : ""}

## Backlog drains (deterministic simulator, same example)

The same workloads as a backlog: every row is enqueued before the first alarm. In the local runs above, delivery starts with the first enqueue request.

${backlogTable(core?.backlog)}

## Worker upload (\`wrangler deploy --dry-run\`)

${upload ? `${fmt(upload.upload_kib, 2)} KiB upload, ${fmt(upload.gzip_kib, 2)} KiB gzip` : "_not measured_"}

## Startup (\`bench/startup.mjs\`)

${startup ? `The production wasm (${int(startup.wasm_bytes)} bytes) compiled and instantiated by V8 in ${startup.runs} fresh Node processes (workerd freezes the clocks a Worker can read, so it cannot be timed from inside): compile ${startup.compile_ms.median} ms median (${startup.compile_ms.min}-${startup.compile_ms.max}), instantiate ${startup.instantiate_ms.median} ms (${startup.instantiate_ms.min}-${startup.instantiate_ms.max}), together ${startup.total_ms.median} ms. V8 compiles wasm lazily, so this is the cost before the first request; each function compiles on its first call.` : "_not measured_"}
`;
}
