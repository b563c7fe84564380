// Starts the Worker in local workerd (`wrangler dev`) with the benchmark
// configuration (bench/wrangler.toml: the BenchSource class, the bench
// queue, RELAY_BENCH=on) and hands each JSON event the Worker logs on
// stdout to a listener: the relay's per-alarm summaries
// (`{"event":"relay_alarm",...}`) and the queue consumer's per-batch lines
// (`{"event":"bench_queue_batch",...}`).
//
// It reuses the end-to-end harness's `Relay` class (HTTP calls with the
// token, stop) and starts the process the same way the harness does:
// detached, on free ports, with its own persistence directory.

import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Relay, ROOT, TOKEN, sleep } from "../tests/e2e/harness.mjs";

/** How long `wrangler dev` may take to answer its first request. */
const READY_TIMEOUT_MS = 180_000;
/** Starts tried when a port picked as free was taken before wrangler bound it. */
const PORT_ATTEMPTS = 4;

async function freePort() {
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

/** The Worker's JSON log events in `text`, a chunk of complete lines. */
function events(text) {
  const out = [];
  for (const line of text.split("\n")) {
    if (!line.includes('"event"')) continue;
    const at = line.indexOf("{");
    if (at < 0) continue;
    try {
      const parsed = JSON.parse(line.slice(at));
      if (parsed.event === "relay_alarm") out.push({ kind: "alarm", ...parsed.alarm });
      else if (parsed.event === "bench_queue_batch") out.push({ kind: "queue_batch", ...parsed });
      else if (typeof parsed.event === "string") out.push({ kind: parsed.event, ...parsed });
    } catch {}
  }
  return out;
}

/**
 * Starts an instance with `vars` on top of bench/wrangler.toml's. Returns
 * the harness `Relay` (api, stop) with `listener`, a settable callback
 * receiving every logged event. Another process can take a port between
 * our picking it and wrangler binding it; then it starts again on others.
 */
export async function startBenchWorker({ vars = {} } = {}) {
  for (let attempt = 1; ; attempt++) {
    try {
      return await startOnce(vars);
    } catch (e) {
      if (attempt >= PORT_ATTEMPTS || !/Address already in use/.test(String(e.message))) throw e;
    }
  }
}

async function startOnce(vars) {
  const port = await freePort();
  const inspector = await freePort();
  const persistDir = mkdtempSync(join(tmpdir(), "relay-bench-"));
  const allVars = { RELAY_TOKEN: TOKEN, ...vars };
  const args = [
    "dev", "--config", join(ROOT, "bench", "wrangler.toml"),
    "--port", String(port), "--ip", "127.0.0.1", "--inspector-port", String(inspector),
    "--persist-to", persistDir, "--show-interactive-dev-session=false",
  ];
  for (const [k, v] of Object.entries(allVars)) args.push("--var", `${k}:${v}`);
  const wrangler = join(ROOT, "node_modules", "wrangler", "bin", "wrangler.js");
  const path = `${join(ROOT, "node_modules", ".bin")}:${process.env.PATH}`;
  const child = spawn(process.execPath, [wrangler, ...args], {
    cwd: ROOT,
    detached: true,
    env: { ...process.env, PATH: path, WRANGLER_SEND_METRICS: "false", CI: "1", NO_COLOR: "1" },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const worker = new Relay(child, port, persistDir);
  worker.listener = () => {};
  let partial = "";
  child.stdout.on("data", (d) => {
    const text = partial + d.toString();
    const cut = text.lastIndexOf("\n");
    partial = text.slice(cut + 1);
    for (const ev of events(text.slice(0, cut + 1))) worker.listener(ev);
  });
  const stop = worker.stop.bind(worker);
  worker.stop = async () => {
    await stop();
    rmSync(persistDir, { recursive: true, force: true });
  };
  const deadline = Date.now() + READY_TIMEOUT_MS;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) {
      await worker.stop();
      throw new Error(`wrangler exited:\n${worker.output}`);
    }
    try {
      const r = await worker.api("GET", "/v1/health");
      if (r.status === 200) return worker;
    } catch {}
    await sleep(200);
  }
  await worker.stop();
  throw new Error(`wrangler did not become ready:\n${worker.output}`);
}
