// Starts the Worker in local workerd (`wrangler dev`) with the benchmark
// configuration (bench/wrangler.toml: the BenchSource class, the bench
// queue, RELAY_BENCH=on) and hands each JSON event the Worker logs on
// stdout to a listener: the relay's per-alarm and per in-turn delivery
// summaries (`{"event":"relay_alarm",...}`, `"relay_delivery"`) and the
// queue consumer's per-batch lines
// (`{"event":"bench_queue_batch",...}`).
//
// It starts the process with the end-to-end harness's `startWrangler`
// (detached, free ports, retried on a port collision) and reuses its
// `Relay` class (HTTP calls with the token, stop).

import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ROOT, TOKEN, startWrangler } from "../tests/e2e/harness.mjs";

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
      else if (parsed.event === "relay_delivery") out.push({ kind: "delivery", ...parsed.alarm });
      else if (parsed.event === "bench_queue_batch") out.push({ kind: "queue_batch", ...parsed });
      else if (typeof parsed.event === "string") out.push({ kind: parsed.event, ...parsed });
    } catch {}
  }
  return out;
}

/**
 * Starts an instance with `vars` on top of bench/wrangler.toml's (or of
 * `config`, a variant of it such as the profile's). Returns
 * the harness `Relay` (api, stop) with `listener`, a settable callback
 * receiving every logged event.
 */
export async function startBenchWorker({ vars = {}, config = join(ROOT, "bench", "wrangler.toml") } = {}) {
  const persistDir = mkdtempSync(join(tmpdir(), "relay-bench-"));
  let worker;
  try {
    worker = await startWrangler({ configs: [config], vars: { RELAY_TOKEN: TOKEN, ...vars }, persistDir });
  } catch (e) {
    rmSync(persistDir, { recursive: true, force: true });
    throw e;
  }
  worker.listener = () => {};
  let partial = "";
  worker.child.stdout.on("data", (d) => {
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
  return worker;
}
