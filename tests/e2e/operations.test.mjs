// Operating the relay in workerd: idempotent enqueue, horizon pruning,
// parking (after failed cycles and on a permanent error), redrive,
// discard, backpressure, watermark forgetting, and the status figures.

import { test, before, after, afterEach } from "node:test";
import assert from "node:assert/strict";
import { Relay, put, sleep, until } from "./harness.mjs";

let relay;
before(async () => {
  relay = await Relay.start({
    vars: {
      RELAY_PARK_AFTER_FAILED_CYCLES: "2",
      RELAY_DEDUP_HORIZON_MS: "1500",
      RELAY_MAX_QUEUED_ROWS: "10",
    },
  });
});
after(async () => {
  await relay?.stop();
});
// After every test: the relay's own audit of each outbox's tables and each
// target's watermarks against its apply log.
afterEach(async () => {
  assert.deepEqual(await relay.audit(), [], "the relay's own audit");
});


const enq = (src, body) => relay.api("POST", `/v1/sources/${src}/enqueue`, body);
const fault = (t, body) => relay.api("POST", `/v1/targets/${t}/faults`, body);
const parked = async (src) => (await relay.api("GET", `/v1/sources/${src}/parked`)).body.targets;

test("the same idempotency key and rows return the original sequences; other rows get 409; nothing is written", async () => {
  const src = "idem";
  const rows = [put("idem-t", "a", 1), put("idem-t", "b", 2)];
  const first = await enq(src, { rows, idempotency_key: "order-1" });
  assert.equal(first.status, 200);
  assert.deepEqual(first.body.seqs, [1, 2]);
  assert.equal(first.body.duplicate, false);
  const spaced = await relay.api("POST", `/v1/sources/${src}/enqueue`,
    '{"idempotency_key":"order-1","rows":[{"target":"idem-t","puts":[["a", 1]]},{"target":"idem-t","puts":[["b",2]]}]}',
    { raw: true });
  assert.equal(spaced.status, 200);
  assert.deepEqual(spaced.body.seqs, [1, 2], "same content in another spelling is a duplicate");
  assert.equal(spaced.body.duplicate, true);
  const conflict = await enq(src, { rows: [put("idem-t", "a", 3)], idempotency_key: "order-1" });
  assert.equal(conflict.status, 409);
  assert.equal(conflict.body.error.code, "idempotency_conflict");
  const badKey = await enq(src, { rows, idempotency_key: "k".repeat(129) });
  assert.equal(badKey.status, 400);
  assert.equal(badKey.body.error.code, "invalid_idempotency_key");
  const s = await relay.drained(src);
  assert.equal(s.last_seq, 2);
  assert.equal(s.enqueued_rows, 2);
  assert.deepEqual(await relay.log("idem-t", src), [1, 2]);
  assert.equal(s.dedup_hits, 1, "counted once the next write carried it");
});

test("keys are pruned after their horizon and the key can be used again", async () => {
  const src = "prune";
  await enq(src, { rows: [put("prune-t", "a", 1)], idempotency_key: "k" });
  let s = await relay.drained(src);
  assert.equal(s.dedup_records, 1);
  await sleep(1_700);
  // Any alarm prunes expired keys; an unkeyed enqueue brings one.
  await enq(src, { rows: [put("prune-t", "b", 2)] });
  await until(async () => (await relay.status(src)).dedup_records === 0, "the key to be pruned");
  const again = await enq(src, { rows: [put("prune-t", "c", 3)], idempotency_key: "k" });
  assert.equal(again.body.duplicate, false, "an expired key is fresh");
  assert.deepEqual(again.body.seqs, [3]);
});

test("a target is parked after 2 failed cycles with all its rows, later rows park behind, redrive keeps the order", async () => {
  const src = "park";
  await fault("park-down", { reject: true });
  const first = await relay.enqueue(src, [put("park-down", "a", 1), put("park-up", "a", 1), put("park-down", "b", 2)]);
  await until(async () => (await parked(src)).some((t) => t.parked), "the target to be parked", 60_000);
  const [t] = (await parked(src)).filter((x) => x.parked);
  assert.equal(t.target, "park-down");
  assert.equal(t.rows, 2);
  assert.match(t.reason, /2 consecutive cycles/);
  assert.ok(t.first_failure_ms <= t.last_failure_ms);
  const later = await relay.enqueue(src, [put("park-down", "c", 3)]);
  const rows = await relay.api("GET", `/v1/sources/${src}/parked/park-down`);
  assert.deepEqual(rows.body.rows.map((r) => r.seq), [first.seqs[0], first.seqs[2], later.seqs[0]]);
  let s = await relay.status(src);
  assert.equal(s.parked_rows, 3);
  assert.deepEqual(s.parked_targets, { "park-down": 3 });
  assert.equal(s.queued_rows, 0);
  assert.deepEqual(await relay.log("park-up", src), [first.seqs[1]], "others are not held back");
  await fault("park-down", { reject: false });
  const redrive = await relay.api("POST", `/v1/sources/${src}/parked/park-down/redrive`);
  assert.deepEqual(redrive.body, { rows: 3, was_parked: true });
  const again = await relay.api("POST", `/v1/sources/${src}/parked/park-down/redrive`);
  assert.deepEqual(again.body, { rows: 0, was_parked: false }, "idempotent");
  const newest = await relay.enqueue(src, [put("park-down", "d", 4)]);
  s = await relay.drained(src);
  assert.equal(s.parked_rows, 0);
  assert.deepEqual(await relay.log("park-down", src), [first.seqs[0], first.seqs[2], later.seqs[0], newest.seqs[0]]);
  assert.ok(relay.output.includes('"action":"redrive"'), "the action is audited in the log");
});

test("a permanent error parks at once; discard drops the rows and unparks the target", async () => {
  const src = "perm";
  await fault("perm-t", { reject: true, permanent: true });
  const { seqs, at_ms } = await relay.enqueue(src, [put("perm-t", "a", 1), put("perm-t", "b", 2)]);
  await until(async () => (await parked(src)).some((t) => t.parked), "the target to be parked");
  const [t] = await parked(src);
  assert.match(t.reason, /permanent error/);
  assert.equal(t.rows, 2);
  // A parked row has not been delivered: both contract reads say so, and
  // the watermark stays below the parked rows' commit time.
  const through = await relay.api("GET", `/v1/sources/${src}/delivered-through/${seqs[1]}`);
  assert.deepEqual(through.body, { seq: seqs[1], delivered: false }, "a parked row is not delivered");
  const wm = await relay.api("GET", `/v1/sources/${src}/watermark`);
  assert.equal(wm.body.relay_watermark, at_ms - 1, "held just below the parked rows' commit time");
  const discard = await relay.api("POST", `/v1/sources/${src}/parked/perm-t/discard`);
  assert.deepEqual(discard.body, { rows: 2, was_parked: true });
  assert.deepEqual((await relay.api("POST", `/v1/sources/${src}/parked/perm-t/discard`)).body, { rows: 0, was_parked: false });
  const settled = await relay.api("GET", `/v1/sources/${src}/delivered-through/${seqs[1]}`);
  assert.deepEqual(settled.body, { seq: seqs[1], delivered: true }, "a discarded row is settled by the operator");
  await fault("perm-t", { reject: false });
  const next = await relay.enqueue(src, [put("perm-t", "c", 3)]);
  await relay.drained(src);
  assert.deepEqual(await relay.log("perm-t", src), [next.seqs[0]], `discarded ${seqs} never arrive`);
  assert.equal((await relay.status(src)).parked_rows, 0);
});

test("backpressure: 429 with Retry-After past the bound, success at it, nothing written", async () => {
  const src = "full";
  await fault("full-t", { reject: true });
  const rows = (n) => Array.from({ length: n }, (_, i) => put("full-t", `k${i}`, i));
  assert.equal((await enq(src, { rows: rows(8) })).status, 200);
  const over = await enq(src, { rows: rows(3) });
  assert.equal(over.status, 429);
  assert.equal(over.body.error.code, "outbox_full");
  assert.equal(over.headers.get("retry-after"), "5");
  const at = await enq(src, { rows: rows(2) });
  assert.equal(at.status, 200, "exactly at the bound is accepted");
  const s = await relay.status(src);
  assert.equal(s.last_seq, 10);
  assert.equal(s.capacity.rows, 10);
  assert.equal(s.capacity.percent_full, 100);
  assert.equal(s.rejected_full, 1);
  await fault("full-t", { reject: false });
});

test("a target's watermark for a source can be listed and forgotten; target status reports rows written per row", async () => {
  await relay.enqueue("fw-src", [put("fw-t", "a", 1), put("fw-t", "b", 2)]);
  await relay.drained("fw-src");
  let w = await relay.api("GET", "/v1/targets/fw-t/watermarks");
  assert.equal(w.body.watermarks[0].watermark, 2);
  const st = await relay.api("GET", "/v1/targets/fw-t/status");
  assert.equal(st.body.applied_rows, 2);
  assert.ok(st.body.sql_rows_written_per_applied_row > 0);
  const f = await relay.api("DELETE", "/v1/targets/fw-t/watermarks/fw-src");
  assert.deepEqual(f.body, { source: "fw-src", forgotten: true });
  w = await relay.api("GET", "/v1/targets/fw-t/watermarks");
  assert.deepEqual(w.body.watermarks, []);
});

test("status figures match what happened: delivered, subrequests, rows written per row", async () => {
  const src = "fig";
  await relay.enqueue(src, [put("fig-a", "k", 1), put("fig-b", "k", 2), put("fig-a", "k", 3)]);
  const s = await relay.drained(src);
  assert.equal(s.delivered_rows, 3);
  assert.equal(s.subrequests, 2, "one call per target");
  assert.equal(s.queued_bytes, 0);
  assert.ok(s.sql_rows_written_per_delivered_row > 1 && s.sql_rows_written_per_delivered_row < 4);
  assert.equal(s.last_alarm.rows_delivered, 3);
  assert.equal(s.last_alarm.queued_rows, 0);
});

/**
 * A status read while a delivery awaits a slow target, and after; `inTurn`
 * whether the enqueue's own invocation delivers (else the alarm does).
 */
async function statusWhileDelivering(r, src, inTurn) {
  await r.api("POST", `/v1/targets/${src}-t/faults`, { delay_ms: 1_500 });
  try {
    await r.enqueue(src, [put(`${src}-t`, "k", 1)]);
    await sleep(600); // the delivery now awaits the slow target
    const during = await r.status(src);
    assert.equal(during.rearmed, false, "the running delivery arms its own next wake-up");
    const s = await r.drained(src);
    await sleep(2_500); // time for a stray alarm to fire
    const after = await r.status(src);
    assert.equal(after.delivered_rows, 1);
    assert.equal(s.queued_rows, 0);
    const lines = r.alarmLogs().filter((a) => a.source === src);
    const delivering = lines.filter((a) => a.rows_delivered > 0);
    assert.equal(delivering.length, 1, `one delivery took the row: ${JSON.stringify(lines)}`);
    assert.equal(delivering[0].in_turn ?? false, inTurn, "the enqueue's own invocation, or the alarm");
    if (inTurn) {
      // The safety net, 1 s out, fires while the call is awaited (it defers
      // to the delivery and is kept ahead of it) and at most once after,
      // finding the row gone: never a delivery of its own.
      assert.ok(after.alarms <= 2, `the net ran ${after.alarms} times: ${JSON.stringify(lines)}`);
      assert.ok(lines.filter((a) => !a.in_turn).every((a) => a.rows_delivered === 0 && a.subrequests === 0));
    } else {
      assert.equal(after.alarms, 1, `no second, empty alarm: ${JSON.stringify(after.last_alarm)}`);
      assert.equal(after.last_alarm.rows_delivered, 1);
    }
  } finally {
    await r.api("POST", `/v1/targets/${src}-t/faults`, { delay_ms: 0 });
  }
}

test("a status read while the in-turn delivery awaits a target arms no alarm, and the net's alarms call no target", async () => {
  await statusWhileDelivering(relay, "fig-slow", true);
});

test("a status read while the alarm awaits a target arms no second, empty alarm", async () => {
  const alarmOnly = await Relay.start({ vars: { RELAY_IN_TURN: "off" } });
  try {
    await statusWhileDelivering(alarmOnly, "fig-slow-alarm", false);
  } finally {
    await alarmOnly.stop();
  }
});

test("with an Analytics Engine dataset bound, alarms still deliver and write their data points", async () => {
  const extraToml = '[[analytics_engine_datasets]]\nbinding = "RELAY_METRICS"\ndataset = "relay_metrics"';
  const metrics = await Relay.start({ extraToml });
  try {
    await metrics.enqueue("m-src", [put("m-t", "k", 1)]);
    const s = await metrics.drained("m-src");
    assert.equal(s.delivered_rows, 1);
    assert.ok(!metrics.output.includes("relay_metrics_error"), "the data point was accepted");
    assert.ok(metrics.alarmLogs().some((a) => a.metrics_written), "a data point per alarm");
    assert.ok(relay.alarmLogs().every((a) => !a.metrics_written), "no binding, no data point");
  } finally {
    await metrics.stop();
  }
});
