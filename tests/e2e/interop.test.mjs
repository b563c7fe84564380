// A TypeScript source delivers to a Rust target and a Rust source to a
// TypeScript target, over the same wire protocol: the npm package's objects
// (tests/e2e/interop) and the reference Worker in one workerd session.

import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ROOT, startWrangler, until, writeRelayConfig } from "./harness.mjs";

const INTEROP = join(ROOT, "tests", "e2e", "interop", "wrangler.toml");

let app;
before(async () => {
  // The reference Worker, with its sources delivering to the TypeScript target class.
  const config = writeRelayConfig();
  const rust = '{ name = "RELAY_TARGET", class_name = "RelayTarget" }';
  const ts = '{ name = "RELAY_TARGET", class_name = "TsTarget", script_name = "relay-interop" }';
  const text = readFileSync(config, "utf8");
  assert.ok(text.includes(rust), "the reference config binds RELAY_TARGET");
  writeFileSync(config, text.replace(rust, ts));
  app = await startWrangler({ configs: [INTEROP, config], persistDir: mkdtempSync(join(tmpdir(), "relay-interop-")), ready: "/health" });
});
after(async () => {
  await app?.stop();
});

const get = (path) => app.ok(path);

test("a TypeScript source delivers to a Rust target, in order, once", async () => {
  for (let i = 1; i <= 5; i++) {
    const r = await app.api("POST", "/ts-source/ts-src", { rows: [{ target: "rust-t", puts: [["k", i], [`k${i}`, { i }]] }] });
    assert.equal(r.status, 200, r.text);
    assert.deepEqual(r.body.seqs, [i]);
  }
  await until(async () => (await get("/rust-target/rust-t/watermarks")).watermarks[0]?.watermark === 5, "five rows at the Rust target");
  const keys = await get("/rust-target/rust-t/keys");
  assert.deepEqual(keys.keys.find((k) => k.key === "k"), { key: "k", value: 5 }, "the last write wins: order kept");
  assert.equal(keys.keys.length, 6);
  assert.equal((await get("/ts-source/ts-src/status")).delivered_rows, 5);
});

test("a Rust source delivers to a TypeScript target, in order, once", async () => {
  for (let i = 1; i <= 5; i++) {
    const r = await app.api("POST", "/rust-source/rust-src/enqueue", { rows: [{ target: "ts-t", puts: [["k", i]] }] });
    assert.equal(r.status, 200, r.text);
  }
  await until(async () => (await get("/ts-target/ts-t/watermarks")).watermarks[0]?.watermark === 5, "five rows at the TypeScript target");
  assert.deepEqual((await get("/ts-target/ts-t/keys")).keys, [{ key: "k", value: 5 }]);
  assert.equal((await get("/rust-source/rust-src/status")).delivered_rows, 5);
  assert.deepEqual(app.panics(), []);
});

test("the package's operator methods park, page, redrive and discard a TypeScript source's rows", async () => {
  const op = (name, query = "") => app.api("GET", `/ts-source/op-src/operate/${name}${query}`);
  const faults = await app.api("POST", "/rust-target/down-t/faults", { reject: true, permanent: true });
  assert.equal(faults.status, 200, faults.text);
  for (const i of [1, 2]) {
    assert.equal((await app.api("POST", "/ts-source/op-src", { rows: [{ target: "down-t", puts: [["k", i]] }] })).status, 200);
  }
  await until(async () => (await op("parkedTargets")).body.targets?.some?.((t) => t.target === "down-t" && t.parked), "down-t parked");
  const page = await op("parkedRows", "?target=down-t");
  assert.deepEqual(page.body.rows.map((r) => r.seq), [1, 2]);
  assert.equal((await op("deliveredThrough", "?seq=2")).body, false);
  assert.equal(typeof (await op("relayWatermark")).body, "number");
  assert.equal((await op("parkedRows", "?target=not%20a%20name")).body.error.code, "invalid_target");
  // The page limit at and past its edges (MAX_PARKED_ROWS_PER_PAGE = 500).
  assert.deepEqual((await op("parkedRows", "?target=down-t&limit=500")).body.rows.map((r) => r.seq), [1, 2]);
  assert.equal((await op("parkedRows", "?target=down-t&limit=1")).body.rows.length, 1);
  assert.equal((await op("parkedRows", "?target=down-t&limit=501")).body.error.code, "invalid_limit");
  assert.equal((await op("parkedRows", "?target=down-t&limit=0")).body.error.code, "invalid_limit");
  assert.equal((await op("parkedRows", "?target=down-t&limit=1.5")).body.error.code, "invalid_limit");
  assert.equal((await op("deliveredThrough", "?seq=-1")).body.error.code, "invalid_seq");

  assert.equal((await app.api("POST", "/rust-target/down-t/faults", { reject: false })).status, 200);
  const redriven = await op("redrive", "?target=down-t");
  assert.deepEqual(redriven.body, { rows: 2, wasParked: true });
  await until(async () => (await op("deliveredThrough", "?seq=2")).body === true, "the redriven rows delivered");
  assert.deepEqual((await get("/rust-target/down-t/keys")).keys, [{ key: "k", value: 2 }]);

  assert.equal((await app.api("POST", "/rust-target/gone-t/faults", { reject: true, permanent: true })).status, 200);
  assert.equal((await app.api("POST", "/ts-source/op-src", { rows: [{ target: "gone-t", puts: [["k", 1]] }] })).status, 200);
  await until(async () => (await op("parkedTargets")).body.targets?.some?.((t) => t.target === "gone-t" && t.parked), "gone-t parked");
  assert.deepEqual((await op("discard", "?target=gone-t")).body, { rows: 1, wasParked: true });
  assert.equal((await op("deliveredThrough", "?seq=3")).body, true, "a discarded row counts as done");
});

test("generated JavaScript values as rows and options get a result or a typed RelayError, and refusals write nothing", async () => {
  const seed = Number(process.env.RELAY_E2E_SEED ?? Date.now() % 2 ** 31);
  console.log(`interop attack: seed ${seed} (replay with RELAY_E2E_SEED=${seed})`);
  const protocol = JSON.parse(readFileSync(join(ROOT, "clients", "typescript", "protocol.json"), "utf8"));
  const codes = protocol.source.find((op) => op.name === "enqueue").codes;
  const r = await app.api("GET", `/ts-source/attack-src/attack?seed=${seed}&n=1000`);
  assert.equal(r.status, 200, r.text);
  const { accepted, rows, codes: seen, other, operator } = r.body;
  const refused = Object.values(seen).reduce((a, b) => a + b, 0);
  console.log(`interop attack: ${accepted} enqueues accepted, ${refused} refused (seed ${seed})`);
  const operatorCodes = protocol.source.filter((op) => ["redrive", "discard", "delivered_through", "parked_rows"].includes(op.name)).flatMap((op) => op.codes);
  for (const code of Object.keys(operator)) assert.ok(code === "ok" || operatorCodes.includes(code), `operator call answered ${code} (seed ${seed})`);
  assert.deepEqual(other, [], `every failure is a RelayError (seed ${seed})`);
  for (const code of Object.keys(seen)) assert.ok(codes.includes(code), `${code} is an enqueue code (seed ${seed})`);
  assert.ok(accepted >= 5 && refused >= 50, `both outcomes occur: ${JSON.stringify(r.body)}`);
  const status = await get("/ts-source/attack-src/status");
  assert.equal(status.enqueued_rows, rows, "only accepted rows were written");
  assert.equal(status.last_seq, rows);
  assert.deepEqual(app.panics(), []);
});

test("a traceparent given to the package travels with its rows to the Rust target's apply log", async () => {
  const trace = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
  const r = await app.api("POST", "/ts-source/trace-src", { rows: [{ target: "trace-t", puts: [["k", 1]] }] }, { headers: { traceparent: trace } });
  assert.equal(r.status, 200, r.text);
  await until(async () => app.applyLogs().some((l) => l.source === "trace-src" && (l.traces ?? []).includes(trace)), "the apply log line naming the trace");
  const bad = await app.api("POST", "/ts-source/trace-src", { rows: [{ target: "trace-t", puts: [["k", 2]] }] }, { headers: { traceparent: "not-a-trace" } });
  assert.equal(bad.status, 400, bad.text);
  assert.equal(bad.body.error.code, "invalid_traceparent");
});
