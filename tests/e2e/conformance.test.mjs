// The storage suite over DoSql in workerd: the same Rust code the native
// test runs over SQLite (`testing::conformance`), served by the test build
// on a source object that was never used. Every promise of the SQL
// interface must hold on the real Durable Object SQLite, and every
// statement the relay's script issues must be issued here as natively, with
// the rows written that crates/sql/tests/conformance.json records for
// Durable Objects (the native test pins the SQLite column of the same file).

import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { Relay, ROOT } from "./harness.mjs";

const RECORDED = join(ROOT, "crates", "sql", "tests", "conformance.json");

let relay;
before(async () => {
  relay = await Relay.start();
});
after(async () => {
  await relay?.stop();
});

test("DoSql keeps every promise of the SQL interface, and the relay's statements cost what they cost natively", async () => {
  const r = await relay.api("POST", "/v1/sources/conformance-fresh/conformance");
  assert.ok(r.body && Array.isArray(r.body.checks), `a report: ${r.status} ${r.text.slice(0, 500)}`);
  for (const check of r.body.checks) assert.equal(check.failure, null, check.name);
  assert.equal(r.body.script_error, null);
  assert.equal(r.status, 200);

  // Calls and rows returned are the same on both backends; rows written
  // are recorded per backend (Durable Objects also count index entries and
  // schema changes). RELAY_BLESS=1 records this backend's column.
  const recorded = JSON.parse(readFileSync(RECORDED, "utf8"));
  const here = r.body.statements.map((s) => ({
    sql: s.sql,
    calls: s.calls,
    rows_returned: s.rows_returned,
    rows_written_durable_object: s.rows_written,
  }));
  const expected = recorded.map(({ rows_written_sqlite, ...rest }) => rest);
  if (process.env.RELAY_BLESS === "1") {
    assert.equal(here.length, recorded.length, "record the native column first");
    const merged = recorded.map((r, i) => ({ ...r, rows_written_durable_object: here[i].rows_written_durable_object }));
    writeFileSync(RECORDED, JSON.stringify(merged, null, 2) + "\n");
    return;
  }
  for (let i = 0; i < Math.max(here.length, expected.length); i++) {
    assert.deepEqual(here[i], expected[i], `statement ${i}: workerd vs recorded`);
  }
  const written = recorded.reduce((sum, s) => sum + s.rows_written_durable_object, 0);
  assert.equal(r.body.rows_written, written, "rows written by the whole script");
  assert.deepEqual(relay.panics(), []);
});

test("the suite refuses an object that already holds the relay's tables", async () => {
  assert.equal((await relay.api("POST", "/v1/sources/conformance-used/enqueue", { rows: [] })).status, 400);
  await relay.enqueue("conformance-used", [{ target: "conformance-t", puts: [["k", 1]] }]);
  const r = await relay.api("POST", "/v1/sources/conformance-used/conformance");
  assert.equal(r.status, 500);
  assert.match(r.body.script_error, /must hold nothing/);
  assert.deepEqual(r.body.checks, [], "no check ran on a used database");
});
