// W7: partitioned sources. Single-row enqueues from concurrent producers
// to one logical source of 1, 2 and 4 partitions (and to a plain source
// for reference), each on a fresh workerd. Accepted enqueues per second
// are reported as ratios to 1 partition. Each target belongs to one
// producer, which sends its rows in turn, so the order a target must see
// is the order of that producer's replies; after the drain the target's
// arrival log (the bench build's, in apply order, naming the partition
// each row came from) must equal it, nothing twice (0 violations).

import { startBenchWorker } from "./workerd.mjs";
import { sleep } from "../tests/e2e/harness.mjs";

const FULL = { rows: 4_000, producers: 32, targets: 64, counts: [1, 2, 4] };
const QUICK = { rows: 400, producers: 8, targets: 16, counts: [1, 2, 4] };
/** Longest a drain may take, ms. */
const DRAIN_MAX_MS = 300_000;

const L = "w7";

/** One system: `partitions` (0: a plain source). */
async function runOne(plan, partitions, say) {
  const vars = partitions ? { RELAY_PARTITIONS: JSON.stringify({ [L]: { partitions, epoch: 1 } }) } : {};
  const worker = await startBenchWorker({ vars });
  try {
    const targets = Array.from({ length: plan.targets }, (_, i) => `w7-t${i}`);
    const sent = new Map(targets.map((t) => [t, []]));
    const perProducer = Math.ceil(plan.rows / plan.producers);
    const latencies = [];
    const started = Date.now();
    await Promise.all(
      Array.from({ length: plan.producers }, async (_, p) => {
        const mine = targets.filter((_, i) => i % plan.producers === p);
        for (let i = 0; i < perProducer; i++) {
          const t = mine[i % mine.length];
          const t0 = Date.now();
          const r = await worker.api("POST", `/v1/sources/${L}/enqueue`, { rows: [{ target: t, puts: [["v", i]] }] });
          if (r.status !== 200) throw new Error(`W7 enqueue ${r.status}: ${r.text}`);
          latencies.push(Date.now() - t0);
          const pos = r.body.positions?.[0] ?? { partition: null, seq: r.body.seqs[0] };
          sent.get(t).push(pos);
        }
      }),
    );
    const accepted_ms = Date.now() - started;
    const rows = plan.producers * perProducer;
    const drainDeadline = Date.now() + DRAIN_MAX_MS;
    let status;
    for (;;) {
      status = (await worker.api("GET", `/v1/sources/${L}/status`)).body;
      if (status.queued_rows === 0 && status.delivered_rows === rows) break;
      if (Date.now() > drainDeadline) throw new Error(`W7 ${partitions} partitions: no drain: ${JSON.stringify(status).slice(0, 300)}`);
      await sleep(250);
    }
    const drain_ms = Date.now() - started;
    let violations = 0;
    for (const [t, positions] of sent) {
      // The target's arrival log (bench builds), in the order it applied rows.
      const stats = (await worker.api("GET", `/v1/bench/targets/${t}/stats`)).body;
      const got = stats.first_rows.map(([source, seq]) => `${source}#${seq}`);
      const want = positions.map((p) => `${partitions ? `${L}:${p.partition}` : L}#${p.seq}`);
      if (stats.duplicates || JSON.stringify(got) !== JSON.stringify(want)) violations++;
    }
    latencies.sort((a, b) => a - b);
    const result = {
      partitions,
      rows,
      producers: plan.producers,
      targets: plan.targets,
      accepted_ms,
      accepted_per_s: Math.round((rows / accepted_ms) * 1000 * 10) / 10,
      enqueue_p50_ms: latencies[Math.floor(latencies.length / 2)],
      enqueue_p99_ms: latencies[Math.floor(latencies.length * 0.99)],
      drain_ms,
      order_violations: violations,
    };
    say(`W7 ${partitions || "plain"}: ${result.accepted_per_s} enqueues/s, drained in ${drain_ms} ms, ${violations} order violations`);
    return result;
  } finally {
    await worker.stop();
  }
}

/** Runs W7: a plain source, then 1, 2 and 4 partitions; ratios to 1 partition. */
export async function runPartitions({ quick, say }) {
  const plan = quick ? QUICK : FULL;
  const results = [];
  for (const p of [0, ...plan.counts]) results.push(await runOne(plan, p, say));
  const one = results.find((r) => r.partitions === 1);
  for (const r of results) r.ratio_to_1 = Math.round((r.accepted_per_s / one.accepted_per_s) * 100) / 100;
  return results;
}
