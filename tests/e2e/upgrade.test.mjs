// Upgrading in place, in workerd: the oldest release whose storage the
// current build upgrades (tests/e2e/releases/before-ids.json, built into
// build/releases/before-ids by scripts/build-previous) runs with rows in every state a deploy finds
// them in — queued for many targets, failing at a target that rejects,
// parked, delayed behind their hold, keyed, and applied at their target
// with the source's checkpoint lost — and is SIGKILLed mid-drain. The
// current build then starts on the same persisted state, migrates each
// object as it opens, and drains everything: every accepted row applied
// exactly once and in order, none lost, the delayed ones not before their
// time, the idempotency key still answering its original sequences, the
// relay's own audit clean and the counters adding up.

import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { ROOT, Relay, put, sleep, until } from "./harness.mjs";

const PREVIOUS = JSON.parse(readFileSync(join(ROOT, "tests", "e2e", "releases", "before-ids.json"), "utf8"));
/** That release's test build, as `Relay.start`'s `build`. */
const PREVIOUS_BUILD = "releases/before-ids";

// Park after 6 failed cycles (1 s back-off doubling to 10 s: parked about
// 25 s after the first failure), so one rejecting target can be parked and
// another still failing when the relay is killed, with room for a slow
// machine; one target per alarm, so
// the bulk rows drain over hundreds of alarms and the kill lands mid-drain.
const VARS = { RELAY_PARK_AFTER_FAILED_CYCLES: "6", RELAY_TARGETS_PER_FIRE: "1", RELAY_FIRES_PER_ALARM: "1" };
const SRC = "upg";
const CRASH_SRC = "upg-crash";
const DELAY_MS = 30_000;
const BULK_ROWS = 300;
const BULK_TARGETS = 100;
const trace = `00-${"7".repeat(32)}-00f067aa0ba902b7-01`;

test("the oldest release, killed with rows in flight, upgrades in place to the current build and drains every row exactly once", async () => {
  const stamp = join(ROOT, "build", PREVIOUS_BUILD, ".commit");
  assert.ok(existsSync(stamp) && readFileSync(stamp, "utf8").trim() === PREVIOUS.commit,
    `build/${PREVIOUS_BUILD} is not the recorded release: run scripts/build-previous`);

  // What each target was sent, per source, in sequence order.
  const sent = new Map();
  const accept = (source, rows, seqs) =>
    rows.forEach((row, i) => {
      const key = `${source} ${row.target}`;
      sent.set(key, [...(sent.get(key) ?? []), seqs[i]]);
    });
  const enqueue = async (relay, source, body, headers = {}) => {
    const r = await relay.api("POST", `/v1/sources/${source}/enqueue`, body, { headers });
    assert.equal(r.status, 200, `enqueue at ${source}: ${r.text}`);
    if (!r.body.duplicate) accept(source, body.rows, r.body.seqs);
    return r.body;
  };
  const fault = async (relay, path, body) => {
    const r = await relay.api("POST", path, body);
    assert.equal(r.status, 200, `${path}: ${r.text}`);
  };

  let relay = await Relay.start({ build: PREVIOUS_BUILD, vars: VARS });
  const persistDir = relay.persistDir;
  let seen, atKill, crashAtKill, applied;
  const keyed = { idempotency_key: "upg-order-1", rows: [put("upg-failing", "order", 1), put("upg-keyed", "order", 1)] };
  let keyedSeqs, due;
  try {
    // Parked: a target that rejects until the source parks it.
    await fault(relay, "/v1/targets/upg-parked/faults", { reject: true });
    await enqueue(relay, SRC, { rows: [1, 2, 3].map((i) => put("upg-parked", `p${i}`, i)) });
    await until(async () => (await relay.status(SRC)).parked_targets["upg-parked"] === 3, "upg-parked to be parked", 90_000);

    // Failing, with a failure record and a keyed enqueue among its rows.
    await fault(relay, "/v1/targets/upg-failing/faults", { reject: true });
    keyedSeqs = (await enqueue(relay, SRC, keyed)).seqs;
    await enqueue(relay, SRC, { rows: [put("upg-failing", "f", 2)] });
    await until(async () => (await relay.status(SRC)).failing_targets["upg-failing"] >= 1, "upg-failing to fail a cycle");

    // Delayed: a row with delay_ms and a later row of its target held behind it.
    const delayed = await enqueue(relay, SRC, {
      rows: [{ target: "upg-delay", puts: [["d", 1]], delay_ms: DELAY_MS }, put("upg-delay", "d", 2)],
    }, { traceparent: trace });
    due = delayed.due_ms[0];
    assert.deepEqual(delayed.due_ms, [due, due], "the later row inherits the hold");

    // Applied at their targets, the source's checkpoint lost: every
    // checkpoint of this source fails until the kill (the fault is the
    // object's memory, gone with it).
    await fault(relay, `/v1/sources/${CRASH_SRC}/faults`, { crash_checkpoints: 1_000_000 });
    const crashRows = [put("upg-crash-a", "c", 1), put("upg-crash-b", "c", 2), put("upg-crash-a", "c", 3)];
    await enqueue(relay, CRASH_SRC, { rows: crashRows });
    await until(async () => (await relay.log("upg-crash-a", CRASH_SRC)).length === 2 && (await relay.log("upg-crash-b", CRASH_SRC)).length === 1,
      "the crash source's rows to be applied");

    // Queued: many targets, drained one per alarm; killed mid-drain.
    for (let i = 0; i < BULK_ROWS; i += 150) {
      const rows = [];
      for (let j = i; j < i + 150; j++) rows.push(put(`upg-b${j % BULK_TARGETS}`, `k${j}`, j));
      await enqueue(relay, SRC, { rows });
    }
    const start = (await relay.status(SRC)).delivered_rows;
    for (;;) {
      atKill = await relay.status(SRC);
      if (atKill.delivered_rows >= start + 20) break;
      await sleep(20);
    }
    crashAtKill = await relay.status(CRASH_SRC);
    relay.kill();
    await relay.stop();
    seen = relay.seen;

    assert.ok(atKill.queued_rows > 0, "killed before the drain finished");
    assert.equal(atKill.parked_targets["upg-parked"], 3, "parked at the kill");
    assert.ok(atKill.failing_targets["upg-failing"] >= 1, "failing at the kill, not yet parked");
    assert.ok(Date.now() < due, "the delayed rows were still held at the kill");
    assert.equal(crashAtKill.queued_rows, crashRows.length, "applied, yet still queued at their source");

    // The current build on the same state.
    relay = await Relay.start({ vars: VARS, persistDir });
    for (const kind of ["sources", "targets"]) for (const name of seen[kind]) relay.seen[kind].add(name);
    const upgraded = await relay.status(SRC);
    assert.equal(upgraded.parked_targets["upg-parked"], 3, "still parked after the upgrade");
    assert.equal(upgraded.enqueued_rows, atKill.enqueued_rows, "every accepted row is still counted");
    const early = Date.now() < due;
    if (early) assert.deepEqual(await relay.log("upg-delay", SRC), [], "the delayed rows wait for their time after the upgrade");

    // The repeated key answers the original sequences, as a duplicate.
    const again = await relay.api("POST", `/v1/sources/${SRC}/enqueue`, keyed);
    assert.equal(again.status, 200, again.text);
    assert.deepEqual([again.body.seqs, again.body.duplicate], [keyedSeqs, true], "the key is remembered across the upgrade");

    // Clear the faults and redrive the parked target.
    await fault(relay, "/v1/targets/upg-parked/faults", { reject: false });
    await fault(relay, "/v1/targets/upg-failing/faults", { reject: false });
    const redrive = await relay.api("POST", `/v1/sources/${SRC}/parked/upg-parked/redrive`);
    assert.deepEqual(redrive.body, { rows: 3, was_parked: true });
    const total = [...sent.values()].reduce((n, seqs) => n + seqs.length, 0);
    const sources = {};
    for (const source of [SRC, CRASH_SRC]) {
      sources[source] = await relay.drained(source, 120_000);
      assert.equal(sources[source].parked_rows, 0, `${source}: nothing parked`);
    }

    // Every accepted row applied exactly once, in order, at its target.
    applied = 0;
    for (const [key, seqs] of sent) {
      const [source, target] = key.split(" ");
      assert.deepEqual(await relay.log(target, source), seqs, `${target} from ${source}`);
      applied += seqs.length;
    }
    assert.equal(applied, total);

    // The delayed rows applied no earlier than their due time.
    const apply = relay.applyLogs().find((l) => l.source === SRC && l.traces.includes(trace));
    assert.ok(apply, "the delayed rows' relay_apply line");
    assert.ok(apply.at_ms >= due, `applied at ${apply.at_ms}, ${due - apply.at_ms} ms before its due time`);

    // The counters add up, and the relay's own audit passes.
    let enqueued = 0;
    for (const [source, s] of Object.entries(sources)) {
      assert.equal(s.enqueued_rows, s.delivered_rows + s.discarded_rows, `${source}: enqueued = delivered + discarded`);
      assert.equal(s.discarded_rows, 0, `${source}: nothing discarded`);
      enqueued += s.enqueued_rows;
    }
    assert.equal(enqueued, total, "every accepted row counted once");
    assert.deepEqual(await relay.audit(), [], "the relay's own audit");
    assert.deepEqual(relay.panics(), []);

    const delivered = Object.values(sources).reduce((n, s) => n + s.delivered_rows, 0);
    const inFlight = atKill.queued_rows + atKill.parked_rows + crashAtKill.queued_rows;
    console.log(
      `upgrade ${PREVIOUS.commit.slice(0, 12)} (source schema ${PREVIOUS.schema.relay_source}, target ${PREVIOUS.schema.relay_target}) -> current: ` +
      `in flight at the kill ${inFlight} rows (queued ${atKill.queued_rows + crashAtKill.queued_rows}, parked ${atKill.parked_rows}, ` +
      `delayed 2, failing targets ${Object.keys(atKill.failing_targets).length}, applied but not checkpointed ${crashAtKill.queued_rows}); ` +
      `delivered after the upgrade ${delivered - atKill.delivered_rows - crashAtKill.delivered_rows}; ` +
      `delayed checked held after the upgrade: ${early ? "yes" : "no (started past due)"}; ` +
      `applied ${applied} of ${total} accepted, duplicates 0, lost 0`,
    );
  } finally {
    await relay.stop();
  }
});
