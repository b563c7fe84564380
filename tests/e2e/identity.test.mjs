// A source's identity at its targets, in workerd: two source classes of the
// test Worker (RelaySource and RelaySourceTwin) each hold an object named
// `default`, and both send their row 1 to the same target. The target keys
// its watermark by the source's name and its object's id, which differs
// per class, so both rows apply; keyed by name alone, the second row 1 was
// taken for a duplicate and lost while its source reported it delivered.

import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { Relay, put, until } from "./harness.mjs";

/** The front door's test header that routes a source request to RelaySourceTwin. */
const TWIN = { "relay-test-source-twin": "1" };

let relay;
before(async () => {
  relay = await Relay.start({
    bindings: ['{ name = "TEST_SOURCE_TWIN", class_name = "RelaySourceTwin" }'],
    extraToml: '[[migrations]]\ntag = "test-twin"\nnew_sqlite_classes = ["RelaySourceTwin"]',
  });
});
after(async () => {
  await relay?.stop();
});

const enqueue = async (rows, headers = {}) => {
  const r = await relay.api("POST", "/v1/sources/default/enqueue", { rows }, { headers });
  assert.equal(r.status, 200, r.text);
  return r.body;
};
const status = async (headers = {}) => {
  const r = await relay.api("GET", "/v1/sources/default/status", undefined, { headers });
  assert.equal(r.status, 200, r.text);
  return r.body;
};

test("objects named default in two source classes each deliver their row 1 to one target", async () => {
  const first = await enqueue([put("shared-t", "from-first", "a")]);
  const second = await enqueue([put("shared-t", "from-second", "b")], TWIN);
  assert.deepEqual([first.seqs, second.seqs], [[1], [1]], "two sources, each with its own sequence");

  const [one, two] = await Promise.all([status(), status(TWIN)]);
  assert.match(one.source_id, /^[0-9a-f]{64}$/);
  assert.match(two.source_id, /^[0-9a-f]{64}$/);
  assert.notEqual(one.source_id, two.source_id, "ids differ across classes");

  await until(async () => (await status()).delivered_rows === 1 && (await status(TWIN)).delivered_rows === 1, "both delivered");
  const keys = Object.fromEntries((await relay.keys("shared-t")).map((k) => [k.key, k.value]));
  assert.deepEqual(keys, { "from-first": "a", "from-second": "b" }, "both effects arrived");

  const { watermarks } = await relay.ok("/v1/targets/shared-t/watermarks");
  const marks = watermarks.map((w) => [w.source, w.source_id, w.watermark, w.applied_rows]).sort();
  assert.deepEqual(marks, [
    ["default", one.source_id, 1, 1],
    ["default", two.source_id, 1, 1],
  ].sort(), "one watermark per source id");
  assert.deepEqual(relay.panics(), []);
});

test("later rows of both keep arriving once and in order", async () => {
  for (let i = 2; i <= 4; i++) {
    await enqueue([put("shared-t", "last-first", i)]);
    await enqueue([put("shared-t", "last-second", i * 10)], TWIN);
  }
  await until(async () => (await status()).delivered_rows === 4 && (await status(TWIN)).delivered_rows === 4, "both drained");
  const keys = Object.fromEntries((await relay.keys("shared-t")).map((k) => [k.key, k.value]));
  assert.equal(keys["last-first"], 4);
  assert.equal(keys["last-second"], 40);
  const { watermarks } = await relay.ok("/v1/targets/shared-t/watermarks");
  assert.deepEqual(watermarks.map((w) => w.watermark), [4, 4]);
  assert.deepEqual(relay.panics(), []);
});
