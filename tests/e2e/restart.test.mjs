// wrangler dev with a persistence directory, killed with SIGKILL mid-drain
// and restarted on the same directory: the persisted alarm fires by itself,
// nothing is lost and nothing is applied twice.

import { test } from "node:test";
import assert from "node:assert/strict";
import { Relay, put, sleep, until } from "./harness.mjs";

test("a relay killed mid-drain resumes on restart, losing nothing and applying nothing twice", async () => {
  // One target per alarm, so the drain spans hundreds of alarms.
  const vars = { RELAY_TARGETS_PER_FIRE: "1", RELAY_FIRES_PER_ALARM: "1" };
  let relay = await Relay.start({ vars });
  const src = "restart";
  const n = 300;
  const sent = new Map();
  try {
    for (let i = 0; i < n; i += 150) {
      const rows = [];
      for (let j = i; j < i + 150; j++) rows.push(put(`rt${j % 100}`, `k${j}`, j));
      const { seqs } = await relay.enqueue(src, rows);
      seqs.forEach((seq, k) => {
        const t = `rt${(i + k) % 100}`;
        sent.set(t, [...(sent.get(t) ?? []), seq]);
      });
    }
    let s;
    for (;;) {
      s = await relay.status(src);
      if (s.delivered_rows >= 20) break;
      await sleep(20);
    }
    assert.ok(s.queued_rows > 0, "killed before the drain finished");
    relay.kill();
    await relay.stop();
    console.log(`killed with ${s.queued_rows} rows queued`);
    relay = await Relay.start({ vars, persistDir: relay.persistDir });
    // Poll without status reads (a status read would re-arm a lost alarm).
    const deadline = Date.now() + 120_000;
    for (;;) {
      const r = await relay.api("GET", `/v1/sources/${src}/delivered-through/${n}`);
      if (r.body.delivered) break;
      assert.ok(Date.now() < deadline, "the persisted alarm did not resume the drain");
      await sleep(200);
    }
    const after = await relay.status(src);
    assert.equal(after.queued_rows, 0);
    assert.equal(after.enqueued_rows, n);
    for (const [t, seqs] of sent) assert.deepEqual(await relay.log(t, src), seqs, `target ${t}`);
    assert.deepEqual(await relay.audit(), [], "the relay's own audit");
  } finally {
    await relay.stop();
  }
});

test("counts once read never go back after the object restarts", async () => {
  let relay = await Relay.start();
  const src = "restart-counts";
  const figures = (s) => ({
    alarms: s.alarms,
    fires: s.fires,
    subrequests: s.subrequests,
    sql_rows_written: s.sql_rows_written,
    rows_written_today: s.rows_written_today,
    delivered_rows: s.delivered_rows,
  });
  try {
    for (let i = 0; i < 6; i++) {
      await relay.enqueue(src, [put(`rc${i}`, "k", i)]);
      await relay.drained(src);
    }
    await until(async () => (await relay.status(src)).fires >= 6, "six deliveries counted");
    const read = figures(await relay.status(src));
    relay.kill();
    await relay.stop();
    relay = await Relay.start({ persistDir: relay.persistDir });
    const again = figures(await relay.status(src));
    for (const [k, v] of Object.entries(read)) assert.ok(again[k] >= v, `${k}: ${again[k]} after the restart, ${v} read before`);
    assert.equal(again.delivered_rows, 6);
  } finally {
    await relay.stop();
  }
});
