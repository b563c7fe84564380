// The relay inside a Cloudflare Agents SDK Agent, in workerd
// (tests/e2e/agents): the Agent's Lifecycle owns the object's alarm, and the
// relay keeps its alarm as a job of the Lifecycle's queue through
// `durable-relay/agents`. Under steady orders, each with a job of the
// Agent's own (`this.schedule`), half of them enqueued with `enqueueSync`
// inside the object's transaction, while the desk refuses rows for a while and
// then heals: every row arrives once, in order; the desk's refusals were
// retried (the relay's back-off, a follow-up alarm) until it healed; every
// job of the Agent ran within JOB_DELAY_BOUND_MS of its time; and a row
// enqueued once everything was idle arrives too.

import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ROOT, sleep, startWrangler, until } from "./harness.mjs";

const DIR = join(ROOT, "tests", "e2e", "agents");
/** How often the steady traffic orders, ms. */
const EVERY_MS = 250;
/** How long the steady traffic runs, ms. */
const TRAFFIC_MS = 6_000;
/** How long the desk refuses rows from the start, ms. */
const REFUSE_MS = 2_000;
/** How long after its order each of the Agent's own jobs is due, ms. */
const TICK_MS = 700;
/** Longest one of the Agent's jobs may run after its time, ms. */
const JOB_DELAY_BOUND_MS = 1_000;
/** How long the source sits idle before the last order, ms. */
const IDLE_MS = 3_000;
/** Longest the order made while idle may take to arrive, ms. */
const IDLE_DELIVERY_BOUND_MS = 2_000;

let app;
before(async () => {
  app = await startWrangler({
    configs: [join(DIR, "wrangler.toml")],
    persistDir: mkdtempSync(join(tmpdir(), "relay-agents-")),
    ready: "/health",
  });
});
after(async () => {
  await app?.stop();
});

const get = (path) => app.ok(path);

/** The desk's arrivals from `shop`, once there are `n`; on a timeout, fails saying how many came. */
async function arrived(shop, n, what) {
  let got;
  try {
    await until(async () => (got = await get(`/desk/desk/arrivals?source=${shop}`)).rows.length >= n, what);
  } catch (e) {
    throw new Error(`${e.message}: ${got?.rows.length} of ${n} rows arrived, ${got?.refused} batches refused`);
  }
  return got;
}

test("inside an Agent: every row once and in order through refusals, the Agent's own jobs on time, a follow-up alarm", async () => {
  await get(`/desk/desk/refuse?ms=${REFUSE_MS}`);
  const sent = [];
  const start = Date.now();
  for (let i = 0; Date.now() - start < TRAFFIC_MS; i++) {
    // Every other order enqueues with enqueueSync, inside the object's transaction.
    const op = i % 2 ? "order-sync" : "order";
    sent.push(await get(`/shop/s1/${op}?id=o${i}&tick_ms=${TICK_MS}`));
    await sleep(EVERY_MS);
  }
  await arrived("s1", sent.length, "every row to arrive");
  await until(async () => (await get("/shop/s1/ticks")).length === sent.length, "every job of the Agent to run");

  // Idle: nothing owed, then one more order.
  await sleep(IDLE_MS);
  const idle = await get(`/shop/s1/order-sync?id=idle&tick_ms=${TICK_MS}`);
  sent.push(idle);
  const { rows, refused } = await arrived("s1", sent.length, "the row sent while idle");
  assert.deepEqual(
    rows.map((r) => r.seq),
    sent.map((s) => s.seq),
    "every row once, in order",
  );
  assert.ok(refused > 0, "the desk refused rows while it was refusing");
  const idleLag = rows.at(-1).at_ms - idle.at_ms;
  assert.ok(idleLag <= IDLE_DELIVERY_BOUND_MS, `the row sent while idle arrived after ${idleLag} ms`);

  await until(async () => (await get("/shop/s1/ticks")).length === sent.length, "the last job of the Agent");
  const ticks = await get("/shop/s1/ticks");
  // The Agent's schedules keep whole seconds: a job is due at the second its time falls in.
  const delays = ticks.map((t) => t.ran_ms - Math.floor(t.due_ms / 1000) * 1000);
  assert.ok(Math.min(...delays) >= 0, `a job ran early: ${delays.join(",")}`);
  assert.ok(Math.max(...delays) <= JOB_DELAY_BOUND_MS, `job delays ${delays.join(",")} ms`);

  const status = await get("/shop/s1/status");
  assert.equal(status.queuedRows, 0);
  assert.equal(status.deliveredRows, sent.length);
  const lags = rows.map((r, i) => r.at_ms - sent[i].at_ms);
  console.log(
    `agent: ${sent.length} rows delivered once in order (lag max ${Math.max(...lags)} ms), ` +
      `${refused} refused batches retried, ${status.alarms} relay alarms; ` +
      `${ticks.length} jobs of the Agent, delay max ${Math.max(...delays)} ms; ` +
      `the row sent after ${IDLE_MS} ms idle arrived in ${idleLag} ms`,
  );
  assert.deepEqual(app.panics(), []);
});

test("only the agents entry imports agents: the package's main entry works without it", () => {
  const dir = join(ROOT, "packages", "durable-relay", "src");
  const imports = (file) => [...readFileSync(join(dir, file), "utf8").matchAll(/\bfrom\s+["']([^"']+)["']/g)].map((m) => m[1]);
  for (const file of ["index.js", "index.d.ts"]) {
    assert.deepEqual(imports(file).filter((spec) => /^agents(\/|$)/.test(spec)), [], `${file} imports agents`);
  }
  assert.ok(imports("agents.js").includes("agents/lifecycle"), "agents.js imports the Lifecycle");
});
