// Every reply bounded in bytes, in real workerd, probed from outside: pages
// of parked rows of about 1 MB, keys pages of 64 KiB values and a target's
// watermarks from 1,150 sources. Every page is at most MAX_PAGE_BYTES plus
// the envelope unless it holds a single row, every row is listed once, in
// order, and `next` is null exactly on the last page. The largest pages
// are printed as `count:bytes`.

import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { Relay } from "./harness.mjs";

/** `MAX_PAGE_BYTES`: the byte budget of one page's items. */
const MAX_PAGE_BYTES = 1024 * 1024;
/** `PAGE_ENVELOPE_BYTES`: what a reply may add around its items. */
const PAGE_ENVELOPE_BYTES = 4 * 1024;
/** `MAX_WATERMARKS_PER_PAGE`. */
const MAX_WATERMARKS_PER_PAGE = 500;
/** Characters of one value: its JSON string is just under 64 KiB. */
const VALUE_CHARS = 65_000;

let relay;
before(async () => {
  relay = await Relay.start();
});
after(async () => {
  await relay?.stop();
});

/** A row to `target` of `values` values of `chars` characters each. */
function row(target, values, chars = VALUE_CHARS) {
  const puts = [];
  for (let i = 0; i < values; i++) puts.push([`k${String(i).padStart(2, "0")}`, "x".repeat(chars)]);
  return { target, puts };
}

/** Pages through `path` (a listing with `?limit`) until `next` is null. */
async function pages(path, items, after = (n) => encodeURIComponent(n)) {
  const out = [];
  let next = null;
  do {
    const sep = path.includes("?") ? "&" : "?";
    const r = await relay.api("GET", next === null ? path : `${path}${sep}after=${after(next)}`);
    assert.equal(r.status, 200, r.text.slice(0, 300));
    out.push({ count: r.body[items].length, bytes: Buffer.byteLength(r.text), body: r.body });
    next = r.body.next;
  } while (next !== null);
  return out;
}

/** Each page within the budget plus its envelope, unless it holds one row. */
function assertBounded(list, what) {
  for (const p of list) {
    assert.ok(p.count >= 1, `${what}: an empty page before the end`);
    if (p.count > 1) {
      assert.ok(p.bytes <= MAX_PAGE_BYTES + PAGE_ENVELOPE_BYTES, `${what}: a page of ${p.count} rows is ${p.bytes} bytes`);
    }
  }
}

const largest = (list) =>
  [...list].sort((a, b) => b.bytes - a.bytes).slice(0, 5).map((p) => `${p.count}:${p.bytes}`).join(" ");

test("parked pages of rows of about 1 MB stay within the byte budget and list every row once", async () => {
  const src = "rb-src";
  const target = "rb-parked";
  await relay.api("POST", `/v1/targets/${target}/faults`, { reject: true, permanent: true });
  const seqs = [];
  // The largest row a source accepts (the longest values it takes), whose
  // page alone is over the budget; then rows of about 1 MB, half-size
  // rows, then many small ones.
  let chars = 65_534;
  for (;;) {
    const r = await relay.api("POST", `/v1/sources/${src}/enqueue`, { rows: [row(target, 16, chars)] });
    if (r.status === 200) {
      seqs.push(...r.body.seqs);
      break;
    }
    assert.ok(r.status === 400 || r.status === 413, r.text);
    chars -= 1;
  }
  for (let i = 0; i < 7; i++) seqs.push(...(await relay.enqueue(src, [row(target, 16)])).seqs);
  for (let i = 0; i < 6; i++) seqs.push(...(await relay.enqueue(src, [row(target, 8)])).seqs);
  for (let i = 0; i < 3; i++) {
    const small = Array.from({ length: 100 }, (_, j) => ({ target, puts: [[`s${i}-${j}`, j]] }));
    seqs.push(...(await relay.enqueue(src, small)).seqs);
  }
  const parkedAll = async () => {
    const r = await relay.api("GET", `/v1/sources/${src}/parked`);
    return r.body.targets?.find((t) => t.target === target)?.rows ?? 0;
  };
  const deadline = Date.now() + 60_000;
  while ((await parkedAll()) < seqs.length) {
    assert.ok(Date.now() < deadline, "every row parked");
    await new Promise((r) => setTimeout(r, 200));
  }
  const list = await pages(`/v1/sources/${src}/parked/${target}`, "rows", String);
  assertBounded(list, "parked");
  const listed = list.flatMap((p) => p.body.rows.map((r) => r.seq));
  assert.deepEqual(listed, seqs, "every parked row once, in order");
  assert.ok(list.some((p) => p.count === 1 && p.bytes > MAX_PAGE_BYTES), "a row over the budget is a page alone");
  assert.equal(list.at(-1).body.next, null);
  console.log(`parked pages: ${list.length}; largest (count:bytes) ${largest(list)}`);
});

test("keys pages of 64 KiB values stay within the byte budget", async () => {
  const src = "rb-keys-src";
  const target = "rb-keys";
  for (let i = 0; i < 4; i++) {
    const rows = Array.from({ length: 15 }, (_, j) => ({ target, puts: [[`key-${i}-${String(j).padStart(2, "0")}`, "v".repeat(VALUE_CHARS)]] }));
    await relay.enqueue(src, rows);
  }
  await relay.drained(src);
  const list = await pages(`/v1/targets/${target}/keys?limit=1000`, "keys");
  assertBounded(list, "keys");
  const keys = list.flatMap((p) => p.body.keys.map((k) => k.key));
  assert.equal(keys.length, 60);
  assert.equal(new Set(keys).size, 60, "every key once");
  assert.deepEqual(keys, [...keys].sort(), "ascending");
  assert.ok(list.length > 1, "60 values of 64 KiB do not fit one page");
  console.log(`keys pages: ${list.length}; largest (count:bytes) ${largest(list)}`);
});

test("watermarks of 1,150 sources come in pages of 500 with a cursor", async () => {
  const target = "rb-marks";
  const seeded = await relay.api("POST", `/v1/targets/${target}/faults`, { seed_watermarks: 1_150 });
  assert.equal(seeded.status, 200, seeded.text);
  const list = await pages(`/v1/targets/${target}/watermarks`, "watermarks");
  assert.deepEqual(list.map((p) => p.count), [500, 500, 150]);
  assertBounded(list, "watermarks");
  const sources = list.flatMap((p) => p.body.watermarks.map((w) => `${w.source}/${w.source_id}`));
  assert.equal(new Set(sources).size, 1_150, "every source once");
  assert.equal(list.at(-1).body.next, null);
  const small = await relay.api("GET", `/v1/targets/${target}/watermarks?limit=2`);
  assert.equal(small.body.watermarks.length, 2);
  assert.match(small.body.next, /^seed00001\/[0-9a-f]{64}$/);
  const bad = await relay.api("GET", `/v1/targets/${target}/watermarks?after=a%20b`);
  assert.equal(bad.status, 400);
  assert.equal(bad.body.error.code, "invalid_query");
  assert.match(bad.body.error.message, /after/);
  const tooMany = await relay.api("GET", `/v1/targets/${target}/watermarks?limit=${MAX_WATERMARKS_PER_PAGE + 1}`);
  assert.equal(tooMany.status, 400);
  assert.equal(tooMany.body.error.code, "invalid_limit");
  assert.match(tooMany.body.error.message, /limit/);
  console.log(`watermarks pages: ${list.length}; largest (count:bytes) ${largest(list)}`);
});
