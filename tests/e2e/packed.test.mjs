// Packed rows in workerd (RELAY_PACK_ROWS, on by default): the pack's SQL
// (JSON functions, the partial index) on real SQLite Durable Objects, with
// real alarms. A burst of 256-row requests over 64 targets reaches every target
// once and in order for a fraction of the rows written plain rows cost; a
// target's queued rows are listed one by one out of a pack; the status says
// the source packs; a pack takes the slot a delivered pack left (Durable
// Objects count the pack's index entry as a row written, which a guard must
// not read as two rows changed); the relay's own audit (pack invariants
// included) holds.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Relay, put } from "./harness.mjs";

/** Source rows written per row a packed burst may cost on Free (the
 * simulator measures 0.10 on the shipped SQL; alarms and the state row are
 * shared by the rows). */
const PACKED_ROWS_WRITTEN_PER_ROW_MAX = 0.15;

test("packed bursts reach every target once, in order, for a fraction of a row written per row", async () => {
  const relay = await Relay.start({ vars: { RELAY_PACK_ROWS: "on" } });
  const src = "pk-burst";
  const requests = 3;
  try {
    const before = (await relay.status(src)).sql_rows_written;
    for (let r = 0; r < requests; r++) {
      const rows = [];
      for (let i = r * 256; i < (r + 1) * 256; i++) rows.push(put(`pk-t${i % 64}`, `k${i}`, i));
      const done = await relay.enqueue(src, rows);
      assert.equal(done.seqs.length, 256);
    }
    const s = await relay.drained(src, 120_000);
    assert.equal(s.config.pack_rows, true, "the status says the source packs");
    for (let t = 0; t < 64; t++) {
      const seqs = await relay.log(`pk-t${t}`, src);
      assert.equal(seqs.length, requests * 4, `pk-t${t}: every row once`);
      assert.ok(seqs.every((q, i) => i === 0 || seqs[i - 1] < q), `pk-t${t}: in order`);
    }
    const perRow = (s.sql_rows_written - before) / (requests * 256);
    console.log(`packed bursts in workerd: ${perRow.toFixed(3)} source rows written per row`);
    assert.ok(perRow <= PACKED_ROWS_WRITTEN_PER_ROW_MAX, `${perRow} rows written per row`);
    assert.deepEqual(await relay.audit(), [], "the relay's own audit");
  } finally {
    await relay.stop();
  }
});

test("a packed row's rows are listed, delayed and delivered one by one", async () => {
  const relay = await Relay.start({ vars: { RELAY_PACK_ROWS: "on" } });
  const src = "pk-list";
  try {
    const late = { ...put("pk-a", "late", 2), delay_ms: 4_000 };
    await relay.enqueue(src, [put("pk-a", "k", 1), late, put("pk-b", "k", 3), put("pk-a", "k", 4)]);
    const deadline = Date.now() + 3_000;
    while ((await relay.log("pk-b", src)).length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
    assert.deepEqual(await relay.log("pk-b", src), [3], "the rows due now went at once");
    const page = await relay.ok(`/v1/sources/${src}/queued?target=pk-a`);
    assert.deepEqual(page.rows.map((r) => r.seq), [2, 4], "row 1 went at once; 2 and 4 wait, out of the pack");
    assert.deepEqual(page.rows[0].effects, { puts: [["late", 2]], deletes: [] }, "its effects");
    await relay.drained(src);
    assert.deepEqual(await relay.log("pk-a", src), [1, 2, 4]);
    assert.deepEqual(await relay.log("pk-b", src), [3]);
    assert.deepEqual(await relay.audit(), [], "the relay's own audit");
  } finally {
    await relay.stop();
  }
});

test("a pack takes the slot of a delivered pack, request after request", async () => {
  const relay = await Relay.start();
  const src = "pk-slot";
  try {
    for (let r = 0; r < 4; r++) {
      const rows = [put("pk-s1", `k${r}`, r), put("pk-s2", `k${r}`, r), put("pk-s1", `j${r}`, r)];
      const done = await relay.enqueue(src, rows);
      assert.deepEqual(done.seqs, [3 * r + 1, 3 * r + 2, 3 * r + 3], `request ${r} is accepted`);
      await relay.drained(src);
    }
    assert.equal((await relay.status(src)).config.pack_rows, true, "packs are on by default");
    assert.deepEqual(await relay.log("pk-s1", src), [1, 3, 4, 6, 7, 9, 10, 12]);
    assert.deepEqual(await relay.log("pk-s2", src), [2, 5, 8, 11]);
    assert.deepEqual(await relay.audit(), [], "the relay's own audit");
  } finally {
    await relay.stop();
  }
});
