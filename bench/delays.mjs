// W6: delay accuracy. Rows delayed by 1 s, 10 s and 60 s (quick: 1 s and
// 3 s) are enqueued one per request, staggered, each with its own
// traceparent; the target's relay_apply line stamps when it applied each
// (the target's clock). Lateness = apply time - the row's due time, which
// the enqueue reply states (`due_ms`). A row applied before its due time is
// a failure of the run.

import { startBenchWorker } from "./workerd.mjs";
import { sleep } from "../tests/e2e/harness.mjs";

/** Rows per delay, and the pause between enqueues, ms. */
const FULL = { delays: [1_000, 10_000, 60_000], rows: 10, stagger_ms: 700 };
const QUICK = { delays: [1_000, 3_000], rows: 3, stagger_ms: 200 };
/** How long after the last due time the run waits for stragglers, ms. */
const GRACE_MS = 30_000;

const trace = (n) => `00-${n.toString(16).padStart(32, "a")}-00f067aa0ba902b7-01`;

function stats(xs) {
  const s = [...xs].sort((a, b) => a - b);
  const at = (q) => s[Math.min(s.length - 1, Math.floor(q * s.length))];
  return { min: s[0], p50: at(0.5), p90: at(0.9), max: s.at(-1) };
}

/** Runs W6 on a fresh workerd; returns one entry per delay. */
export async function runDelays({ quick, say }) {
  const plan = quick ? QUICK : FULL;
  const worker = await startBenchWorker({});
  const applied = new Map();
  worker.listener = (ev) => {
    if (ev.kind !== "relay_apply") return;
    for (const t of ev.traces ?? []) if (!applied.has(t)) applied.set(t, ev.at_ms);
  };
  try {
    const sent = [];
    let n = 1;
    for (let i = 0; i < plan.rows; i++) {
      for (const delay of plan.delays) {
        const tp = trace(n++);
        const body = { rows: [{ target: `w6-${delay}-${i}`, puts: [["k", i]], delay_ms: delay }] };
        const r = await worker.api("POST", `/v1/sources/w6-${delay}/enqueue`, body, { headers: { traceparent: tp } });
        if (r.status !== 200) throw new Error(`W6 enqueue ${r.status}: ${r.text}`);
        sent.push({ delay, tp, due: r.body.due_ms[0] });
        await sleep(plan.stagger_ms);
      }
    }
    const lastDue = Math.max(...sent.map((s) => s.due));
    say(`W6: ${sent.length} delayed rows enqueued; waiting until ${new Date(lastDue).toISOString()}`);
    while (sent.some((s) => !applied.has(s.tp)) && Date.now() < lastDue + GRACE_MS) await sleep(250);
    return plan.delays.map((delay) => {
      const mine = sent.filter((s) => s.delay === delay);
      const late = mine.filter((s) => applied.has(s.tp)).map((s) => applied.get(s.tp) - s.due);
      return {
        delay_ms: delay,
        rows: mine.length,
        missing: mine.length - late.length,
        early: late.filter((l) => l < 0).length,
        late_ms: late.length ? stats(late) : null,
      };
    });
  } finally {
    await worker.stop();
  }
}
