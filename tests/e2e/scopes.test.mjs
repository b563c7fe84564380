// Least-privilege bearer tokens in workerd: every front-door route (each
// public operation of clients/typescript/protocol.json plus the reference
// Worker's own routes) tried with every scope's token, with both tokens of a
// rotation, with RELAY_TOKEN (all scopes), with a wrong token and with none.
// Allowed: anything but 401/403. Outside the token's scope: 403
// `forbidden_scope` naming the scope needed. No valid token: 401. A refused
// request writes nothing: the source's counters, its parked rows, a
// target's watermarks and the directory stay as they were. Prints the table
// it checked (route x credential -> status).

import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { Relay, ROOT, TOKEN, put, until } from "./harness.mjs";

const PROTOCOL = JSON.parse(readFileSync(join(ROOT, "clients", "typescript", "protocol.json"), "utf8"));

const SOURCE = "scoped";
/** A target rows reach; one whose watermark an operator may forget; two parked (redrive, discard). */
const T = { applied: "scoped-t", forget: "scoped-wm", redrive: "scoped-pr", discard: "scoped-pd" };

/** Credentials: the token sent and the scopes it holds (undefined: no valid token). */
const CREDENTIALS = [
  { name: "producer-old", token: "producer-old-token", scopes: ["producer"] },
  { name: "producer-new", token: "producer-new-token", scopes: ["producer"] },
  { name: "reader", token: "reader-token", scopes: ["reader"] },
  { name: "operator", token: "operator-token", scopes: ["operator"] },
  { name: "RELAY_TOKEN", token: TOKEN, scopes: ["producer", "reader", "operator"] },
  { name: "wrong", token: "not-a-configured-token" },
  { name: "none", token: null },
];

const VARS = {
  RELAY_PRODUCER_TOKENS: "producer-old-token, producer-new-token",
  RELAY_READER_TOKENS: "reader-token",
  RELAY_OPERATOR_TOKENS: "operator-token",
};

/**
 * The scope each public operation needs, written apart from the Worker's
 * FrontRoute::scope. An operation missing here fails the test.
 */
const OPERATION_SCOPES = {
  "source enqueue": "producer",
  "source status": "reader",
  "source relay_watermark": "reader",
  "source delivered_through": "reader",
  "source targets": "reader",
  "source parked_rows": "reader",
  "source queued": "reader",
  "source redrive": "operator",
  "source discard": "operator",
  "source rearm": "operator",
  "target status": "reader",
  "target keys": "reader",
  "target watermarks": "reader",
  "target forget_watermark": "operator",
};

/** Values for an operation's path parameters. */
function fill(kind, op) {
  const target = op.name === "discard" ? T.discard : T.redrive;
  const path = op.path.split("?")[0]
    .replace("{target}", target)
    .replace("{seq}", "1")
    .replace("{source}", SOURCE);
  const name = kind === "source" ? SOURCE : op.name === "forget_watermark" ? T.forget : T.applied;
  // A query parameter the operation requires, given.
  const required = (op.path.split("?")[1] ?? "").split("&").includes("target") ? `?target=${T.applied}` : "";
  return `/v1/${kind}s/${name}${path}${required}`;
}

/** Every front-door route: the protocol's public operations, then the Worker's own. */
function routes() {
  const out = [];
  for (const kind of ["source", "target"]) {
    for (const op of PROTOCOL[kind].filter((o) => o.reach === "public")) {
      const scope = OPERATION_SCOPES[`${kind} ${op.name}`];
      assert.ok(scope, `no expected scope for the ${kind} operation ${op.name}: add it to OPERATION_SCOPES`);
      const body = op.name === "enqueue" ? () => ({ rows: [put(T.applied, "k", 1)] }) : () => undefined;
      out.push({ label: `${op.method} ${kind} ${op.name}`, method: op.method, path: () => fill(kind, op), body, scope });
    }
  }
  let fresh = 0;
  const own = [
    ["GET", "/v1/health", "reader"],
    ["GET", "/v1/sources", "reader"],
    ["GET", `/v1/sources/${SOURCE}/alarms`, "reader"],
    ["POST", `/v1/sources/${SOURCE}/retire`, "operator"],
    ["POST", `/v1/sources/${SOURCE}/faults`, "operator", {}],
    ["GET", `/v1/sources/${SOURCE}/audit`, "operator"],
    // The storage suite runs on an object never used: a new one each time.
    ["POST", () => `/v1/sources/scoped-conformance-${fresh++}/conformance`, "operator"],
    ["POST", `/v1/targets/${T.applied}/faults`, "operator", {}],
    ["GET", `/v1/targets/${T.applied}/log?source=${SOURCE}`, "operator"],
    ["GET", `/v1/targets/${T.applied}/audit`, "operator"],
  ];
  for (const [method, path, scope, body] of own) {
    const at = typeof path === "function" ? path : () => path;
    const label = `${method} ${typeof path === "function" ? "/v1/sources/<fresh>/conformance" : path.replace(/\?.*/, "")}`;
    out.push({ label, method, path: at, body: () => body, scope });
  }
  return out;
}

/** What a refused request must leave as it was. */
async function snapshot(relay) {
  const s = await relay.ok(`/v1/sources/${SOURCE}/status`);
  const pick = ["last_seq", "enqueued_rows", "delivered_rows", "queued_rows", "parked_rows", "parked_targets"];
  const counters = Object.fromEntries(pick.map((k) => [k, s[k]]));
  const watermarks = (await relay.ok(`/v1/targets/${T.forget}/watermarks`)).watermarks;
  const directory = (await relay.ok("/v1/sources")).sources.map((x) => x.name);
  return { counters, watermarks, directory };
}

let relay;
before(async () => {
  relay = await Relay.start({ vars: VARS });
});
after(async () => {
  await relay?.stop();
});

test("every route answers each scope as it should, and a refusal writes nothing", async () => {
  // Two targets park at once on a permanent error; two others apply.
  for (const t of [T.redrive, T.discard]) {
    assert.equal((await relay.api("POST", `/v1/targets/${t}/faults`, { reject: true, permanent: true })).status, 200);
  }
  await relay.enqueue(SOURCE, [T.applied, T.forget, T.redrive, T.discard].map((t) => put(t, "k", 0)));
  await until(async () => {
    const s = await relay.status(SOURCE);
    return s.queued_rows === 0 && s.parked_rows === 2;
  }, "two rows applied and two parked", 60_000);

  const table = [];
  const failures = [];
  for (const route of routes()) {
    const row = { route: route.label, needs: route.scope, ...Object.fromEntries(CREDENTIALS.map((c) => [c.name, "-"])) };
    // Refusals first, while the parked rows they must not touch are still there.
    const allowedFor = (c) => c.scopes !== undefined && (c.scopes.includes(route.scope) || (route.scope === "reader" && c.scopes.includes("operator")));
    const ordered = [...CREDENTIALS.filter((c) => !allowedFor(c)), ...CREDENTIALS.filter(allowedFor)];
    for (const cred of ordered) {
      const refused = !allowedFor(cred);
      const beforeState = refused ? await snapshot(relay) : undefined;
      const r = await relay.api(route.method, route.path(), route.body(), { token: cred.token });
      row[cred.name] = r.status;
      const where = `${route.label} as ${cred.name}: ${r.status} ${r.text.slice(0, 200)}`;
      try {
        if (cred.scopes === undefined) {
          assert.equal(r.status, 401, where);
          assert.equal(r.body.error.code, "unauthorized", where);
        } else if (refused) {
          assert.equal(r.status, 403, where);
          assert.equal(r.body.error.code, "forbidden_scope", where);
          assert.match(r.body.error.message, new RegExp(`needs the ${route.scope} scope`), where);
          assert.ok(!r.text.includes(cred.token), `${where}: the token is never echoed`);
        } else {
          assert.ok(![401, 403].includes(r.status) && r.status < 500, where);
        }
        if (refused) assert.deepEqual(await snapshot(relay), beforeState, `${where}: a refusal writes nothing`);
      } catch (e) {
        failures.push(e.message);
      }
    }
    table.push(row);
  }
  console.log("route x credential -> status (needs: the route's scope)");
  console.table(table);
  assert.deepEqual(failures, []);
  // The producers' enqueues (both tokens of the rotation) and RELAY_TOKEN's were written.
  assert.equal((await relay.status(SOURCE)).enqueued_rows, 4 + 3);
  assert.deepEqual(relay.panics(), []);
});

test("a token list with a blank entry is a 500 bad_configuration naming the variable", async () => {
  // Not ready at /v1/health (it answers 500): the console's page needs no token.
  const bad = await Relay.start({ vars: { ...VARS, RELAY_READER_TOKENS: "reader-token, ,other" }, ready: "/" });
  try {
    for (const token of [TOKEN, "reader-token", null]) {
      const r = await bad.api("GET", "/v1/health", undefined, { token });
      assert.equal(r.status, 500, r.text);
      assert.equal(r.body.error.code, "bad_configuration");
      assert.match(r.body.error.message, /^RELAY_READER_TOKENS: entry 2 of 3 is blank/);
      assert.ok(!r.text.includes("reader-token"), "the tokens are never echoed");
    }
  } finally {
    await bad.stop();
  }
});
