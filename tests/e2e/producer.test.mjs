// A producer Worker in TypeScript (examples/producer) calling the reference
// relay from another script, in one local session: through a Durable
// Object binding by script_name (the fetch protocol), through the typed RPC
// entrypoint RelayRpc (typed replies and errors carrying the HTTP API's
// codes), and through a service binding to the front door.

import { test, before, after, afterEach } from "node:test";
import assert from "node:assert/strict";
import { join } from "node:path";
import { Relay, ROOT, TOKEN, home, until } from "./harness.mjs";

const PRODUCER = join(ROOT, "examples", "producer", "wrangler.toml");

let app;
before(async () => {
  app = await Relay.start({ before: [PRODUCER], ready: "/health", vars: { RELAY_MAX_QUEUED_ROWS: "20", RELAY_PARTITIONS: JSON.stringify({ "rpc-parted": { partitions: 3, epoch: 1 }, "rpc-queued-parted": { partitions: 2, epoch: 1 } }) } });
});
after(async () => {
  await app?.stop();
});

/** The relay's HTTP API through the producer's service binding. */
const relayApi = (method, path, body) => app.api(method, `/relay${path}`, body, { token: TOKEN });
afterEach(async () => {
  for (const s of ["stub-src", "rpc-src", "full-src", "park-src"]) {
    const r = await relayApi("GET", `/v1/sources/${s}/audit`);
    assert.ok(r.status === 200 && r.body.ok, `audit of ${s}: ${r.text}`);
  }
});

test("a Durable Object binding by script_name reaches the relay's source class", async () => {
  const r = await app.api("POST", "/stub/stub-src/enqueue", { rows: [{ target: "stub-t", puts: [["k", 1]] }] });
  assert.equal(r.status, 200, r.text);
  assert.deepEqual(r.body.seqs, [1]);
  await until(async () => (await app.api("GET", "/stub/stub-src/status")).body.delivered_rows === 1, "delivery");
  const keys = await relayApi("GET", "/v1/targets/stub-t/keys");
  assert.deepEqual(keys.body.keys, [{ key: "k", value: 1 }]);
});

test("RelayRpc enqueues with typed replies, idempotency and status", async () => {
  const rows = [{ target: "rpc-t", puts: [["a", { n: 1 }]] }, { target: "rpc-t", deletes: ["b"] }];
  const r = await app.api("POST", "/rpc/enqueue/rpc-src", { rows, idempotencyKey: "order-1" });
  assert.equal(r.status, 200, r.text);
  assert.deepEqual(r.body.seqs, [1, 2]);
  assert.equal(r.body.duplicate, false);
  const again = await app.api("POST", "/rpc/enqueue/rpc-src", { rows, idempotencyKey: "order-1" });
  assert.equal(again.body.duplicate, true);
  assert.deepEqual(again.body.seqs, [1, 2]);
  await until(async () => (await app.api("GET", "/rpc/status/rpc-src")).body.delivered_rows === 2, "delivery");
  const status = (await app.api("GET", "/rpc/status/rpc-src")).body;
  assert.equal(status.source, "rpc-src");
  assert.equal(status.dedup_hits, 1);
  assert.equal((await app.api("GET", "/rpc/delivered/rpc-src/2")).body.delivered, true);
  assert.equal((await app.api("GET", "/rpc/delivered/rpc-src/3")).body.delivered, false, "not yet allocated");
  const w = (await app.api("GET", "/rpc/watermark/rpc-src")).body.relay_watermark;
  assert.ok(Math.abs(w - Date.now()) < 60_000, "an empty outbox reports now");
});

test("the README's RPC example enqueues an order once, however often it is retried, and sees it applied", async () => {
  const first = await app.api("POST", "/quick-start/order-17");
  assert.equal(first.status, 200, first.text);
  assert.equal(typeof first.body.applied, "boolean");
  await until(async () => (await app.api("POST", "/quick-start/order-17")).body.applied === true, "the row to apply");
  const status = (await app.api("GET", "/rpc/status/orders")).body;
  assert.equal(status.enqueued_rows, 1, "the retries were duplicates: one row");
  assert.equal(status.delivered_rows, 1);
});

test("RelayRpc routes a partitioned source's rows by target and reports over its partitions", async () => {
  const rows = ["pa", "pb", "pc", "pd", "pe", "pf"].map((t, i) => ({ target: t, puts: [["k", i]] }));
  const r = await app.api("POST", "/rpc/enqueue/rpc-parted", { rows, idempotencyKey: "parted-1" });
  assert.equal(r.status, 200, r.text);
  assert.equal(r.body.positions.length, 6);
  assert.ok(new Set(r.body.positions.map((p) => p.partition)).size > 1, "the rows span partitions");
  const again = await app.api("POST", "/rpc/enqueue/rpc-parted", { rows, idempotencyKey: "parted-1" });
  assert.equal(again.body.duplicate, true, "every partition answered the retry as a duplicate");
  assert.deepEqual(again.body.positions, r.body.positions);
  await until(async () => (await app.api("GET", "/rpc/status/rpc-parted")).body.delivered_rows === 6, "delivery");
  const status = (await app.api("GET", "/rpc/status/rpc-parted")).body;
  assert.equal(status.partitions.length, 3);
  const keys = await relayApi("GET", "/v1/targets/pf/keys");
  assert.deepEqual(keys.body.keys, [{ key: "k", value: 5 }]);
});

test("RelayRpc lists a target's queued rows at a plain and at a partitioned source, named where they wait", async () => {
  const late = (v) => ({ target: "q-late", puts: [["k", v]], delay_ms: 3_600_000 });
  for (const source of ["rpc-queued", "rpc-queued-parted"]) {
    const r = await app.api("POST", `/rpc/enqueue/${source}`, { rows: [late(1), late(2)] });
    assert.equal(r.status, 200, r.text);
    const page = (await app.api("GET", `/rpc/queued/${source}/q-late`)).body;
    assert.deepEqual(page.rows.map((row) => row.effects.puts[0][1]), [1, 2], JSON.stringify(page));
    const at = source === "rpc-queued" ? source : `${source}:${r.body.positions[0].partition}`;
    assert.equal(page.source, at, "the object that holds them");
    const http = await relayApi("GET", `/v1/sources/${source}/queued?target=q-late&limit=1`);
    assert.deepEqual([http.body.rows.length, http.body.next, http.body.source], [1, page.rows[0].seq, at], http.text);
    const next = await relayApi("GET", `/v1/sources/${at}/queued?target=q-late&after=${http.body.next}`);
    assert.deepEqual(next.body.rows.map((row) => row.seq), [page.rows[1].seq], "paged on at the object named");
  }
  const bad = await relayApi("GET", "/v1/sources/rpc-queued/queued?target=q-late&limit=501");
  assert.deepEqual([bad.status, bad.body.error.code], [400, "invalid_limit"], bad.text);
});

test("RelayRpc carries a traceparent option to the target's apply log line", async () => {
  const trace = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
  const r = await app.api("POST", "/rpc/enqueue/trace-src", { rows: [{ target: "trace-t", puts: [["k", 1]] }] }, { headers: { traceparent: trace } });
  assert.equal(r.status, 200, r.text);
  await until(async () => (await app.api("GET", "/rpc/status/trace-src")).body.delivered_rows === 1, "delivery");
  await until(async () => app.output.includes('"event":"relay_apply"') && app.output.includes(trace), "the apply log line");
  const bad = await app.api("POST", "/rpc/enqueue/trace-src", { rows: [{ target: "trace-t", puts: [["k", 2]] }] }, { headers: { traceparent: "00-nope" } });
  assert.equal(bad.status, 400, bad.text);
  assert.equal(bad.body.error.code, "invalid_traceparent");
});

test("RelayRpc throws errors that keep the HTTP API's code and status across the RPC boundary", async () => {
  const bad = await app.api("POST", "/rpc/enqueue/rpc-src", { rows: [{ target: "rpc-t" }] });
  assert.equal(bad.status, 400);
  assert.deepEqual(
    { name: bad.body.error.name, code: bad.body.error.code, status: bad.body.error.status },
    { name: "RelayError", code: "row_without_effects", status: 400 },
  );
  assert.match(bad.body.error.message, /^row_without_effects: /);
  const conflict = await app.api("POST", "/rpc/enqueue/rpc-src", {
    rows: [{ target: "rpc-t", puts: [["a", 2]] }],
    idempotencyKey: "order-1",
  });
  assert.equal(conflict.body.error.code, "idempotency_conflict");
  assert.equal(conflict.status, 409);
  const badName = await app.api("POST", "/rpc/enqueue/a%20b", { rows: [{ target: "t", puts: [["k", 1]] }] });
  assert.equal(badName.body.error.code, "invalid_source");
});

test("a full outbox answers outbox_full with its retry delay over RPC", async () => {
  await relayApi("POST", "/v1/targets/full-t/faults", { reject: true });
  const rows = Array.from({ length: 20 }, (_, i) => ({ target: "full-t", puts: [[`k${i}`, i]] }));
  assert.equal((await app.api("POST", "/rpc/enqueue/full-src", { rows })).status, 200);
  const full = await app.api("POST", "/rpc/enqueue/full-src", { rows: [{ target: "full-t", puts: [["x", 1]] }] });
  assert.equal(full.status, 429);
  assert.equal(full.body.error.code, "outbox_full");
  assert.equal(full.body.error.retryAfterS, 5);
  await relayApi("POST", "/v1/targets/full-t/faults", { reject: false });
  await until(async () => (await app.api("GET", "/rpc/status/full-src")).body.queued_rows === 0, "the outbox to drain");
});

test("past the daily allowance of rows written, RPC throws daily_write_limit with the wait until 00:00 UTC", async () => {
  const src = "rpc-wl-src";
  assert.equal((await relayApi("POST", `/v1/sources/${src}/faults`, { refuse_writes: true })).status, 200);
  const r = await app.api("POST", `/rpc/enqueue/${src}`, { rows: [{ target: "rpc-wl-t", puts: [["k", 1]] }] });
  assert.equal(r.status, 503, r.text);
  assert.equal(r.body.error.code, "daily_write_limit");
  const midnight = (Math.floor(Date.now() / 86_400_000) + 1) * 86_400_000;
  const wait = r.body.error.retryAfterS;
  assert.ok(wait >= 1 && wait <= 86_400 && Date.now() + wait * 1000 >= midnight - 2_000, `retryAfterS ${wait}`);
  await relayApi("POST", `/v1/sources/${src}/faults`, { refuse_writes: false });
  assert.equal((await app.api("GET", `/rpc/status/${src}`)).body.last_seq, 0, "nothing was written");
});

test("parked targets are listed, read and redriven over RPC", async () => {
  await relayApi("POST", "/v1/targets/park-t/faults", { reject: true, permanent: true });
  const r = await app.api("POST", "/rpc/enqueue/park-src", {
    rows: [{ target: "park-t", puts: [["k", { deep: [1, "two", null] }]] }],
  });
  assert.equal(r.status, 200, r.text);
  await until(async () => (await app.api("GET", "/rpc/parked/park-src")).body.targets.some((t) => t.parked), "parking");
  assert.deepEqual((await app.api("GET", "/rpc/queued/park-src/park-t")).body.rows, [], "a parked row is not queued");
  const page = await app.api("GET", "/rpc/parked/park-src/park-t");
  assert.equal(page.body.rows.length, 1);
  assert.deepEqual(page.body.rows[0].effects, { puts: [["k", { deep: [1, "two", null] }]], deletes: [] }, "values cross RPC as JSON");
  assert.equal((await app.api("GET", "/rpc/delivered/park-src/1")).body.delivered, false, "a parked row is not delivered");
  await relayApi("POST", "/v1/targets/park-t/faults", { reject: false });
  const redrive = await app.api("POST", "/rpc/redrive/park-src/park-t");
  assert.deepEqual(redrive.body, { rows: 1, was_parked: true });
  await until(async () => (await app.api("GET", "/rpc/delivered/park-src/1")).body.delivered, "redelivery");
});

/** A target name with prefix `prefix` whose home among `n` partitions is `p`. */
const homed = (prefix, p, n) => {
  for (let i = 0; ; i++) if (home(`${prefix}${i}`, n) === p) return `${prefix}${i}`;
};

test("an enqueue straight into a partition, or at a partitioned source's own object, is refused on every entry", async () => {
  const rows = [{ target: "pa", puts: [["k", 1]] }];
  const rpc = await app.api("POST", "/rpc/enqueue/rpc-parted:1", { rows });
  assert.equal(rpc.status, 400, rpc.text);
  assert.equal(rpc.body.error.code, "partition_enqueue");
  const stub = await app.api("POST", "/stub/rpc-parted:1/enqueue", { rows });
  assert.equal(stub.status, 400, stub.text);
  assert.equal(stub.body.error.code, "partition_enqueue");
  const front = await relayApi("POST", "/v1/sources/rpc-parted:1/enqueue", { rows });
  assert.equal(front.body.error.code, "partition_enqueue");
  const logical = await app.api("POST", "/stub/rpc-parted/enqueue", { rows });
  assert.equal(logical.status, 400, logical.text);
  assert.equal(logical.body.error.code, "partitioned_source", "past the router, rows could overtake");
  for (let p = 0; p < 3; p++) {
    const s = (await relayApi("GET", `/v1/sources/rpc-parted:${p}/status`)).body;
    assert.ok(!s.last_alarm || s.enqueued_rows === s.delivered_rows + s.queued_rows + s.parked_rows);
  }
});

test("RelayRpc operator calls reach a target whose name has ':' and the front door decodes names", async () => {
  await relayApi("POST", "/v1/targets/cust:9/faults", { reject: true, permanent: true });
  const r = await app.api("POST", "/rpc/enqueue/colon-src", { rows: [{ target: "cust:9", puts: [["k", 1]] }] });
  assert.equal(r.status, 200, r.text);
  await until(async () => (await app.api("GET", "/rpc/parked/colon-src")).body.targets.some((t) => t.target === "cust:9" && t.parked), "parking");
  const page = await app.api("GET", "/rpc/parked/colon-src/cust:9");
  assert.equal(page.status, 200, page.text);
  assert.equal(page.body.rows.length, 1);
  await relayApi("POST", "/v1/targets/cust:9/faults", { reject: false });
  const redrive = await app.api("POST", "/rpc/redrive/colon-src/cust:9");
  assert.deepEqual(redrive.body, { rows: 1, was_parked: true }, redrive.text);
  await until(async () => (await app.api("GET", "/rpc/delivered/colon-src/1")).body.delivered, "redelivery");
  const discard = await app.api("POST", "/rpc/discard/colon-src/cust:9");
  assert.deepEqual(discard.body, { rows: 0, was_parked: false }, discard.text);
  const encoded = await relayApi("GET", "/v1/sources/colon%3Asrc/status");
  assert.equal(encoded.status, 200, encoded.text);
  assert.equal(encoded.body.source, "colon:src");
});

test("a spanning enqueue one partition refuses says over RPC what committed, and a keyed retry completes it", async () => {
  const full = homed("full-p", 0, 3);
  const other = homed("other-p", 1, 3);
  await relayApi("POST", `/v1/targets/${full}/faults`, { reject: true });
  const fill = Array.from({ length: 20 }, (_, i) => ({ target: full, puts: [[`k${i}`, i]] }));
  assert.equal((await app.api("POST", "/rpc/enqueue/rpc-parted", { rows: fill })).status, 200);
  const rows = [{ target: full, puts: [["x", 1]] }, { target: other, puts: [["x", 2]] }];
  const refused = await app.api("POST", "/rpc/enqueue/rpc-parted", { rows, idempotencyKey: "span-1" });
  assert.equal(refused.status, 429, refused.text);
  assert.equal(refused.body.error.code, "outbox_full");
  assert.equal(refused.body.error.committed.length, 1, refused.text);
  assert.equal(refused.body.error.committed[0].partition, 1);
  await relayApi("POST", `/v1/targets/${full}/faults`, { reject: false });
  await until(async () => (await app.api("GET", "/rpc/status/rpc-parted")).body.queued_rows === 0, "the full partition to drain");
  const done = await app.api("POST", "/rpc/enqueue/rpc-parted", { rows, idempotencyKey: "span-1" });
  assert.equal(done.status, 200, done.text);
  assert.equal(done.body.duplicate, false, "partition 0 took its row now");
  assert.deepEqual(done.body.positions[1], refused.body.error.committed[0], "partition 1 answered a duplicate");
  const status = (await app.api("GET", "/rpc/status/rpc-parted")).body;
  for (const field of ["conflicts", "dedup_hits", "rejected_full", "parked_bytes", "queued_bytes", "dedup_records"]) {
    const sum = status.partitions.reduce((a, p) => a + p.status[field], 0);
    assert.equal(status[field], sum, `the logical status sums ${field}`);
  }
  assert.ok(status.rejected_full >= 1 && status.dedup_hits >= 1);
});
