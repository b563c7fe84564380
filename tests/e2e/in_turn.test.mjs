// In-turn delivery in real workerd: an enqueue's own invocation delivers its
// rows after the reply, so a row needs no alarm of its own; the reply never
// waits for a target; the alarm the enqueue armed in its turn stays the
// safety net, IN_TURN_ALARM_GRACE_MS later, and delivers what a killed
// invocation did not, once.

import { test } from "node:test";
import assert from "node:assert/strict";
import { Relay, put, sleep, until } from "./harness.mjs";

/** IN_TURN_ALARM_GRACE_MS in crates/core/src/limits.rs. */
const IN_TURN_ALARM_GRACE_MS = 30_000;

test("a lone row reaches its target in the enqueue's own invocation, and no alarm runs", async () => {
  const relay = await Relay.start();
  const src = "it-lone";
  try {
    const sent = Date.now();
    const { seqs } = await relay.enqueue(src, [put("it-lone-t", "k", 1)]);
    await until(async () => (await relay.api("GET", `/v1/sources/${src}/delivered-through/${seqs[0]}`)).body.delivered, "delivery");
    const s = await relay.status(src);
    assert.equal(s.alarms, 0, "no alarm ran");
    assert.equal(s.fires, 1, "one fire delivered it");
    assert.equal(s.last_alarm.in_turn, true, "and it was the enqueue's own");
    assert.ok(s.alarm_at_ms >= sent + IN_TURN_ALARM_GRACE_MS, `the safety net is armed, ${s.alarm_at_ms - sent} ms after the enqueue`);
    const history = (await relay.api("GET", `/v1/sources/${src}/alarms`)).body.alarms;
    assert.deepEqual(history.map((p) => [p.in_turn, p.rows_delivered]), [[true, 1]]);
    assert.deepEqual(await relay.log("it-lone-t", src), seqs);
    assert.deepEqual(await relay.audit(), [], "the relay's own audit");
  } finally {
    await relay.stop();
  }
});

test("a producer's stream is delivered in its enqueues' invocations: one fire per request, no alarm per row", async () => {
  const relay = await Relay.start();
  const src = "it-stream";
  try {
    const sent = [];
    for (let i = 0; i < 40; i++) sent.push(...(await relay.enqueue(src, [put(`it-s${i % 4}`, `k${i}`, i)])).seqs);
    const s = await relay.drained(src);
    assert.equal(s.delivered_rows, 40);
    assert.equal(s.alarms, 0, "the safety net never fired: every row went in turn");
    for (let t = 0; t < 4; t++) {
      assert.deepEqual(await relay.log(`it-s${t}`, src), sent.filter((_, i) => i % 4 === t), `it-s${t} in order, once`);
    }
    assert.deepEqual(await relay.audit(), [], "the relay's own audit");
  } finally {
    await relay.stop();
  }
});

test("the enqueue's reply does not wait for a slow target its delivery calls", async () => {
  const relay = await Relay.start();
  const src = "it-slow";
  try {
    await relay.api("POST", "/v1/targets/it-slow-t/faults", { delay_ms: 2_000 });
    const started = Date.now();
    await relay.enqueue(src, [put("it-slow-t", "a", 1)]);
    const answered = Date.now() - started;
    assert.ok(answered < 1_500, `answered in ${answered} ms, while its delivery waits 2,000 ms for the target`);
    // A second enqueue while the first delivery still awaits the target is answered at once too.
    const second = Date.now();
    await relay.enqueue(src, [put("it-slow-t", "b", 2)]);
    assert.ok(Date.now() - second < 1_500, "the second enqueue is not queued behind the delivery");
    const s = await relay.drained(src, 30_000);
    assert.equal(s.delivered_rows, 2);
    assert.equal(s.alarms, 0, "the running delivery ran again for the second row: no alarm");
    const runs = relay.alarmLogs().filter((a) => a.source === src && a.in_turn);
    assert.ok(runs.some((r) => r.started_at_ms + r.duration_ms > started + answered), "the delivery ended after the reply");
    assert.deepEqual(await relay.audit(), [], "the relay's own audit");
  } finally {
    await relay.api("POST", "/v1/targets/it-slow-t/faults", { delay_ms: 0 }).catch(() => {});
    await relay.stop();
  }
});

test("killed while its in-turn delivery awaits the target, the row is delivered once by the safety-net alarm", { timeout: 120_000 }, async () => {
  let relay = await Relay.start();
  const src = "it-killed";
  try {
    await relay.api("POST", "/v1/targets/it-killed-t/faults", { delay_ms: 5_000 });
    const sent = Date.now();
    const { seqs } = await relay.enqueue(src, [put("it-killed-t", "k", 1)]);
    await sleep(500); // the delivery now awaits the target, which has not applied
    relay.kill();
    await relay.stop();
    relay = await Relay.start({ persistDir: relay.persistDir });
    // No status read (it would not move an alarm still ahead anyway): the stored alarm fires by itself.
    await until(
      async () => (await relay.api("GET", `/v1/sources/${src}/delivered-through/${seqs[0]}`)).body.delivered,
      "the safety-net alarm",
      IN_TURN_ALARM_GRACE_MS + 30_000,
    );
    const deliveredAfter = Date.now() - sent;
    assert.ok(deliveredAfter >= IN_TURN_ALARM_GRACE_MS - 1_000, `delivered ${deliveredAfter} ms after the enqueue: by the alarm`);
    const s = await relay.status(src);
    assert.equal(s.alarms, 1, "one alarm delivered it");
    assert.deepEqual(await relay.log("it-killed-t", src), seqs, "applied once");
    assert.deepEqual(await relay.audit(), [], "the relay's own audit");
  } finally {
    await relay.stop();
  }
});

test("with RELAY_IN_TURN=off the alarm delivers, armed for now", async () => {
  const relay = await Relay.start({ vars: { RELAY_IN_TURN: "off" } });
  const src = "it-off";
  try {
    await relay.enqueue(src, [put("it-off-t", "k", 1)]);
    const s = await relay.drained(src);
    assert.equal(s.alarms, 1, "an alarm delivered it");
    assert.equal(s.last_alarm.in_turn ?? false, false);
    assert.ok(relay.alarmLogs().every((a) => a.source !== src || !a.in_turn), "no in-turn delivery ran");
  } finally {
    await relay.stop();
  }
});
