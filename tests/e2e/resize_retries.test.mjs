// Crashes, retries and map changes in workerd, in the sequences a careful
// user runs into: a keyed request sent, the relay SIGKILLed, restarted under
// another partition map, and the request sent again; a plain source with
// rows waiting made partitioned (its rows visible to every logical read even
// under a map refused for leaving them out); and producers retrying keyed requests
// through kills during two resizes. Each must answer what was committed
// the first time, keep every row visible and in order, and apply every
// acknowledged row exactly once.

import { test } from "node:test";
import assert from "node:assert/strict";
import { Relay, home, sleep, until } from "./harness.mjs";

/** The first name `prefix-i` whose homes under each count are as asked. */
function homed(prefix, want) {
  for (let i = 0; ; i++) {
    const name = `${prefix}-${i}`;
    if (Object.entries(want).every(([n, h]) => home(name, Number(n)) === h)) return name;
  }
}

const mapOf = (source, m) => ({ RELAY_PARTITIONS: JSON.stringify({ [source]: m }) });
const enq = (relay, source, body) => relay.api("POST", `/v1/sources/${source}/enqueue`, body);
const valueAt = async (relay, target) => (await relay.api("GET", `/v1/targets/${target}/keys`)).body.keys.find((k) => k.key === "v")?.value;

test("a keyed retry after a crash and a map change answers the first commit, under every later map", async () => {
  const S = "pk";
  const moving = homed("mv", { 2: 1, 3: 0 });
  const staying = homed("st", { 2: 0, 3: 0 });
  let relay = await Relay.start({ vars: mapOf(S, { partitions: 2, epoch: 1 }) });
  try {
    // A delayed row: still queued when the map changes.
    const delayed = { idempotency_key: "k1", rows: [{ target: moving, puts: [["v", "a"]], delay_ms: 60_000 }] };
    const first = await enq(relay, S, delayed);
    assert.equal(first.status, 200, first.text);
    // A spanning request over a moving and a staying target.
    const span = { idempotency_key: "k2", rows: [{ target: staying, puts: [["w", 1]], delay_ms: 60_000 }, { target: moving, puts: [["w", 1]], delay_ms: 60_000 }] };
    const spanFirst = await enq(relay, S, span);
    assert.equal(spanFirst.status, 200, spanFirst.text);
    await relay.stop();

    relay = await Relay.start({ vars: mapOf(S, { partitions: 3, epoch: 2, from: 2 }), persistDir: relay.persistDir });
    const again = await enq(relay, S, delayed);
    assert.equal(again.status, 200, again.text);
    assert.equal(again.body.duplicate, true, `the retry is the first request: ${again.text}`);
    assert.deepEqual(again.body.positions, first.body.positions);
    const spanAgain = await enq(relay, S, span);
    assert.equal(spanAgain.status, 200, `a spanning retry is answered, not refused: ${spanAgain.text}`);
    assert.equal(spanAgain.body.duplicate, true, spanAgain.text);
    assert.deepEqual(spanAgain.body.positions, spanFirst.body.positions);
    const status = await relay.status(S);
    assert.equal(status.queued_rows, 3, "one row per row sent, none twice");
    await relay.stop();

    // from dropped (the epoch raised, as every change must): the same answers.
    relay = await Relay.start({ vars: mapOf(S, { partitions: 3, epoch: 3 }), persistDir: relay.persistDir });
    const dropped = await enq(relay, S, delayed);
    assert.equal(dropped.body.duplicate, true, `answered from the records, whatever the map: ${dropped.text}`);
    assert.deepEqual(dropped.body.positions, first.body.positions);
    assert.equal(dropped.body.queued_rows, 3, "the reply counts the rows waiting at every object the key reached");
    // A new row: the delayed rows still wait at the old homes, so the map must keep 2 in from.
    const fresh = await enq(relay, S, { rows: [{ target: moving, puts: [["v", "c"]] }] });
    assert.equal(fresh.status, 409, fresh.text);
    assert.equal(fresh.body.error.code, "unsettled_layout");
    assert.equal((await relay.status(S)).queued_rows, 3, "the refusal wrote nothing");
    assert.deepEqual(relay.panics(), []);
  } finally {
    await relay.stop();
  }
});

test("a keyed retry of a delivered row after a map change applies nothing again: a newer value stays", async () => {
  const S = "pd";
  const moving = homed("dv", { 2: 1, 3: 0 });
  let relay = await Relay.start({ vars: mapOf(S, { partitions: 2, epoch: 1 }) });
  try {
    const old = { idempotency_key: "old", rows: [{ target: moving, puts: [["v", "a"]] }] };
    const first = await enq(relay, S, old);
    assert.equal(first.status, 200, first.text);
    assert.equal((await enq(relay, S, { idempotency_key: "new", rows: [{ target: moving, puts: [["v", "b"]] }] })).status, 200);
    await until(async () => (await valueAt(relay, moving)) === "b", "the newer value");
    await relay.stop();

    for (const [i, m] of [{ partitions: 3, epoch: 2, from: 2 }, { partitions: 3, epoch: 3 }].entries()) {
      relay = await Relay.start({ vars: mapOf(S, m), persistDir: relay.persistDir });
      const again = await enq(relay, S, old);
      assert.equal(again.status, 200, again.text);
      assert.equal(again.body.duplicate, true, `map ${i}: ${again.text}`);
      assert.deepEqual(again.body.positions, first.body.positions);
      await until(async () => (await relay.status(S)).queued_rows === 0, "nothing left to deliver");
      await sleep(500);
      assert.equal(await valueAt(relay, moving), "b", `map ${i}: the older value never comes back`);
      const wm = (await relay.api("GET", `/v1/targets/${moving}/watermarks`)).body;
      const applied = wm.watermarks.reduce((a, w) => a + w.applied_rows, 0);
      assert.equal(applied, 2, `two rows sent, two applied: ${JSON.stringify(wm)}`);
      await relay.stop();
    }
  } finally {
    await relay.stop();
  }
});

test("a plain source made partitioned keeps its waiting rows visible and in order", async () => {
  const S = "cv";
  const parkedT = "cv-parked";
  const delayedT = homed("cv-late", { 2: 1 });
  let relay = await Relay.start();
  try {
    await relay.api("POST", `/v1/targets/${parkedT}/faults`, { reject: true, permanent: true });
    assert.equal((await enq(relay, S, { rows: [{ target: parkedT, puts: [["v", 1]] }, { target: parkedT, puts: [["v", 2]] }] })).status, 200);
    assert.equal((await enq(relay, S, { idempotency_key: "plain-k", rows: [{ target: delayedT, puts: [["v", "old"]], delay_ms: 12_000 }] })).status, 200);
    await until(async () => (await relay.status(S)).parked_rows === 2, "two parked rows");
    await relay.stop();

    // Without the plain layout in from, the map is refused and nothing moves.
    relay = await Relay.start({ vars: mapOf(S, { partitions: 2, epoch: 1 }), persistDir: relay.persistDir });
    const refused = await enq(relay, S, { rows: [{ target: delayedT, puts: [["v", "new"]] }] });
    assert.equal(refused.status, 409, refused.text);
    assert.equal(refused.body.error.code, "unsettled_layout");
    // Every logical read still shows the rows the map left at the plain object.
    const hidden = await relay.status(S);
    assert.equal(hidden.queued_rows, 1, JSON.stringify(hidden));
    assert.equal(hidden.parked_rows, 2);
    assert.equal(hidden.resize_settled, false);
    assert.deepEqual(hidden.partitions.map((p) => p.partition), ["plain", 0, 1]);
    const listed = (await relay.api("GET", `/v1/sources/${S}/parked`)).body.targets;
    assert.deepEqual(listed.map((t) => [t.target, t.partition]), [[parkedT, "plain"]]);
    const rows = await relay.api("GET", `/v1/sources/${S}/parked/${parkedT}`);
    assert.equal(rows.status, 200, rows.text);
    assert.equal(rows.body.rows.length, 2, "a parked target's rows at the logical name are the plain object's");
    await relay.stop();

    relay = await Relay.start({ vars: mapOf(S, { partitions: 2, epoch: 2, from: "plain" }), persistDir: relay.persistDir });
    const status = await relay.status(S);
    assert.equal(status.queued_rows, 1, JSON.stringify(status));
    assert.equal(status.parked_rows, 2);
    assert.equal(status.resize_settled, false);
    const parked = (await relay.api("GET", `/v1/sources/${S}/parked`)).body.targets;
    assert.deepEqual(parked.map((t) => [t.target, t.partition]), [[parkedT, "plain"]]);
    const retry = await enq(relay, S, { idempotency_key: "plain-k", rows: [{ target: delayedT, puts: [["v", "old"]], delay_ms: 12_000 }] });
    assert.equal(retry.body.duplicate, true, `the plain source's key still answers: ${retry.text}`);
    const fresh = await enq(relay, S, { rows: [{ target: delayedT, puts: [["v", "new"]] }] });
    assert.equal(fresh.status, 200, fresh.text);
    assert.equal(fresh.body.positions[0].partition, "plain", "behind the delayed row, at the plain object");
    await relay.api("POST", `/v1/targets/${parkedT}/faults`, { reject: false });
    const redrive = await relay.api("POST", `/v1/sources/${S}/parked/${parkedT}/redrive`);
    assert.deepEqual(redrive.body, { rows: 2, was_parked: true }, redrive.text);
    await until(async () => (await relay.status(S)).queued_rows === 0, "every row delivered", 40_000);
    assert.equal(await valueAt(relay, delayedT), "new", "the newer row applied last");
    assert.equal(await valueAt(relay, parkedT), 2);
    assert.deepEqual(await relay.audit(), []);
    assert.deepEqual(relay.panics(), []);
  } finally {
    await relay.stop();
  }
});

test("producers retrying keyed requests through kills during two resizes: every acknowledged row applied once", async () => {
  const S = "chaos";
  const TARGETS = Array.from({ length: 24 }, (_, i) => `ch-${i}`);
  const PRODUCERS = 16;
  const PER_PRODUCER = 40;
  // The maps in deploy order, each with the kills it takes while load runs;
  // a map without from waits until the last resize settled.
  const steps = [
    { map: { partitions: 2, epoch: 1 }, kills: 1 },
    { map: { partitions: 4, epoch: 2, from: 2 }, kills: 1 },
    { map: { partitions: 4, epoch: 3 }, kills: 1 },
    { map: { partitions: 3, epoch: 4, from: 4 }, kills: 2 },
  ];
  let relay = await Relay.start({ vars: mapOf(S, steps[0].map) });
  const persistDir = relay.persistDir;
  let up = true;
  const acked = new Map(); // key -> target
  let retries = 0;
  const producer = async (p) => {
    for (let i = 0; i < PER_PRODUCER; i++) {
      const key = `p${p}-${i}`;
      const target = TARGETS[(p * 7 + i * 5) % TARGETS.length];
      const body = { idempotency_key: key, rows: [{ target, puts: [["v", key]] }] };
      for (;;) {
        if (!up) {
          await sleep(100);
          continue;
        }
        const r = await enq(relay, S, body).catch(() => null);
        if (r?.status === 200) {
          acked.set(key, target);
          break;
        }
        const transient = !r || r.status >= 500 || ["superseded", "stale_epoch"].includes(r.body?.error?.code);
        assert.ok(transient, `only a crash or a map in motion refuses: ${r?.text}`);
        retries++;
        await sleep(50);
      }
    }
  };
  const kills = [];
  const chaos = async () => {
    for (const [s, step] of steps.entries()) {
      for (let k = 0; k < step.kills; k++) {
        await sleep(700 + ((s * 3 + k) % 4) * 250);
        const next0 = k + 1 === step.kills ? steps[s + 1] : step;
        if (next0 && next0.map.from === undefined) {
          await until(async () => (await relay.status(S)).resize_settled, "the resize to settle", 60_000);
        }
        up = false;
        await relay.stop();
        const next = k + 1 === step.kills ? steps[s + 1] : step;
        if (!next) {
          relay = await Relay.start({ vars: mapOf(S, step.map), persistDir });
          up = true;
          return;
        }
        relay = await Relay.start({ vars: mapOf(S, next.map), persistDir });
        kills.push(`${JSON.stringify(next.map)} after ${acked.size} acknowledged`);
        up = true;
      }
    }
  };
  try {
    await Promise.all([chaos(), ...Array.from({ length: PRODUCERS }, (_, p) => producer(p))]);
    await until(async () => (await relay.status(S)).queued_rows === 0, "every row delivered", 120_000);
    let applied = 0;
    for (const t of TARGETS) {
      const wm = (await relay.api("GET", `/v1/targets/${t}/watermarks`)).body;
      applied += wm.watermarks.reduce((a, w) => a + w.applied_rows, 0);
    }
    console.log(`chaos: ${acked.size} acknowledged, ${retries} retries, kills: ${kills.join("; ")}; applied ${applied}`);
    assert.equal(acked.size, PRODUCERS * PER_PRODUCER);
    assert.equal(applied, acked.size, "every acknowledged row applied exactly once");
    assert.deepEqual(await relay.audit(), []);
    assert.deepEqual(relay.panics(), []);
  } finally {
    up = false;
    await relay.stop();
  }
});
