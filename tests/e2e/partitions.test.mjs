// Partitioned sources in workerd: a logical source over two partitions
// (RELAY_PARTITIONS) routes each row by a stable hash of its target, the
// status and watermark are gathered over the partitions; then the relay is
// restarted with four partitions (epoch 2, from 2) while rows are still
// queued at the old homes, and the load goes on: every target's rows are
// applied once and in the order they were accepted, which the targets'
// relay_apply lines show (each request carries its own traceparent).

import { test } from "node:test";
import assert from "node:assert/strict";
import { Relay, home, until } from "./harness.mjs";

const L = "porders";
const TARGETS = Array.from({ length: 12 }, (_, i) => `pt${String(i).padStart(2, "0")}`);

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

const R = "rr";
const rmap = (partitions, epoch, from) => ({ RELAY_PARTITIONS: JSON.stringify({ [R]: from === undefined ? { partitions, epoch } : { partitions, epoch, from } }) });

/** Every logical-name route answers, with the partitions the map names. */
async function logicalRoutesAnswer(relay, partitions, target) {
  const status = await relay.api("GET", `/v1/sources/${R}/status`);
  assert.equal(status.status, 200, status.text);
  assert.equal(status.body.partitions.length, partitions);
  for (const field of ["conflicts", "dedup_hits", "rejected_full", "parked_bytes", "parked_rows"]) {
    assert.equal(status.body[field], status.body.partitions.reduce((a, p) => a + p.status[field], 0), field);
  }
  assert.equal((await relay.api("GET", `/v1/sources/${R}/watermark`)).status, 200);
  const parked = await relay.api("GET", `/v1/sources/${R}/parked`);
  assert.equal(parked.status, 200, parked.text);
  for (const action of ["redrive", "discard"]) {
    const r = await relay.api("POST", `/v1/sources/${R}/parked/nobody/${action}`);
    assert.deepEqual(r.body, { rows: 0, was_parked: false }, `${action} answers at the logical name: ${r.text}`);
  }
  return { status: status.body, parked: parked.body.targets.filter((t) => t.target === target) };
}

test("a second resize before the first settled gates through every unsettled layout; a map that skips one is refused", async () => {
  // A target whose home differs under 2, 4 and 3 partitions.
  const x = Array.from({ length: 200 }, (_, i) => `x-${i}`).find((t) => new Set([home(t, 2), home(t, 4), home(t, 3)]).size === 3);
  const trace = (k) => ({ headers: { traceparent: traceOf(1_000 + k) } });
  const put = (k) => ({ rows: [{ target: x, puts: [["v", k]] }] });
  let relay = await Relay.start({ vars: rmap(2, 1) });
  const relays = [relay];
  try {
    await relay.api("POST", `/v1/targets/${x}/faults`, { reject: true, permanent: true });
    assert.equal((await relay.api("POST", `/v1/sources/${R}/enqueue`, put(1), trace(1))).status, 200);
    await until(async () => (await relay.status(R)).parked_rows === 1, "the first row parked at its 2-partition home");
    await relay.stop();

    // Grow to 4: the second row follows the first to its old home.
    relay = await Relay.start({ vars: rmap(4, 2, 2), persistDir: relay.persistDir });
    relays.push(relay);
    const second = await relay.api("POST", `/v1/sources/${R}/enqueue`, put(2), trace(2));
    assert.equal(second.status, 200, second.text);
    assert.equal(second.body.positions[0].partition, home(x, 2), "gated behind its parked row");
    let view = await logicalRoutesAnswer(relay, 4, x);
    assert.equal(view.status.resize_settled, false);
    assert.deepEqual(view.parked.map((t) => t.partition), [home(x, 2)]);
    await relay.stop();

    // Shrink to 3 before that settled, with a map that forgets the 2-partition layout: refused.
    relay = await Relay.start({ vars: rmap(3, 3, 4), persistDir: relay.persistDir });
    relays.push(relay);
    const skipping = await relay.api("POST", `/v1/sources/${R}/enqueue`, put(3), trace(3));
    assert.equal(skipping.status, 409, skipping.text);
    assert.equal(skipping.body.error.code, "unsettled_layout");
    assert.match(skipping.body.error.message, /keep 2 in from/);
    view = await logicalRoutesAnswer(relay, 4, x);
    assert.equal(view.status.resize_settled, false, "a shrink's status answers (partitions past the new count too)");
    await relay.stop();

    // With every unsettled layout listed, oldest first (under a new epoch: every change of a
    // map raises it, and some partitions prepared the refused one), the row goes behind the others.
    relay = await Relay.start({ vars: rmap(3, 4, [2, 4]), persistDir: relay.persistDir });
    relays.push(relay);
    const third = await relay.api("POST", `/v1/sources/${R}/enqueue`, put(3), trace(3));
    assert.equal(third.status, 200, third.text);
    assert.equal(third.body.positions[0].partition, home(x, 2));
    view = await logicalRoutesAnswer(relay, 4, x);
    assert.equal(view.parked[0].rows, 3, "all three rows wait at its oldest home, in order");
    const rows = await relay.api("GET", `/v1/sources/${R}:${home(x, 2)}/parked/${x}`);
    assert.deepEqual(rows.body.rows.map((r) => r.effects.puts[0][1]), [1, 2, 3]);
    // Healed and redriven at the logical name, they arrive in order; the next row goes to its new home.
    await relay.api("POST", `/v1/targets/${x}/faults`, { reject: false });
    const redrive = await relay.api("POST", `/v1/sources/${R}/parked/${x}/redrive`);
    assert.deepEqual(redrive.body, { rows: 3, was_parked: true }, redrive.text);
    await until(async () => (await relay.status(R)).queued_rows === 0, "the redriven rows delivered");
    const fourth = await relay.api("POST", `/v1/sources/${R}/enqueue`, put(4), trace(4));
    assert.equal(fourth.body.positions[0].partition, home(x, 3), "released by every old home: its new one");
    await until(async () => (await relay.status(R)).queued_rows === 0, "the fourth row delivered");
    assert.equal((await relay.status(R)).resize_settled, true);
    const discard = await relay.api("POST", `/v1/sources/${R}/parked/${x}/discard`);
    assert.equal(discard.status, 200, discard.text);
    await until(
      async () => relays.flatMap((r) => r.applyLogs()).filter((l) => l.traces.some((t) => parseInt(t.split("-")[1], 16) >= 1_000)).length >= 2,
      "the apply lines",
    );
    const applied = relays
      .flatMap((r) => r.applyLogs())
      .flatMap((l) => l.traces.map((t) => parseInt(t.split("-")[1], 16) - 1_000))
      .filter((k) => k >= 1 && k <= 4);
    assert.deepEqual(applied, [1, 2, 3, 4], "applied once each, in the order accepted");
    const keys = await relay.keys(x);
    assert.deepEqual(keys, [{ key: "v", value: 4 }]);
    assert.deepEqual(relay.panics(), []);
    assert.deepEqual(await relay.audit(), []);
  } finally {
    await relay.stop();
  }
});
