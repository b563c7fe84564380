// HTTPS endpoints as targets, in real workerd against a real receiver
// (endpoint/receiver.mjs): rows addressed to `endpoint:<name>` arrive in
// order, one request at a time, each signed as Standard Webhooks has it and
// carrying an id stable across retries; failures, stalls, throttling and
// dropped connections are retried until the row is taken; a 4xx parks the
// endpoint for the source until redriven; workerd SIGKILLed mid-stream
// loses nothing and applies nothing twice at a receiver that deduplicates;
// a row to an endpoint not configured is refused and writes nothing.

import { test } from "node:test";
import assert from "node:assert/strict";
import { Relay, put, until } from "./harness.mjs";
import { Receiver, verify } from "./endpoint/receiver.mjs";

/** A Standard Webhooks test secret (24 random bytes, base64). */
const SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

/** A secret the receiver does not know: the new one of a rotation. */
const NEW_SECRET = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD";

/** RELAY_ENDPOINTS naming `hook` at the receiver, `bulk`, which takes batches, and `rotating`, whose secret is being rotated, at the same receiver. */
const endpoints = (url, timeout_ms = 1_000) =>
  JSON.stringify({
    hook: { url, secret: SECRET, timeout_ms, headers: { "x-tenant": "acme" } },
    bulk: { url, secret: SECRET, timeout_ms, batch: true },
    rotating: { url, secret: `${NEW_SECRET} ${SECRET}`, timeout_ms },
  });

/** One row to the endpoint, its payload numbered `n`. */
const hooked = (n) => ({ target: "endpoint:hook", puts: [["order", { n }]] });

/** Starts a receiver and a relay configured with it (and `vars`); runs `body`; stops both. */
async function withReceiver(body, { timeout_ms, vars = {} } = {}) {
  const rx = await Receiver.start(SECRET);
  const relay = await Relay.start({ vars: { RELAY_ENDPOINTS: endpoints(rx.url, timeout_ms), ...vars } });
  try {
    await body(relay, rx);
    assert.deepEqual(relay.panics(), [], "no panic");
    assert.deepEqual(await relay.audit(), [], "the relay's own audit");
  } finally {
    await relay.stop();
    await rx.stop();
  }
}

test("rows to an endpoint arrive in order, signed, one request at a time, beside an object's rows", async () => {
  await withReceiver(async (relay, rx) => {
    const src = "ep-order";
    const sent = [];
    for (let i = 0; i < 20; i++) sent.push(...(await relay.enqueue(src, [hooked(i), put("ep-order-t", `k${i}`, i)])).seqs);
    await relay.drained(src);
    const toHook = sent.filter((_, i) => i % 2 === 0);
    const payloads = rx.payloads();
    assert.deepEqual(payloads.map((p) => p.seq), toHook, "every row once, in sequence order");
    assert.deepEqual(payloads.map((p) => p.puts[0][1].n), [...Array(20).keys()]);
    assert.ok(payloads.every((p) => p.source === src && Array.isArray(p.deletes)));
    assert.equal(rx.requests.length, 20, "no retries in calm conditions");
    assert.ok(rx.requests.every((r) => r.valid), "every signature verifies");
    assert.equal(rx.maxInFlight, 1, "one request in flight for the source and endpoint");
    for (const r of rx.requests) {
      assert.match(r.id, /^msg_[0-9a-f]{64}_[0-9]+$/);
      assert.equal(r.id.split("_")[2], String(JSON.parse(r.body).seq), "the id names the row's sequence");
      assert.equal(r.headers["x-tenant"], "acme", "the configured header");
      assert.match(r.headers["user-agent"], /^durable-relay\//);
      assert.equal(r.headers["content-type"], "application/json");
    }
    assert.deepEqual(await relay.log("ep-order-t", src), sent.filter((_, i) => i % 2 === 1), "the object's rows too");
  });
});

test("a busy source never has two requests open at its endpoint, when its in-turn deliveries hand over to the alarm", async () => {
  await withReceiver(async (relay, rx) => {
    const src = "ep-busy";
    rx.otherwise = { status: 200, delay_ms: 20 };
    // Eight producers into one source keep its in-turn delivery running
    // past its bound of runs in a row, so the alarm takes over while
    // enqueues go on: the alarm and an in-turn delivery must not overlap.
    const producers = 8;
    const each = 50;
    await Promise.all(
      Array.from({ length: producers }, async (_, p) => {
        for (let i = 0; i < each; i++) await relay.enqueue(src, [hooked(p * 1000 + i)]);
      }),
    );
    await relay.drained(src);
    const status = await relay.status(src);
    const seqs = rx.payloads().map((p) => p.seq);
    assert.deepEqual(seqs, [...seqs].sort((a, b) => a - b), "first arrivals in sequence order");
    assert.equal(seqs.length, producers * each, "every row");
    assert.equal(rx.maxInFlight, 1, "one request open at a time");
    assert.equal(rx.requests.length, producers * each, "none sent twice");
    console.log(`# ${rx.requests.length} requests, at most ${rx.maxInFlight} open; the source ran ${status.alarms} alarms`);
  });
});

test("an endpoint whose secret is being rotated gets a signature by each, so a receiver that knows either accepts", async () => {
  await withReceiver(async (relay, rx) => {
    const src = "ep-rotating";
    for (let i = 0; i < 3; i++) await relay.enqueue(src, [{ target: "endpoint:rotating", puts: [["k", { i }]] }]);
    await relay.drained(src);
    assert.equal(rx.requests.length, 3);
    for (const r of rx.requests) {
      const sigs = r.headers["webhook-signature"].split(" ");
      assert.equal(sigs.length, 2, "one signature per secret");
      assert.ok(r.valid, "the receiver, which knows only the old secret, accepts it");
      assert.ok(verify(NEW_SECRET, r.id, r.timestamp, r.body, sigs[0]), "the first is by the new secret");
      assert.ok(!verify(NEW_SECRET, r.id, r.timestamp, r.body, sigs[1]), "the second is not");
    }
  });
});

test("an endpoint that takes batches gets a source's rows as arrays, in order, signed, each request one subrequest", async () => {
  await withReceiver(async (relay, rx) => {
    const src = "ep-bulk";
    const rows = Array.from({ length: 30 }, (_, i) => ({ target: "endpoint:bulk", puts: [["order", { n: i }]] }));
    const { seqs } = await relay.enqueue(src, rows);
    await relay.drained(src);
    assert.deepEqual(rx.payloads().map((p) => p.seq), seqs, "every row once, in order");
    assert.ok(rx.requests.length < seqs.length, `${rx.requests.length} requests for ${seqs.length} rows`);
    for (const r of rx.requests) {
      assert.ok(r.valid, "each batch is signed");
      const batch = JSON.parse(r.body);
      assert.ok(Array.isArray(batch) && batch.length > 0);
      assert.equal(r.id, `${r.id.split("_").slice(0, 2).join("_")}_${batch[0].seq}-${batch.at(-1).seq}`, "the id names the batch's rows");
    }
    const counted = relay.alarmLogs().filter((a) => a.source === src).reduce((n, a) => n + a.subrequests, 0);
    assert.equal(counted, rx.requests.length, "one subrequest per request, as the budget counts them");
  });
});

test("a failing, stalling, throttling or disconnecting endpoint gets the row again, same id, freshly signed, until it takes it", async () => {
  await withReceiver(async (relay, rx) => {
    const src = "ep-retry";
    rx.next(500, "close", "stall", { status: 429, headers: { "retry-after": "1" } }, 503);
    const { seqs } = await relay.enqueue(src, [hooked(1), hooked(2)]);
    const s = await relay.drained(src, 90_000);
    assert.deepEqual(rx.payloads().map((p) => p.seq), seqs, "both rows, in order, once in effect");
    const first = rx.requests.filter((r) => r.id === rx.requests[0].id);
    assert.equal(first.length, 6, "the first row was sent six times: five failures, then taken");
    assert.ok(first.every((r) => r.valid), "every attempt is signed");
    assert.ok(first.every((r) => r.body === first[0].body), "the same payload each time");
    assert.equal(rx.requests.length, 7, "the second row waited behind the first and went once");
    assert.ok(rx.requests.at(-1).at >= first.at(-1).at, "and after it");
    assert.deepEqual(s.parked_targets, {}, "throttling, stalls and 5xx never park");
  }, { timeout_ms: 1_000 });
});

test("an endpoint that takes each row on its second try makes progress every cycle: never parked, every row once, in order", async () => {
  await withReceiver(async (relay, rx) => {
    const src = "ep-second";
    for (let i = 0; i < 8; i++) rx.next(500, 200);
    const { seqs } = await relay.enqueue(src, [1, 2, 3, 4, 5, 6, 7, 8].map(hooked));
    const s = await relay.drained(src, 90_000);
    assert.deepEqual(s.parked_targets, {}, "never parked, though it parks after 3 failed cycles: each cycle took a row");
    assert.deepEqual(rx.payloads().map((p) => p.seq), seqs, "every row, in order, once in effect");
    assert.equal(rx.requests.length, 16, "each row refused once, then taken");
    const gaps = [];
    for (let i = 0; i + 1 < rx.requests.length; i += 2) gaps.push(rx.requests[i + 1].at - rx.requests[i].at);
    console.log(`second try: ms from each refusal to the row's next try: ${gaps.join(", ")}`);
  }, { vars: { RELAY_PARK_AFTER_FAILED_CYCLES: "3" } });
});

test("an endpoint's Retry-After holds its rows until the pause is over, through later enqueues' deliveries", async () => {
  await withReceiver(async (relay, rx) => {
    const src = "ep-pause";
    rx.next({ status: 429, headers: { "retry-after": "4" } });
    const first = await relay.enqueue(src, [hooked(1)]);
    await until(async () => rx.requests.length === 1, "the first attempt");
    const refusedAt = rx.requests[0].at;
    const record = (await relay.ok(`/v1/sources/${src}/parked?limit=10`)).targets.find((t) => t.target === "endpoint:hook");
    assert.ok(record.retry_at_ms >= refusedAt + 3_000, `the record says when: ${record.retry_at_ms - refusedAt} ms after the 429`);
    // A later enqueue's own delivery must pass the paused endpoint over.
    await new Promise((ok) => setTimeout(ok, 1_000));
    const second = await relay.enqueue(src, [hooked(2)]);
    await relay.drained(src, 30_000);
    const gap = rx.requests[1].at - refusedAt;
    assert.ok(gap >= 3_900, `called again ${gap} ms after the 429 asked for 4 s (the back-off alone is 1 s)`);
    assert.equal(rx.requests.length, 3, "one attempt refused, then each row once");
    assert.deepEqual(rx.payloads().map((p) => p.seq), [...first.seqs, ...second.seqs], "in order");
  });
});

test("an endpoint that refuses a row with a 4xx is parked for the source, and a redrive delivers its rows in order", async () => {
  await withReceiver(async (relay, rx) => {
    const src = "ep-park";
    rx.next({ status: 422, headers: {} });
    const { seqs } = await relay.enqueue(src, [hooked(1), hooked(2), put("ep-park-t", "k", 1)]);
    await until(async () => (await relay.status(src)).parked_targets["endpoint:hook"] === 2, "the endpoint to park");
    assert.deepEqual(rx.payloads(), [], "nothing taken");
    assert.deepEqual(await relay.log("ep-park-t", src), [seqs[2]], "the object's row is not held up");
    const parked = await relay.ok(`/v1/sources/${src}/parked?limit=10`);
    const record = parked.targets.find((t) => t.target === "endpoint:hook");
    assert.match(record.last_error ?? record.reason ?? "", /422/, "the refusal is recorded with its status");
    const redrive = await relay.api("POST", `/v1/sources/${src}/parked/endpoint:hook/redrive`);
    assert.equal(redrive.status, 200, redrive.text);
    await relay.drained(src);
    assert.deepEqual(rx.payloads().map((p) => p.seq), seqs.slice(0, 2), "both rows, in order");
  });
});

test("a row to an endpoint that is not configured is refused whole and writes nothing", async () => {
  await withReceiver(async (relay, rx) => {
    const src = "ep-unknown";
    const r = await relay.api("POST", `/v1/sources/${src}/enqueue`, {
      rows: [put("ep-unknown-t", "k", 1), { target: "endpoint:nope", puts: [["k", 1]] }],
    });
    assert.equal(r.status, 400);
    assert.equal(r.body.error.code, "unknown_endpoint");
    assert.match(r.body.error.message, /endpoint:nope/);
    const s = await relay.status(src);
    assert.equal(s.enqueued_rows, 0, "nothing written");
    assert.equal(rx.requests.length, 0);
  });
});

test("an endpoint table with a bad entry is refused before anything is written, and its secret is never echoed", async () => {
  const relay = await Relay.start({
    vars: { RELAY_ENDPOINTS: JSON.stringify({ hook: { url: "http://127.0.0.1:9/x", secret: "whsec_c2hvcnQ=" } }) },
    readyStatus: 500,
  });
  try {
    for (const r of [
      await relay.api("GET", "/v1/health"),
      await relay.api("POST", "/v1/sources/ep-bad/enqueue", { rows: [put("ep-bad-t", "k", 1)] }),
    ]) {
      assert.equal(r.status, 500);
      assert.equal(r.body.error.code, "bad_configuration");
      assert.match(r.body.error.message, /RELAY_ENDPOINTS: hook: the secret decodes to 5 bytes/);
      assert.doesNotMatch(r.text, /c2hvcnQ/, "the secret stays out of the answer");
    }
    assert.equal((await relay.api("GET", "/v1/sources/ep-bad/status")).status, 500, "nothing opens a source");
  } finally {
    await relay.stop();
  }
});

test("killed mid-stream, the relay loses no row and a deduplicating receiver applies each once, in order", { timeout: 180_000 }, async () => {
  const rx = await Receiver.start(SECRET);
  const vars = { RELAY_ENDPOINTS: endpoints(rx.url, 5_000) };
  let relay = await Relay.start({ vars });
  const src = "ep-killed";
  try {
    // Each request is answered after 150 ms, so the kill lands mid-stream.
    rx.next(...Array.from({ length: 40 }, () => ({ status: 200, delay_ms: 150 })));
    const sent = [];
    for (let i = 0; i < 12; i++) sent.push(...(await relay.enqueue(src, [hooked(i)])).seqs);
    await until(async () => rx.applied.size >= 3, "a few rows taken", 30_000);
    relay.kill();
    await relay.stop();
    const before = rx.applied.size;
    relay = await Relay.start({ persistDir: relay.persistDir, vars });
    await relay.drained(src, 120_000);
    const seqs = rx.payloads().map((p) => p.seq);
    assert.deepEqual(seqs, sent, `every row once in effect, in order (${before} taken before the kill)`);
    assert.ok(rx.requests.every((r) => r.valid), "every attempt is signed");
    const again = rx.requests.length - rx.applied.size;
    console.log(`# killed after ${before} of ${sent.length} rows; ${again} requests were repeats the receiver deduplicated`);
  } finally {
    await relay.stop();
    await rx.stop();
  }
});
