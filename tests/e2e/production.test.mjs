// The Worker exactly as deployed: the production build (no test plumbing
// compiled in) with RELAY_ENV=production. It delivers; the test-only routes
// do not exist; its schema has no test tables.

import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { Relay, put, until } from "./harness.mjs";

let relay;
before(async () => {
  relay = await Relay.start({ build: "prod", vars: { RELAY_ENV: "production" } });
});
after(async () => {
  await relay?.stop();
});

test("the production build delivers, in order, with values as sent", async () => {
  const health = await relay.api("GET", "/v1/health");
  assert.equal(health.body.test_faults, false);
  const rows = [put("prod-t", "a", { n: 1 }), put("prod-u", "b", 2), put("prod-t", "a", { n: 3 })];
  const body = `{"rows":[{"target":"prod-t","puts":[["big",123456789012345678901234567890]]}]}`;
  assert.equal((await relay.api("POST", "/v1/sources/prod-src/enqueue", body, { raw: true })).status, 200);
  await relay.enqueue("prod-src", rows);
  await until(async () => (await relay.status("prod-src")).delivered_rows === 4, "delivery");
  const keys = await relay.api("GET", "/v1/targets/prod-t/keys");
  assert.deepEqual(keys.body.keys.find((k) => k.key === "a"), { key: "a", value: { n: 3 } }, "the later row wins");
  assert.match(keys.text, /"value":123456789012345678901234567890/, "every digit");
  const w = await relay.api("GET", "/v1/targets/prod-t/watermarks");
  assert.equal(w.body.watermarks[0].watermark, 4);
});

test("the test-only routes do not exist in the production build", async () => {
  for (const [method, path, body] of [
    ["POST", "/v1/sources/prod-src/faults", { crash_checkpoints: 1 }],
    ["GET", "/v1/sources/prod-src/audit"],
    ["POST", "/v1/targets/prod-t/faults", { reject: true }],
    ["GET", "/v1/targets/prod-t/log?source=prod-src"],
    ["GET", "/v1/targets/prod-t/audit"],
    ["POST", "/v1/sources/prod-fresh/conformance"],
  ]) {
    const r = await relay.api(method, path, body);
    assert.equal(r.status, 404, `${method} ${path}: ${r.text}`);
    assert.equal(r.body.error.code, "no_route");
  }
  assert.deepEqual(relay.panics(), []);
});
