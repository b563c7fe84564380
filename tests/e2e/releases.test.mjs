// Two releases side by side, in workerd, as every deploy has them: the
// release this one replaces (tests/e2e/releases/previous.json) and the last
// release before source ids (before-ids.json), each built by
// scripts/build-previous, run beside the current build.
//
// - Each pairing of a source script and a target script across releases
//   (the target bound by script_name, as a target deployed on its own
//   schedule is), SIGKILLed while deliveries run: every row applied once,
//   in order, and nothing parked.
// - One namespace served by the previous release and the current build in
//   turn while rows flow, as a gradual deployment or a deferred code update
//   serves it, SIGKILLed at every other turn.
// - A partitioned source whose router runs one release and whose objects
//   the other: key homes, a resize (prepare, activate, seal) and the
//   logical reads cross the releases.
// - Upgrade, rollback and upgrade again, with rows queued, parked, delayed,
//   keyed and mid-drain, SIGKILLed at each step.

import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ROOT, Relay, put, startWrangler, until, writeRelayConfig } from "./harness.mjs";

/** The builds, as `Relay.start`'s `build`, by the name a test gives them. */
const BUILDS = { current: "test", previous: "releases/previous", "before-ids": "releases/before-ids" };

/** Fails unless build/releases/NAME holds the recorded commit's build. */
function checkBuilt(name) {
  const record = JSON.parse(readFileSync(join(ROOT, "tests", "e2e", "releases", `${name}.json`), "utf8"));
  const stamp = join(ROOT, "build", "releases", name, ".commit");
  assert.ok(existsSync(stamp) && readFileSync(stamp, "utf8").trim() === record.commit,
    `build/releases/${name} is not the recorded release: run scripts/build-previous`);
  return record;
}

/**
 * The reference Worker at `build`, as the script `script`, whose targets
 * are the RelayTarget class of the script `targets` (its own without one).
 */
function scriptConfig({ build, script, targets, vars = {} }) {
  const path = writeRelayConfig({ build, vars });
  const own = '{ name = "RELAY_TARGET", class_name = "RelayTarget" }';
  let text = readFileSync(path, "utf8");
  assert.ok(text.includes('name = "durable-relay"') && text.includes(own), "the reference config names its script and binds RELAY_TARGET");
  text = text.replace(/^name = "durable-relay"$/m, `name = "${script}"`);
  if (targets) text = text.replace(own, `{ name = "RELAY_TARGET", class_name = "RelayTarget", script_name = "${targets}" }`);
  writeFileSync(path, text);
  return path;
}

/** A session of two scripts on `persistDir`: sources at `source`'s build, their targets at `target`'s. */
async function startPair(source, target, persistDir) {
  const configs = [
    scriptConfig({ build: BUILDS[source], script: "relay-sources", targets: "relay-targets" }),
    scriptConfig({ build: BUILDS[target], script: "relay-targets" }),
  ];
  const app = await startWrangler({ configs, persistDir });
  app.tempFiles.push(...configs);
  return app;
}

/** What each (source, target) was sent, in sequence order, as `relay.log` answers it. */
class Sent {
  constructor() {
    this.seqs = new Map();
  }

  /** Enqueues `body` at `source` and records the rows it took. */
  async enqueue(relay, source, body) {
    const r = await relay.api("POST", `/v1/sources/${source}/enqueue`, body);
    assert.equal(r.status, 200, `enqueue at ${source}: ${r.text}`);
    if (!r.body.duplicate) body.rows.forEach((row, i) => this.add(source, row.target, r.body.seqs[i]));
    return r.body;
  }

  add(source, target, seq) {
    const key = `${source} ${target}`;
    this.seqs.set(key, [...(this.seqs.get(key) ?? []), seq]);
  }

  get total() {
    return [...this.seqs.values()].reduce((n, s) => n + s.length, 0);
  }

  /** Every row applied once, in order, at its target. */
  async check(relay, what) {
    for (const [key, seqs] of this.seqs) {
      const [source, target] = key.split(" ");
      assert.deepEqual(await relay.log(target, source), seqs, `${what}: ${target} from ${source}`);
    }
  }
}

const PAIRINGS = [
  ["previous", "previous"],
  ["previous", "current"],
  ["current", "previous"],
  ["current", "current"],
  ["before-ids", "current"],
  ["current", "before-ids"],
];

for (const [source, target] of PAIRINGS) {
  test(`a source of the ${source} release delivers to a target of the ${target} release, killed midway: every row once, in order, nothing parked`, async () => {
    for (const name of [source, target]) if (name !== "current") checkBuilt(name);
    const persistDir = mkdtempSync(join(tmpdir(), "relay-pair-"));
    const S = "rel-src";
    const sent = new Sent();
    // Rows to three targets, then SIGKILL while their deliveries run.
    let app = await startPair(source, target, persistDir);
    try {
      for (let i = 1; i <= 12; i++) await sent.enqueue(app, S, { rows: [put(`rel-t${i % 3}`, `k${i}`, i)] });
    } finally {
      app.kill();
      await app.stop();
    }
    app = await startPair(source, target, persistDir);
    try {
      const keyed = { idempotency_key: "rel-key", rows: [put("rel-t0", "key", 1), put("rel-t1", "key", 1)] };
      const first = await sent.enqueue(app, S, keyed);
      const again = await app.api("POST", `/v1/sources/${S}/enqueue`, keyed);
      assert.deepEqual([again.body.seqs, again.body.duplicate], [first.seqs, true], "the key answers its sequences");
      await sent.enqueue(app, S, { rows: [{ target: "rel-t2", puts: [["held", 1]], delay_ms: 1_500 }, put("rel-t2", "after", 1)] });
      await until(async () => (await app.status(S)).queued_rows === 0, `${source} -> ${target}: the rows to leave`, 60_000);
      const status = await app.status(S);
      assert.equal(status.parked_rows, 0, "nothing parked");
      assert.deepEqual(status.parked_targets ?? {}, {}, "no target parked");
      await sent.check(app, `${source} -> ${target}`);
      assert.equal(status.delivered_rows, sent.total, "every accepted row delivered once");
      if (target === "current" && source === "current") {
        const reply = await app.api("GET", "/v1/targets/rel-t0/status");
        assert.equal(reply.headers.get("relay-protocol"), "2", "an object says which protocol it speaks");
      }
      assert.deepEqual(app.panics(), []);
    } finally {
      await app.stop();
    }
  });
}

/**
 * A session where the front door (the router of partitioned sources) runs
 * `router`'s build and the source and target objects run `objects`'s: the
 * operations between a router and its partitions (prepare, activate, key
 * homes, seal, the logical reads) cross the two releases.
 */
async function startSplit(router, objects, vars, persistDir) {
  const front = scriptConfig({ build: BUILDS[router], script: "relay-front", targets: "relay-objects", vars });
  const text = readFileSync(front, "utf8");
  const own = '{ name = "RELAY_SOURCE", class_name = "RelaySource" }';
  assert.ok(text.includes(own), "the reference config binds RELAY_SOURCE");
  writeFileSync(front, text.replace(own, '{ name = "RELAY_SOURCE", class_name = "RelaySource", script_name = "relay-objects" }'));
  const configs = [front, scriptConfig({ build: BUILDS[objects], script: "relay-objects", vars })];
  const app = await startWrangler({ configs, persistDir });
  app.tempFiles.push(...configs);
  return app;
}

for (const [router, objects] of [["previous", "current"], ["current", "previous"]]) {
  test(`a partitioned source whose router runs the ${router} release and whose objects the ${objects}: keys, a resize and every read cross the releases, every row once, in order`, async () => {
    checkBuilt("previous");
    const L = "prel";
    const map = (partitions, epoch, from) => ({ RELAY_PARTITIONS: JSON.stringify({ [L]: from ? { partitions, epoch, from } : { partitions, epoch } }) });
    const persistDir = mkdtempSync(join(tmpdir(), "relay-split-"));
    /** Rows sent to each (partition object, target), in sequence order. */
    const sent = new Map();
    let n = 0;
    const load = async (app, requests) => {
      for (let i = 0; i < requests; i++) {
        n += 1;
        const rows = [put(`prt${n % 4}`, `k${n}`, n), put(`prt${(n + 1) % 4}`, `j${n}`, n)];
        const body = { idempotency_key: `split-${n}`, rows };
        const r = await app.api("POST", `/v1/sources/${L}/enqueue`, body);
        assert.equal(r.status, 200, r.text);
        r.body.positions.forEach((pos, j) => {
          const key = `${L}:${pos.partition} ${rows[j].target}`;
          sent.set(key, [...(sent.get(key) ?? []), pos.seq]);
        });
        if (i === 0) {
          const again = await app.api("POST", `/v1/sources/${L}/enqueue`, body);
          assert.deepEqual([again.body.positions, again.body.duplicate], [r.body.positions, true], "a keyed repeat answers its positions");
        }
      }
    };
    const check = async (app, what) => {
      await until(async () => (await app.status(L)).queued_rows === 0, `${what}: drained`, 90_000);
      const s = await app.status(L);
      assert.equal(s.parked_rows, 0, `${what}: nothing parked`);
      for (const [key, seqs] of sent) {
        const [source, target] = key.split(" ");
        assert.deepEqual(await app.log(target, source), seqs, `${what}: ${target} from ${source}`);
      }
      const w = await app.api("GET", `/v1/sources/${L}/watermark`);
      assert.equal(w.status, 200, `${what}: the logical watermark: ${w.text}`);
      const delivered = (script) => new RegExp(`\\[${script}\\][^\\n]*"event":"relay_(delivery|alarm)"`);
      assert.match(app.output, delivered("relay-objects"), `${what}: the objects' script delivers`);
      assert.doesNotMatch(app.output, delivered("relay-front"), `${what}: the router's script holds no source`);
    };

    let app = await startSplit(router, objects, map(2, 1), persistDir);
    try {
      await load(app, 12);
      await check(app, "two partitions");
    } finally {
      await app.stop();
    }
    // A resize: the router adopts the new map at every partition.
    app = await startSplit(router, objects, map(3, 2, 2), persistDir);
    try {
      await load(app, 12);
      await check(app, "three partitions");
      assert.deepEqual(app.panics(), []);
    } finally {
      await app.stop();
    }
  });
}

// Park after 2 failed cycles; one target per fire and one fire per alarm,
// so a bulk load drains over many deliveries and a turn ends mid-drain.
const VARS = { RELAY_PARK_AFTER_FAILED_CYCLES: "2", RELAY_TARGETS_PER_FIRE: "1", RELAY_FIRES_PER_ALARM: "1" };

test("one namespace served by the previous release and the current build in turn while rows flow: every row once, in order", async () => {
  checkBuilt("previous");
  const persistDir = mkdtempSync(join(tmpdir(), "relay-alternate-"));
  const sources = ["alt-a", "alt-b", "alt-c"];
  const sent = new Sent();
  const turns = ["previous", "current", "previous", "current", "previous", "current"];
  let n = 0;
  for (const [i, build] of turns.entries()) {
    const relay = await Relay.start({ build: BUILDS[build], vars: VARS, persistDir });
    try {
      // Rows to eight targets from three sources for two seconds; the
      // deliveries they start are under way when the turn ends.
      const endAt = Date.now() + 2_000;
      while (Date.now() < endAt) {
        n += 1;
        const rows = [put(`alt-t${n % 8}`, `k${n}`, n), put(`alt-t${(n + 3) % 8}`, `j${n}`, n)];
        await sent.enqueue(relay, sources[n % 3], { rows });
      }
      const status = await relay.status(sources[0]);
      assert.equal(status.parked_rows, 0, `turn ${i} (${build}): nothing parked`);
    } finally {
      // Every other turn ends with the process killed mid-delivery.
      if (i % 2 === 0) relay.kill();
      await relay.stop();
    }
  }
  const relay = await Relay.start({ vars: VARS, persistDir });
  try {
    for (const source of sources) {
      const s = await relay.drained(source, 180_000);
      assert.equal(s.parked_rows, 0, `${source}: nothing parked`);
    }
    await sent.check(relay, "alternating releases");
    relay.seen.sources = new Set(sources);
    relay.seen.targets = new Set([...Array(8).keys()].map((t) => `alt-t${t}`));
    assert.deepEqual(await relay.audit(), [], "the relay's own audit");
    assert.deepEqual(relay.panics(), []);
    console.log(`alternating releases: ${turns.length} turns, ${sent.total} rows from ${sources.length} sources, every one applied once, in order`);
  } finally {
    await relay.stop();
  }
});

test("upgrade, rollback and upgrade again with rows queued, parked, delayed, keyed and mid-drain, killed at each step: every row once, in order", async () => {
  checkBuilt("previous");
  const persistDir = mkdtempSync(join(tmpdir(), "relay-rollback-"));
  const SRC = "urr";
  const sent = new Sent();
  const fault = async (relay, path, body) => {
    const r = await relay.api("POST", path, body);
    assert.equal(r.status, 200, `${path}: ${r.text}`);
  };
  const bulk = async (relay, from) => {
    const rows = [];
    for (let j = from; j < from + 120; j++) rows.push(put(`urr-b${j % 40}`, `k${j}`, j));
    await sent.enqueue(relay, SRC, { rows });
  };
  /** Waits until `SRC` has delivered `more` rows past what it had, then kills the process. */
  const killMidDrain = async (relay, more) => {
    const start = (await relay.status(SRC)).delivered_rows;
    await until(async () => (await relay.status(SRC)).delivered_rows >= start + more, "the drain to be under way", 60_000);
    const at = await relay.status(SRC);
    relay.kill();
    await relay.stop();
    assert.ok(at.queued_rows > 0, "killed before the drain finished");
    return at;
  };
  const keyed = { idempotency_key: "urr-order", rows: [put("urr-keyed", "order", 1), put("urr-keyed-2", "order", 1)] };
  const DELAY_MS = 45_000;

  // The previous release: a parked target, a delayed row held, a keyed
  // request, a bulk load killed mid-drain.
  let relay = await Relay.start({ build: BUILDS.previous, vars: VARS, persistDir });
  await fault(relay, "/v1/targets/urr-parked/faults", { reject: true });
  await sent.enqueue(relay, SRC, { rows: [1, 2, 3].map((i) => put("urr-parked", `p${i}`, i)) });
  await until(async () => (await relay.status(SRC)).parked_targets["urr-parked"] === 3, "urr-parked to be parked", 90_000);
  const keyedSeqs = (await sent.enqueue(relay, SRC, keyed)).seqs;
  const delayed = await sent.enqueue(relay, SRC, { rows: [{ target: "urr-delay", puts: [["d", 1]], delay_ms: DELAY_MS }, put("urr-delay", "d", 2)] });
  const due = delayed.due_ms[0];
  await bulk(relay, 0);
  const first = await killMidDrain(relay, 10);

  // Upgrade: the current build takes over, keeps every promise, and is killed mid-drain.
  relay = await Relay.start({ vars: VARS, persistDir });
  let status = await relay.status(SRC);
  assert.equal(status.parked_targets["urr-parked"], 3, "still parked after the upgrade");
  assert.equal(status.enqueued_rows, first.enqueued_rows, "every accepted row still counted");
  let again = await relay.api("POST", `/v1/sources/${SRC}/enqueue`, keyed);
  assert.deepEqual([again.body.seqs, again.body.duplicate], [keyedSeqs, true], "the key answers after the upgrade");
  await bulk(relay, 1_000);
  await killMidDrain(relay, 10);

  // Rollback: the previous release runs on what the current build wrote.
  relay = await Relay.start({ build: BUILDS.previous, vars: VARS, persistDir });
  status = await relay.status(SRC);
  assert.equal(status.parked_targets["urr-parked"], 3, "still parked after the rollback");
  again = await relay.api("POST", `/v1/sources/${SRC}/enqueue`, keyed);
  assert.deepEqual([again.body.seqs, again.body.duplicate], [keyedSeqs, true], "the key answers after the rollback");
  await bulk(relay, 2_000);
  if (Date.now() < due) assert.deepEqual(await relay.log("urr-delay", SRC), [], "the delayed rows wait for their time");
  await killMidDrain(relay, 10);

  // Upgrade again: everything drains, the parked rows are redriven, the
  // delayed ones arrive no earlier than their time.
  relay = await Relay.start({ vars: VARS, persistDir });
  try {
    await fault(relay, "/v1/targets/urr-parked/faults", { reject: false });
    const redrive = await relay.api("POST", `/v1/sources/${SRC}/parked/urr-parked/redrive`);
    assert.deepEqual(redrive.body, { rows: 3, was_parked: true });
    const drained = await relay.drained(SRC, 180_000);
    await until(async () => (await relay.log("urr-delay", SRC)).length === 2, "the delayed rows, once due", DELAY_MS + 60_000);
    assert.ok(Date.now() >= due, "the delayed rows applied no earlier than their due time");
    assert.equal(drained.parked_rows, 0, "nothing parked");
    await sent.check(relay, "upgrade, rollback, upgrade");
    const final = await relay.status(SRC);
    assert.equal(final.enqueued_rows, sent.total, "every accepted row counted once");
    assert.equal(final.delivered_rows, sent.total, "every accepted row delivered once");
    assert.deepEqual(await relay.audit(), [], "the relay's own audit");
    assert.deepEqual(relay.panics(), []);
    console.log(`upgrade, rollback, upgrade: ${sent.total} rows, killed mid-drain at each of 3 steps, every one applied once, in order`);
  } finally {
    await relay.stop();
  }
});
