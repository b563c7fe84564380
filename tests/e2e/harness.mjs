// Starts the real Worker under `wrangler dev` (workerd, SQLite Durable
// Objects, real alarms) as a child process and drives it over HTTP.
//
// Every instance gets free ports, its own persistence directory (unless one
// is passed, to restart on the same state) and the test token. stdout is
// captured so tests can read the relay's per-alarm JSON log lines.

import { spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join, dirname } from "node:path";
import { fileURLToPath } from "node:url";

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
export const TOKEN = "e2e-token-" + process.pid;

/**
 * The relay's protocol table, written from the Rust one
 * (`durable_relay::protocol`): every operation's method, path and codes.
 */
const PROTOCOL = JSON.parse(readFileSync(join(ROOT, "clients", "typescript", "protocol.json"), "utf8"));

/** `op.path` (`/parked/{target}?after&limit`) as a pattern of front-door paths under `kind`. */
function frontPattern(kind, op) {
  const path = op.path.split("?")[0].replace(/\{[^}]+\}/g, "[^/]+");
  return new RegExp(`^/v1/${kind}/[^/]+${path}$`);
}

const OPERATIONS = [
  ...PROTOCOL.source.map((op) => ({ op, pattern: frontPattern("sources", op) })),
  ...PROTOCOL.target.map((op) => ({ op, pattern: frontPattern("targets", op) })),
];

/**
 * The operation of the relay's protocol a front-door request line names,
 * if it names one (the reference Worker's own routes name none).
 */
export function operationOf(method, path) {
  const bare = String(path).split("?")[0];
  return OPERATIONS.find(({ op, pattern }) => op.method === method && pattern.test(bare))?.op;
}

export async function freePort() {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.on("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

/** How long one HTTP call to the relay may take before the test fails. */
const REQUEST_TIMEOUT_MS = 60_000;

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** Waits until `pred()` is truthy, polling; throws naming `what` on timeout. */
export async function until(pred, what, timeoutMs = 30_000) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await pred()) return;
    await sleep(150);
  }
  throw new Error(`timed out waiting for ${what}`);
}

/** A running `wrangler dev`. */
export class Relay {
  constructor(child, port, persistDir) {
    this.child = child;
    this.port = port;
    this.persistDir = persistDir;
    this.base = `http://127.0.0.1:${port}`;
    this.output = "";
    /** Generated configs to delete when the instance stops. */
    this.tempFiles = [];
    /** Source and target names this instance has been asked about, for `audit`. */
    this.seen = { sources: new Set(), targets: new Set() };
    child.stdout.on("data", (d) => (this.output += d.toString()));
    child.stderr.on("data", (d) => (this.output += d.toString()));
  }

  /**
   * Starts the reference Worker. `build` picks the wasm build, a directory
   * under build/ ("test", with the fault routes and apply log; "prod",
   * exactly as deployed; "releases/previous" or "releases/before-ids",
   * an earlier release's test build, from scripts/build-previous); `vars`
   * are merged over the test defaults (a value of `undefined` removes one);
   * `extraToml` is appended to the config; `bindings` are extra Durable
   * Object bindings (TOML inline tables) added to wrangler.toml's; `before` lists configs of other
   * Workers to run in the same session ahead of the relay (the first one is
   * served on the port), so they can bind the relay by `script_name`;
   * `ready` is the path that answers 200 once the session is up;
   * `firstVars` are `--var`s for the first Worker of such a session;
   * `readyStatus` is the status `ready` answers once up (200, or the 500 of
   * a configuration the Worker refuses).
   */
  static async start({ vars = {}, persistDir, extraToml = "", bindings = [], build = "test", before = [], ready, firstVars = {}, readyStatus } = {}) {
    persistDir ??= mkdtempSync(join(tmpdir(), "relay-e2e-"));
    const config = writeRelayConfig({ vars, extraToml, bindings, build });
    const configs = [...before, config];
    const relay = await startWrangler({ configs, persistDir, ready, vars: firstVars, readyStatus }).catch((e) => {
      rmSync(config, { force: true });
      throw e;
    });
    relay.tempFiles.push(config);
    return relay;
  }

  /** SIGKILLs the whole process group (wrangler and workerd). */
  kill() {
    try {
      process.kill(-this.child.pid, "SIGKILL");
    } catch {}
  }

  /** Stops and waits for the process to go. */
  async stop() {
    this.kill();
    for (let i = 0; i < 100 && this.child.exitCode === null && this.child.signalCode === null; i++) await sleep(50);
    for (const f of this.tempFiles) rmSync(f, { force: true });
  }

  /** Runs the Worker's scheduled handler once, as its Cron Trigger would. */
  async scheduled() {
    const res = await fetch(`${this.base}/__scheduled?cron=${encodeURIComponent("*/5 * * * *")}`, {
      signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
    });
    if (res.status !== 200) throw new Error(`/__scheduled answered ${res.status}: ${await res.text()}`);
  }

  /** An HTTP call with the token (and any extra `headers`); returns { status, body } (body parsed when JSON). */
  async api(method, path, body, { token = TOKEN, raw = false, headers: extra = {} } = {}) {
    this.remember(path, body);
    const headers = { ...extra };
    if (token !== null) headers.authorization = `Bearer ${token}`;
    // A hung isolate (a wasm panic aborts it) must fail the test, not stall it.
    const init = { method, headers, signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS) };
    if (body !== undefined) init.body = raw ? body : JSON.stringify(body);
    const res = await fetch(this.base + path, init);
    const text = await res.text();
    let parsed = text;
    try {
      parsed = JSON.parse(text);
    } catch {}
    // Every refusal of a relay operation is one its protocol entry lists.
    const code = parsed?.error?.code;
    const op = operationOf(method, path);
    if (code !== undefined && op !== undefined && !op.codes.includes(code)) {
      throw new Error(`${method} ${path} answered ${res.status} ${code}, which the protocol's "${op.name}" does not list`);
    }
    return { status: res.status, body: parsed, headers: res.headers, text };
  }

  /** GETs `path`, which must answer 200, and returns its JSON body. */
  async ok(path) {
    const r = await this.api("GET", path);
    if (r.status !== 200) throw new Error(`GET ${path} answered ${r.status}: ${r.text}`);
    return r.body;
  }

  /** Notes the valid source and target names a request names. */
  remember(path, body) {
    const valid = (n) => /^[A-Za-z0-9._:-]{1,64}$/.test(n) && !/^\.+$/.test(n);
    const m = String(path).match(/^\/v1\/(sources|targets)\/([^/?]+)/);
    if (m && valid(m[2])) this.seen[m[1]].add(m[2]);
    for (const row of (body && typeof body === "object" && Array.isArray(body.rows) ? body.rows : [])) {
      // An endpoint is no object: the receiver checks what it was sent.
      if (row && typeof row.target === "string" && valid(row.target) && !row.target.startsWith("endpoint:")) this.seen.targets.add(row.target);
    }
  }

  /**
   * Runs the relay's own audit (test builds) on every source and target this
   * instance was asked about: each outbox's invariants on its tables, and
   * each target's watermarks against its apply log. Returns the breaches.
   */
  async audit() {
    const breaches = [];
    for (const [kind, names] of [["sources", this.seen.sources], ["targets", this.seen.targets]]) {
      for (const name of [...names]) {
        const r = await this.api("GET", `/v1/${kind}/${name}/audit`);
        const status = kind === "sources" ? await this.api("GET", `/v1/sources/${name}/status`) : null;
        if (Array.isArray(status?.body?.partitions)) {
          // A logical source: audit each of its objects (its own, at its
          // name, while the map lists the plain layout).
          for (const p of status.body.partitions) {
            const a = p.source === name ? r : await this.api("GET", `/v1/sources/${p.source}/audit`);
            if (a.status !== 200 || !a.body.ok) breaches.push(`sources/${p.source}: ${a.text}`);
          }
          continue;
        }
        if (r.status !== 200 || !r.body.ok) breaches.push(`${kind}/${name}: ${r.text}`);
      }
    }
    return breaches;
  }

  async enqueue(source, rows) {
    const r = await this.api("POST", `/v1/sources/${source}/enqueue`, { rows });
    if (r.status !== 200) throw new Error(`enqueue ${r.status}: ${JSON.stringify(r.body)}`);
    return r.body;
  }

  async status(source) {
    const r = await this.api("GET", `/v1/sources/${source}/status`);
    if (r.status !== 200) throw new Error(`status ${r.status}: ${JSON.stringify(r.body)}`);
    return r.body;
  }

  /** The sequences `target` applied from `source`, in application order. */
  async log(target, source) {
    const r = await this.api("GET", `/v1/targets/${target}/log?source=${source}`);
    if (r.status !== 200) throw new Error(`log ${r.status}: ${JSON.stringify(r.body)}`);
    return r.body.seqs;
  }

  async keys(target) {
    const r = await this.api("GET", `/v1/targets/${target}/keys`);
    return r.body.keys;
  }

  /** Waits until `source` has an empty outbox. */
  async drained(source, timeoutMs = 60_000) {
    const deadline = Date.now() + timeoutMs;
    let s;
    while (Date.now() < deadline) {
      s = await this.status(source);
      if (s.queued_rows === 0) return s;
      await sleep(200);
    }
    throw new Error(`${source} did not drain: ${JSON.stringify(s)}`);
  }

  /** Lines of the Worker's output that show a Rust panic or a wasm trap. */
  panics() {
    return this.output.split("\n").filter((l) => /panicked at|RuntimeError: unreachable|Rust panic/.test(l));
  }

  /** Every `relay_apply` line targets logged so far (applies of rows with a traceparent). */
  applyLogs() {
    return this.output
      .split("\n")
      .filter((l) => l.includes('"event":"relay_apply"'))
      .map((l) => JSON.parse(l.slice(l.indexOf("{"))));
  }

  /**
   * Every delivery's summary the relay logged so far: the platform's alarms
   * (`relay_alarm`) and the in-turn deliveries enqueues ran after their
   * replies (`relay_delivery`, with `in_turn: true`).
   */
  alarmLogs() {
    const out = [];
    for (const line of this.output.split("\n")) {
      const at = line.indexOf('{"alarm"');
      if (at < 0) continue;
      try {
        const parsed = JSON.parse(line.slice(at));
        if (parsed.event === "relay_alarm" || parsed.event === "relay_delivery") out.push(parsed.alarm);
      } catch {}
    }
    return out;
  }
}

/** Starts tried when a port picked as free was taken before wrangler bound it. */
const PORT_ATTEMPTS = 4;
/** How long `wrangler dev` may take to answer its first request. */
const READY_TIMEOUT_MS = Number(process.env.RELAY_E2E_READY_MS ?? 180_000);

/** The variables every test relay runs with, unless a test overrides them. */
const TEST_VARS = { RELAY_ENV: "test", RELAY_TEST_FAULTS: "on", RELAY_TOKEN: TOKEN };

/**
 * Writes a config for the reference Worker, derived from wrangler.toml (so
 * bindings and migrations stay the same): `main` points at `build/<build>`,
 * there is no build command (the suite builds once), and `[vars]` holds the
 * test variables. Written into .e2e/ (git-ignored), away from the
 * developer's .dev.vars, which would override its [vars]. `bindings` are
 * extra Durable Object bindings (TOML inline tables, such as
 * `{ name = "X", class_name = "Y" }`) added to wrangler.toml's list.
 */
export function writeRelayConfig({ vars = {}, extraToml = "", bindings = [], build = "test" } = {}) {
  const all = { ...TEST_VARS, ...vars };
  if (build === "prod") delete all.RELAY_TEST_FAULTS;
  const lines = [];
  let section = "";
  for (const line of readFileSync(join(ROOT, "wrangler.toml"), "utf8").split("\n")) {
    const header = line.match(/^\[+([^\]]+)\]+/);
    if (header) section = header[1];
    if (section === "build") continue;
    if (section === "vars") {
      if (header) {
        lines.push("[vars]");
        for (const [k, v] of Object.entries(all)) if (v !== undefined) lines.push(`${k} = ${JSON.stringify(String(v))}`);
      }
      continue;
    }
    lines.push(line.startsWith("main = ") ? `main = "../build/${build}/entry.mjs"` : line);
    if (section === "durable_objects" && line.trim() === "bindings = [") for (const b of bindings) lines.push(`  ${b},`);
  }
  if (bindings.length > 0 && !lines.some((l) => bindings.some((b) => l.includes(b)))) {
    throw new Error("wrangler.toml has no `bindings = [` line under [durable_objects] to add bindings to");
  }
  mkdirSync(join(ROOT, ".e2e"), { recursive: true });
  const path = join(ROOT, ".e2e", `relay-${process.pid}-${Date.now()}-${Math.random().toString(36).slice(2, 8)}.toml`);
  writeFileSync(path, lines.join("\n") + "\n" + extraToml + "\n");
  return path;
}

/**
 * Spawns `wrangler dev` with `configs` (the first is served on the port) on
 * free ports with `persistDir` and `vars` (as `--var`), and resolves with a `Relay` once `ready`
 * answers (by default the front door's `/v1/health`). Another process can
 * take a port between our picking it and wrangler binding it; then it
 * starts again on others. `cwd` is where wrangler runs (and so a config's
 * `[build]` command): the repository unless a test's project lives elsewhere.
 */
export async function startWrangler({ configs, persistDir, ready = "/v1/health", vars = {}, cwd = ROOT, readyStatus = 200 }) {
  for (let attempt = 1; ; attempt++) {
    try {
      return await startOnce({ configs, persistDir, ready, vars, cwd, readyStatus });
    } catch (e) {
      if (attempt >= PORT_ATTEMPTS || !/Address already in use/.test(String(e.message))) throw e;
    }
  }
}

async function startOnce({ configs, persistDir, ready, vars, cwd, readyStatus }) {
  const port = await freePort();
  const inspector = await freePort();
  const args = [
    "dev", "--port", String(port), "--ip", "127.0.0.1", "--inspector-port", String(inspector),
    "--persist-to", persistDir, "--show-interactive-dev-session=false",
    // GET /__scheduled runs the first Worker's scheduled handler (the sweep).
    "--test-scheduled",
  ];
  for (const config of configs) args.push("--config", config);
  // --var reaches the first config's Worker; multi-Worker sessions set [vars].
  for (const [k, v] of Object.entries(vars)) args.push("--var", `${k}:${v}`);
  // Run wrangler with this Node (22, from node_modules) whatever PATH says.
  const wrangler = join(ROOT, "node_modules", "wrangler", "bin", "wrangler.js");
  const path = `${join(ROOT, "node_modules", ".bin")}:${process.env.PATH}`;
  const child = spawn(process.execPath, [wrangler, ...args], {
    cwd,
    detached: true,
    env: { ...process.env, PATH: path, WRANGLER_SEND_METRICS: "false", CI: "1", NO_COLOR: "1" },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const relay = new Relay(child, port, persistDir);
  /** The Chrome DevTools Protocol port of the Worker (the CPU profile in bench/profile.mjs). */
  relay.inspectorPort = inspector;
  const deadline = Date.now() + READY_TIMEOUT_MS;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`wrangler exited:\n${relay.output}`);
    try {
      const r = await relay.api("GET", ready);
      if (r.status === readyStatus) return relay;
    } catch {}
    await sleep(250);
  }
  relay.kill();
  throw new Error(`wrangler did not become ready:\n${relay.output}`);
}

/** One row putting `key = value` at `target`. */
export const put = (target, key, value) => ({ target, puts: [[key, value]] });

/** FNV-1a 64 of the name's bytes modulo n: the relay's home partition, written apart from it. */
export function home(name, n) {
  let h = 0xcbf29ce484222325n;
  for (const b of new TextEncoder().encode(name)) {
    h ^= BigInt(b);
    h = (h * 0x100000001b3n) & 0xffffffffffffffffn;
  }
  return Number(h % BigInt(n));
}
