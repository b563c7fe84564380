// A corpus of bad requests: each gets its 4xx with a JSON error naming the
// problem, and the outbox is unchanged afterwards. Also authentication.

import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { Relay, put } from "./harness.mjs";

let relay;
before(async () => {
  relay = await Relay.start();
});
after(async () => {
  await relay?.stop();
});

const SRC = "bad-src";
const ENQ = `/v1/sources/${SRC}/enqueue`;
const big = (n) => "x".repeat(n);
const row = (extra) => ({ target: "t", puts: [["k", 1]], ...extra });
const manyKeys = (n) => Array.from({ length: n }, (_, i) => [`k${i}`, i]);

// [name, method, path, body (object, or raw string with raw=true), status, code]
const corpus = [
  ["malformed JSON", "POST", ENQ, "{", 400, "malformed_json", true],
  ["trailing garbage", "POST", ENQ, '{"rows":[]} x', 400, "malformed_json", true],
  ["empty body", "POST", ENQ, "", 400, "empty_body", true],
  ["array instead of object", "POST", ENQ, [], 400, "invalid_request"],
  ["missing rows", "POST", ENQ, {}, 400, "invalid_request"],
  ["rows is a number", "POST", ENQ, { rows: 5 }, 400, "invalid_request"],
  ["rows is null", "POST", ENQ, { rows: null }, 400, "invalid_request"],
  ["empty rows", "POST", ENQ, { rows: [] }, 400, "no_rows"],
  ["unknown top-level field", "POST", ENQ, { rows: [row()], priority: 1 }, 400, "invalid_request"],
  ["unknown row field", "POST", ENQ, { rows: [row({ ttl: 5 })] }, 400, "invalid_request"],
  ["missing target", "POST", ENQ, { rows: [{ puts: [["k", 1]] }] }, 400, "invalid_request"],
  ["target is a number", "POST", ENQ, { rows: [row({ target: 7 })] }, 400, "invalid_request"],
  ["empty target", "POST", ENQ, { rows: [row({ target: "" })] }, 400, "invalid_target"],
  ["target with a space", "POST", ENQ, { rows: [row({ target: "a b" })] }, 400, "invalid_target"],
  ["target with a slash", "POST", ENQ, { rows: [row({ target: "a/b" })] }, 400, "invalid_target"],
  ["target of 65 bytes", "POST", ENQ, { rows: [row({ target: "t".repeat(65) })] }, 400, "invalid_target"],
  ["row without effects", "POST", ENQ, { rows: [{ target: "t" }] }, 400, "row_without_effects"],
  ["empty puts and deletes", "POST", ENQ, { rows: [{ target: "t", puts: [], deletes: [] }] }, 400, "row_without_effects"],
  ["puts is an object", "POST", ENQ, { rows: [{ target: "t", puts: { k: 1 } }] }, 400, "invalid_request"],
  ["put is not a pair", "POST", ENQ, { rows: [{ target: "t", puts: [["k"]] }] }, 400, "invalid_request"],
  ["put key is a number", "POST", ENQ, { rows: [{ target: "t", puts: [[1, 2]] }] }, 400, "invalid_request"],
  ["delete key is a number", "POST", ENQ, { rows: [{ target: "t", deletes: [1] }] }, 400, "invalid_request"],
  ["empty key", "POST", ENQ, { rows: [{ target: "t", puts: [["", 1]] }] }, 400, "empty_key"],
  ["key of 513 bytes", "POST", ENQ, { rows: [{ target: "t", deletes: ["k".repeat(513)] }] }, 400, "key_too_long"],
  ["value over 64 KiB", "POST", ENQ, { rows: [{ target: "t", puts: [["k", big(65_535)]] }] }, 400, "value_too_large"],
  ["key twice in a row", "POST", ENQ, { rows: [{ target: "t", puts: [["k", 1]], deletes: ["k"] }] }, 400, "duplicate_key"],
  ["65 effects in a row", "POST", ENQ, { rows: [{ target: "t", puts: manyKeys(65) }] }, 400, "too_many_effects"],
  ["257 rows", "POST", ENQ, { rows: Array.from({ length: 257 }, () => row()) }, 400, "too_many_rows"],
  [
    "row too big for one target batch",
    "POST", ENQ,
    { rows: [{ target: "t", puts: Array.from({ length: 17 }, (_, i) => [`k${i}`, big(62 * 1024)]) }] },
    400, "row_too_large",
  ],
  [
    "rows over the request limit",
    "POST", ENQ,
    { rows: Array.from({ length: 17 }, () => ({ target: "t", puts: [["k", big(62 * 1024)]] })) },
    413, "request_too_large",
  ],
  ["body over 2 MiB", "POST", ENQ, "x".repeat(2 * 1024 * 1024 + 1), 413, "body_too_large", true],
  ["invalid source name", "POST", "/v1/sources/bad%20name/enqueue", { rows: [row()] }, 400, "invalid_name"],
  ["source name of 65 bytes", "POST", `/v1/sources/${"s".repeat(65)}/enqueue`, { rows: [row()] }, 400, "invalid_name"],
  ["GET on enqueue", "GET", ENQ, undefined, 404, "no_route"],
  ["unknown route", "GET", "/v1/nothing", undefined, 404, "no_route"],
  ["delivered-through not a number", "GET", `/v1/sources/${SRC}/delivered-through/abc`, undefined, 400, "invalid_seq"],
  ["delivered-through past 2^53-1", "GET", `/v1/sources/${SRC}/delivered-through/9007199254740992`, undefined, 400, "invalid_seq"],
  ["keys limit of 0", "GET", "/v1/targets/t/keys?limit=0", undefined, 400, "invalid_limit"],
  ["keys limit of 1001", "GET", "/v1/targets/t/keys?limit=1001", undefined, 400, "invalid_limit"],
  ["fault switch with an unknown field", "POST", `/v1/sources/${SRC}/faults`, { explode: true }, 400, "invalid_request"],
];

test(`a corpus of ${corpus.length} bad requests each get their 4xx and change nothing`, async () => {
  // One row queued behind a failing target, so the outbox is not empty.
  await relay.api("POST", "/v1/targets/t/faults", { reject: true });
  await relay.enqueue(SRC, [put("t", "k", 0)]);
  const before = await relay.status(SRC);
  assert.ok(corpus.length >= 30);
  for (const [name, method, path, body, status, code, raw] of corpus) {
    const r = await relay.api(method, path, body, { raw: !!raw });
    assert.equal(r.status, status, `${name}: ${JSON.stringify(r.body)}`);
    assert.equal(r.body?.error?.code, code, `${name}: ${JSON.stringify(r.body)}`);
    assert.equal(typeof r.body.error.message, "string");
  }
  const after = await relay.status(SRC);
  for (const k of ["os", "queued_rows", "queued_bytes", "enqueued_rows"]) assert.equal(after[k], before[k], k);
});

test("the row limits hold at their edge: exactly 256 rows and a 64 KiB value are accepted", async () => {
  const rows = Array.from({ length: 256 }, (_, i) => put("edge-t", `k${i}`, i));
  rows[0] = { target: "edge-t", puts: [["big", big(65_534)]] }; // 65,536 bytes of JSON
  const r = await relay.api("POST", "/v1/sources/edge-src/enqueue", { rows });
  assert.equal(r.status, 200, JSON.stringify(r.body));
  assert.equal(r.body.seqs.length, 256);
});

test("requests without the right bearer token get 401", async () => {
  const path = `/v1/sources/${SRC}/status`;
  let r = await relay.api("GET", path, undefined, { token: null });
  assert.equal(r.status, 401);
  assert.equal(r.body.error.code, "unauthorized");
  r = await relay.api("GET", path, undefined, { token: "wrong" });
  assert.equal(r.status, 401);
  r = await relay.api("POST", ENQ, { rows: [row()] }, { token: "wrong" });
  assert.equal(r.status, 401);
  r = await relay.api("GET", path);
  assert.equal(r.status, 200);
});
