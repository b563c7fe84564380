// The npm package (packages/durable-relay) in a TypeScript Worker of its
// own (examples/typescript), in workerd: the Rust engine, compiled to wasm
// and bound by the package's glue, inside TypeScript Durable Objects. The
// order write and the outbox row commit together; a throw after the enqueue
// leaves neither; a retried request enqueues nothing twice; rows reach the
// target in order and its handler's table matches them; a handler's throw
// is reported and retried; an enqueue is served while the source's alarm
// is in flight; a kill mid-delivery loses nothing and counts nothing twice.

import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ROOT, startWrangler, until } from "./harness.mjs";

const EXAMPLE = join(ROOT, "examples", "typescript", "wrangler.toml");

let app;
before(async () => {
  app = await startWrangler({ configs: [EXAMPLE], persistDir: mkdtempSync(join(tmpdir(), "relay-ts-")), ready: "/health" });
});
after(async () => {
  await app?.stop();
});

const get = (path) => app.ok(path);
const order = (shard, body, headers = {}) => app.api("POST", `/orders/${shard}`, body, { headers });

test("the order and its outbox row commit together, and the row reaches the customer's handler", async () => {
  const r = await order("s1", { id: "o-1", customer: "ada", amount: 30 });
  assert.equal(r.status, 200, r.text);
  assert.deepEqual(r.body.seqs, [1]);
  assert.deepEqual(await get("/orders/s1"), [{ id: "o-1", customer: "ada", amount: 30, seq: 1 }]);
  await until(async () => (await get("/customers/ada")).points === 30, "the handler to count the order");
  const keys = await get("/customers/ada/relay/keys");
  assert.deepEqual(keys.keys, [{ key: "order:o-1", value: { amount: 30 } }]);
  const status = await get("/orders/s1/relay/status");
  assert.equal(status.delivered_rows, 1);
  assert.deepEqual(app.panics(), []);
});

test("a throw after the enqueue inside the same transaction leaves neither the order nor the row", async () => {
  const r = await order("s2", { id: "o-bad", customer: "bob", amount: 5, fail_after_enqueue: true });
  // The order's own Error, rethrown by `place` as not the relay's refusal: the Worker's 500.
  assert.equal(r.status, 500, r.text);
  assert.match(r.body.error.message, /failed after its row was enqueued/);
  assert.equal(r.body.error.code, "internal", "the Worker's own answer to an Error, not the relay's aborted");
  assert.deepEqual(await get("/orders/s2"), [], "no order");
  const status = await get("/orders/s2/relay/status");
  assert.equal(status.last_seq, 0, "no sequence allocated");
  assert.equal(status.enqueued_rows, 0);
});

test("a retried keyed order enqueues nothing twice and writes its order once", async () => {
  const body = { id: "o-2", customer: "cy", amount: 7 };
  const first = await order("s3", body, { "idempotency-key": "order-o-2" });
  const again = await order("s3", body, { "idempotency-key": "order-o-2" });
  assert.equal(first.status, 200, first.text);
  assert.equal(again.status, 200, again.text);
  assert.equal(again.body.duplicate, true);
  assert.deepEqual(again.body.seqs, first.body.seqs);
  assert.equal((await get("/orders/s3")).length, 1, "the duplicate did not run the writes");
  await until(async () => (await get("/customers/cy")).points === 7, "one delivery");
});

test("rows reach the customer in order, each once, and hostile rows get typed errors", async () => {
  for (let i = 1; i <= 20; i++) {
    const r = await order("s4", { id: `o-${String(i).padStart(2, "0")}`, customer: "dee", amount: i });
    assert.equal(r.status, 200, r.text);
  }
  await until(async () => (await get("/customers/dee")).points === 210, "all twenty");
  const keys = await get("/customers/dee/relay/keys?limit=100");
  assert.equal(keys.keys.length, 20);
  const marks = await get("/customers/dee/relay/watermarks");
  assert.deepEqual(marks.watermarks.map((w) => w.watermark), [20]);
  const bad = await order("s4", { id: "o-x", customer: "not a name!", amount: 1 });
  assert.equal(bad.status, 400, bad.text);
  assert.equal(bad.body.error.code, "invalid_target");
  assert.equal((await get("/orders/s4")).length, 20, "a refused enqueue writes nothing");
  assert.deepEqual(app.panics(), []);
});

test("a handler that throws rolls its batch back and the source reports and retries it", async () => {
  const r = await order("s5", { id: "o-neg", customer: "eve", amount: -1 });
  assert.equal(r.status, 200, r.text);
  await until(async () => {
    const parked = await get("/orders/s5/relay/parked");
    return parked.targets.some((t) => t.target === "eve" && /hook_refused/.test(t.last_error ?? ""));
  }, "the refusal in the source's report");
  assert.equal((await get("/customers/eve")).points, 0, "nothing of the batch applied");
  const marks = await get("/customers/eve/relay/watermarks");
  assert.deepEqual(marks.watermarks, [], "no watermark moved");
});

test("an enqueue and a status read are served while the source's alarm awaits a slow target", async () => {
  const first = await order("s6", { id: "o-slow", customer: "slow-3000", amount: 1 });
  assert.equal(first.status, 200, first.text);
  await new Promise((resolve) => setTimeout(resolve, 500)); // the alarm is now waiting on the target
  const started = Date.now();
  const second = await order("s6", { id: "o-next", customer: "fay", amount: 2 });
  const status = await app.api("GET", "/orders/s6/relay/status");
  const waited = Date.now() - started;
  assert.equal(second.status, 200, second.text);
  assert.equal(status.status, 200, status.text);
  assert.ok(waited < 2000, `served in ${waited} ms, not after the slow call`);
  await until(async () => (await get("/customers/slow-3000")).points === 1, "the slow target's row");
  await until(async () => (await get("/customers/fay")).points === 2, "the other row");
  const slowAlarm = app.alarmLogs().find((a) => a.source === "s6" && a.duration_ms >= 2900);
  assert.ok(slowAlarm, "an alarm of s6 did wait on the slow target");
  assert.deepEqual(app.panics(), []);
  assert.doesNotMatch(app.output, /recursive use of an object/);
});

test("RELAY_ALARM_LOG=notable leaves a routine delivery unlogged in the TypeScript package too", async () => {
  const quiet = await startWrangler({
    configs: [EXAMPLE],
    persistDir: mkdtempSync(join(tmpdir(), "relay-ts-quiet-")),
    ready: "/health",
    vars: { RELAY_ALARM_LOG: "notable" },
  });
  try {
    const r = await quiet.api("POST", "/orders/quiet", { id: "q-1", customer: "quiet-ada", amount: 3 });
    assert.equal(r.status, 200, r.text);
    await until(async () => (await quiet.ok("/orders/quiet/relay/status")).delivered_rows === 1, "delivery");
    const status = await quiet.ok("/orders/quiet/relay/status");
    assert.ok(status.fires >= 1, "a delivery ran (in the enqueue's invocation, or an alarm)");
    assert.deepEqual(quiet.alarmLogs(), [], "a routine delivery writes no relay_alarm or relay_delivery line");
    assert.ok(app.alarmLogs().length > 0, "by default every alarm is logged");
  } finally {
    await quiet.stop();
  }
});

test("killed mid-delivery and restarted on its persisted state, nothing is lost or counted twice", async () => {
  const vars = { RELAY_TARGETS_PER_FIRE: "1", RELAY_FIRES_PER_ALARM: "1" };
  const persistDir = mkdtempSync(join(tmpdir(), "relay-ts-restart-"));
  let run = await startWrangler({ configs: [EXAMPLE], persistDir, ready: "/health", vars });
  const expected = new Map();
  const n = 240;
  try {
    // One target per alarm, so the drain spans a hundred alarms; the orders go in concurrently.
    const orders = Array.from({ length: n }, (_, k) => ({ id: `o-${k + 1}`, customer: `rc${k % 120}`, amount: k + 1 }));
    for (const o of orders) expected.set(o.customer, (expected.get(o.customer) ?? 0) + o.amount);
    for (let k = 0; k < n; k += 60) {
      const replies = await Promise.all(orders.slice(k, k + 60).map((o) => run.api("POST", "/orders/restart", o)));
      for (const r of replies) assert.equal(r.status, 200, r.text);
    }
    let s;
    for (;;) {
      s = (await run.api("GET", "/orders/restart/relay/status")).body;
      if (s.delivered_rows >= 10) break;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    assert.ok(s.queued_rows > 0, "killed before the drain finished");
    console.log(`typescript: killed with ${s.queued_rows} of ${n} rows queued`);
    run.kill();
    await run.stop();
    run = await startWrangler({ configs: [EXAMPLE], persistDir, ready: "/health", vars });
    // No status reads: they would re-arm a lost alarm; the persisted one must resume by itself.
    await until(
      async () => (await run.api("GET", `/orders/restart/relay/delivered-through/${n}`)).body.delivered === true,
      "the persisted alarm to finish the drain",
      120_000,
    );
    for (const [customer, points] of expected) {
      assert.equal((await run.api("GET", `/customers/${customer}`)).body.points, points, `${customer}: each order counted once`);
    }
    assert.deepEqual(run.panics(), []);
  } finally {
    await run.stop();
  }
});

test("inside the object's own transactionSync, the order and the row commit together, or neither does", async () => {
  const ok = await app.api("POST", "/orders/t1?sync", { id: "o-1", customer: "gus", amount: 4 });
  assert.equal(ok.status, 200, ok.text);
  assert.deepEqual(ok.body.seqs, [1]);
  const again = await app.api("POST", "/orders/t1?sync", { id: "o-2", customer: "gus", amount: 4 }, { headers: { "idempotency-key": "t1-o-2" } });
  assert.equal(again.status, 200, again.text);
  const dup = await app.api("POST", "/orders/t1?sync", { id: "o-2", customer: "gus", amount: 4 }, { headers: { "idempotency-key": "t1-o-2" } });
  assert.equal(dup.body.duplicate, true, "a keyed retry is a duplicate");
  assert.deepEqual(dup.body.seqs, again.body.seqs);

  const bad = await app.api("POST", "/orders/t1?sync", { id: "o-bad", customer: "gus", amount: 100, fail_after_enqueue: true });
  assert.equal(bad.status, 500, bad.text);
  assert.match(bad.body.error.message, /failed after its row was enqueued/);
  const refused = await app.api("POST", "/orders/t1?sync", { id: "o-x", customer: "not a name!", amount: 1 });
  assert.equal(refused.status, 400, refused.text);
  assert.equal(refused.body.error.code, "invalid_target");

  assert.deepEqual((await get("/orders/t1")).map((o) => o.id), ["o-1", "o-2"], "the rolled-back order is not there, the duplicate wrote nothing");
  const status = await get("/orders/t1/relay/status");
  assert.equal(status.last_seq, 2, "the rolled-back row took no sequence");
  await until(async () => (await get("/customers/gus")).points === 8, "both committed rows delivered, the rolled-back one never");
  await new Promise((resolve) => setTimeout(resolve, 1500));
  assert.equal((await get("/customers/gus")).points, 8, "and nothing more arrives");
  assert.deepEqual(app.panics(), []);
});
