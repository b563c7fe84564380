// Hostile input against the real Worker: a corpus of bad requests (hand
// written, plus the cases the native fuzz test and issue reports found),
// each of which gets its 4xx with a JSON error naming the problem and
// changes nothing; values that must arrive exactly as sent (hand written
// and seeded-generated), checked byte for byte at the target; and, after
// all of it, no Rust panic in the Worker's log and a relay that still
// answers. Also authentication.

import { test, before, after, afterEach } from "node:test";
import assert from "node:assert/strict";
import { Relay, put } from "./harness.mjs";

let relay;
before(async () => {
  relay = await Relay.start();
});
after(async () => {
  await relay?.stop();
});
// After every test: the relay's own audit of each outbox's tables and each
// target's watermarks against its apply log.
afterEach(async () => {
  assert.deepEqual(await relay.audit(), [], "the relay's own audit");
});

const SRC = "bad-src";
const ENQ = `/v1/sources/${SRC}/enqueue`;
const big = (n) => "x".repeat(n);
const row = (extra) => ({ target: "t", puts: [["k", 1]], ...extra });
const manyKeys = (n) => Array.from({ length: n }, (_, i) => [`k${i}`, i]);
/** An enqueue body putting the raw JSON text `value` at key "k" of target "t". */
const rawRow = (value) => `{"rows":[{"target":"t","puts":[["k",${value}]]}]}`;
const nest = (n) => "[".repeat(n) + "1" + "]".repeat(n);
const nestObj = (n) => '{"a":'.repeat(n) + "1" + "}".repeat(n);

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
  // Values the relay cannot carry exactly: refused, naming the limit.
  ["value nested 130 deep (a reported crash)", "POST", ENQ, rawRow(nest(130)), 400, "value_too_deep", true],
  ["value nested 65 deep", "POST", ENQ, rawRow(nest(65)), 400, "value_too_deep", true],
  ["object nested 65 deep", "POST", ENQ, rawRow(nestObj(65)), 400, "value_too_deep", true],
  ["body nested 100,000 deep", "POST", ENQ, "[".repeat(100_000), 400, "value_too_deep", true],
  ["lone high surrogate", "POST", ENQ, rawRow('"\\ud800"'), 400, "lone_surrogate", true],
  ["lone low surrogate", "POST", ENQ, rawRow('"a\\udc00b"'), 400, "lone_surrogate", true],
  ["reversed surrogate pair", "POST", ENQ, rawRow('"\\ude00\\ud83d"'), 400, "lone_surrogate", true],
  ["surrogate then letter", "POST", ENQ, rawRow('"\\ud83d\\u0041"'), 400, "lone_surrogate", true],
  ["object naming a key twice", "POST", ENQ, rawRow('{"a":1,"a":2}'), 400, "duplicate_object_key", true],
  ["object naming a key twice, escaped", "POST", ENQ, rawRow('{"a":1,"\\u0061":2}'), 400, "duplicate_object_key", true],
  // Not JSON at all, in ways JavaScript or lenient parsers accept.
  ["NaN", "POST", ENQ, rawRow("NaN"), 400, "malformed_json", true],
  ["Infinity", "POST", ENQ, rawRow("Infinity"), 400, "malformed_json", true],
  ["hex number", "POST", ENQ, rawRow("0x10"), 400, "malformed_json", true],
  ["leading zero", "POST", ENQ, rawRow("012"), 400, "malformed_json", true],
  ["bare decimal point", "POST", ENQ, rawRow("1."), 400, "malformed_json", true],
  ["plus sign", "POST", ENQ, rawRow("+1"), 400, "malformed_json", true],
  ["single quotes", "POST", ENQ, rawRow("'x'"), 400, "malformed_json", true],
  ["trailing comma in a value", "POST", ENQ, rawRow("[1,]"), 400, "malformed_json", true],
  ["comment", "POST", ENQ, '{"rows":[/* hi */]}', 400, "malformed_json", true],
  ["raw newline in a string", "POST", ENQ, rawRow('"a\nb"'), 400, "malformed_json", true],
  ["byte-order mark before the body", "POST", ENQ, "\ufeff" + JSON.stringify({ rows: [row()] }), 400, "malformed_json", true],
  ["invalid UTF-8", "POST", ENQ, new Uint8Array([0x7b, 0x22, 0xff, 0xfe, 0x22, 0x7d]), 400, "invalid_utf8", true],
  ["two JSON documents", "POST", ENQ, JSON.stringify({ rows: [row()] }) + JSON.stringify({ rows: [row()] }), 400, "malformed_json", true],
  ["rows is an object", "POST", ENQ, { rows: { 0: row() } }, 400, "invalid_request"],
  ["row is a string", "POST", ENQ, { rows: ["t"] }, 400, "invalid_request"],
  ["target is null", "POST", ENQ, { rows: [row({ target: null })] }, 400, "invalid_request"],
  ["target with a NUL", "POST", ENQ, { rows: [row({ target: "a\u0000b" })] }, 400, "invalid_target"],
  ["target named ..", "POST", ENQ, { rows: [row({ target: ".." })] }, 400, "invalid_target"],
  ["target named .", "POST", ENQ, { rows: [row({ target: "." })] }, 400, "invalid_target"],
  ["target with a non-ASCII letter", "POST", ENQ, { rows: [row({ target: "caf\u00e9" })] }, 400, "invalid_target"],
  ["put key with a lone surrogate", "POST", ENQ, '{"rows":[{"target":"t","puts":[["\\ud800",1]]}]}', 400, "malformed_json", true],
  ["idempotency key empty", "POST", ENQ, { rows: [row()], idempotency_key: "" }, 400, "invalid_idempotency_key"],
  ["idempotency key of 129 bytes", "POST", ENQ, { rows: [row()], idempotency_key: "\u00e9".repeat(64) + "k" }, 400, "invalid_idempotency_key"],
  ["idempotency key a number", "POST", ENQ, { rows: [row()], idempotency_key: 5 }, 400, "invalid_request"],
  ["idempotency key an array", "POST", ENQ, { rows: [row()], idempotency_key: ["k"] }, 400, "invalid_request"],
  // Request lines.
  ["parked page after 2^53+1 (fuzz)", "GET", `/v1/sources/${SRC}/parked/t?after=9007199254740993`, undefined, 400, "invalid_query"],
  ["parked page after -1", "GET", `/v1/sources/${SRC}/parked/t?after=-1`, undefined, 400, "invalid_query"],
  ["parked page limit 501", "GET", `/v1/sources/${SRC}/parked/t?limit=501`, undefined, 400, "invalid_limit"],
  ["parked page limit twice", "GET", `/v1/sources/${SRC}/parked/t?limit=1&limit=2`, undefined, 400, "invalid_query"],
  ["unknown query parameter", "GET", `/v1/sources/${SRC}/status?verbose=1`, undefined, 400, "invalid_query"],
  ["encoded slash in a source name", "GET", "/v1/sources/a%2F..%2Fb/status", undefined, 400, "invalid_name"],
  ["NUL in a source name", "GET", "/v1/sources/a%00b/status", undefined, 400, "invalid_name"],
  ["dot-dot source name", "GET", "/v1/sources/../status", undefined, 404, "no_route"],
  ["encoded dot-dot source name", "GET", "/v1/sources/%2E%2E/status", undefined, 404, "no_route"],
  ["invalid parked target name", "GET", `/v1/sources/${SRC}/parked/a%20b`, undefined, 400, "invalid_target"],
  ["redrive of an invalid target", "POST", `/v1/sources/${SRC}/parked/a%20b/redrive`, undefined, 400, "invalid_target"],
  ["unknown parked action", "POST", `/v1/sources/${SRC}/parked/t/explode`, undefined, 404, "no_route"],
  ["apply through the front door", "POST", "/v1/targets/t/apply", JSON.stringify({ source: SRC, rows: [] }), 404, "no_route", true],
  ["forget an invalid watermark name", "DELETE", "/v1/targets/t/watermarks/a%20b", undefined, 400, "invalid_name"],
  ["keys after of 513 bytes", "GET", `/v1/targets/t/keys?after=${"k".repeat(513)}`, undefined, 400, "invalid_query"],
  ["keys limit not a number", "GET", "/v1/targets/t/keys?limit=ten", undefined, 400, "invalid_limit"],
  ["log without a source", "GET", "/v1/targets/t/log", undefined, 400, "invalid_query"],
  ["delivered-through negative", "GET", `/v1/sources/${SRC}/delivered-through/-1`, undefined, 400, "invalid_seq"],
  ["delivered-through 1e3", "GET", `/v1/sources/${SRC}/delivered-through/1e3`, undefined, 400, "invalid_seq"],
  ["PUT on enqueue", "PUT", ENQ, { rows: [row()] }, 404, "no_route"],
  ["PATCH on status", "PATCH", `/v1/sources/${SRC}/status`, undefined, 404, "no_route"],
  ["trailing path segment", "GET", `/v1/sources/${SRC}/status/extra`, undefined, 404, "no_route"],
  ["fault body nested too deep", "POST", `/v1/sources/${SRC}/faults`, '{"a":[[[[[1]]]]]}', 400, "value_too_deep", true],
  ["fault delay a string", "POST", "/v1/targets/t2/faults", { delay_ms: "5" }, 400, "invalid_request"],
];

test(`a corpus of ${corpus.length} bad requests each get their 4xx and change nothing`, async () => {
  // One row queued behind a failing target, so the outbox is not empty.
  await relay.api("POST", "/v1/targets/t/faults", { reject: true });
  await relay.enqueue(SRC, [put("t", "k", 0)]);
  const before = await relay.status(SRC);
  assert.ok(corpus.length >= 90, `${corpus.length} cases`);
  for (const [name, method, path, body, status, code, raw] of corpus) {
    const r = await relay.api(method, path, body, { raw: !!raw });
    assert.equal(r.status, status, `${name}: ${JSON.stringify(r.body)}`);
    assert.equal(r.body?.error?.code, code, `${name}: ${JSON.stringify(r.body)}`);
    assert.equal(typeof r.body.error.message, "string");
  }
  const after = await relay.status(SRC);
  for (const k of ["last_seq", "queued_rows", "queued_bytes", "enqueued_rows"]) assert.equal(after[k], before[k], k);
  assert.deepEqual(relay.panics(), [], "no Rust panic in the Worker's log");
  assert.equal((await relay.api("GET", "/v1/health")).status, 200, "the relay answers normally right after");
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

// ---- values that must arrive exactly as sent ----------------------------------

/** Each value's JSON text as sent, and the canonical text the target must hold. */
const exact = [
  ["a number past f64 (a reported crash)", "1e400", "1e400"],
  ["an integer past 2^53 (a reported crash)", "123456789012345678901234567890", "123456789012345678901234567890"],
  ["2^53 + 1", "9007199254740993", "9007199254740993"],
  ["a decimal past f64 precision", "0.1000000000000000055511151231257827", "0.1000000000000000055511151231257827"],
  ["trailing zeros", "2.50", "2.50"],
  ["negative zero", "-0", "-0"],
  ["an upper-case exponent with a sign", "1E+2", "1E+2"],
  ["a tiny exponent", "-1e-400", "-1e-400"],
  ["an escaped NUL", '"a\\u0000b"', '"a\\u0000b"'],
  ["escapes spelled differently", '"\\u0041\\/\\u00e9"', '"A/\u00e9"'],
  ["a surrogate pair", '"\\ud83d\\ude00"', '"\u{1F600}"'],
  ["line and paragraph separators", '"\u2028\u2029"', '"\u2028\u2029"'],
  ["control characters", '"\\u0001\\u001f\\b"', '"\\u0001\\u001f\\b"'],
  ["objects sorted, whitespace dropped", '{ "b" : [ 1 , 2 ] ,\n "a" : { "d" : null , "c" : true } }', '{"a":{"c":true,"d":null},"b":[1,2]}'],
  ["keys sorted by UTF-8 bytes", '{"\uffff":1,"\u{1F600}":2,"z":3}', '{"z":3,"\uffff":1,"\u{1F600}":2}'],
  ["nesting at the limit (64)", "[".repeat(64) + "]".repeat(64), "[".repeat(64) + "]".repeat(64)],
];

/** A seeded generator (mulberry32) so a failing run replays. */
function rng(seed) {
  return () => {
    seed |= 0;
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** A random value already in canonical form (so it must come back unchanged). */
function canonicalValue(r, depth = 0) {
  const pick = (xs) => xs[Math.floor(r() * xs.length)];
  const digits = (n) => Array.from({ length: n }, () => Math.floor(r() * 10)).join("");
  const str = () => {
    const cps = Array.from({ length: Math.floor(r() * 8) }, () =>
      pick([0x0, 0x1f, 0x22, 0x5c, 0x41, 0x7f, 0xe9, 0x2028, 0xfeff, 0xffff, 0x1f600, 0x10ffff, 0x20 + Math.floor(r() * 0x5e)]),
    );
    return JSON.stringify(String.fromCodePoint(...cps));
  };
  const kind = depth >= 4 ? Math.floor(r() * 4) : Math.floor(r() * 6);
  switch (kind) {
    case 0: return pick(["null", "true", "false"]);
    case 1: return pick(["-", ""]) + (1 + Math.floor(r() * 9)) + digits(Math.floor(r() * 40));
    case 2: return `${pick(["-", ""])}${Math.floor(r() * 10)}.${digits(1 + Math.floor(r() * 30))}${pick(["", "e-7", "E+400", "e1234"])}`;
    case 3: return str();
    case 4: return `[${Array.from({ length: Math.floor(r() * 4) }, () => canonicalValue(r, depth + 1)).join(",")}]`;
    default: {
      const keys = [...new Set(Array.from({ length: Math.floor(r() * 4) }, () => JSON.parse(str())))];
      keys.sort((a, b) => Buffer.compare(Buffer.from(a, "utf8"), Buffer.from(b, "utf8")));
      return `{${keys.map((k) => `${JSON.stringify(k)}:${canonicalValue(r, depth + 1)}`).join(",")}}`;
    }
  }
}

/** The raw JSON text of the value at `start` in `text` (strings and brackets aware). */
function scanValue(text, start) {
  let depth = 0;
  let inString = false;
  for (let i = start; i < text.length; i++) {
    const c = text[i];
    if (inString) {
      if (c === "\\") i++;
      else if (c === '"') inString = false;
      if (!inString && depth === 0) return text.slice(start, i + 1);
      continue;
    }
    if (c === '"') inString = true;
    else if (c === "[" || c === "{") depth++;
    else if (c === "]" || c === "}") {
      if (depth === 0) return text.slice(start, i);
      depth--;
      if (depth === 0) return text.slice(start, i + 1);
    } else if (c === "," && depth === 0) return text.slice(start, i);
  }
  return text.slice(start);
}

test("values arrive byte for byte in their canonical form, hand-written and generated", async () => {
  const seed = Number(process.env.RELAY_E2E_SEED ?? Date.now() % 2 ** 31);
  console.log(`hostile: generated values from seed ${seed} (replay with RELAY_E2E_SEED=${seed})`);
  const r = rng(seed);
  const cases = [...exact];
  for (let i = 0; i < 30; i++) {
    const v = canonicalValue(r);
    cases.push([`generated #${i}`, v, v]);
  }
  assert.ok(cases.length + corpus.length > 100, "the hostile corpus has more than 100 cases");
  // One row per value, each to its own key of one target, in one request.
  const body = `{"rows":[${cases.map(([, sent], i) => `{"target":"exact-t","puts":[["v${String(i).padStart(3, "0")}",${sent}]]}`).join(",")}]}`;
  const res = await relay.api("POST", "/v1/sources/exact-src/enqueue", body, { raw: true });
  assert.equal(res.status, 200, res.text);
  await relay.drained("exact-src");
  const keys = await relay.api("GET", "/v1/targets/exact-t/keys");
  assert.equal(keys.status, 200);
  for (const [i, [name, , want]] of cases.entries()) {
    const marker = `{"key":"v${String(i).padStart(3, "0")}","value":`;
    const at = keys.text.indexOf(marker);
    assert.ok(at >= 0, `${name}: key missing`);
    assert.equal(scanValue(keys.text, at + marker.length), want, `${name} changed on the way`);
  }
  assert.deepEqual(relay.panics(), []);
});

test("keys with a NUL, astral characters and 512 bytes arrive as sent", async () => {
  const keys = ["a\u0000b", "\u{1F600}", "k".repeat(512), "\u2028", "é".repeat(256)];
  await relay.enqueue("exact-keys", [{ target: "exact-k", puts: keys.map((k, i) => [k, i]) }]);
  await relay.drained("exact-keys");
  const got = (await relay.api("GET", "/v1/targets/exact-k/keys")).body.keys;
  assert.deepEqual(got.map((k) => k.key).sort(), [...keys].sort());
  for (const [i, k] of keys.entries()) assert.equal(got.find((g) => g.key === k).value, i);
});
