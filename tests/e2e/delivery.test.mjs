// Delivery through real workerd: enqueue over the front door, in-turn and
// alarm-driven fires, DO-to-DO apply calls, and the faults a relay must
// survive.

import { test, before, after, afterEach } from "node:test";
import assert from "node:assert/strict";
import { Relay, put, sleep, until } from "./harness.mjs";

/** How far past an in-turn enqueue its safety-net alarm is armed (IN_TURN_ALARM_GRACE_MS in crates/core/src/limits.rs). */
const IN_TURN_ALARM_GRACE_MS = 5_000;
/** Longest a failing target waits between retries, and so the longest an in-turn delivery's lease (TARGET_RETRY_BACKOFF_MAX_MS). */
const TARGET_RETRY_BACKOFF_MAX_MS = 10_000;

let relay;
before(async () => {
  relay = await Relay.start();
});
after(async () => {
  await relay?.stop();
});
// After every test: the relay's own audit of each outbox's tables and each
// target's watermarks against its apply log.
afterEach(async () => {
  assert.deepEqual(await relay.audit(), [], "the relay's own audit");
});


test("enqueued rows reach their targets in sequence order and the outbox empties", async () => {
  const rows = [];
  for (let i = 0; i < 30; i++) rows.push(put(`order-t${i % 3}`, `k${i}`, { i }));
  const sent = Date.now();
  const { seqs, last_seq } = await relay.enqueue("order-src", rows);
  const answered = Date.now();
  assert.equal(seqs.length, 30);
  assert.equal(last_seq, 30);
  const s = await relay.drained("order-src");
  assert.equal(s.queued_rows, 0);
  assert.equal(s.delivered_rows, 30);
  assert.ok(s.alarms <= 1, "the enqueue's own invocation delivered: at most the safety net ran, finding nothing");
  // The enqueue's safety net is armed IN_TURN_ALARM_GRACE_MS after it (a delivery that ran longer
  // keeps it within its lease), and has fired or is due soon: nothing later.
  assert.ok(
    s.alarm_at_ms === null ||
      (s.alarm_at_ms >= sent + IN_TURN_ALARM_GRACE_MS && s.alarm_at_ms <= answered + IN_TURN_ALARM_GRACE_MS + TARGET_RETRY_BACKOFF_MAX_MS),
    `the safety net at ${s.alarm_at_ms}`,
  );
  for (let t = 0; t < 3; t++) {
    const expected = seqs.filter((_, i) => i % 3 === t);
    assert.deepEqual(await relay.log(`order-t${t}`, "order-src"), expected);
  }
  const keys = await relay.keys("order-t0");
  assert.deepEqual(keys.find((k) => k.key === "k0").value, { i: 0 }, "values come back as JSON");
});

test("concurrent enqueuers while the alarm delivers: every accepted row applied once, in order", async () => {
  const src = "conc-src";
  const targets = Array.from({ length: 10 }, (_, i) => `conc-t${i}`);
  const sent = new Map(targets.map((t) => [t, []]));
  const writer = async (w) => {
    for (let r = 0; r < 15; r++) {
      const rows = targets.map((t, i) => put(t, `w${w}`, { w, r, i }));
      const { seqs } = await relay.enqueue(src, rows);
      seqs.forEach((seq, i) => sent.get(targets[i]).push(seq));
    }
  };
  await Promise.all([0, 1, 2, 3, 4].map(writer));
  const s = await relay.drained(src);
  assert.equal(s.enqueued_rows, 750);
  assert.equal(s.delivered_rows, 750);
  for (const t of targets) {
    const expected = sent.get(t).sort((a, b) => a - b);
    assert.deepEqual(await relay.log(t, src), expected, `target ${t}`);
  }
});

test("a failing target does not hold back others, and its rows arrive in order after it heals", async () => {
  const src = "fail-src";
  await relay.api("POST", "/v1/targets/fail-bad/faults", { reject: true });
  const rows = [];
  for (let i = 0; i < 12; i++) rows.push(put(i % 2 ? "fail-bad" : `fail-ok${i}`, "k", i));
  const { seqs } = await relay.enqueue(src, rows);
  await until(async () => (await relay.status(src)).queued_rows === 6, "healthy rows to drain");
  const s = await relay.status(src);
  assert.deepEqual(Object.keys(s.failing_targets), ["fail-bad"], "its record passes its rows over");
  assert.deepEqual(await relay.log("fail-bad", src), []);
  for (let i = 0; i < 12; i += 2) assert.deepEqual(await relay.log(`fail-ok${i}`, src), [seqs[i]]);
  await relay.api("POST", "/v1/targets/fail-bad/faults", { reject: false });
  await relay.drained(src, 90_000);
  assert.deepEqual(await relay.log("fail-bad", src), seqs.filter((_, i) => i % 2));
});

test("a crash between the target apply and the source cleanup never applies a row twice", async () => {
  const src = "crash-src";
  await relay.api("POST", `/v1/sources/${src}/faults`, { crash_checkpoints: 1 });
  const rows = [put("crash-a", "k", 1), put("crash-b", "k", 2), put("crash-a", "k", 3)];
  const { seqs } = await relay.enqueue(src, rows);
  // The targets applied before the crash; the retried alarm only cleans up.
  await until(async () => (await relay.log("crash-b", src)).length === 1, "the apply before the crash");
  const s = await relay.drained(src, 60_000);
  assert.deepEqual(await relay.log("crash-a", src), [seqs[0], seqs[2]]);
  assert.deepEqual(await relay.log("crash-b", src), [seqs[1]]);
  assert.equal(s.delivered_rows, 3);
  const cleanup = relay.alarmLogs().filter((a) => a.source === src && a.rows_delivered > 0);
  assert.equal(cleanup.at(-1).rows_applied, 0, "the fire after the crash applied nothing new");
});

test("an alarm that was dropped is re-armed by the next status read", async () => {
  const src = "drop-src";
  await relay.api("POST", "/v1/targets/drop-t/faults", { reject: true });
  await relay.enqueue(src, [put("drop-t", "k", 1)]);
  await until(async () => Object.keys((await relay.status(src)).failing_targets).length === 1, "the failed fire");
  await relay.api("POST", `/v1/sources/${src}/faults`, { drop_alarm: true });
  await relay.api("POST", "/v1/targets/drop-t/faults", { reject: false });
  await sleep(3_000);
  assert.deepEqual(await relay.log("drop-t", src), [], "no alarm, no delivery");
  const s = await relay.status(src);
  assert.equal(s.rearmed, true);
  await relay.drained(src, 30_000);
  assert.deepEqual(await relay.log("drop-t", src), [1]);
});

test("an alarm the platform dropped unseen is set again by the next enqueue", async () => {
  // The fault deletes the stored alarm and leaves the object's memory of it,
  // as the platform does when an alarm's retries fail: the object still
  // remembers its back-off alarm, whose time then passes. An enqueue that
  // trusted that memory would set no alarm and the rows would wait for ever.
  const src = "drop2-src";
  await relay.api("POST", "/v1/targets/drop2-t/faults", { reject: true });
  await relay.enqueue(src, [put("drop2-t", "k", 1)]);
  await until(async () => Object.keys((await relay.status(src)).failing_targets).length === 1, "the failed fire");
  await relay.api("POST", `/v1/sources/${src}/faults`, { drop_alarm: true });
  await relay.api("POST", "/v1/targets/drop2-t/faults", { reject: false });
  // Past the remembered back-off (1 s, doubling: at most 2 s after the last fire).
  await sleep(3_000);
  assert.deepEqual(await relay.log("drop2-t", src), [], "no alarm, no delivery");
  await relay.enqueue(src, [put("drop2-t", "k", 2)]);
  // Read only the target: a status read would re-arm the source itself.
  await until(async () => (await relay.log("drop2-t", src)).length === 2, "delivery after the enqueue", 15_000);
  assert.deepEqual(await relay.log("drop2-t", src), [1, 2]);
});

test("delivered_through and relay_watermark follow the outbox", async () => {
  const src = "wm-src";
  await relay.api("POST", "/v1/targets/wm-t/faults", { reject: true });
  const before = Date.now();
  await relay.enqueue(src, [put("wm-t", "k", 1)]);
  let r = await relay.api("GET", `/v1/sources/${src}/delivered-through/1`);
  assert.deepEqual(r.body, { seq: 1, delivered: false });
  r = await relay.api("GET", `/v1/sources/${src}/watermark`);
  assert.ok(r.body.relay_watermark >= before - 1 && r.body.relay_watermark < r.body.now_ms);
  await relay.api("POST", "/v1/targets/wm-t/faults", { reject: false });
  await relay.enqueue(src, [put("wm-t", "k", 2)]);
  await relay.drained(src);
  r = await relay.api("GET", `/v1/sources/${src}/delivered-through/2`);
  assert.deepEqual(r.body, { seq: 2, delivered: true });
  r = await relay.api("GET", `/v1/sources/${src}/delivered-through/3`);
  assert.deepEqual(r.body, { seq: 3, delivered: false }, "not yet allocated");
  r = await relay.api("GET", `/v1/sources/${src}/watermark`);
  assert.equal(r.body.relay_watermark, r.body.now_ms);
});
