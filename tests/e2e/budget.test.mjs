// The Free plan's subrequest budget, measured on backlogs that need many
// alarms. Local workerd does not enforce the cap, so the relay's own count
// (logged once per alarm) is what we check.

import { test } from "node:test";
import assert from "node:assert/strict";
import { Relay, put } from "./harness.mjs";

/** Enqueues one row to each of `n` distinct targets, in requests of 200. */
async function distinct(relay, src, n) {
  for (let i = 0; i < n; i += 200) {
    const rows = [];
    for (let j = i; j < Math.min(n, i + 200); j++) rows.push(put(`${src}-t${j}`, "k", j));
    await relay.enqueue(src, rows);
  }
}

test("the Free preset drains 400 distinct targets in alarms of 16 subrequests", async () => {
  const relay = await Relay.start({ vars: { RELAY_PLAN: "free" } });
  try {
    await distinct(relay, "free", 400);
    const s = await relay.drained("free", 120_000);
    const alarms = relay.alarmLogs().filter((a) => a.source === "free");
    const calls = alarms.map((a) => a.subrequests);
    console.log(`free preset: ${alarms.length} alarms, subrequests per alarm max ${Math.max(...calls)}, total ${s.subrequests}`);
    assert.ok(Math.max(...calls) <= 50);
    assert.ok(calls.every((c) => c <= 16), "8 targets x 2 fires");
    assert.equal(s.subrequests, 400, "one call per distinct target");
    assert.equal(s.delivered_rows, 400);
    assert.deepEqual(await relay.audit(), [], "the relay's own audit");
  } finally {
    await relay.stop();
  }
});

test("an override past 50 calls is capped at 50 subrequests per alarm", async () => {
  // 25 targets x 2 fires x 2 calls would allow 100 calls; the plan caps 50.
  // The work budget is raised out of the way: at Free's 200 units an alarm
  // that reads a window and calls 25 targets is cut after one fire, before
  // the subrequest cap could bind.
  const vars = { RELAY_PLAN: "free", RELAY_TARGETS_PER_FIRE: "25", RELAY_FIRES_PER_ALARM: "4", RELAY_WORK_PER_ALARM: "600000" };
  const relay = await Relay.start({ vars });
  try {
    await distinct(relay, "capped", 600);
    const s = await relay.drained("capped", 120_000);
    const alarms = relay.alarmLogs().filter((a) => a.source === "capped");
    const calls = alarms.map((a) => a.subrequests);
    console.log(`capped: ${alarms.length} alarms, subrequests per alarm max ${Math.max(...calls)}, total ${s.subrequests}`);
    assert.equal(Math.max(...calls), 50, "the cap binds");
    assert.ok(alarms.every((a) => a.subrequest_cap === 50));
    assert.equal(s.delivered_rows, 600);
    assert.deepEqual(await relay.audit(), [], "the relay's own audit");
  } finally {
    await relay.stop();
  }
});
