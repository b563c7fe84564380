// Every entry keeps every promise: the same generated requests, sent to a
// plain source and to a partitioned one through each way in (the front
// door, RelayRpc, a Durable Object stub, and a TypeScript object through
// the npm package), get the same verdict everywhere, and the targets end
// up holding the same rows. Each way in writes to
// targets of its own (the same names under its own prefix), so their
// states can be compared once everything is delivered.

import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { join } from "node:path";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { Relay, ROOT, TOKEN, startWrangler, until, writeRelayConfig } from "./harness.mjs";

const PRODUCER = join(ROOT, "examples", "producer", "wrangler.toml");
const INTEROP = join(ROOT, "tests", "e2e", "interop", "wrangler.toml");
const PARTITIONED = { "fd-part": { partitions: 3, epoch: 1 }, "rpc-part": { partitions: 2, epoch: 1 } };

/** The ways in: how each sends an enqueue, and the source and target prefix it uses. */
const PATHS = [
  { id: "a", source: "fd-plain", send: (app, s, body) => app.api("POST", `/relay/v1/sources/${s}/enqueue`, body, { token: TOKEN }) },
  { id: "b", source: "fd-part", send: (app, s, body) => app.api("POST", `/relay/v1/sources/${s}/enqueue`, body, { token: TOKEN }) },
  { id: "c", source: "rpc-plain", send: rpcSend },
  { id: "d", source: "rpc-part", send: rpcSend },
  { id: "e", source: "stub-plain", send: (app, s, body) => app.api("POST", `/stub/${s}/enqueue`, body) },
];

function rpcSend(app, source, body) {
  return app.api("POST", `/rpc/enqueue/${source}`, { rows: body.rows, idempotencyKey: body.idempotency_key });
}

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

/**
 * Requests of 1 to 5 rows over nine targets, some keyed (keys reused with
 * the same or other rows), some delayed a little, some bad in one row, a
 * few past a per-request limit. `t` stands for the target prefix.
 */
function generate(random, n) {
  const below = (k) => Math.floor(random() * k);
  const out = [];
  for (let i = 0; i < n; i++) {
    if (out.length > 0 && random() < 0.15) {
      const pick = out[below(out.length)];
      const rows = pick.rows.slice();
      if (random() < 0.5) rows.push({ t: below(9), puts: [["r", i]] });
      out.push({ key: pick.key ?? "again", rows });
      continue;
    }
    const count = random() < 0.03 ? 257 : 1 + below(5);
    const rows = [];
    for (let j = 0; j < count; j++) {
      const t = below(9);
      switch (below(60)) {
        case 0: rows.push({ t, puts: [["", 1]] }); break;
        case 1: rows.push({ t, puts: [["a", 1], ["a", 2]] }); break;
        case 2: rows.push({ t }); break;
        case 3: rows.push({ t, puts: [["v", "\ud800"]] }); break;
        case 4: rows.push({ t, puts: [["v", 1]], delay_ms: 86_400_001 }); break;
        case 5: rows.push({ t, puts: [["v", 1]], delay_ms: 1, not_before_ms: 1 }); break;
        case 6: rows.push({ t, puts: [["v", i]], delay_ms: 300 }); break;
        default: rows.push({ t, puts: [["v", i], [`k${j}`, { i, j }]], deletes: ["gone"] });
      }
    }
    out.push({ key: random() < 0.4 ? `k${below(8)}` : undefined, rows });
  }
  return out;
}

/** The request as path `id` sends it: its targets under its prefix. */
function concrete(id, request) {
  const rows = request.rows.map(({ t, ...rest }) => ({ target: `${id}-t${t}`, ...rest }));
  return request.key === undefined ? { rows } : { rows, idempotency_key: request.key };
}

/**
 * What a caller sees: the status and code, and for an accepted enqueue
 * whether it was a duplicate, how many rows it took, and whether each row
 * that asked for a delay got one. A row that asked for none may still wait
 * behind an earlier delayed row of its target, but whether that hold is
 * still live depends on the wall clock between one path's call and the
 * next, so only the rows' own delays are compared here (the delay tests
 * pin holds through the shipped SQL under a fake clock).
 */
function verdict(r, request) {
  if (r.status !== 200) return { status: r.status, code: r.body?.error?.code };
  const due = r.body.due_ms ?? [];
  const asked = request.rows.map((row, i) => (row.delay_ms === undefined ? null : (due[i] ?? 0) > 0));
  return { status: 200, duplicate: r.body.duplicate, rows: r.body.seqs.length, due: asked };
}

/** The plain front-door path's verdicts and target states, for the TypeScript path to match. */
const plain = { seed: undefined, requests: [], verdicts: [], targets: [] };

let app;
before(async () => {
  app = await Relay.start({ before: [PRODUCER], ready: "/health", vars: { RELAY_PARTITIONS: JSON.stringify(PARTITIONED) } });
});
after(async () => {
  await app?.stop();
});

test("the same requests through every entry, plain and partitioned, get the same verdicts and write the same rows", async () => {
  const seed = Number(process.env.RELAY_E2E_SEED ?? Date.now() % 2 ** 31);
  console.log(`every_path: seed ${seed} (replay with RELAY_E2E_SEED=${seed})`);
  const requests = generate(rng(seed), 80);
  let accepted = 0;
  for (const [i, request] of requests.entries()) {
    const verdicts = [];
    for (const path of PATHS) verdicts.push(verdict(await path.send(app, path.source, concrete(path.id, request)), request));
    for (const [k, v] of verdicts.entries()) {
      assert.deepEqual(v, verdicts[0], `request ${i} via ${PATHS[k].id} (${PATHS[k].source}) vs ${PATHS[0].source} (seed ${seed})`);
    }
    if (verdicts[0].status === 200) accepted += 1;
    plain.verdicts.push(verdicts[0]);
  }
  plain.seed = seed;
  plain.requests = requests;
  assert.ok(accepted >= 10 && requests.length - accepted >= 5, `both verdicts occur: ${accepted} of ${requests.length} accepted`);
  for (const path of PATHS) {
    await until(async () => (await app.api("GET", `/relay/v1/sources/${path.source}/status`, undefined, { token: TOKEN })).body.queued_rows === 0, `${path.source} to drain`, 60_000);
  }
  // Every target of every way in holds the same keys and values, and took the same rows.
  for (let t = 0; t < 9; t++) {
    const state = [];
    for (const path of PATHS) {
      const keys = (await app.api("GET", `/relay/v1/targets/${path.id}-t${t}/keys`, undefined, { token: TOKEN })).body.keys;
      const marks = (await app.api("GET", `/relay/v1/targets/${path.id}-t${t}/watermarks`, undefined, { token: TOKEN })).body.watermarks;
      state.push({ keys, applied: marks.reduce((a, m) => a + m.applied_rows, 0) });
    }
    for (const [k, s] of state.entries()) assert.deepEqual(s, state[0], `target t${t} via ${PATHS[k].id} (seed ${seed})`);
    plain.targets.push(state[0]);
  }
  for (const source of ["fd-plain", "rpc-plain", "stub-plain", "fd-part:0", "fd-part:1", "fd-part:2", "rpc-part:0", "rpc-part:1"]) {
    const r = await app.api("GET", `/relay/v1/sources/${source}/audit`, undefined, { token: TOKEN });
    assert.ok(r.status === 200 && r.body.ok, `audit of ${source}: ${r.text}`);
  }
  assert.deepEqual(app.panics(), []);
});

test("the same requests through a TypeScript object (the npm package) get the plain path's verdicts and writes", async () => {
  assert.equal(plain.verdicts.length, plain.requests.length, "the plain path ran first, in the test above");
  const seed = plain.seed;
  // A TypeScript source (tests/e2e/interop) whose targets are the reference Worker's.
  const ts = await startWrangler({
    configs: [INTEROP, writeRelayConfig()],
    persistDir: mkdtempSync(join(tmpdir(), "relay-every-ts-")),
    ready: "/health",
  });
  try {
    for (const [i, request] of plain.requests.entries()) {
      const v = verdict(await ts.api("POST", "/ts-source/ts-plain", concrete("f", request)), request);
      assert.deepEqual(v, plain.verdicts[i], `request ${i} via the npm package vs fd-plain (seed ${seed})`);
    }
    await until(async () => (await ts.api("GET", "/ts-source/ts-plain/status")).body.queued_rows === 0, "ts-plain to drain", 60_000);
    for (let t = 0; t < 9; t++) {
      const keys = (await ts.api("GET", `/rust-target/f-t${t}/keys`)).body.keys;
      const marks = (await ts.api("GET", `/rust-target/f-t${t}/watermarks`)).body.watermarks;
      const state = { keys, applied: marks.reduce((a, m) => a + m.applied_rows, 0) };
      assert.deepEqual(state, plain.targets[t], `target t${t} via the npm package vs fd-plain (seed ${seed})`);
    }
    assert.deepEqual(ts.panics(), []);
  } finally {
    await ts.stop();
  }
});
