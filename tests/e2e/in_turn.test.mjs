// In-turn delivery in real workerd: an enqueue's own invocation delivers its
// rows after the reply, so a row needs no alarm of its own; the reply never
// waits for a target; the alarm the enqueue armed in its turn stays the
// safety net, IN_TURN_ALARM_GRACE_MS later, and delivers what a killed
// invocation did not, once, by then.

import { test } from "node:test";
import assert from "node:assert/strict";
import { Relay, put, sleep, until } from "./harness.mjs";

/** IN_TURN_ALARM_GRACE_MS in crates/core/src/limits.rs. */
const IN_TURN_ALARM_GRACE_MS = 5_000;
/** The target the killed delivery awaits answers this late. */
const SLOW_TARGET_MS = 5_000;

test("a lone row reaches its target in the enqueue's own invocation; the safety net then finds it gone", async () => {
  const relay = await Relay.start();
  const src = "it-lone";
  try {
    const sent = Date.now();
    const { seqs } = await relay.enqueue(src, [put("it-lone-t", "k", 1)]);
    const answered = Date.now();
    const armed = (await relay.status(src)).alarm_at_ms;
    assert.ok(
      armed === null || (armed >= sent + IN_TURN_ALARM_GRACE_MS && armed <= answered + IN_TURN_ALARM_GRACE_MS),
      `the safety net is armed ${armed - sent} ms after the enqueue`,
    );
    await until(async () => (await relay.api("GET", `/v1/sources/${src}/delivered-through/${seqs[0]}`)).body.delivered, "delivery");
    // The safety net fires once, finds the row delivered, and arms nothing after it.
    await sleep(IN_TURN_ALARM_GRACE_MS + 2_000);
    const s = await relay.status(src);
    assert.equal(s.alarms, 1, "the safety net ran once");
    assert.equal(s.alarm_at_ms, null, "and armed no other");
    const history = (await relay.api("GET", `/v1/sources/${src}/alarms`)).body.alarms;
    assert.deepEqual(history.map((p) => [p.in_turn, p.rows_delivered]), [[true, 1], [false, 0]], "delivered in turn");
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
    const started = Date.now();
    const sent = [];
    for (let i = 0; i < 40; i++) sent.push(...(await relay.enqueue(src, [put(`it-s${i % 4}`, `k${i}`, i)])).seqs);
    const s = await relay.drained(src);
    assert.equal(s.delivered_rows, 40);
    const seconds = Math.ceil((Date.now() - started) / IN_TURN_ALARM_GRACE_MS);
    assert.ok(s.alarms <= seconds + 1, `${s.alarms} alarms in ${seconds} grace periods: the safety net, about once per IN_TURN_ALARM_GRACE_MS, not once per row`);
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
    const alarms = relay.alarmLogs().filter((a) => a.source === src && !a.in_turn);
    assert.ok(alarms.every((a) => a.rows_delivered === 0), "the running delivery ran again for the second row: no alarm delivered");
    const runs = relay.alarmLogs().filter((a) => a.source === src && a.in_turn);
    assert.ok(runs.some((r) => r.started_at_ms + r.duration_ms > started + answered), "the delivery ended after the reply");
    assert.deepEqual(await relay.audit(), [], "the relay's own audit");
  } finally {
    await relay.api("POST", "/v1/targets/it-slow-t/faults", { delay_ms: 0 }).catch(() => {});
    await relay.stop();
  }
});

test("killed while its in-turn delivery awaits the target, the row is delivered once by the safety-net alarm, at its time", { timeout: 120_000 }, async () => {
  let relay = await Relay.start();
  const src = "it-killed";
  try {
    await relay.api("POST", "/v1/targets/it-killed-t/faults", { delay_ms: SLOW_TARGET_MS });
    const { seqs } = await relay.enqueue(src, [put("it-killed-t", "k", 1)]);
    await sleep(500); // the delivery now awaits the target, which has not applied
    relay.kill();
    await relay.stop();
    relay = await Relay.start({ persistDir: relay.persistDir });
    const restarted = Date.now();
    // No status read (it would not move an alarm still ahead anyway): the stored alarm fires by itself.
    await until(
      async () => (await relay.api("GET", `/v1/sources/${src}/delivered-through/${seqs[0]}`)).body.delivered,
      "the safety-net alarm",
      SLOW_TARGET_MS + 30_000,
    );
    // Its time (IN_TURN_ALARM_GRACE_MS after the enqueue) falls during or soon after the restart, then the target's delay.
    const deliveredAfter = Date.now() - restarted;
    assert.ok(deliveredAfter < SLOW_TARGET_MS + 10_000, `delivered ${deliveredAfter} ms after the restart: not a call timeout later`);
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
