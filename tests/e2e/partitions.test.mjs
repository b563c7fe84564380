// Partitioned sources in workerd: a logical source over two partitions
// (RELAY_PARTITIONS) routes each row by a stable hash of its target, the
// status and watermark are gathered over the partitions; then the relay is
// restarted with four partitions (epoch 2, from 2) while rows are still
// queued at the old homes, and the load goes on: every target's rows are
// applied once and in the order they were accepted, which the targets'
// relay_apply lines show (each request carries its own traceparent).

import { test } from "node:test";
import assert from "node:assert/strict";
import { Relay, until } from "./harness.mjs";

const L = "porders";
const TARGETS = Array.from({ length: 12 }, (_, i) => `pt${String(i).padStart(2, "0")}`);

/** FNV-1a 64 of the name's bytes modulo n: the relay's home partition, written apart from it. */
function home(name, n) {
  let h = 0xcbf29ce484222325n;
  for (const b of new TextEncoder().encode(name)) {
    h ^= BigInt(b);
    h = (h * 0x100000001b3n) & 0xffffffffffffffffn;
  }
  return Number(h % BigInt(n));
}

const vars = (partitions, epoch, from) => ({
  RELAY_PARTITIONS: JSON.stringify({ [L]: from === undefined ? { partitions, epoch } : { partitions, epoch, from } }),
});

let n = 0;
const traceOf = (k) => `00-${k.toString(16).padStart(32, "0")}-00f067aa0ba902b7-01`;
/** What each target was sent, in acceptance order: trace numbers. */
const sent = new Map(TARGETS.map((t) => [t, []]));

/** Four producers, each owning three targets and enqueueing one row per request, in turn. */
async function load(relay, perProducer, partitions) {
  await Promise.all(
    [0, 1, 2, 3].map(async (p) => {
      for (let i = 0; i < perProducer; i++) {
        const t = TARGETS[p * 3 + (i % 3)];
        const k = ++n;
        const r = await relay.api("POST", `/v1/sources/${L}/enqueue`, { rows: [{ target: t, puts: [["v", k]] }] }, { headers: { traceparent: traceOf(k) } });
        assert.equal(r.status, 200, r.text);
        assert.equal(r.body.positions.length, 1);
        if (partitions) assert.ok(r.body.positions[0].partition < partitions, JSON.stringify(r.body));
        sent.get(t).push(k);
      }
    }),
  );
}

/** Per target, the trace numbers in the order the target applied them (its relay_apply lines, in log order). */
function appliedOrder(relays) {
  const out = new Map(TARGETS.map((t) => [t, []]));
  const lines = relays.flatMap((r) => r.applyLogs());
  for (const line of lines) {
    for (const tp of line.traces) {
      const k = parseInt(tp.split("-")[1], 16);
      const target = [...sent].find(([, ks]) => ks.includes(k))?.[0];
      if (target) out.get(target).push(k);
    }
  }
  return out;
}

test("a partitioned source routes by target, reports over its partitions, and keeps order per target through a resize", async () => {
  let relay = await Relay.start({ vars: vars(2, 1) });
  const relays = [relay];
  try {
    const r = await relay.api("POST", `/v1/sources/${L}/enqueue`, { rows: TARGETS.map((t) => ({ target: t, puts: [["v", 0]] })) });
    assert.equal(r.status, 200, r.text);
    TARGETS.forEach((t, i) => assert.equal(r.body.positions[i].partition, home(t, 2), `${t} at its home`));
    const direct = await relay.api("POST", `/v1/sources/${L}:1/enqueue`, { rows: [{ target: "pt00", puts: [["v", 0]] }] });
    assert.equal(direct.status, 400);
    assert.equal(direct.body.error.code, "partition_enqueue");
    await load(relay, 15, 2);
    await until(async () => (await relay.status(L)).queued_rows === 0, "drained over two partitions", 60_000);
    const s = await relay.status(L);
    assert.equal(s.partitions.length, 2);
    assert.equal(s.enqueued_rows, 12 + 60);
    assert.equal(s.delivered_rows, 12 + 60);
    assert.equal(s.partitions.reduce((a, p) => a + p.status.enqueued_rows, 0), s.enqueued_rows);
    const w = await relay.api("GET", `/v1/sources/${L}/watermark`);
    assert.equal(w.status, 200);
    const pos = r.body.positions[0];
    const dt = await relay.api("GET", `/v1/sources/${L}:${pos.partition}/delivered-through/${pos.seq}`);
    assert.equal(dt.body.delivered, true, "a position is asked of its partition");

    // Rows pile up at the old homes: every target fails.
    for (const t of TARGETS) await relay.api("POST", `/v1/targets/${t}/faults`, { reject: true });
    await load(relay, 6, 2);
    assert.ok((await relay.status(L)).queued_rows >= 24, "rows queued at the old homes");
    await relay.stop();

    // Four partitions now: moving targets stay gated at their old homes while rows wait there.
    relay = await Relay.start({ vars: vars(4, 2, 2), persistDir: relay.persistDir });
    relays.push(relay);
    for (const t of TARGETS) await relay.api("POST", `/v1/targets/${t}/faults`, { reject: true });
    await load(relay, 6, 4);
    const mid = await relay.status(L);
    assert.equal(mid.partitions.length, 4);
    assert.equal(mid.resize_settled, false, "old homes still hold rows of moving targets");
    for (const t of TARGETS) await relay.api("POST", `/v1/targets/${t}/faults`, { reject: false });
    await load(relay, 6, 4);
    await until(async () => (await relay.status(L)).queued_rows === 0, "drained over four partitions", 90_000);
    assert.equal((await relay.status(L)).resize_settled, true);
    // Once settled, moving targets go to their new homes.
    const moved = TARGETS.find((t) => home(t, 2) !== home(t, 4));
    assert.ok(moved, "some target moves between 2 and 4 partitions");
    const k = ++n;
    const after = await relay.api("POST", `/v1/sources/${L}/enqueue`, { rows: [{ target: moved, puts: [["v", k]] }] }, { headers: { traceparent: traceOf(k) } });
    assert.equal(after.body.positions[0].partition, home(moved, 4));
    sent.get(moved).push(k);
    await until(async () => (await relay.status(L)).queued_rows === 0, "the last row delivered", 30_000);
    await until(async () => appliedOrder(relays).get(moved).at(-1) === k, "its apply line", 10_000);

    const applied = appliedOrder(relays);
    for (const t of TARGETS) assert.deepEqual(applied.get(t), sent.get(t), `${t}: applied once each, in the order accepted`);
    assert.deepEqual(relay.panics(), []);
    assert.deepEqual(await relay.audit(), []);
  } finally {
    await relay.stop();
  }
});
