// CPU per invocation, in real workerd. An alarm the platform retries (here
// one that threw, through the test fault `fail_alarms`; in production also
// one the CPU limit cut off) is told its retry count by the module entry,
// since workers-rs does not pass `alarmInfo` on, and runs a smaller fire:
// the Free preset's rows per fire halved per retry. And a work budget far
// below what a drain needs cuts every alarm short (`cpu_cut`), each
// settling what it did and re-arming at once: every row still arrives, in
// order, once.

import { test, after } from "node:test";
import assert from "node:assert/strict";
import { Relay, put, until } from "./harness.mjs";

let relay;
after(async () => {
  await relay?.stop();
});

/** Starts a relay with `vars` in place of the one before it. */
async function restart(vars = {}) {
  await relay?.stop();
  relay = await Relay.start({ vars });
}

/**
 * The Free preset's base rows per fire (DEFAULT_ROWS_PER_FIRE), the rows a
 * fire inspects per base row (WINDOW_ROWS_PER_BUDGET_ROW) and its fires per
 * alarm (WORKER_FREE_RELAY_FIRES).
 */
const FREE_ROWS_PER_FIRE = 256;
const WINDOW_ROWS_PER_BUDGET_ROW = 4;
const FREE_FIRES_PER_ALARM = 2;

/** `n` rows for `targets` targets, round robin, from `source`'s point of view. */
const rows = (n, targets, prefix) => Array.from({ length: n }, (_, i) => put(`${prefix}-${i % targets}`, `k${i}`, i));

/** Waits for every row of `seqs` to be applied at its target once, in order. */
async function appliedInOrder(relay, source, seqs, targets, prefix) {
  await relay.drained(source, 120_000);
  for (let t = 0; t < targets; t++) {
    const mine = seqs.filter((_, i) => i % targets === t);
    assert.deepEqual(await relay.log(`${prefix}-${t}`, source), mine, `${prefix}-${t} applied its rows once, in order`);
  }
  assert.deepEqual(await relay.audit(), [], "the relay's own audit");
  assert.deepEqual(relay.panics(), []);
}

test("an alarm the platform retries is told its retry count and runs a smaller fire", { timeout: 180_000 }, async () => {
  await restart();
  const src = "cpu-retried";
  // The next two alarms throw; the platform retries (after about 2 s, then 4 s).
  const fault = await relay.api("POST", `/v1/sources/${src}/faults`, { fail_alarms: 2 });
  assert.equal(fault.status, 200, fault.text);
  // 1,024 rows, due in 3 s so all are queued before the first alarm: one
  // Free fire inspects 4 x 256 of them, so an alarm that is not a retry
  // would take them all in its first fire.
  const seqs = [];
  for (let b = 0; b < 4; b++) {
    const batch = rows(256, 4, "cpu-r").map((r, i) => ({ ...r, puts: [[`k${b * 256 + i}`, b * 256 + i]], delay_ms: 3_000 }));
    seqs.push(...(await relay.enqueue(src, batch)).seqs);
  }
  // Only the platform's alarms: the rows are not due when enqueued, so no in-turn delivery runs.
  const alarms = () => relay.alarmLogs().filter((a) => a.source === src && !a.in_turn);
  assert.ok(relay.alarmLogs().every((a) => a.source !== src || !a.in_turn), "delayed rows start no in-turn delivery");
  await until(() => alarms().length > 0, "the first alarm that ran", 60_000);
  const first = alarms()[0];
  assert.equal(first.retry_count, 2, `the alarm after two failures is their second retry: ${JSON.stringify(first)}`);
  // Quartered: each fire inspects 4 x 64 rows, two fires per alarm.
  const quartered = (FREE_ROWS_PER_FIRE >> 2) * WINDOW_ROWS_PER_BUDGET_ROW * FREE_FIRES_PER_ALARM;
  assert.ok(first.rows_delivered > 0 && first.rows_delivered <= quartered, `a quartered alarm: ${first.rows_delivered} rows, at most ${quartered}`);
  console.log(`the retried alarm: retry_count ${first.retry_count}, ${first.rows_delivered} rows in ${first.fires} fires, work ${first.work}`);
  assert.match(relay.output, /test fault: this alarm fails \(1 more to fail\)/);
  await appliedInOrder(relay, src, seqs, 4, "cpu-r");
  const later = alarms().slice(1);
  assert.ok(later.length > 0 && later.every((a) => a.retry_count === 0), "alarms after a success are not retries");
  const tooMany = await relay.api("POST", `/v1/sources/${src}/faults`, { fail_alarms: 7 });
  assert.equal(tooMany.status, 400, "more failures than the platform retries are refused");
});

test("a work budget far below a drain's cuts every alarm short, and every row still arrives in order, once", { timeout: 180_000 }, async () => {
  await restart({ RELAY_WORK_PER_ALARM: "60" });
  const src = "cpu-cut";
  const { seqs } = await relay.enqueue(src, rows(120, 3, "cpu-c"));
  await appliedInOrder(relay, src, seqs, 3, "cpu-c");
  const alarms = relay.alarmLogs().filter((a) => a.source === src && a.rows_delivered > 0);
  assert.ok(alarms.length >= 2, `the drain took ${alarms.length} alarms`);
  assert.ok(alarms.some((a) => a.cpu_cut), "an alarm stopped at its work budget");
  assert.ok(alarms.every((a) => a.work > 0), "each alarm counted its work");
  console.log(`120 rows under a 60-unit work budget: ${alarms.length} alarms, ${alarms.filter((a) => a.cpu_cut).length} cut`);
});
