// The two embeddings side by side: the Rust example (examples/embedded, the
// library in a workers-rs Worker) and the TypeScript example
// (examples/typescript, the npm package), on W5's own-source streaming
// shape. Both serve the same routes: `POST /orders/{shard}` writes an order
// row and enqueues its outbox row in one transaction; the order's customer
// is its target. 8 producers, one shard (source) each, send their orders
// one request at a time, as fast as accepted, round-robin over 64 customers.
//
// Reported per run: accepted orders/s (first request to last reply), the
// time until every shard reports its last row delivered, the Worker CPU
// (wrangler and workerd processes, less the driver) per order, and the
// end-to-end latency of a lone order on an idle source. Runs
// alternate between the two so machine noise falls on both; the medians
// and their ratio are printed.
//
//   node bench/embedded.mjs [--orders N] [--runs K]

import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ROOT, sleep, startWrangler, writeRelayConfig } from "../tests/e2e/harness.mjs";
import { snapshot, workerCpuMs } from "./cpu.mjs";
import { quantile } from "./stream.mjs";

const args = process.argv.slice(2);
const flag = (name, fallback) => {
  const at = args.indexOf(name);
  return at >= 0 ? Number(args[at + 1]) : fallback;
};
const ORDERS = flag("--orders", 2000);
const RUNS = flag("--runs", 3);
const PRODUCERS = 8;
const CUSTOMERS = 64;
const LONE_ORDERS = 20;

const EMBEDDINGS = [
  { id: "rust", configs: () => [join(ROOT, "examples", "embedded", "wrangler.toml"), writeRelayConfig()] },
  { id: "typescript", configs: () => [join(ROOT, "examples", "typescript", "wrangler.toml")] },
];

async function once(embedding, run) {
  const app = await startWrangler({
    configs: embedding.configs(),
    persistDir: mkdtempSync(join(tmpdir(), `relay-embedded-bench-${embedding.id}-`)),
    ready: "/health",
  });
  try {
    const perProducer = ORDERS / PRODUCERS;
    const shards = Array.from({ length: PRODUCERS }, (_, p) => `bench${run}-${p}`);
    // Warm every shard and its isolate before timing.
    for (const shard of shards) {
      const r = await app.api("POST", `/orders/${shard}`, { id: "warm", customer: "warm", amount: 1 });
      if (r.status !== 200) throw new Error(`${embedding.id} warm-up: ${r.status} ${r.text}`);
    }
    await sleep(500);
    const before = snapshot();
    const start = Date.now();
    const latencies = [];
    await Promise.all(
      shards.map(async (shard, p) => {
        for (let i = 0; i < perProducer; i++) {
          const customer = `c${(p + i) % CUSTOMERS}`;
          const sent = Date.now();
          const r = await app.api("POST", `/orders/${shard}`, { id: `o${i}`, customer, amount: 1 });
          latencies.push(Date.now() - sent);
          if (r.status !== 200) throw new Error(`${embedding.id} order: ${r.status} ${r.text}`);
        }
      }),
    );
    const acceptedMs = Date.now() - start;
    const last = perProducer + 1; // the warm-up order took sequence 1
    for (const shard of shards) {
      for (;;) {
        const r = await app.api("GET", `/orders/${shard}/relay/delivered-through/${last}`);
        if (r.body?.delivered === true) break;
        if (Date.now() - start > 120_000) throw new Error(`${embedding.id}: ${shard} did not drain`);
        await sleep(50);
      }
    }
    const drainedMs = Date.now() - start;
    const cpuMs = workerCpuMs(before, snapshot());
    const lone = await loneRows(app, run);
    if (app.panics().length) throw new Error(`${embedding.id}: ${app.panics()[0]}`);
    return {
      accepted_per_s: Math.round((ORDERS * 1000) / acceptedMs),
      enqueue_p50_ms: quantile(latencies, 0.5),
      drained_ms: drainedMs,
      cpu_ms_per_order: cpuMs === null ? null : Math.round((cpuMs / ORDERS) * 100) / 100,
      lone_e2e_p50_ms: quantile(lone, 0.5),
    };
  } finally {
    await app.stop();
  }
}

/**
 * End-to-end latency of a lone order on an idle source: from the enqueue's
 * reply to the customer's points showing it, polled every 2 ms (the same
 * polling for both embeddings, so the ratio holds even where the absolute
 * figure carries the poll). 20 orders, 250 ms apart.
 */
async function loneRows(app, run) {
  const latencies = [];
  for (let i = 0; i < LONE_ORDERS; i++) {
    await sleep(250);
    const customer = `lone${run}-${i}`;
    const r = await app.api("POST", `/orders/lone${run}`, { id: `l${i}`, customer, amount: 1 });
    const replied = Date.now();
    if (r.status !== 200) throw new Error(`lone order: ${r.status} ${r.text}`);
    for (;;) {
      const c = await app.api("GET", `/customers/${customer}`);
      if (c.body?.points === 1) break;
      if (Date.now() - replied > 10_000) throw new Error(`lone order ${i} did not arrive`);
      await sleep(2);
    }
    latencies.push(Date.now() - replied);
  }
  return latencies;
}

const results = Object.fromEntries(EMBEDDINGS.map((e) => [e.id, []]));
for (let run = 0; run < RUNS; run++) {
  for (const embedding of EMBEDDINGS) {
    const r = await once(embedding, run);
    results[embedding.id].push(r);
    console.log(`embedded bench: ${embedding.id} run ${run + 1}: ${JSON.stringify(r)}`);
  }
}
const median = (id, key) => quantile(results[id].map((r) => r[key]), 0.5);
console.log(`embedded bench: ${ORDERS} orders, ${PRODUCERS} producers with a shard each, ${CUSTOMERS} customers, medians of ${RUNS} runs`);
for (const key of ["accepted_per_s", "enqueue_p50_ms", "drained_ms", "cpu_ms_per_order", "lone_e2e_p50_ms"]) {
  const [rust, ts] = [median("rust", key), median("typescript", key)];
  const ratio = rust && ts ? Math.round((ts / rust) * 100) / 100 : null;
  console.log(`  ${key.padEnd(18)} rust ${String(rust).padStart(8)}   typescript ${String(ts).padStart(8)}   typescript/rust ${ratio}`);
}
