// A target that answers too late: the source's call times out and the
// target is blocked, yet the apply happens; the next cycle's resend is all
// duplicates, so every row is applied exactly once (a lost reply, for real).

import { test } from "node:test";
import assert from "node:assert/strict";
import { Relay, put, until } from "./harness.mjs";

test("a call that times out after the target applied is redelivered harmlessly", async () => {
  const relay = await Relay.start({ vars: { RELAY_CALL_TIMEOUT_MS: "500" } });
  const src = "slow-src";
  try {
    await relay.api("POST", "/v1/targets/slow-t/faults", { delay_ms: 1_500 });
    const { seqs } = await relay.enqueue(src, [put("slow-t", "a", 1), put("fast-t", "a", 1), put("slow-t", "b", 2)]);
    await until(async () => "slow-t" in (await relay.status(src)).failing_targets, "the timed-out call");
    assert.deepEqual(await relay.log("fast-t", src), [seqs[1]], "the fast target is not held back");
    await until(async () => (await relay.log("slow-t", src)).length === 2, "the late apply");
    await relay.api("POST", "/v1/targets/slow-t/faults", { delay_ms: 0 });
    const s = await relay.drained(src, 60_000);
    assert.deepEqual(await relay.log("slow-t", src), [seqs[0], seqs[2]], "applied once each");
    assert.equal(s.delivered_rows, 3);
    assert.ok(relay.alarmLogs().some((a) => a.source === src && a.rows_delivered === 2 && a.rows_applied === 0));
    assert.deepEqual(await relay.audit(), [], "the relay's own audit");
  } finally {
    await relay.stop();
  }
});

test("an enqueue is answered while the source's alarm awaits a slow target", async () => {
  // The alarm's target calls are awaited I/O: the Durable Object takes
  // other requests meanwhile, so an enqueue never queues behind delivery.
  const relay = await Relay.start();
  const src = "busy-src";
  try {
    await relay.api("POST", "/v1/targets/slow-t/faults", { delay_ms: 3_000 });
    await relay.enqueue(src, [put("slow-t", "a", 1)]);
    // The alarm starts at once; the assertions below check it had.
    await new Promise((r) => setTimeout(r, 500));
    const sent = Date.now();
    const second = await relay.enqueue(src, [put("other-t", "b", 2)]);
    const answered = Date.now();
    await relay.drained(src, 30_000);
    const first = relay.alarmLogs().find((a) => a.source === src && a.rows_delivered >= 1);
    assert.ok(first, "the alarm that called the slow target logged");
    const alarmEnd = first.started_at_ms + first.duration_ms;
    assert.ok(first.started_at_ms < sent, `the alarm had started (${first.started_at_ms}) before the enqueue (${sent})`);
    assert.ok(answered < alarmEnd, `the enqueue was answered at ${answered}, before the alarm ended at ${alarmEnd}`);
    assert.ok(second.at_ms < alarmEnd, "and committed before it ended");
    assert.deepEqual(await relay.audit(), [], "the relay's own audit");
  } finally {
    await relay.stop();
  }
});
