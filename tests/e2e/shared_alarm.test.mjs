// The object's one alarm, shared by the relay and its host, in workerd
// (tests/e2e/shared_alarm): a TypeScript source expires its own holds on the
// alarm, armed through `relay.setAlarm`, while the relay delivers under
// steady enqueues. Both happen on time: every row arrives within
// DELIVERY_BOUND_MS of its enqueue, and every hold expires within
// EXPIRY_BOUND_MS after its time, expiries running while the enqueues go on.
// A host that sets the object's alarm directly, pushing the relay's back, is
// caught: a `relay_alarm_moved` warning, and the row still arrives on time.

import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ROOT, sleep, startWrangler, until } from "./harness.mjs";

const DIR = join(ROOT, "tests", "e2e", "shared_alarm");
/** How long each hold lasts, ms: the host's alarm comes due every ~1.5 s. */
const HOLD_MS = 1_500;
/** How often the steady traffic enqueues, ms. */
const EVERY_MS = 250;
/** How long the steady traffic runs, ms. */
const TRAFFIC_MS = 8_000;
/** Longest a row may take from its enqueue to its target, ms. */
const DELIVERY_BOUND_MS = 2_000;
/** Longest a hold may outlive its time, ms. */
const EXPIRY_BOUND_MS = 1_000;

let app;
before(async () => {
  app = await startWrangler({
    configs: [join(DIR, "wrangler.toml")],
    persistDir: mkdtempSync(join(tmpdir(), "relay-shared-alarm-")),
    ready: "/health",
  });
});
after(async () => {
  await app?.stop();
});

const get = (path) => app.ok(path);

/** The desk's arrival time of each of `shop`'s sequences. */
async function arrivals(shop) {
  return new Map((await get(`/desk/desk/arrivals?source=${shop}`)).map((a) => [a.seq, a.at_ms]));
}

test("the host's expiries and the relay's deliveries are both on time under steady traffic", async () => {
  const sent = [];
  const start = Date.now();
  for (let i = 0; Date.now() - start < TRAFFIC_MS; i++) {
    sent.push(await get(`/shop/s1/hold?id=h${i}&ttl_ms=${HOLD_MS}`));
    await sleep(EVERY_MS);
  }
  const lastEnqueue = sent.at(-1).at_ms;
  await until(async () => (await get("/shop/s1/holds")).every((h) => h.expired_ms !== null), "every hold to expire");
  await until(async () => (await arrivals("s1")).size === sent.length, "every row to arrive");

  const arrived = await arrivals("s1");
  const lags = sent.map(({ seq, at_ms }) => arrived.get(seq) - at_ms);
  assert.ok(Math.max(...lags) <= DELIVERY_BOUND_MS, `delivery lags ${lags.join(",")} ms`);
  const holds = await get("/shop/s1/holds");
  assert.equal(holds.length, sent.length);
  const late = holds.map((h) => h.expired_ms - h.expires_ms);
  assert.ok(Math.min(...late) >= 0, `a hold expired early: ${late.join(",")}`);
  assert.ok(Math.max(...late) <= EXPIRY_BOUND_MS, `expiry delays ${late.join(",")} ms`);
  const duringTraffic = holds.filter((h) => h.expired_ms < lastEnqueue).length;
  assert.ok(duringTraffic >= sent.length / 2, `only ${duringTraffic} of ${sent.length} expired while enqueues went on`);
  assert.deepEqual((await get("/shop/s1/alarms")).host, null, "every hold expired: no host time left");
  console.log(
    `shared alarm: ${sent.length} rows, delivery lag max ${Math.max(...lags)} ms; ` +
      `${holds.length} expiries, delay max ${Math.max(...late)} ms, ${duringTraffic} during traffic`,
  );
  assert.deepEqual(app.panics(), []);
});

test("an alarm the host pushes back directly is caught, and the row still arrives on time", async () => {
  // A long hold: the host's own time is a minute on.
  const hold = await get(`/shop/s2/hold?id=long&ttl_ms=60000`);
  await until(async () => (await arrivals("s2")).has(hold.seq), "the hold's row");
  const pushed = await get("/shop/s2/push-back?id=x");
  await until(async () => /relay_alarm_moved/.test(app.output), "the relay_alarm_moved warning");
  const line = app.output.split("\n").find((l) => l.includes("relay_alarm_moved"));
  assert.match(line, /setAlarm/, "the warning names the fix");
  await until(async () => (await arrivals("s2")).has(pushed.seq), "the late row to arrive");
  const lag = (await arrivals("s2")).get(pushed.seq) - pushed.at_ms;
  assert.ok(lag <= DELIVERY_BOUND_MS, `the row pushed back arrived after ${lag} ms`);
  const alarms = await get("/shop/s2/alarms");
  const holdAt = (await get("/shop/s2/holds"))[0].expires_ms;
  assert.equal(alarms.host, holdAt, "the host's own time stands");
  assert.ok(alarms.object !== null && alarms.object <= holdAt, `the object's alarm ${alarms.object} is not past the host's ${holdAt}`);
  console.log(`pushed back: the row arrived after ${lag} ms; ${line.trim()}`);
  assert.deepEqual(app.panics(), []);
});
