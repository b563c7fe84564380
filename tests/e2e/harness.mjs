// Starts the real Worker under `wrangler dev` (workerd, SQLite Durable
// Objects, real alarms) as a child process and drives it over HTTP.
//
// Every instance gets free ports, its own persistence directory (unless one
// is passed, to restart on the same state) and the test token. stdout is
// captured so tests can read the relay's per-alarm JSON log lines.

import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join, dirname } from "node:path";
import { fileURLToPath } from "node:url";

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
export const TOKEN = "e2e-token-" + process.pid;

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
    child.stdout.on("data", (d) => (this.output += d.toString()));
    child.stderr.on("data", (d) => (this.output += d.toString()));
  }

  /**
   * Starts an instance; `vars` become `--var` flags; `extraToml` is appended
   * to a copy of wrangler.toml (written beside it, so paths still resolve).
   */
  static async start({ vars = {}, persistDir, extraToml } = {}) {
    persistDir ??= mkdtempSync(join(tmpdir(), "relay-e2e-"));
    const allVars = { RELAY_ENV: "test", RELAY_TEST_FAULTS: "on", RELAY_TOKEN: TOKEN, ...vars };
    let config;
    if (extraToml) {
      config = join(ROOT, `.wrangler-e2e-${process.pid}-${Date.now()}.toml`);
      writeFileSync(config, readFileSync(join(ROOT, "wrangler.toml"), "utf8") + "\n" + extraToml + "\n");
    }
    return startWrangler({ config, vars: allVars, persistDir });
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
  }

  /** An HTTP call with the token; returns { status, body } (body parsed when JSON). */
  async api(method, path, body, { token = TOKEN, raw = false } = {}) {
    const headers = {};
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
    return { status: res.status, body: parsed, headers: res.headers, text };
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

  /** Every per-alarm summary the relay logged so far. */
  alarmLogs() {
    const out = [];
    for (const line of this.output.split("\n")) {
      const at = line.indexOf('{"alarm"');
      if (at < 0) continue;
      try {
        const parsed = JSON.parse(line.slice(at));
        if (parsed.event === "relay_alarm") out.push(parsed.alarm);
      } catch {}
    }
    return out;
  }
}

/** Starts tried when a port picked as free was taken before wrangler bound it. */
const PORT_ATTEMPTS = 4;
/** How long `wrangler dev` may take to answer its first request. */
const READY_TIMEOUT_MS = 180_000;

/**
 * Spawns `wrangler dev` (with `config`, default wrangler.toml) on free ports
 * with `vars` and `persistDir`, and resolves with a `Relay` once
 * `/v1/health` answers. Another process can take a port between our
 * picking it and wrangler binding it; then it starts again on others.
 */
export async function startWrangler({ config, vars, persistDir }) {
  for (let attempt = 1; ; attempt++) {
    try {
      return await startOnce({ config, vars, persistDir });
    } catch (e) {
      if (attempt >= PORT_ATTEMPTS || !/Address already in use/.test(String(e.message))) throw e;
    }
  }
}

async function startOnce({ config, vars, persistDir }) {
  const port = await freePort();
  const inspector = await freePort();
  const args = [
    "dev", "--port", String(port), "--ip", "127.0.0.1", "--inspector-port", String(inspector),
    "--persist-to", persistDir, "--show-interactive-dev-session=false",
  ];
  if (config) args.push("--config", config);
  for (const [k, v] of Object.entries(vars)) args.push("--var", `${k}:${v}`);
  // Run wrangler with this Node (22, from node_modules) whatever PATH says.
  const wrangler = join(ROOT, "node_modules", "wrangler", "bin", "wrangler.js");
  const path = `${join(ROOT, "node_modules", ".bin")}:${process.env.PATH}`;
  const child = spawn(process.execPath, [wrangler, ...args], {
    cwd: ROOT,
    detached: true,
    env: { ...process.env, PATH: path, WRANGLER_SEND_METRICS: "false", CI: "1", NO_COLOR: "1" },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const relay = new Relay(child, port, persistDir);
  const deadline = Date.now() + READY_TIMEOUT_MS;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`wrangler exited:\n${relay.output}`);
    try {
      const r = await relay.api("GET", "/v1/health");
      if (r.status === 200) return relay;
    } catch {}
    await sleep(250);
  }
  relay.kill();
  throw new Error(`wrangler did not become ready:\n${relay.output}`);
}

/** One row putting `key = value` at `target`. */
export const put = (target, key, value) => ({ target, puts: [[key, value]] });
