// The platform's named failures of a target call, in real workerd: the test
// target throws the platform's own error from its fetch ("Durable Object
// reset because its code was updated", "Network connection lost", "Durable
// Object is overloaded"), before or after applying the batch, and the
// source's call fails as it would in production. Interruptions are sent
// again at once (in the same alarm, leaving no failure record); an
// overloaded target backs off and is never parked for it, even with a
// policy that parks after one failed cycle. Every row is applied once, in
// order. (A timeout after the apply is pinned in timeout.test.mjs.)

import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { Relay, put, until } from "./harness.mjs";

let relay;
before(async () => {
  relay = await Relay.start({ vars: { RELAY_PARK_AFTER_FAILED_CYCLES: "1" } });
});
after(async () => {
  await relay?.stop();
});

const CASES = [
  { throw: "code_updated", after_apply: false },
  { throw: "code_updated", after_apply: true },
  { throw: "network_lost", after_apply: false },
  { throw: "network_lost", after_apply: true },
];

for (const c of CASES) {
  test(`${c.throw}${c.after_apply ? " after the apply" : ""}: sent again at once, applied once, no failure kept`, async () => {
    const src = `pf-${c.throw}-${c.after_apply}`;
    const target = `${src}-t`;
    await relay.api("POST", `/v1/targets/${target}/faults`, { throw: c.throw, times: 1, after_apply: c.after_apply });
    const { seqs } = await relay.enqueue(src, [put(target, "a", 1), put(target, "b", 2)]);
    const s = await relay.drained(src);
    assert.deepEqual(await relay.log(target, src), seqs, "applied once each, in order");
    assert.deepEqual(s.failing_targets, {}, "an interruption is not the target's failure");
    assert.deepEqual(s.parked_targets, {}, "never parked for it");
    await until(() => relay.alarmLogs().some((a) => a.source === src), "the alarm's log line");
    const alarms = relay.alarmLogs().filter((a) => a.source === src);
    assert.equal(alarms[0].rows_delivered, 2, "delivered by the first alarm: the retry went at once");
    assert.equal(alarms[0].subrequests, 2, "the batch went twice");
    assert.deepEqual(await relay.audit(), [], "the relay's own audit");
  });
}

test("an overloaded target backs off and is never parked for it", async () => {
  const src = "pf-overloaded";
  const target = `${src}-t`;
  await relay.api("POST", `/v1/targets/${target}/faults`, { throw: "overloaded", times: 3 });
  const { seqs } = await relay.enqueue(src, [put(target, "a", 1), put(target, "b", 2)]);
  await until(async () => target in (await relay.status(src)).failing_targets, "the overloaded call");
  const s = await relay.drained(src, 60_000);
  assert.deepEqual(await relay.log(target, src), seqs, "applied once each, in order");
  await until(() => relay.alarmLogs().some((a) => a.source === src && a.rows_delivered > 0), "the last alarm's log line");
  assert.deepEqual(s.parked_targets, {}, "parking after one failed cycle does not count overloads");
  const alarms = relay.alarmLogs().filter((a) => a.source === src);
  assert.ok(alarms.every((a) => a.subrequests <= 1), "one call per alarm: an overloaded target is not hammered");
  assert.equal(alarms.reduce((n, a) => n + a.subrequests, 0), 4, "three refused calls, then the one that applied");
  assert.deepEqual(await relay.audit(), [], "the relay's own audit");
});
