// Workers Free's daily allowance of rows written, in real workerd: the test
// source's store refuses every write with the platform's own message
// ("refuse_writes", the fault switch), as the platform does once the
// account's rows written for the day are used up, until 00:00 UTC. An
// enqueue is a 503 daily_write_limit whose Retry-After reaches midnight UTC,
// and changes nothing; the alarm that meets the refusal sleeps until
// midnight instead of retrying at once; when writes come back, the next
// enqueue brings the alarm forward and every row arrives once, in order.
// Status keeps answering throughout and tells the rows written today.

import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { Relay, put, sleep, until } from "./harness.mjs";

let relay;
before(async () => {
  relay = await Relay.start();
});
after(async () => {
  await relay?.stop();
});

const DAY_MS = 86_400_000;
const nextMidnight = (ms) => (Math.floor(ms / DAY_MS) + 1) * DAY_MS;
const faults = (src, body) => relay.api("POST", `/v1/sources/${src}/faults`, body);

test("an enqueue past the daily allowance is a 503 daily_write_limit until 00:00 UTC and writes nothing", async () => {
  const src = "wl-enqueue";
  const { seqs } = await relay.enqueue(src, [put("wl-t1", "a", 1)]);
  const before = await relay.drained(src);
  assert.equal((await faults(src, { refuse_writes: true })).status, 200);
  const r = await relay.api("POST", `/v1/sources/${src}/enqueue`, { rows: [put("wl-t1", "b", 2), put("wl-t2", "c", 3)] });
  assert.equal(r.status, 503, r.text);
  assert.equal(r.body.error.code, "daily_write_limit");
  assert.match(r.body.error.message, /Exceeded allowed rows written in Durable Objects free tier/);
  const retry = Number(r.headers.get("retry-after"));
  assert.ok(retry >= 1 && retry <= 86_400, `Retry-After ${retry}`);
  assert.ok(Date.now() + retry * 1000 >= nextMidnight(Date.now()) - 2_000, `Retry-After ${retry} reaches 00:00 UTC`);
  const s = await relay.status(src);
  assert.deepEqual([s.last_seq, s.queued_rows, s.queued_bytes], [before.last_seq, 0, 0], "the outbox is unchanged");
  await faults(src, { refuse_writes: false });
  const next = await relay.enqueue(src, [put("wl-t1", "b", 2)]);
  assert.deepEqual(next.seqs, [seqs[0] + 1], "the refused enqueue took no sequence");
  await relay.drained(src);
  assert.deepEqual(await relay.log("wl-t1", src), [seqs[0], next.seqs[0]]);
  assert.deepEqual(await relay.audit(), [], "the relay's own audit");
});

test("an alarm past the daily allowance sleeps until 00:00 UTC, and when writes come back every row arrives once, in order", async () => {
  const src = "wl-alarm";
  // A refusing target keeps its rows queued through the first alarm.
  await relay.api("POST", "/v1/targets/wl-down/faults", { reject: true });
  const rows = [];
  for (let i = 0; i < 6; i++) rows.push(put(i % 2 ? "wl-down" : "wl-up", `k${i}`, i));
  const { seqs } = await relay.enqueue(src, rows);
  await until(async () => "wl-down" in (await relay.status(src)).failing_targets, "the refusing target's failure");
  // Now the day's allowance runs out, and the target recovers: the next
  // alarm applies the rows at the target, then cannot write its checkpoint.
  await faults(src, { refuse_writes: true });
  await relay.api("POST", "/v1/targets/wl-down/faults", { reject: false });
  await until(() => relay.alarmLogs().some((a) => a.source === src && a.write_limited), "the refused alarm's log line", 60_000);
  const limited = relay.alarmLogs().find((a) => a.source === src && a.write_limited);
  const s = await relay.status(src);
  assert.equal(s.alarm_at_ms, nextMidnight(limited.started_at_ms), "the next alarm at 00:00 UTC, no sooner");
  assert.equal(s.queued_rows, 3, "the rows wait: the checkpoint rolled back");
  await sleep(5_000);
  const refused = relay.alarmLogs().filter((a) => a.source === src && a.write_limited);
  assert.equal(refused.length, 1, "no retry seconds later (the platform's would come after 2 s)");
  // Writes come back; an enqueue that gets through brings the alarm forward.
  await faults(src, { refuse_writes: false });
  const last = await relay.enqueue(src, [put("wl-down", "last", 99)]);
  const done = await relay.drained(src);
  assert.equal(done.delivered_rows, 7);
  const down = seqs.filter((_, i) => i % 2 === 1);
  assert.deepEqual(await relay.log("wl-down", src), [...down, ...last.seqs], "every row once, in order");
  assert.deepEqual(await relay.log("wl-up", src), seqs.filter((_, i) => i % 2 === 0));
  assert.deepEqual(await relay.audit(), [], "the relay's own audit");
});

test("status tells the rows written today and their projection, and counts once read survive a restart", async () => {
  const src = "wl-today";
  await relay.enqueue(src, [put("wl-d", "a", 1)]);
  const s = await relay.drained(src);
  const today = new Date().toISOString().slice(0, 10);
  assert.equal(s.rows_written_day, today);
  assert.ok(s.rows_written_today > 0 && s.rows_written_today <= s.sql_rows_written, JSON.stringify(s));
  assert.ok(s.rows_written_projected_today >= s.rows_written_today);
  assert.equal(s.rows_written_free_limit, 100_000);
});
