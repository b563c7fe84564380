// Failure isolation in workerd, on the Free preset: a healthy target's row
// is not held back by any number of failing targets ahead of it. A cycle
// that could remember only 32 failures ended at the 33rd and started over
// from the head, so 40 rejecting targets held a healthy row back for good.

import { test } from "node:test";
import assert from "node:assert/strict";
import { Relay, put, until } from "./harness.mjs";

/** Alarms of `src` logged so far. */
const alarmsOf = (relay, src) => relay.alarmLogs().filter((a) => a.source === src);

test("a healthy row behind 100 failing targets arrives in the same few alarms as behind 3", async () => {
  const relay = await Relay.start({ vars: { RELAY_PLAN: "free" } });
  try {
    const figures = {};
    for (const failing of [3, 100]) {
      const src = `iso-${failing}`;
      const bad = Array.from({ length: failing }, (_, i) => `${src}-bad${i}`);
      for (const t of bad) await relay.api("POST", `/v1/targets/${t}/faults`, { reject: true });
      // First, failures nobody knows yet: each costs one call.
      await relay.enqueue(src, [...bad.map((t) => put(t, "k", 1)), put(`${src}-first`, "k", 1)]);
      await until(async () => (await relay.log(`${src}-first`, src)).length === 1, `${src}: the first healthy row`, 60_000);
      const finding = alarmsOf(relay, src).length;
      // Status names 50 of each; the parked list pages them all (200 a page).
      const found = (await relay.ok(`/v1/sources/${src}/parked?limit=200`)).targets;
      assert.equal(found.filter((t) => !t.parked && t.failed_cycles > 0).length, failing, "every failing target has its record");
      // Then, with every failure known, another healthy row.
      const before = alarmsOf(relay, src).length;
      await relay.enqueue(src, [put(`${src}-later`, "k", 2)]);
      await until(async () => (await relay.log(`${src}-later`, src)).length === 1, `${src}: the later healthy row`, 30_000);
      const behind = alarmsOf(relay, src).length - before;
      figures[failing] = { finding, behind };
      for (const a of alarmsOf(relay, src)) assert.ok(a.subrequests <= 16, `an alarm made ${a.subrequests} calls`);
      assert.deepEqual(await relay.log(bad[0], src), [], "the failing targets applied nothing");
    }
    console.log(`free preset: ${JSON.stringify(figures)} (alarms to reach the first healthy row; alarms for a later one)`);
    assert.ok(figures[100].finding <= Math.ceil(101 / 16) + 1, "one call per new failure, 16 per alarm");
    assert.ok(figures[100].behind <= 2 && figures[3].behind <= 2, "known failures cost the later row nothing");
    assert.deepEqual(relay.panics(), []);
    assert.deepEqual(await relay.audit(), []);
  } finally {
    await relay.stop();
  }
});

test("40 rejecting targets ahead of one healthy row no longer hold it back", async () => {
  const relay = await Relay.start({ vars: { RELAY_PLAN: "free" } });
  try {
    const src = "iso-40";
    const bad = Array.from({ length: 40 }, (_, i) => `${src}-bad${i}`);
    for (const t of bad) await relay.api("POST", `/v1/targets/${t}/faults`, { reject: true });
    const started = Date.now();
    await relay.enqueue(src, [...bad.map((t) => put(t, "k", 1)), put(`${src}-ok`, "k", 1)]);
    await until(async () => (await relay.log(`${src}-ok`, src)).length === 1, "the healthy row", 30_000);
    console.log(`40 failing ahead: the healthy row arrived after ${Date.now() - started} ms, ${alarmsOf(relay, src).length} alarms`);
    // Healed, every failing target gets its retry and its row, once.
    for (const t of bad) await relay.api("POST", `/v1/targets/${t}/faults`, { reject: false });
    await relay.drained(src, 120_000);
    for (const t of bad) assert.deepEqual(await relay.log(t, src), [bad.indexOf(t) + 1], t);
    assert.deepEqual(await relay.audit(), []);
  } finally {
    await relay.stop();
  }
});
