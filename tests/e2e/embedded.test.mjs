// The embedded example in workerd: a Worker of its own (examples/embedded)
// whose Orders source writes its own table and enqueues in one transaction,
// and whose Customer target applies with a hook that writes its own table;
// run in one session with the reference relay, which its /forward route
// reaches through the library's Rust client. Its Notes source and Inbox
// target are the README's Rust quick start.

import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { join } from "node:path";
import { Relay, ROOT, sleep, until } from "./harness.mjs";

const EXAMPLE = join(ROOT, "examples", "embedded", "wrangler.toml");

let app;
before(async () => {
  app = await Relay.start({ before: [EXAMPLE], ready: "/health" });
});
after(async () => {
  await app?.stop();
});

const get = (path) => app.ok(path);
const order = (shard, body) => app.api("POST", `/orders/${shard}`, body);

test("the business write and the outbox row commit together, and the row reaches the customer", async () => {
  const r = await order("s1", { id: "o-1", customer: "ada", amount: 30 });
  assert.equal(r.status, 200, r.text);
  assert.deepEqual(r.body.seqs, [1]);
  const orders = await get("/orders/s1");
  assert.deepEqual(orders, [{ id: "o-1", customer: "ada", amount: 30, seq: 1 }], "the order row carries its outbox sequence");
  await until(async () => (await get("/customers/ada")).points === 30, "the hook to count the order");
  const keys = await get("/customers/ada/relay/keys");
  assert.deepEqual(keys.keys, [{ key: "order:o-1", value: { amount: 30 } }]);
  const status = await get("/orders/s1/relay/status");
  assert.equal(status.delivered_rows, 1, "the library serves the relay's status from the embedder's object");
});

test("a failure after the enqueue inside the same transaction leaves neither the order nor the row", async () => {
  const before = await get("/orders/s2/relay/status");
  const r = await order("s2", { id: "o-bad", customer: "bob", amount: 5, fail_after_enqueue: true });
  assert.equal(r.status, 409, r.text);
  assert.equal(r.body.error.code, "aborted");
  assert.deepEqual(await get("/orders/s2"), [], "no order row");
  const after = await get("/orders/s2/relay/status");
  assert.equal(after.last_seq, before.last_seq, "no sequence allocated");
  assert.equal(after.queued_rows, 0, "no outbox row");
  const ok = await order("s2", { id: "o-good", customer: "bob", amount: 7 });
  assert.deepEqual(ok.body.seqs, [before.last_seq + 1], "the next order takes the next sequence");
  await until(async () => (await get("/customers/bob")).points === 7, "the good order to arrive");
});

test("a retried order enqueues nothing twice (the order id is the idempotency key)", async () => {
  const first = await order("s3", { id: "o-r", customer: "cy", amount: 3 });
  const again = await order("s3", { id: "o-r", customer: "cy", amount: 3 });
  assert.equal(again.status, 200, again.text);
  assert.equal(again.body.duplicate, true);
  assert.deepEqual(again.body.seqs, first.body.seqs);
  assert.equal((await get("/orders/s3")).length, 1);
  await until(async () => (await get("/customers/cy")).points === 3, "one order counted");
  await sleep(300);
  assert.equal((await get("/customers/cy")).orders.length, 1, "counted once");
});

test("orders reach each customer in order, and the hook's table matches what was sent", async () => {
  const sent = new Map();
  for (let i = 0; i < 40; i++) {
    const customer = `c${i % 4}`;
    const r = await order("s4", { id: `o4-${i}`, customer, amount: i + 1 });
    assert.equal(r.status, 200, r.text);
    sent.set(customer, [...(sent.get(customer) ?? []), { seq: r.body.seqs[0], order_id: `o4-${i}`, amount: i + 1 }]);
  }
  for (const [customer, rows] of sent) {
    await until(async () => (await get(`/customers/${customer}`)).orders.length === rows.length, `${customer}'s orders`);
    const got = await get(`/customers/${customer}`);
    assert.deepEqual(got.orders.map(({ seq, order_id, amount }) => ({ seq, order_id, amount })), rows, customer);
    assert.equal(got.points, rows.reduce((n, r) => n + r.amount, 0));
  }
});

test("the Rust client in this Worker enqueues at the reference relay through a script_name binding", async () => {
  const r = await app.api("POST", "/forward/fwd-src", { rows: [{ target: "fwd-t", puts: [["k", 1]] }] });
  assert.equal(r.status, 200, r.text);
  assert.deepEqual(r.body.seqs, [1]);
  await until(async () => (await get("/forward/fwd-src/status")).delivered_rows === 1, "delivery at the relay");
  const bad = await app.api("POST", "/forward/fwd-src", { rows: [{ target: "fwd-t" }] });
  assert.equal(bad.status, 400);
  assert.equal(bad.body.error.code, "row_without_effects", "the relay's code comes back through the client");
  // The client's enqueue_traced carries the caller's trace context to the relay's target.
  const trace = "00-1af7651916cd43dd8448eb211c80319c-c7ad6b7169203331-01";
  const traced = await app.api("POST", "/forward/fwd-src", { rows: [{ target: "fwd-t", puts: [["k", 2]] }] }, { headers: { traceparent: trace } });
  assert.equal(traced.status, 200, traced.text);
  await until(async () => app.output.includes('"event":"relay_apply"') && app.output.includes(trace), "the relay's apply log line");
});

const note = (to, text) => app.api("POST", `/notes/${to}`, text, { raw: true });

test("a note posted to the Rust quick start arrives at its inbox once", async () => {
  const before = await get("/notes/relay/status");
  const sent = [["qs-ada", "hello, Ada ✓"], ["qs-bob", "hello, Bob"]];
  const seqs = [];
  for (const [to, text] of sent) {
    const r = await note(to, text);
    assert.equal(r.status, 200, r.text);
    assert.equal(r.body.duplicate, false);
    seqs.push(...r.body.seqs);
  }
  assert.deepEqual(seqs, [before.last_seq + 1, before.last_seq + 2], "one row per note, in order");
  for (const [to] of sent) {
    await until(async () => (await get(`/inboxes/${to}`)).keys.length > 0, `${to}'s note`);
  }
  await until(async () => (await get("/notes/relay/status")).queued_rows === 0, "the outbox to drain");
  await sleep(300);
  for (const [i, [to, text]] of sent.entries()) {
    assert.deepEqual((await get(`/inboxes/${to}`)).keys, [{ key: "note", value: text }], to);
    assert.equal((await get(`/inboxes/${to}/relay/status`)).applied_rows, 1, `${to} applied the note once`);
    const { watermarks } = await get(`/inboxes/${to}/relay/watermarks`);
    assert.deepEqual(watermarks.map(({ source, watermark }) => ({ source, watermark })), [{ source: "notes", watermark: seqs[i] }]);
  }
  assert.equal((await get("/notes/relay/status")).delivered_rows, before.delivered_rows + 2);
});

test("a note to an invalid inbox name is refused with a JSON 400 and enqueues nothing", async () => {
  const before = await get("/notes/relay/status");
  const bad = "x".repeat(65);
  const r = await note(bad, "never sent");
  assert.equal(r.status, 400, r.text);
  assert.equal(r.body.error.code, "invalid_target");
  const after = await get("/notes/relay/status");
  assert.equal(after.last_seq, before.last_seq, "no sequence allocated");
  assert.equal(after.queued_rows, before.queued_rows, "no outbox row");
  await sleep(300);
  assert.deepEqual((await get(`/inboxes/${bad}`)).keys, [], "the inbox stays empty");
  assert.deepEqual(app.panics(), []);
});

test("killed mid-delivery and restarted on its persisted state, the example loses nothing", async () => {
  // One target per alarm, so delivery of 30 customers' orders takes 30+ alarms.
  const slow = { RELAY_TARGETS_PER_FIRE: "1", RELAY_FIRES_PER_ALARM: "1" };
  await app.stop();
  app = await Relay.start({ before: [EXAMPLE], ready: "/health", firstVars: slow, persistDir: app.persistDir });
  const n = 60;
  const placed = await Promise.all(
    Array.from({ length: n }, (_, i) => order("s5", { id: `o5-${i}`, customer: `k${i % 30}`, amount: 1 })),
  );
  for (const r of placed) assert.equal(r.status, 200, r.text);
  const mid = await get("/orders/s5/relay/status");
  assert.ok(mid.queued_rows > 0, `killed mid-delivery (${mid.queued_rows} rows still queued)`);
  app.kill();
  await sleep(300);
  app = await Relay.start({ before: [EXAMPLE], ready: "/health", firstVars: slow, persistDir: app.persistDir });
  for (let c = 0; c < 30; c++) {
    await until(async () => (await get(`/customers/k${c}`)).orders.length === 2, `customer k${c}`, 60_000);
  }
  const status = await get("/orders/s5/relay/status");
  assert.equal(status.queued_rows, 0);
  assert.equal(status.delivered_rows, n);
  for (let c = 0; c < 30; c++) {
    const got = await get(`/customers/k${c}`);
    assert.equal(got.orders.length, 2, "each order counted once");
    assert.ok(got.orders[0].seq < got.orders[1].seq, "in order");
  }
});
