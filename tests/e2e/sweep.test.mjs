// No stranded rows, in real workerd: a source whose alarm the platform
// dropped, and which then gets no traffic, is delivered by the scheduled
// sweep (the Worker's Cron Trigger, run here through wrangler's
// /__scheduled). Each run takes the next page of the source directory, so a
// round over more sources than one run checks takes several runs; every run
// reads a bounded number of rows.

import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { Relay, put, sleep, until } from "./harness.mjs";

/** Sources one sweep run checks (SWEEP_SOURCES_PER_RUN in src/sweep.rs). */
const PER_RUN = 32;
/** Listed sources: more than one run's page. */
const SOURCES = 40;
/** Rows one run may read: the directory's cursor and page, and the state row and the unfolded tail per source. */
const RUN_ROWS_READ_MAX = 2 + (PER_RUN + 1) + PER_RUN * 6;

let relay;
before(async () => {
  relay = await Relay.start();
});
after(async () => {
  await relay?.stop();
});

const name = (i) => `sw-${String(i).padStart(2, "0")}`;

/** The sweep log lines printed so far. */
const sweeps = () =>
  relay.output
    .split("\n")
    .filter((l) => l.includes('"event":"relay_sweep"'))
    .map((l) => JSON.parse(l.slice(l.indexOf("{"))));

/** Leaves `src` with a row queued and no stored alarm, as after the platform gave up on it. */
async function strand(src, target) {
  await relay.api("POST", `/v1/targets/${target}/faults`, { reject: true });
  await relay.enqueue(src, [put(target, "k", 1)]);
  await until(async () => Object.keys((await relay.status(src)).failing_targets).length === 1, `${src} failing`);
  await relay.api("POST", `/v1/sources/${src}/faults`, { drop_alarm: true });
  await relay.api("POST", `/v1/targets/${target}/faults`, { reject: false });
}

test("the scheduled sweep re-arms sources left with rows and no alarm, a bounded page per run", async () => {
  // Every source lists itself in the directory with its first row.
  for (let i = 0; i < SOURCES; i++) {
    if (i === 3 || i === 37) continue;
    await relay.enqueue(name(i), [put(`${name(i)}-t`, "k", i)]);
  }
  // One stranded source on each page of the round.
  await strand(name(3), "sw-down-a");
  await strand(name(37), "sw-down-b");
  await sleep(4_000);
  assert.deepEqual(await relay.log("sw-down-a", name(3)), [], "no traffic, no alarm: nothing moves");
  assert.deepEqual(await relay.log("sw-down-b", name(37)), []);

  await relay.scheduled();
  await until(async () => (await relay.log("sw-down-a", name(3))).length === 1, "the first run's source delivered");
  assert.deepEqual(await relay.log("sw-down-b", name(37)), [], "the second page waits for the next run");
  await relay.scheduled();
  await until(async () => (await relay.log("sw-down-b", name(37))).length === 1, "the second run's source delivered");

  await until(async () => sweeps().length === 2, "two sweep log lines");
  const [first, second] = sweeps();
  console.log(`sweep runs: ${JSON.stringify(sweeps())}`);
  assert.equal(first.sources, PER_RUN);
  assert.equal(first.round_complete, false);
  assert.equal(second.sources, SOURCES - PER_RUN);
  assert.equal(second.round_complete, true);
  assert.equal(first.rearmed + second.rearmed, 2, "only the stranded sources were re-armed");
  assert.equal(first.failed + second.failed, 0);
  for (const run of [first, second]) {
    const read = run.directory_rows_read + run.source_rows_read;
    assert.ok(read <= RUN_ROWS_READ_MAX, `a run read ${read} rows`);
  }

  // A third run starts the round again from the first source, and finds nothing to do.
  await relay.scheduled();
  await until(async () => sweeps().length === 3, "a third sweep log line");
  assert.equal(sweeps()[2].sources, PER_RUN);
  assert.equal(sweeps()[2].rearmed, 0);
  assert.deepEqual(await relay.audit(), [], "the relay's own audit");
});
