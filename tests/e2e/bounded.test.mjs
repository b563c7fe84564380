// Bounded reads in real workerd: a source that many targets have failed
// answers status, its parked list and enqueues with a bounded number of
// SQLite rows read (workerd's own `rowsRead`, summed by the test build into
// `x-relay-rows-read`) and a bounded reply, however many records it holds.

import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { Relay, put } from "./harness.mjs";

/** Failing and parked target records seeded: a long outage of many targets. */
const FAILING = 10_000;
const PARKED = 2_000;
/** Rows one status read may cost, whatever the records: a page of them plus the state. */
const STATUS_ROWS_READ_MAX = 400;
/** Bytes a status reply may take. */
const STATUS_BYTES_MAX = 32 * 1024;
/** Rows one enqueue of a row may cost. */
const ENQUEUE_ROWS_READ_MAX = 20;

let relay;
before(async () => {
  relay = await Relay.start();
});
after(async () => {
  await relay?.stop();
});

/** Rows `r` read, from the test build's header. */
const rowsRead = (r) => Number(r.headers.get("x-relay-rows-read"));

async function seeded(src, failing, parked) {
  await relay.enqueue(src, [put(`${src}-t`, "k", 1)]);
  await relay.drained(src);
  const r = await relay.api("POST", `/v1/sources/${src}/faults`, {
    seed_failing_targets: failing,
    seed_parked_targets: parked,
  });
  assert.equal(r.status, 200, JSON.stringify(r.body));
}

test("status, the parked list and an enqueue read a bounded number of rows with 10,000 failing targets", async () => {
  const costs = {};
  for (const [src, failing, parked] of [
    ["few-src", 10, 2],
    ["many-src", FAILING, PARKED],
  ]) {
    await seeded(src, failing, parked);
    const status = await relay.api("GET", `/v1/sources/${src}/status`);
    assert.equal(status.status, 200);
    const parkedList = await relay.api("GET", `/v1/sources/${src}/parked`);
    assert.equal(parkedList.status, 200);
    const enqueue = await relay.api("POST", `/v1/sources/${src}/enqueue`, { rows: [put(`${src}-t`, "k", 2)] });
    assert.equal(enqueue.status, 200);
    costs[src] = {
      status_rows_read: rowsRead(status),
      status_bytes: status.text.length,
      parked_rows_read: rowsRead(parkedList),
      parked_bytes: parkedList.text.length,
      enqueue_rows_read: rowsRead(enqueue),
      status,
      parkedList,
    };
  }
  const figures = Object.fromEntries(
    Object.entries(costs).map(([k, { status, parkedList, ...v }]) => [k, v]),
  );
  console.log(`bounded reads: ${JSON.stringify(figures)}`);
  const many = costs["many-src"];
  assert.ok(many.status_rows_read <= STATUS_ROWS_READ_MAX, `status read ${many.status_rows_read} rows`);
  assert.ok(many.status_bytes <= STATUS_BYTES_MAX, `status answered ${many.status_bytes} bytes`);
  assert.ok(many.enqueue_rows_read <= ENQUEUE_ROWS_READ_MAX, `an enqueue read ${many.enqueue_rows_read} rows`);
  assert.ok(many.parked_rows_read <= STATUS_ROWS_READ_MAX, `the parked list read ${many.parked_rows_read} rows`);
});
