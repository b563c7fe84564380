// W3C trace context across the hop: a traceparent sent with an enqueue is
// stored with the rows (no extra row write), travels in the target batch,
// and is named in the source's alarm log line and the target's apply log
// line; a retry with a new traceparent is still a duplicate; a bad one is
// refused before anything is written.

import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { Relay, put, until } from "./harness.mjs";

const T1 = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
const T2 = "00-4bf92f3577b34da6a3ce929d0e0e4736-11f067aa0ba902b7-01";

let relay;
before(async () => {
  relay = await Relay.start();
});
after(async () => {
  await relay?.stop();
});

const enqueue = (source, body, trace) =>
  relay.api("POST", `/v1/sources/${source}/enqueue`, body, { headers: trace === undefined ? {} : { traceparent: trace } });

const applyLines = () => relay.applyLogs();

test("a traceparent travels with its rows into the alarm's and the target's log lines, at no extra write", async () => {
  const src = "tr-src";
  // A status read writes the counts it reports (one row when some are
  // unwritten), so the drain is watched without one: one read before, one
  // after the alarm's log line, whatever the timing.
  const written = async (rows, trace) => {
    const before = (await relay.status(src)).sql_rows_written;
    const alarms = relay.alarmLogs().filter((a) => a.source === src).length;
    const r = await enqueue(src, { rows }, trace);
    assert.equal(r.status, 200, r.text);
    const last = r.body.seqs.at(-1);
    await until(async () => (await relay.api("GET", `/v1/sources/${src}/delivered-through/${last}`)).body.delivered, "delivery");
    await until(() => relay.alarmLogs().filter((a) => a.source === src).length > alarms, "the alarm's log line");
    return { r, delta: (await relay.status(src)).sql_rows_written - before };
  };
  // A source's first delivery writes a row the later ones do not: both
  // measured enqueues come after it.
  await written([put("tr-a", "warm", 0), put("tr-b", "warm", 0)]);
  const plain = await written([put("tr-a", "k0", 0), put("tr-b", "k0", 0)]);
  const traced = await written([put("tr-a", "k1", 1), put("tr-b", "k1", 1)], T1);
  assert.equal(traced.delta, plain.delta, "a traced enqueue writes exactly what an untraced one does");
  const alarm = relay.alarmLogs().find((a) => a.source === src && a.traces?.includes(T1));
  assert.ok(alarm, "the alarm that delivered them names the trace");
  assert.equal(alarm.traced_rows, 2);
  await until(async () => applyLines().filter((l) => l.traces.includes(T1)).length === 2, "one apply line per target");
  const lines = applyLines().filter((l) => l.traces.includes(T1));
  assert.deepEqual(lines.map((l) => [l.source, l.rows]).sort(), [[src, 1], [src, 1]]);
  assert.ok(!applyLines().some((l) => l.first_seq === plain.r.body.seqs[0] && l.source === src), "untraced applies log nothing");
  assert.deepEqual((await relay.keys("tr-b")).map((k) => k.key), ["k0", "k1", "warm"], "the rows applied as usual");
});

test("a keyed retry with a new traceparent is still a duplicate; a bad traceparent is refused and writes nothing", async () => {
  const src = "tr-key";
  const body = { idempotency_key: "order-9", rows: [put("tr-c", "k", 1)] };
  const first = await enqueue(src, body, T1);
  const again = await enqueue(src, body, T2);
  assert.equal(again.status, 200, again.text);
  assert.equal(again.body.duplicate, true);
  assert.deepEqual(again.body.seqs, first.body.seqs);
  const before = await relay.status(src);
  for (const bad of ["00-nope", T1.toUpperCase(), T1.replace(/^00/, "01"), `00-${"0".repeat(32)}-00f067aa0ba902b7-01`]) {
    const r = await enqueue(src, { rows: [put("tr-c", "k", 2)] }, bad);
    assert.equal(r.status, 400, `${bad}: ${r.text}`);
    assert.equal(r.body.error.code, "invalid_traceparent");
  }
  const afterBad = await relay.status(src);
  assert.equal(afterBad.last_seq, before.last_seq, "nothing was written");
  assert.deepEqual(await relay.audit(), [], "the relay's own audit");
});
