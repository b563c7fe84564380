// The npm package's RelaySource and the reference Worker's RelayRpc build
// their methods from the protocol's table: the path each
// call asks for, from generated arguments, is one the table's template
// matches, with every path argument in its own segment (so that no
// argument, however bad, can name another operation) and the query's
// parameters only when given. No workerd: the path builder is plain
// JavaScript.

import { test } from "node:test";
import assert from "node:assert/strict";
import { OPERATIONS } from "../../packages/durable-relay/src/operations.js";
import { pathOf } from "../../packages/durable-relay/src/calls.js";

const rpc = OPERATIONS.filter((op) => op.request === null);

/** A small seeded generator (mulberry32), so a failure can be replayed. */
function rng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const VALUES = [undefined, null, "", "t", "cust:9", "a/b", "a b", "..", "%", "é", "\ud800", "a\udfffb", 0, -1, 1.5, 2 ** 53, true, [], ["x", "y"], {}, { after: 1 }];

test("every RPC path keeps its arguments in their segments and names its own operation", () => {
  const seed = Number(process.env.RELAY_SEED ?? Date.now() % 1_000_000);
  console.log(`rpc paths: seed ${seed} (RELAY_SEED replays it)`);
  const random = rng(seed);
  const pick = () => VALUES[Math.floor(random() * VALUES.length)];
  assert.ok(rpc.length >= 8, `the table offers ${rpc.length} body-less RPC methods`);
  for (let i = 0; i < 2_000; i++) {
    const op = rpc[i % rpc.length];
    const [template, query = ""] = op.path.split("?");
    const params = template.match(/\{\w+\}/g) ?? [];
    const args = params.map(pick);
    const options = random() < 0.5 ? undefined : Object.fromEntries(query.split("&").filter(Boolean).map((q) => [q, pick()]));
    const path = pathOf(op, [...args, options]);
    const [got, gotQuery = ""] = path.split("?");
    const want = template.split("/");
    const segments = got.split("/");
    assert.equal(segments.length, want.length, `${op.rpc.method}(${JSON.stringify(args)}) -> ${path} (seed ${seed})`);
    want.forEach((w, j) => {
      if (w.startsWith("{")) assert.notEqual(segments[j], "", `${path}: an empty argument keeps its segment`);
      else assert.equal(segments[j], w, `${path}: the template's literal`);
    });
    const names = gotQuery === "" ? [] : gotQuery.split("&").map((p) => p.split("=")[0]);
    const allowed = query.split("&").filter(Boolean);
    for (const n of names) assert.ok(allowed.includes(n), `${path}: ${n} is a query parameter of ${op.path}`);
    for (const n of allowed) assert.equal(names.includes(n), options?.[n] !== undefined, `${path}: ${n} sent when given`);
  }
});

test("an empty path argument is sent as an escaped NUL, which no name or sequence accepts", () => {
  const redrive = rpc.find((op) => op.rpc.method === "redrive");
  assert.equal(pathOf(redrive, [""]), "/parked/%00/redrive");
  assert.equal(pathOf(redrive, ["cust:9"]), "/parked/cust%3A9/redrive");
  const rows = rpc.find((op) => op.rpc.method === "parkedRows");
  assert.equal(pathOf(rows, [undefined, { limit: 5 }]), "/parked/%00?limit=5", "not the parked targets' page");
  assert.equal(pathOf(rows, ["t", { after: 0 }]), "/parked/t?after=0");
  assert.equal(pathOf(redrive, ["a\ud800"]), "/parked/a%EF%BF%BD/redrive", "a lone surrogate has no UTF-8");
});
