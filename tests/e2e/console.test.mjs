// The operator's view: the source directory (GET /v1/sources, retire), the
// per-source alarm history, the console's static files, and the console
// itself driven in headless Chromium (Debian's chromium, through
// playwright-core): log in, read the figures the API reports, see a parked
// target, redrive it from its button, and see its rows arrive.

import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { Relay, ROOT, TOKEN, put, until } from "./harness.mjs";

/** The Chromium the browser test drives (bootstrap --browser installs Debian's). */
const CHROMIUM = process.env.RELAY_CHROMIUM ?? "/usr/bin/chromium";
/** Where the browser test saves its screenshots. */
const SHOTS = join(ROOT, "build", "screenshots");

let relay;
before(async () => {
  relay = await Relay.start({ vars: { RELAY_PARTITIONS: JSON.stringify({ "ui-parted": { partitions: 2, epoch: 1 } }) } });
});
after(async () => {
  await relay?.stop();
});

test("sources list themselves once, page in name order, and retire only when empty", async () => {
  await relay.api("POST", "/v1/targets/dir-t2/faults", { reject: true });
  await relay.enqueue("dir-b", [put("dir-t", "k", 1)]);
  await relay.enqueue("dir-a", [put("dir-t2", "k", 1)]);
  await relay.enqueue("dir-a", [put("dir-t", "k", 2)]);
  const all = await relay.api("GET", "/v1/sources");
  assert.equal(all.status, 200, JSON.stringify(all.body));
  assert.deepEqual(all.body.sources.map((s) => s.name).filter((n) => n.startsWith("dir-")), ["dir-a", "dir-b"]);
  const first = await relay.api("GET", "/v1/sources?limit=1");
  assert.equal(first.body.sources.length, 1);
  assert.equal(first.body.next, first.body.sources[0].name);
  const rest = await relay.api("GET", `/v1/sources?after=${first.body.next}&limit=100`);
  assert.ok(!rest.body.sources.some((s) => s.name === first.body.next), "a page starts after its cursor");
  assert.equal((await relay.api("GET", "/v1/sources?limit=101")).body.error.code, "invalid_limit");
  assert.equal((await relay.api("GET", "/v1/sources?after=a%2Fb")).body.error.code, "invalid_query");

  // dir-a still owes a row to the failing target: it cannot retire.
  const refused = await relay.api("POST", "/v1/sources/dir-a/retire");
  assert.equal(refused.status, 409);
  assert.equal(refused.body.error.code, "source_not_empty");
  await relay.drained("dir-b");
  const retired = await relay.api("POST", "/v1/sources/dir-b/retire");
  assert.deepEqual(retired.body, { source: "dir-b", retired: true, was_listed: true });
  let names = (await relay.api("GET", "/v1/sources")).body.sources.map((s) => s.name);
  assert.ok(!names.includes("dir-b") && names.includes("dir-a"), names.join(","));
  // A retired source that enqueues again lists itself again.
  await relay.enqueue("dir-b", [put("dir-t", "k", 3)]);
  names = (await relay.api("GET", "/v1/sources")).body.sources.map((s) => s.name);
  assert.ok(names.includes("dir-b"));
  await relay.api("POST", "/v1/targets/dir-t2/faults", { reject: false });
});

test("a retire that an enqueue lands in the middle of leaves the source listed and says it is not empty", async () => {
  const src = "race-src";
  await relay.enqueue(src, [put("race-t", "k", 1)]);
  await relay.drained(src);
  await relay.api("POST", "/v1/targets/race-t2/faults", { reject: true });
  // The retire waits between its emptiness check and its directory call;
  // an enqueue (of a row that stays queued) lands in that gap.
  await relay.api("POST", `/v1/sources/${src}/faults`, { retire_delay_ms: 1_500 });
  const retiring = relay.api("POST", `/v1/sources/${src}/retire`);
  await new Promise((r) => setTimeout(r, 300));
  await relay.enqueue(src, [put("race-t2", "k", 2)]);
  const retired = await retiring;
  assert.equal(retired.status, 409, retired.text);
  assert.equal(retired.body.error.code, "source_not_empty");
  const names = (await relay.api("GET", "/v1/sources")).body.sources.map((s) => s.name);
  assert.ok(names.includes(src), `a source that holds rows stays listed: ${names.join(",")}`);
  assert.equal((await relay.status(src)).queued_rows, 1);
  await relay.api("POST", "/v1/targets/race-t2/faults", { reject: false });
  await relay.drained(src);
  const again = await relay.api("POST", `/v1/sources/${src}/retire`);
  assert.deepEqual(again.body, { source: src, retired: true, was_listed: true });
});

test("a source keeps its recent alarms' figures, and they add up to what it delivered", async () => {
  const src = "hist-src";
  for (let i = 0; i < 3; i++) {
    await relay.enqueue(src, [put("hist-t", `k${i}`, i), put("hist-u", `k${i}`, i)]);
    await relay.drained(src);
  }
  const h = await relay.api("GET", `/v1/sources/${src}/alarms`);
  assert.equal(h.status, 200);
  assert.equal(h.body.kept, 120);
  const delivered = h.body.alarms.reduce((a, p) => a + p.rows_delivered, 0);
  assert.equal(delivered, (await relay.status(src)).delivered_rows);
  assert.ok(h.body.alarms.every((p, i, all) => i === 0 || all[i - 1].at_ms <= p.at_ms), "oldest first");
  assert.equal(h.body.alarms.at(-1).queued_rows, 0);
});

test("the console's files are served without the token, with a strict content policy; the API still needs it", async () => {
  for (const [path, type] of [["/", "text/html"], ["/console.js", "text/javascript"], ["/console.css", "text/css"]]) {
    const r = await relay.api("GET", path, undefined, { token: null });
    assert.equal(r.status, 200, path);
    assert.match(r.headers.get("content-type"), new RegExp(type));
    assert.match(r.headers.get("content-security-policy"), /default-src 'none'; script-src 'self'/);
    assert.equal(r.headers.get("x-frame-options"), "DENY");
  }
  assert.doesNotMatch((await relay.api("GET", "/", undefined, { token: null })).text, /<script>|\son[a-z]+="/, "no inline script");
  assert.equal((await relay.api("GET", "/v1/sources", undefined, { token: null })).status, 401);
  assert.equal((await relay.api("GET", "/?x=1", undefined, { token: null })).status, 401, "only the exact files are open");
});

test("in a browser: log in, read the figures, see a parked target, redrive it from its button, see the rows arrive", async (t) => {
  if (!existsSync(CHROMIUM)) {
    // scripts/test installs it (bootstrap --browser); say so rather than pass silently.
    assert.fail(`no Chromium at ${CHROMIUM}: run scripts/bootstrap --browser or set RELAY_CHROMIUM`);
  }
  const { chromium } = await import("playwright-core");
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });
  t.after(() => browser.close());
  const page = await browser.newPage({ viewport: { width: 1200, height: 900 } });
  const pageErrors = [];
  page.on("pageerror", (e) => pageErrors.push(e.message));
  mkdirSync(SHOTS, { recursive: true });

  const src = "ui-orders";
  await relay.api("POST", "/v1/targets/ui-customer-9/faults", { reject: true, permanent: true });
  const rows = [];
  for (let i = 0; i < 12; i++) rows.push(put(`ui-customer-${i % 4 === 3 ? 9 : i % 4}`, `order-${i}`, { total: i }));
  const { seqs } = await relay.enqueue(src, rows);
  await until(async () => (await relay.status(src)).parked_rows === 3, "ui-customer-9 to be parked");

  await page.goto(relay.base + "/");
  await page.fill("#token", "wrong");
  await page.click("#login-form button");
  await page.waitForSelector("#login-error:text('refused')");
  await page.fill("#token", TOKEN);
  await page.click("#login-form button");
  const row = page.locator(`#sources-table tr[data-source="${src}"]`);
  await row.waitFor();
  const status = await relay.status(src);
  assert.equal(await row.locator('[data-field="parked_rows"]').textContent(), String(status.parked_rows));
  assert.equal(await row.locator('[data-field="delivered_rows"]').textContent(), String(status.delivered_rows));
  assert.match(await row.locator('[data-field="targets"]').textContent(), /parked: ui-customer-9/);

  await row.click();
  await page.waitForSelector('#source-figures [data-figure="parked_rows"]');
  const parked = page.locator('#targets-table tr[data-target="ui-customer-9"]');
  await parked.waitFor();
  assert.equal(await parked.locator('[data-field="state"]').textContent(), "parked");
  assert.equal(await parked.locator('[data-field="kind"]').textContent(), "object");
  assert.match(await parked.locator('[data-field="reason"]').textContent(), /permanent error/);
  assert.equal(await parked.locator('[data-field="rows"]').textContent(), "3");
  await page.waitForSelector("#chart rect");
  assert.match(await page.locator("#chart-caption").textContent(), /alarms · backlog peak/);
  await page.fill("#target-name", "ui-customer-1");
  await page.click("#target-form button");
  await page.waitForSelector('#watermarks-table tr[data-source="ui-orders"]');
  await page.screenshot({ path: join(SHOTS, "console-parked.png"), fullPage: true });

  // A target that hears from many sources: its watermarks come a page at a time.
  await relay.api("POST", "/v1/targets/ui-marks/faults", { seed_watermarks: 150 });
  await page.fill("#target-name", "ui-marks");
  await page.click("#target-form button");
  await page.waitForSelector('#watermarks-table tr[data-source="seed00099"]');
  assert.equal(await page.locator("#watermarks-table tbody tr").count(), 100, "the first page");
  await page.click("#watermarks-more");
  await page.waitForSelector('#watermarks-table tr[data-source="seed00149"]');
  assert.equal(await page.locator("#watermarks-table tbody tr").count(), 150, "and the rest");
  await page.waitForSelector("#watermarks-more.hidden", { state: "attached" });
  // Seeded watermarks have no apply log behind them: the audit leaves this target out.
  relay.seen.targets.delete("ui-marks");

  // Heal the target, then redrive from the button (the page asks first).
  await relay.api("POST", "/v1/targets/ui-customer-9/faults", { reject: false, permanent: false });
  const dialogs = [];
  page.on("dialog", (d) => {
    dialogs.push(d.message());
    d.accept();
  });
  await parked.locator('button[data-action="redrive"]').click();
  await until(async () => (await relay.log("ui-customer-9", src)).length === 3, "the redriven rows to arrive");
  assert.deepEqual(await relay.log("ui-customer-9", src), [seqs[3], seqs[7], seqs[11]], "in order");
  assert.match(dialogs[0], /Redrive 3 parked rows of ui-customer-9/);
  await page.waitForSelector("#targets-empty:not(.hidden)");
  await until(async () => (await row.locator('[data-field="parked_rows"]').textContent()) === "0", "the console to show nothing parked");
  await page.screenshot({ path: join(SHOTS, "console.png"), fullPage: true });

  // A partitioned source: one row gathered over its partitions, ahead of them.
  const routed = await relay.api("POST", "/v1/sources/ui-parted/enqueue", { rows: ["pa", "pb", "pc", "pd"].map((t) => put(`ui-${t}`, "k", 1)) });
  assert.equal(routed.status, 200, routed.text);
  await until(async () => (await relay.status("ui-parted")).delivered_rows === 4, "the partitioned rows delivered");
  const logical = page.locator('#sources-table tr[data-source="ui-parted"]');
  await logical.waitFor();
  assert.match(await logical.locator('[data-field="partitions"]').textContent(), /2 partitions/);
  await until(async () => (await logical.locator('[data-field="delivered_rows"]').textContent()) === "4", "the gathered figure");
  await logical.click();
  await page.waitForSelector('#source-figures [data-figure="partitions"]');
  assert.match(await page.locator('#source-figures [data-figure="partitions"]').textContent(), /^2/);
  assert.deepEqual(pageErrors, [], "no script error in the page");
  assert.deepEqual(await relay.audit(), [], "the relay's own audit");
});

test("the demo runs to its audit: a failing customer recovers and every target holds exactly what was sent", async () => {
  const { execFile } = await import("node:child_process");
  const out = await new Promise((resolve, reject) => {
    execFile(
      process.execPath,
      [join(ROOT, "scripts", "demo.mjs"), "--url", relay.base, "--token", TOKEN, "--rows", "400", "--sources", "4", "--customers", "16", "--fail-ms", "1500"],
      { timeout: 180_000 },
      (err, stdout, stderr) => (err ? reject(new Error(`${err.message}\n${stdout}\n${stderr}`)) : resolve({ stdout, stderr })),
    );
  });
  assert.match(out.stdout, /customer-7 rejects every call for the first 1.5 s/);
  assert.match(out.stderr, /customer-7 recovered after/);
  assert.match(out.stderr, /failing [^ ]*customer-7/, "the progress line showed the failing customer");
  assert.match(out.stdout, /audit: 16 customers hold 400 keys: 0 missing, 0 different from what was sent, 0 unexpected: every target holds exactly what was sent/);
});
