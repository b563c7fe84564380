// Delayed rows in workerd: a row with delay_ms or not_before_ms is applied
// no earlier than its time (judged by the target's own clock in its
// relay_apply line), holds back the later rows of its target and no other
// target, and the source's alarm waits for it; delays past the limit, or
// both fields at once, are refused and write nothing.

import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { Relay, until } from "./harness.mjs";

const MAX_DELAY_MS = 86_400_000;

let relay;
before(async () => {
  relay = await Relay.start();
});
after(async () => {
  await relay?.stop();
});

const trace = (n) => `00-${"d".repeat(31)}${n}-00f067aa0ba902b7-01`;
const enqueue = (source, body, tp) =>
  relay.api("POST", `/v1/sources/${source}/enqueue`, body, { headers: tp ? { traceparent: tp } : {} });

test("a delayed row waits for its time, holds back its own target's later rows and no other target", async () => {
  const src = "dl-src";
  const rows = [
    { target: "dl-a", puts: [["k", 1]], delay_ms: 3_000 },
    { target: "dl-a", puts: [["k", 2]] },
    { target: "dl-b", puts: [["k", 3]] },
  ];
  const r = await enqueue(src, { rows }, trace(1));
  assert.equal(r.status, 200, r.text);
  const due = r.body.due_ms[0];
  assert.ok(due >= r.body.at_ms + 3_000, JSON.stringify(r.body));
  assert.deepEqual(r.body.due_ms, [due, due, 0], "a's later row inherits the wait; b does not");
  await until(async () => (await relay.keys("dl-b")).length === 1, "b delivered at once");
  assert.deepEqual(await relay.keys("dl-a"), [], "a waits");
  const waiting = await relay.status(src);
  assert.equal(waiting.queued_rows, 2);
  // Armed no later than the held rows are due; the enqueue's safety net (1 s
  // out) may wake the source sooner, and it then finds them held.
  assert.ok(waiting.alarm_at_ms > 0 && waiting.alarm_at_ms < due + 1_000, `alarm at ${waiting.alarm_at_ms}, due ${due}`);
  await until(async () => (await relay.status(src)).alarm_at_ms >= due, "the alarm set for the held rows' time", 5_000);
  await until(async () => (await relay.keys("dl-a")).length === 1, "a delivered after its time", 20_000);
  assert.deepEqual((await relay.keys("dl-a")).map((k) => k.value), [2], "in order: 1 then 2");
  assert.deepEqual(await relay.log("dl-a", src), r.body.seqs.slice(0, 2));
  const applies = relay.applyLogs().filter((l) => l.source === src && l.traces.includes(trace(1)));
  const forA = applies.find((l) => l.first_seq === r.body.seqs[0]);
  assert.ok(forA, JSON.stringify(applies));
  assert.ok(forA.at_ms >= due, `applied at ${forA.at_ms}, ${due - forA.at_ms} ms early`);
  const forB = applies.find((l) => l.first_seq === r.body.seqs[2]);
  assert.ok(forB.at_ms < due, "b was not held back");
  assert.deepEqual(await relay.audit(), []);
});

test("not_before_ms in the past is due at once; at the limit it is accepted and the alarm waits for it", async () => {
  const r = await enqueue("dl-past", { rows: [{ target: "dl-c", puts: [["k", 1]], not_before_ms: Date.now() - 60_000 }] });
  assert.equal(r.status, 200, r.text);
  assert.equal(r.body.due_ms, undefined, "no row is delayed");
  await until(async () => (await relay.keys("dl-c")).length === 1, "delivered at once");
  const far = Date.now() + MAX_DELAY_MS - 60_000;
  const held = await enqueue("dl-far", { rows: [{ target: "dl-d", puts: [["k", 1]], not_before_ms: far }] });
  assert.equal(held.status, 200, held.text);
  const s = await relay.status("dl-far");
  assert.ok(s.alarm_at_ms >= far && s.alarm_at_ms < far + 1_000, `alarm at ${s.alarm_at_ms}`);
  assert.equal(s.lag_exceeded, false);
  assert.deepEqual(await relay.audit(), []);
});

test("a delay past the limit, both fields, or a malformed delay is refused and writes nothing", async () => {
  const src = "dl-bad";
  await relay.enqueue(src, [{ target: "dl-e", puts: [["k", 0]] }]);
  const before = await relay.status(src);
  // Written as JSON text, so numbers JavaScript cannot hold reach the relay as sent.
  const bad = [
    [`"delay_ms":${MAX_DELAY_MS + 1}`, "delay_too_long"],
    [`"not_before_ms":${Date.now() + MAX_DELAY_MS + 60_000}`, "delay_too_long"],
    [`"delay_ms":5,"not_before_ms":${Date.now() + 5}`, "conflicting_delay"],
    [`"delay_ms":-1`, "invalid_request"],
    [`"delay_ms":1.5`, "invalid_request"],
    [`"delay_ms":"5"`, "invalid_request"],
    [`"not_before_ms":1e400`, "malformed_json"], // serde_json: "number out of range"
    [`"delay_ms":18446744073709551616`, "invalid_request"],
  ];
  for (const [fields, code] of bad) {
    const body = `{"rows":[{"target":"dl-e","puts":[["k",1]]},{"target":"dl-e","puts":[["k",2]],${fields}}]}`;
    const r = await relay.api("POST", `/v1/sources/${src}/enqueue`, body, { raw: true });
    assert.equal(r.status, 400, `${fields}: ${r.text}`);
    assert.equal(r.body.error.code, code, fields);
  }
  const afterBad = await relay.status(src);
  assert.equal(afterBad.last_seq, before.last_seq, "nothing was written");
  const ok = await enqueue(src, { rows: [{ target: "dl-e", puts: [["k", 1]], delay_ms: MAX_DELAY_MS }] });
  assert.equal(ok.status, 200, "at the limit: accepted");
  assert.deepEqual(relay.panics(), []);
  assert.deepEqual(await relay.audit(), []);
});
