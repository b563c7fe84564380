// The npm package's boundary, in workerd (tests/e2e/package_boundary): a
// JavaScript value JSON cannot carry exactly is refused with a RelayError
// naming its path and writes nothing, whichever enqueue method gets it,
// while every value JSON does carry arrives as sent (a seeded property test
// over generated values); a `writes`, `onApply` or `onPut` that returns a
// promise is refused, writes nothing and advances nothing, and its rejection is never
// left unhandled; the types refuse such callbacks under tsc --strict.

import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ROOT, startWrangler, until } from "./harness.mjs";

const DIR = join(ROOT, "tests", "e2e", "package_boundary");
/** The outbox bound the Worker runs with (`RELAY_MAX_QUEUED_ROWS`). */
const FULL_AT = 300;

let app;
before(async () => {
  app = await startWrangler({
    configs: [join(DIR, "wrangler.toml")],
    persistDir: mkdtempSync(join(tmpdir(), "relay-boundary-")),
    ready: "/health",
    // Room for every generated row, and a bound the outbox_full test reaches.
    vars: { RELAY_MAX_QUEUED_ROWS: String(FULL_AT) },
  });
});
after(async () => {
  await app?.stop();
});

const get = (path) => app.ok(path);

/** Sends enqueue attempts to writer `name`; answers one verdict each. */
async function attempt(name, attempts) {
  const r = await app.api("POST", `/writer/${name}/attempt`, attempts);
  assert.equal(r.status, 200, r.text);
  assert.equal(r.body.length, attempts.length);
  return r.body;
}

/** A stand-in for a value JSON cannot describe (see `revive` in the Worker). */
const js = (kind, v) => (v === undefined ? { $: kind } : { $: kind, v });

/** `path` extended by `key`, as the package names members. */
const member = (path, key) => (/^[A-Za-z_$][\w$]*$/.test(key) ? `${path}.${key}` : `${path}[${JSON.stringify(key)}]`);

/**
 * Every kind of value JSON cannot carry exactly, as the Worker builds it:
 * where inside it the package must point (`at`) and what it must call it.
 */
const INEXACT = {
  NaN: { what: "NaN" },
  Infinity: { what: "Infinity" },
  "-Infinity": { what: "-Infinity" },
  undefined: { what: "undefined" },
  function: { what: "a function" },
  symbol: { what: "a symbol" },
  BigInt: { what: "a BigInt" },
  Map: { what: "an instance of Map" },
  Set: { what: "an instance of Set" },
  Date: { what: "an instance of Date" },
  class: { what: "an instance of Point" },
  toJSON: { at: ".toJSON", what: "a function" },
  sparse: { at: "[1]", what: "a hole in a sparse array" },
  named: { what: "an array with named members" },
  symbolKey: { what: "an object with a symbol-keyed or non-enumerable property" },
  hidden: { what: "an object with a symbol-keyed or non-enumerable property" },
  cycle: { at: ".self", what: "a cycle (it contains itself)" },
};

test("each kind of value JSON cannot carry is refused with its path, through both enqueue methods, and writes nothing", async () => {
  const kinds = Object.keys(INEXACT);
  const attempts = [];
  for (const [i, kind] of kinds.entries()) {
    // The second put's value holds the kind at `.when`, inside a plain object.
    const rows = [{ target: "kinds", puts: [["fine", 1], ["k", { when: js(kind), also: [1, "two"] }]] }];
    attempts.push({ rows, sync: i % 2 === 1, writes: i % 2 === 0 });
  }
  // Outside a value: a row's field, a delete, a row, the rows, the key.
  attempts.push({ rows: [{ target: "kinds", puts: [["k", 1]], delayMs: js("NaN") }] });
  attempts.push({ rows: [{ target: "kinds", deletes: ["gone", js("undefined")] }], sync: true });
  attempts.push({ rows: [{ target: "kinds", puts: [["k", 1]] }, js("Date")] });
  attempts.push({ rows: js("Map") });
  attempts.push({ rows: [{ target: "kinds", puts: [["k", 1]] }], key: js("NaN"), writes: true });
  // Refusals of the engine itself (in the wasm) are RelayErrors by instanceof too.
  attempts.push({ rows: [{ target: "not a name!", puts: [["k", 1]] }], writes: true });
  attempts.push({ rows: [{ target: "kinds", puts: [["k", "\ud800"]] }], sync: true });
  const verdicts = await attempt("kinds", attempts);

  for (const [i, kind] of kinds.entries()) {
    const v = verdicts[i];
    const { at = "", what } = INEXACT[kind];
    assert.equal(v.ok, false, `${kind} was accepted`);
    assert.equal(v.instance, true, `${kind}: a RelayError by instanceof (${v.name}: ${v.message})`);
    assert.equal(v.name, "RelayError");
    assert.equal(v.code, "invalid_value", `${kind}: ${v.message}`);
    assert.equal(v.status, 400);
    assert.equal(v.message, `invalid_value: rows[0].puts[1][1].when${at} is ${what}, which JSON cannot carry exactly`);
  }
  const rest = verdicts.slice(kinds.length);
  assert.match(rest[0].message, /^invalid_value: rows\[0\]\.delayMs is NaN/);
  assert.match(rest[1].message, /^invalid_value: rows\[0\]\.deletes\[1\] is undefined/);
  assert.match(rest[2].message, /^invalid_value: rows\[1\] is an instance of Date/);
  assert.deepEqual([rest[3].code, rest[3].instance], ["invalid_request", true], rest[3].message);
  assert.deepEqual([rest[4].code, rest[4].instance], ["invalid_idempotency_key", true], rest[4].message);
  assert.deepEqual([rest[5].code, rest[5].instance, rest[5].name], ["invalid_target", true, "RelayError"], rest[5].message);
  assert.deepEqual([rest[6].code, rest[6].instance, rest[6].name], ["lone_surrogate", true, "RelayError"], rest[6].message);
  for (const v of rest) assert.equal(v.status, 400, v.message);

  const status = await get("/writer/kinds/relay/status");
  assert.equal(status.last_seq, 0, "no sequence taken");
  assert.equal(status.enqueued_rows, 0);
  assert.deepEqual(await get("/writer/kinds/mine"), [], "no writes callback ran");
});

test("values JSON carries exactly are accepted and arrive as sent, at their depth limit too", async () => {
  const deep = (n) => {
    let v = 1;
    for (let d = 0; d < n; d++) v = [v];
    return v;
  };
  const values = [
    js("bare", { a: 1, ["__proto__"]: [2] }),
    deep(64),
    js("-0"),
    { toJSON: 1, constructor: "c", "": "", "with space": ["é😀", "\u0000", "\u2028"] },
  ];
  // A row's optional field left undefined is a field left out.
  const rows = values.map((value, i) => ({ target: "exact", puts: [[`v${i}`, value]], delayMs: js("undefined") }));
  const [ok, tooDeep] = await attempt("exact", [{ rows }, { rows: [{ target: "exact", puts: [["k", { a: deep(65) }]] }] }]);
  assert.equal(ok.ok, true, ok.message);
  assert.equal(tooDeep.code, "value_too_deep", tooDeep.message);
  // The 65th array is the one too deep: 63 arrays inside the value's first one.
  assert.ok(tooDeep.message.startsWith(`value_too_deep: rows[0].puts[0][1].a${"[0]".repeat(63)} nests`), tooDeep.message);
  await until(async () => (await get("/reader/exact/relay/keys")).keys.length === values.length, "the values to arrive");
  const keys = (await get("/reader/exact/relay/keys")).keys;
  // -0 arrives as 0: JSON has one zero.
  const expected = [{ a: 1, ["__proto__"]: [2] }, deep(64), 0, values[3]];
  for (const [i, value] of expected.entries()) {
    assert.deepEqual(keys.find((k) => k.key === `v${i}`)?.value, value, `v${i}`);
  }
});

/** A small seeded generator (mulberry32), so a failure can be replayed. */
function rng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const NUMBERS = [0, 1, -1, 42, 1.5, -0.25, 0.1, 1 / 3, 1e21, 1e-7, 5e-324, Number.MAX_VALUE, -Number.MAX_VALUE, 2 ** 53, 2 ** 53 + 2, 123456789.125];
const STRINGS = ["", "a", "é😀", "\u0000", "line\nbreak", 'quote" back\\slash', "\u2028\u2029", "𝌆", "x".repeat(300), "$"];
const KEYS = ["a", "b", "key_1", "$x", "with space", "__proto__", "é", "1", "0", "", "constructor", "toJSON", "a.b", "hasOwnProperty"];

/** `obj[key] = v` as an own property, even for `__proto__`. */
const own = (obj, key, v) => Object.defineProperty(obj, key, { value: v, enumerable: true, writable: true, configurable: true });

/**
 * A generated value: `wire` is what the Worker revives, `expect` what must
 * arrive (plain JSON), and `bad` where the one value JSON cannot carry sits
 * and what it is (`null` when there is none). With `inexact`, exactly one
 * such value is placed somewhere inside.
 */
function generate(random, depth, inexact) {
  const below = (n) => Math.floor(random() * n);
  const pick = (xs) => xs[below(xs.length)];
  if (inexact && (depth >= 3 || random() < 0.3)) {
    const kind = pick(Object.keys(INEXACT));
    return { wire: js(kind), expect: undefined, bad: { path: INEXACT[kind].at ?? "", what: INEXACT[kind].what } };
  }
  const container = inexact || (depth < 3 && random() < 0.45);
  if (!container) {
    const value = pick([() => null, () => random() < 0.5, () => pick(NUMBERS), () => pick(STRINGS)])();
    return { wire: value, expect: value, bad: null };
  }
  const n = inexact ? 1 + below(3) : below(4);
  const badAt = inexact ? below(n) : -1;
  const children = Array.from({ length: n }, (_, i) => generate(random, depth + 1, i === badAt));
  if (random() < 0.5) {
    const bad = children[badAt]?.bad;
    return {
      wire: children.map((c) => c.wire),
      expect: children.map((c) => c.expect),
      bad: bad ? { path: `[${badAt}]${bad.path}`, what: bad.what } : null,
    };
  }
  const keys = [...new Set(Array.from({ length: n }, () => pick(KEYS)))];
  while (keys.length < n) keys.push(`k${keys.length}`);
  const wire = {};
  const expect = {};
  let bad = null;
  for (const [i, key] of keys.entries()) {
    own(wire, key, children[i].wire);
    own(expect, key, children[i].expect);
    if (i === badAt) bad = { path: member("", key) + children[i].bad.path, what: children[i].bad.what };
  }
  // A plain object with a null prototype is a plain object too.
  const bare = random() < 0.25;
  return { wire: bare ? js("bare", wire) : wire, expect, bad };
}

test("generated values: exactly those JSON cannot carry are refused, naming their path; the rest arrive exactly (seeded)", async () => {
  const seed = Number(process.env.RELAY_E2E_SEED ?? Date.now() % 2 ** 31);
  console.log(`package boundary values: seed ${seed} (replay with RELAY_E2E_SEED=${seed})`);
  const random = rng(seed);
  const TARGETS = 6;
  const cases = Array.from({ length: 240 }, (_, i) => ({ i, ...generate(random, 0, random() < 0.5), sync: random() < 0.5, writes: random() < 0.3 }));
  const attempts = cases.map((c) => ({
    rows: [{ target: `gen-${c.i % TARGETS}`, puts: [["first", 0], [`c${c.i}`, c.wire]] }],
    sync: c.sync,
    writes: !c.sync && c.writes,
  }));
  const verdicts = await attempt("gen", attempts);
  let accepted = 0;
  let writes = 0;
  const seen = new Set();
  for (const [i, c] of cases.entries()) {
    const v = verdicts[i];
    const how = `case ${i} (${c.sync ? "enqueueSync" : "enqueue"}, seed ${seed}): ${JSON.stringify(c.wire)}`;
    if (c.bad) {
      assert.equal(v.ok, false, `${how} was accepted`);
      assert.equal(v.instance, true, `${how}: ${v.name}: ${v.message}`);
      assert.equal(v.message, `invalid_value: rows[0].puts[1][1]${c.bad.path} is ${c.bad.what}, which JSON cannot carry exactly`, how);
      seen.add(c.bad.what);
    } else {
      assert.equal(v.ok, true, `${how} was refused: ${v.message}`);
      accepted += 1;
      if (attempts[i].writes) writes += 1;
    }
  }
  console.log(`package boundary values: ${accepted} of ${cases.length} accepted, ${seen.size} kinds refused`);
  assert.ok(accepted >= 60 && cases.length - accepted >= 60, `both verdicts occur: ${accepted} of ${cases.length} accepted`);
  assert.ok(seen.size >= 12, `most kinds were generated: ${[...seen].join(", ")}`);

  const status = await get("/writer/gen/relay/status");
  assert.equal(status.enqueued_rows, accepted, "only the accepted rows were written");
  assert.equal((await get("/writer/gen/mine")).length, writes, "a refused enqueue ran no writes");
  await until(async () => (await get(`/writer/gen/relay/delivered-through/${accepted}`)).delivered === true, "the accepted rows to arrive");
  const stored = new Map();
  for (let t = 0; t < TARGETS; t++) {
    for (const { key, value } of (await get(`/reader/gen-${t}/relay/keys?limit=1000`)).keys) stored.set(key, value);
  }
  for (const c of cases) {
    if (c.bad) assert.equal(stored.has(`c${c.i}`), false, `case ${c.i} was refused, yet stored`);
    else assert.deepEqual(stored.get(`c${c.i}`), c.expect, `case ${c.i} arrived changed (seed ${seed})`);
  }
  assert.deepEqual(app.panics(), []);
});

test("an async writes is refused with async_callback: neither its writes nor the rows are written, and its rejection is handled", async () => {
  for (const reject of [false, true]) {
    const name = reject ? "async-writes-rejects" : "async-writes";
    const r = await app.api("POST", `/writer/${name}/async-writes?target=t-async${reject ? "&reject" : ""}`);
    assert.equal(r.status, 200, r.text);
    const v = r.body;
    assert.equal(v.ok, false, "the enqueue was accepted");
    assert.equal(v.instance, true, `${v.name}: ${v.message}`);
    assert.equal(v.code, "async_callback", v.message);
    assert.equal(v.status, 400);
    assert.match(v.message, /writes returned a promise/);
    assert.deepEqual(await get(`/writer/${name}/mine`), [], "the write made before any await was rolled back");
    const status = await get(`/writer/${name}/relay/status`);
    assert.equal(status.last_seq, 0, "no row enqueued");
    assert.equal(status.enqueued_rows, 0);
  }
  await new Promise((resolve) => setTimeout(resolve, 500));
  assert.doesNotMatch(app.output, /unhandled rejection/, "no rejection left unhandled");
});

test("an async onApply is refused: nothing applied, no watermark moved, the row stays owed, and the log says why", async () => {
  const rows = [
    { target: "async-t1", puts: [["k", 1]] },
    { target: "async-t2", puts: [["boom", 1]] },
  ];
  const [v] = await attempt("async-src", [{ rows }]);
  assert.equal(v.ok, true, v.message);
  await until(async () => {
    const page = await get("/writer/async-src/relay/parked");
    return ["async-t1", "async-t2"].every((t) => page.targets.some((p) => p.target === t && /async_callback/.test(p.last_error ?? "")));
  }, "both targets failing with async_callback at the source", 60_000);
  for (const target of ["async-t1", "async-t2"]) {
    assert.deepEqual((await get(`/reader/${target}/relay/keys`)).keys, [], `${target}: no key applied`);
    assert.deepEqual((await get(`/reader/${target}/relay/watermarks`)).watermarks, [], `${target}: no watermark`);
    assert.deepEqual(await get(`/reader/${target}/seen`), [], `${target}: the hook's own write rolled back`);
  }
  const status = await get("/writer/async-src/relay/status");
  assert.equal(status.delivered_rows, 0, "nothing counted as delivered");
  assert.equal(status.queued_rows + status.parked_rows, 2, "both rows still owed");
  assert.equal((await get("/writer/async-src/relay/delivered-through/1")).delivered, false);
  const lines = app.output.split("\n").filter((l) => l.includes('"event":"relay_async_callback"'));
  assert.ok(lines.some((l) => l.includes('"source":"async-src"') && l.includes("onApply returned a promise")), app.output.slice(-2000));
  assert.doesNotMatch(app.output, /unhandled rejection: the async hook failed/, "the rejecting hook's rejection was handled");
  assert.deepEqual(app.panics(), []);
});

test("onPut and onDelete hear each key of each new row once, after onApply, in the order the target applies them", async () => {
  const [v] = await attempt("keys-src", [
    {
      rows: [
        { target: "keys-t", puts: [["a", 1], ["b", { in_key: [2] }]], deletes: ["c"] },
        { target: "keys-t", puts: [["c", 3]], deletes: ["a"] },
      ],
    },
  ]);
  assert.equal(v.ok, true, v.message);
  const [first, second] = v.seqs;
  await until(async () => (await get("/reader/keys-t/keyed")).length >= 6, "the hooks to run");
  const { source_id } = await get("/writer/keys-src/relay/status");
  const call = (callback, key, value, seq) => ({ callback, key, value, source: "keys-src", source_id, seq });
  const expected = [
    call("apply", null, "2", first),
    call("put", "a", "1", first),
    call("put", "b", '{"in_key":[2]}', first),
    call("delete", "c", null, first),
    call("put", "c", "3", second),
    call("delete", "a", null, second),
  ];
  assert.deepEqual(await get("/reader/keys-t/keyed"), expected);

  // A put hook that throws rolls the batch back, its own write with it; the
  // source retries it, and the rows before it are not heard of again.
  const [boom] = await attempt("keys-src", [{ rows: [{ target: "keys-t", puts: [["boom", 1]] }] }]);
  assert.equal(boom.ok, true, boom.message);
  await until(async () => {
    const page = await get("/writer/keys-src/relay/parked");
    return page.targets.some((t) => t.target === "keys-t" && /the put hook refused boom/.test(t.last_error ?? ""));
  }, "the refusal reported at the source", 60_000);
  assert.deepEqual(await get("/reader/keys-t/keyed"), expected, "nothing of the refused batch kept, nothing heard twice");
  assert.equal((await get("/reader/keys-t/relay/keys")).keys.some((k) => k.key === "boom"), false, "boom not applied");
});

test("an async onPut is refused as an async onApply is, and the log names onPut", async () => {
  const [v] = await attempt("async-put-src", [{ rows: [{ target: "async-put-t", puts: [["k", 1]] }] }]);
  assert.equal(v.ok, true, v.message);
  await until(async () => {
    const page = await get("/writer/async-put-src/relay/parked");
    return page.targets.some((t) => t.target === "async-put-t" && /async_callback/.test(t.last_error ?? ""));
  }, "the target failing with async_callback at the source", 60_000);
  assert.deepEqual((await get("/reader/async-put-t/relay/keys")).keys, [], "no key applied");
  assert.deepEqual(await get("/reader/async-put-t/keyed"), [], "the hook's own write rolled back");
  const lines = app.output.split("\n").filter((l) => l.includes('"event":"relay_async_callback"'));
  assert.ok(
    lines.some((l) => l.includes('"callback":"onPut"') && l.includes('"source":"async-put-src"') && l.includes("onPut returned a promise")),
    app.output.slice(-2000),
  );
  assert.deepEqual(app.panics(), []);
});

test("a full outbox rejects with a RelayError carrying its retry delay", async () => {
  // An async onApply never applies, so these rows stay owed.
  const batch = (n) => ({ rows: Array.from({ length: n }, (_, i) => ({ target: "async-full", puts: [[`k${i}`, i]] })) });
  const [a, b, full, fullSync] = await attempt("full-src", [batch(150), batch(150), batch(1), { ...batch(1), sync: true }]);
  assert.equal(a.ok && b.ok, true, `${a.message} ${b.message}`);
  for (const v of [full, fullSync]) {
    assert.deepEqual([v.ok, v.instance, v.code, v.status], [false, true, "outbox_full", 429], v.message);
    assert.ok(v.retryAfterS > 0, `retryAfterS ${v.retryAfterS}`);
  }
});

test("past Workers Free's daily rows written, both enqueues reject with daily_write_limit until midnight UTC and write nothing", async () => {
  // The Worker makes sql.exec throw the platform's own error for this attempt:
  // the package's SQL glue must recognise it from the message.
  const row = (i) => ({ rows: [{ target: "wl-t", puts: [[`k${i}`, i]] }] });
  const [first, refused, refusedSync, after] = await attempt("wl-src", [
    row(1),
    { ...row(2), writes: true, refuseWrites: true },
    { ...row(3), sync: true, refuseWrites: true },
    row(4),
  ]);
  assert.equal(first.ok, true, first.message);
  const midnight = Math.floor(Date.now() / 86_400_000 + 1) * 86_400_000;
  for (const v of [refused, refusedSync]) {
    assert.deepEqual([v.ok, v.instance, v.code, v.status], [false, true, "daily_write_limit", 503], v.message);
    assert.ok(v.retryAfterS > 0 && v.retryAfterS <= 86_400, `retryAfterS ${v.retryAfterS}`);
    assert.ok(Date.now() + v.retryAfterS * 1000 >= midnight - 2_000, `retryAfterS ${v.retryAfterS} reaches 00:00 UTC`);
  }
  assert.deepEqual(after.seqs, [first.seqs[0] + 1], "the refused enqueues took no sequence");
  assert.deepEqual(await get("/writer/wl-src/mine"), [], "the caller's own writes rolled back with the rows");
  await until(async () => (await get("/writer/wl-src/relay/status")).delivered_rows === 2, "both accepted rows delivered");
});

/** Each bad value of each of the relay's variables: construction refuses it, naming the variable. */
const BAD_VARS = {
  RELAY_PLAN: "pro",
  RELAY_TARGETS_PER_FIRE: "many",
  RELAY_FIRES_PER_ALARM: "0",
  RELAY_CALLS_PER_TARGET: "-1",
  RELAY_ROWS_PER_FIRE: "0",
  RELAY_BATCH_ROWS: "0",
  RELAY_SUBREQUESTS_PER_ALARM: "100000",
  RELAY_WORK_PER_ALARM: "x",
  RELAY_MAX_IN_FLIGHT: "0",
  RELAY_CALL_TIMEOUT_MS: "1",
  RELAY_COALESCE_MS: "99999999",
  RELAY_ALARM_LOG: "loud",
  RELAY_PARK_AFTER_FAILED_CYCLES: "0",
  RELAY_MAX_QUEUED_ROWS: "0",
  RELAY_MAX_QUEUED_BYTES: "1",
  RELAY_DEDUP_HORIZON_MS: "1",
  RELAY_DISCARD_HORIZON_MS: "1",
  RELAY_PARTITIONS: "[1]",
};

/** A RelaySource built on writer `name`'s object with `targets` and `vars`: its verdict. */
async function construct(name, targets, vars = {}, alarm = undefined) {
  const r = await app.api("POST", `/writer/${name}/construct`, { targets, vars, alarm });
  assert.equal(r.status, 200, r.text);
  return r.body;
}

test("a misspelt or wrong-kind targets binding is refused at construction, naming it and the bindings env has", async () => {
  assert.deepEqual(await construct("config", "READERS"), { ok: true }, "the right binding is taken");
  const misspelt = await construct("config", "READERZ");
  assert.deepEqual([misspelt.ok, misspelt.instance, misspelt.code, misspelt.status], [false, true, "bad_configuration", 500]);
  assert.equal(
    misspelt.message,
    'bad_configuration: the targets binding "READERZ" is not a Durable Object namespace (env has no binding of that name); ' +
      "env's Durable Object bindings: WRITERS, READERS",
  );
  const variable = await construct("config", "RELAY_PLAN", { RELAY_PLAN: "free" });
  assert.equal(variable.code, "bad_configuration");
  assert.match(variable.message, /"RELAY_PLAN" is not a Durable Object namespace \(env holds a string under that name/);
});

test("an alarm option that is not a store with get, set and delete is refused at construction, naming it", async () => {
  assert.deepEqual(await construct("config", "READERS", {}, "whole"), { ok: true }, "a whole store is taken");
  const shape = "it must be an object with get(), set(ms) and delete() methods, like ctx.storage's getAlarm, setAlarm and deleteAlarm";
  const noSet = await construct("config", "READERS", {}, "no-set");
  assert.deepEqual([noSet.ok, noSet.instance, noSet.code, noSet.status], [false, true, "bad_configuration", 500]);
  assert.equal(noSet.message, `bad_configuration: alarm has set = undefined: ${shape}`);
  const number = await construct("config", "READERS", {}, "number");
  assert.equal(number.message, `bad_configuration: alarm is number: ${shape}`);
});

test("each relay variable with a bad value is refused at construction, naming the variable", async () => {
  for (const [name, value] of Object.entries(BAD_VARS)) {
    const v = await construct("config", "READERS", { [name]: value });
    assert.equal(v.ok, false, `${name}=${value} was accepted`);
    assert.equal(v.code, "bad_configuration", `${name}: ${v.message}`);
    assert.equal(v.instance, true);
    assert.ok(v.message.startsWith(`bad_configuration: ${name}: `), `${name}: ${v.message}`);
  }
});

/** Every key of `value` that is not camelCase, by its path, skipping the caller's data under `puts` and the target-keyed maps. */
function snakeKeys(value, path = "") {
  if (Array.isArray(value)) return value.flatMap((v, i) => snakeKeys(v, `${path}[${i}]`));
  if (value === null || typeof value !== "object") return [];
  return Object.entries(value).flatMap(([key, v]) => [
    ...(key.includes("_") ? [`${path}.${key}`] : []),
    ...(["puts", "parkedTargets", "failingTargets"].includes(key) ? [] : snakeKeys(v, `${path}.${key}`)),
  ]);
}

test("everything the package returns or hands a callback is camelCase; the caller's keys and the wire stay as they are", async () => {
  const shapes = await get("/writer/camel/shapes?target=snake_target&key=snake_key");
  // Every field the wire has, under its camelCase name: none is left snake_case, none is dropped.
  assert.deepEqual(snakeKeys(shapes), []);
  const wire = await get("/writer/camel/relay/status");
  const camel = (k) => k.replace(/_([a-z0-9])/g, (_, c) => c.toUpperCase());
  assert.deepEqual(Object.keys(shapes.status).sort(), Object.keys(wire).map(camel).sort(), "each wire field has its camelCase counterpart");
  assert.deepEqual(Object.keys(shapes.status.config.settings).sort(), Object.keys(wire.config.settings).map(camel).sort());
  assert.deepEqual(Object.keys(shapes.alarm).sort(), Object.keys(wire.last_alarm).map(camel).sort());
  assert.equal(typeof shapes.enqueued.lastSeq, "number");
  assert.equal(typeof shapes.enqueued.queuedRows, "number");
  assert.deepEqual(shapes.written, shapes.enqueued, "writes got the reply the caller did");
  assert.equal(shapes.enqueued.dueMs.length, 1, "a delayMs row was delayed");
  assert.equal(typeof shapes.enqueuedSync.atMs, "number");
  assert.equal(typeof shapes.alarm.rowsDelivered, "number");
  assert.equal(typeof shapes.rearmed.queuedRows, "number");
  assert.equal(typeof shapes.discarded.wasParked, "boolean");
  assert.ok("next" in shapes.targets && "next" in shapes.rows);
  // The wire (the object's fetch protocol) stays snake_case.
  assert.equal(typeof wire.queued_rows, "number");

  // onApply gets camelCase rows with the caller's keys and values as put.
  const r = await app.api("POST", "/writer/camel/attempt", [
    { rows: [{ target: "camel_reader", puts: [["a_key", { inner_key: [1, { deep_key: 2 }] }]] }] },
  ]);
  assert.equal(r.status, 200, r.text);
  await until(async () => (await get("/reader/camel_reader/applied")).length > 0, "the apply");
  const [batch] = await get("/reader/camel_reader/applied");
  assert.deepEqual(batch, [{ seq: r.body[0].seqs[0], effects: { puts: [["a_key", { inner_key: [1, { deep_key: 2 }] }]], deletes: [] } }]);

  // ...and the source's name and object id, as the target keeps its watermark.
  const { source_id } = await get("/writer/camel/relay/status");
  assert.match(source_id, /^[0-9a-f]{64}$/);
  assert.deepEqual(await get("/reader/camel_reader/seen"), [{ source: "camel", source_id, seq: r.body[0].seqs[0] }]);
});

test("a row field in the wire's snake_case is refused: the package takes one convention", async () => {
  const [v] = await attempt("snake", [{ rows: [{ target: "t", puts: [["k", 1]], delay_ms: 5 }] }]);
  assert.deepEqual([v.ok, v.code, v.instance], [false, "invalid_request", true]);
  assert.equal(v.message, "invalid_request: rows[0].delay_ms: the package takes delayMs");
  assert.equal((await get("/writer/snake/relay/status")).enqueued_rows, 0);
});

test("parkedTargets refuses a bad `after` as the HTTP route does (invalid_query), and RPC carries the code", async () => {
  const http = await app.api("GET", "/writer/cursor/relay/parked?after=bad%20name");
  assert.equal(http.status, 400, http.text);
  assert.equal(http.body.error.code, "invalid_query");
  // Thrown inside the object's RPC method, caught by the caller on the other side of RPC.
  const rpc = await get("/writer/cursor/parked-after?after=bad%20name");
  assert.equal(rpc.ok, false);
  assert.equal(rpc.code, "invalid_query", JSON.stringify(rpc));
  assert.match(rpc.message, /^invalid_query: "bad name"/);
  console.log(`over RPC a RelayError arrives as: ${JSON.stringify(rpc)}`);
  assert.deepEqual(await get("/writer/cursor/parked-after?after=fine"), { ok: true, page: { targets: [], next: null } });
});

test("parkedRows refuses a bad `after` as the HTTP route does (invalid_query)", async () => {
  const http = await app.api("GET", "/writer/cursor/relay/parked/t?after=-1");
  assert.equal(http.status, 400, http.text);
  assert.equal(http.body.error.code, "invalid_query");
  for (const after of [-1, 1.5]) {
    const rpc = await get(`/writer/cursor/parked-rows-after?after=${after}`);
    assert.deepEqual([rpc.ok, rpc.code, rpc.status], [false, "invalid_query", 400], JSON.stringify(rpc));
  }
  assert.equal((await get("/writer/cursor/parked-rows-after?after=0")).ok, true);
});

test("queuedRows pages a target's queued rows as GET /queued does, and refuses a bad target alike", async () => {
  const row = (v) => ({ target: "q-late", puts: [["k", v]], delay_ms: 3_600_000 });
  const sent = await app.api("POST", "/writer/queued-src/relay/enqueue", { rows: [row(1), row(2), row(3)] });
  assert.equal(sent.status, 200, sent.text);
  const http = await app.api("GET", "/writer/queued-src/relay/queued?target=q-late&after=0&limit=2");
  assert.equal(http.status, 200, http.text);
  assert.deepEqual(http.body.rows.map((r) => r.effects.puts[0][1]), [1, 2]);
  assert.equal(http.body.next, sent.body.seqs[1]);
  assert.equal(http.body.source, "queued-src");
  const rpc = await get(`/writer/queued-src/queued?target=q-late&after=${http.body.next}`);
  assert.equal(rpc.ok, true, JSON.stringify(rpc));
  assert.deepEqual(rpc.page.rows.map((r) => [r.seq, r.effects.puts[0][1]]), [[sent.body.seqs[2], 3]]);
  assert.ok(rpc.page.rows[0].dueMs >= rpc.page.rows[0].atMs + 3_600_000, "camelCased, with its due time");
  const missing = await app.api("GET", "/writer/queued-src/relay/queued");
  assert.deepEqual([missing.status, missing.body.error.code], [400, "invalid_target"], missing.text);
  const bad = await get("/writer/queued-src/queued?target=");
  assert.deepEqual([bad.ok, bad.code, bad.status], [false, "invalid_target", 400], JSON.stringify(bad));
});

test("a source reached through newUniqueId() refuses its caller with unnamed_source 400, as the chapter says", async () => {
  const v = await get("/unique");
  assert.deepEqual([v.ok, v.name, v.code, v.status], [false, "RelayError", "unnamed_source", 400], JSON.stringify(v));
  const chapter = readFileSync(join(ROOT, "docs", "embedding-typescript.md"), "utf8").replace(/\s+/g, " ");
  const stated = /`unnamed_source`, with `status` (\d+)/.exec(chapter);
  assert.ok(stated, "the TypeScript chapter states the status a newUniqueId() source answers");
  assert.equal(Number(stated[1]), v.status, "the chapter states the status workerd answers");
});

test("tsc --strict refuses a callback that returns a promise (the Worker's and the type tests' expected errors)", () => {
  const tsc = join(ROOT, "node_modules", ".bin", "tsc");
  execFileSync(tsc, ["-p", join(DIR, "tsconfig.json")], { encoding: "utf8" });
});
