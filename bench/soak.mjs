#!/usr/bin/env node
// `npm run soak`: the relay's memory under steady load, beside a trivial
// JavaScript source/target pair under the same load, in local workerd.
//
//   npm run soak -- [--minutes N] [--quick] [--rate ROWS_PER_S] [--out DIR] [--no-build]
//   npm run soak -- --render DIR   (rewrite DIR/report.md from DIR/results.json)
//
// Two workerd processes run side by side: the relay's benchmark build
// (bench/wrangler.toml, Free preset) and the pair (bench/soak/pair.mjs, one
// insert, one call and one delete per row). Each gets the same load:
// PRODUCERS producers enqueueing single rows at a steady total rate over
// SOURCES sources and TARGETS targets, plus, every BURST_EVERY_MS, one
// request of BURST_ROWS rows with values of BURST_VALUE_BYTES. Every
// sample interval the driver reads, per process: the isolate's JS heap
// (live after a garbage collection, and in use as found, through the
// inspector the profile uses), for the relay its wasm
// linear memory and the bytes its allocator holds (`wasm_heap`, from the
// benchmark build's GET /v1/bench/work), and the resident memory of the
// workerd that runs the Worker and of the workerd wrangler runs as its proxy. Linear memory never shrinks, so `wasm_heap` is what tells
// a leak from a peak. At the end the load stops, the relay drains, and every
// target's arrival log must hold every enqueued row exactly once (an
// enqueue that was refused or failed is reported, and not expected).
//
// It prints a table of samples and, after warm-up, each process's largest
// isolate memory (JS heap + wasm memory) and its slope (MB per 10 min); it
// writes report.md into DIR (results.json beside it, not committed).
// wrangler dev restarts workerd when files it watches change (a checkout
// under the run, say), which starts new isolates: the driver then finds the
// new process, counts the restart, and reads the figures after warm-up over
// the longest stretch that ran in one process. It
// exits non-zero if a row was lost or applied twice, and in --quick mode
// (one minute, what scripts/test runs) also if the relay's isolate memory
// passes QUICK_RELAY_BOUND_MB.

import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative, resolve } from "node:path";
import { ROOT, sleep, startWrangler } from "../tests/e2e/harness.mjs";
import { startBenchWorker } from "./workerd.mjs";
import { getOk, pool } from "./measure.mjs";
import { inspector } from "./profile.mjs";

/** Producers per system, each sending one row per request. */
const PRODUCERS = 8;
/** Sources the producers share (producer p sends to source p mod SOURCES). */
const SOURCES = 4;
/** Targets the rows go round. */
const TARGETS = 64;
/** Rows per second per system the producers aim at (all producers together). */
const DEFAULT_RATE = 60;
/** A burst of large values every this many ms... */
const BURST_EVERY_MS = 120_000;
/** ...in quick mode. */
const BURST_EVERY_MS_QUICK = 20_000;
/** Rows in one burst request. */
const BURST_ROWS = 16;
/** Characters of each burst row's value: near the relay's 64 KiB value limit, about 1 MB a burst. */
const BURST_VALUE_BYTES = 60_000;
/** A sample every this many ms... */
const SAMPLE_EVERY_MS = 30_000;
/** ...in quick mode. */
const SAMPLE_EVERY_MS_QUICK = 10_000;
/** Samples before this much of the run are warm-up: excluded from the bound and the slope... */
const WARMUP_MS = 5 * 60_000;
/** ...in quick mode. */
const WARMUP_MS_QUICK = 20_000;
/** Quick mode's run, ms. */
const QUICK_MS = 60_000;
/** Quick mode fails if the relay's isolate (JS heap + wasm memory) passes this, MB: far below an isolate's 128 MB. */
export const QUICK_RELAY_BOUND_MB = 32;
/** Longest the relay may take to deliver what is queued once the load stops, ms. */
const DRAIN_TIMEOUT_MS = 300_000;
/** Concurrent reads of the targets' logs at the end. */
const READ_CONCURRENCY = 8;

const MB = 1024 * 1024;

function parseArgs(argv) {
  const opts = { minutes: 30, quick: false, rate: DEFAULT_RATE, out: null, build: true, render: null };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const value = () => {
      if (i + 1 >= argv.length) throw new Error(`${a} needs a value`);
      return argv[++i];
    };
    if (a === "--minutes") opts.minutes = Number(value());
    else if (a === "--quick") opts.quick = true;
    else if (a === "--rate") opts.rate = Number(value());
    else if (a === "--out") opts.out = value();
    else if (a === "--no-build") opts.build = false;
    else if (a === "--render") opts.render = value();
    else if (a === "--help" || a === "-h") {
      console.log(readFileSync(new URL(import.meta.url)).toString().split("\n").slice(1, 5).join("\n"));
      process.exit(0);
    } else throw new Error(`unknown argument ${a}`);
  }
  if (!(opts.minutes > 0) || !(opts.rate > 0)) throw new Error("--minutes and --rate are positive numbers");
  return opts;
}

/** The two systems: how each enqueues, and how its targets' arrivals are read. */
const SYSTEMS = {
  relay: {
    enqueue: (w, source, rows) =>
      w.api("POST", `/v1/sources/${source}/enqueue`, { rows: rows.map((r) => ({ target: r.target, puts: [[r.key, r.value]] })) }),
    arrivals: async (w, target) => {
      const s = await getOk(w, `/v1/bench/targets/${target}/stats`);
      return { distinct: s.distinct, duplicates: s.duplicates };
    },
  },
  pair: {
    enqueue: (w, source, rows) => w.api("POST", `/enqueue/${source}`, { rows }),
    arrivals: async (w, target) => getOk(w, `/stats/${target}`),
  },
};

/** pid -> {ppid, comm, cmdline} for every process. */
function processes() {
  const out = new Map();
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const text = readFileSync(`/proc/${entry}/stat`, "utf8");
      const comm = text.slice(text.indexOf("(") + 1, text.lastIndexOf(")"));
      const ppid = Number(text.slice(text.lastIndexOf(")") + 2).split(" ")[1]);
      const cmdline = readFileSync(`/proc/${entry}/cmdline`, "utf8").split("\0");
      out.set(Number(entry), { ppid, comm, cmdline });
    } catch {}
  }
  return out;
}

/**
 * The two workerd processes wrangler dev starts under `root`: the one that
 * runs the Worker (it has the inspector) and wrangler's proxy in front of it.
 */
function workerdPids(root) {
  const procs = processes();
  const found = { worker: null, proxy: null };
  const stack = [root];
  while (stack.length) {
    const pid = stack.pop();
    const p = procs.get(pid);
    if (pid !== root && p?.comm === "workerd") {
      if (p.cmdline.some((a) => a.startsWith("--inspector-addr"))) found.worker = pid;
      else found.proxy = pid;
    }
    for (const [child, c] of procs) if (c.ppid === pid) stack.push(child);
  }
  return found;
}

/** Resident memory of `pid`, MB (null when it is gone). */
function rssMb(pid) {
  try {
    const line = readFileSync(`/proc/${pid}/status`, "utf8").split("\n").find((l) => l.startsWith("VmRSS:"));
    return Number(line.split(/\s+/)[1]) / 1024;
  } catch {
    return null;
  }
}

/** Longest a garbage collection asked through the inspector may take, ms. */
const GC_TIMEOUT_MS = 15_000;
/** How often the driver wakes an idle isolate while it waits for one, ms. */
const GC_POKE_MS = 250;

/**
 * The isolate's JS heap, MB, read through the Worker's inspector: in use as
 * found, and live (in use after a full garbage collection, which the
 * inspector asks for). Garbage waiting for a collection swings the first by
 * tens of MB between samples; the second is what the isolate keeps.
 * workerd answers the collection only once the isolate next runs, so the
 * driver wakes it with health probes until it does.
 */
async function jsHeapMb(worker) {
  const session = await inspector(worker.inspectorPort);
  try {
    const found = (await session.call("Runtime.getHeapUsage")).usedSize;
    let collected = false;
    const gc = session.call("HeapProfiler.collectGarbage").then(() => (collected = true));
    const deadline = Date.now() + GC_TIMEOUT_MS;
    while (!collected && Date.now() < deadline) {
      await Promise.race([gc, sleep(GC_POKE_MS)]);
      if (!collected) await worker.api("GET", "/v1/health").catch(() => {});
    }
    if (!collected) throw new Error(`soak: the inspector did not collect garbage within ${GC_TIMEOUT_MS / 1000} s`);
    const live = (await session.call("Runtime.getHeapUsage")).usedSize;
    return { found: found / MB, live: live / MB };
  } finally {
    session.close();
  }
}

/** One sample of a system's memory. */
async function sample(name, worker, t0) {
  const heap = await jsHeapMb(worker);
  const s = { t_s: Math.round((Date.now() - t0) / 1000), js_heap_mb: heap.live, js_heap_found_mb: heap.found, wasm_memory_mb: 0, wasm_heap_mb: null };
  if (name === "relay") {
    const m = (await getOk(worker, "/v1/bench/work")).memory;
    s.wasm_memory_mb = m.wasm_memory / MB;
    s.wasm_heap_mb = m.wasm_heap / MB;
  }
  s.isolate_mb = s.js_heap_mb + s.wasm_memory_mb;
  // A restarted workerd is a new process: find it again.
  if (rssMb(worker.workerd.worker) === null) worker.workerd = workerdPids(worker.child.pid);
  s.workerd_pid = worker.workerd.worker;
  s.workerd_rss_mb = rssMb(worker.workerd.worker);
  s.proxy_rss_mb = rssMb(worker.workerd.proxy);
  return s;
}

/** Least-squares slope of `ys` over `xs` (seconds), per 10 minutes; null with fewer than two points. */
function slopePer10Min(xs, ys) {
  if (xs.length < 2) return null;
  const n = xs.length;
  const mx = xs.reduce((a, b) => a + b, 0) / n;
  const my = ys.reduce((a, b) => a + b, 0) / n;
  let num = 0;
  let den = 0;
  for (let i = 0; i < n; i++) {
    num += (xs[i] - mx) * (ys[i] - my);
    den += (xs[i] - mx) ** 2;
  }
  return den ? (num / den) * 600 : null;
}

/** The load on one system until `endAt`: steady producers and periodic bursts. Returns its counts. */
async function load(name, worker, { endAt, rate, burstEveryMs }) {
  const system = SYSTEMS[name];
  const counts = { enqueued: 0, failed: 0, failures: [], latencies: [], burst_rows: 0 };
  const send = async (source, rows) => {
    const started = Date.now();
    let r;
    try {
      r = await system.enqueue(worker, source, rows);
    } catch (e) {
      r = { status: 0, body: String(e.message) };
    }
    if (r.status === 200) {
      counts.enqueued += rows.length;
      if (rows.length === 1) counts.latencies.push(Date.now() - started);
    } else {
      counts.failed += rows.length;
      if (counts.failures.length < 5) counts.failures.push(`${r.status} ${JSON.stringify(r.body).slice(0, 200)}`);
    }
  };
  const intervalMs = (1000 * PRODUCERS) / rate;
  const producer = async (p) => {
    const start = Date.now() + (p * intervalMs) / PRODUCERS;
    for (let n = 0; ; n++) {
      const due = start + n * intervalMs;
      // A producer behind its schedule (a busy machine) stops at the end all the same.
      if (due >= endAt || Date.now() >= endAt) return;
      if (due > Date.now()) await sleep(due - Date.now());
      const row = { target: `soak-t${(p * 7 + n) % TARGETS}`, key: `k${p}-${n}`, value: { p, n } };
      await send(`soak-s${p % SOURCES}`, [row]);
    }
  };
  const bursts = async () => {
    const value = "x".repeat(BURST_VALUE_BYTES);
    const start = Date.now();
    for (let b = 1; ; b++) {
      const due = start + b * burstEveryMs;
      if (due >= endAt - 1000) return;
      await sleep(Math.max(0, due - Date.now()));
      const rows = Array.from({ length: BURST_ROWS }, (_, i) => ({ target: `soak-t${(b * BURST_ROWS + i) % TARGETS}`, key: `big${b}-${i}`, value }));
      await send(`soak-s${b % SOURCES}`, rows);
      counts.burst_rows += rows.length;
    }
  };
  await Promise.all([...Array.from({ length: PRODUCERS }, (_, p) => producer(p)), bursts()]);
  return counts;
}

/** Waits until the relay's sources hold no rows. */
async function drainRelay(worker) {
  const deadline = Date.now() + DRAIN_TIMEOUT_MS;
  for (;;) {
    const st = await pool(Array.from({ length: SOURCES }, (_, s) => `soak-s${s}`), SOURCES, (s) => getOk(worker, `/v1/sources/${s}/status`));
    const queued = st.reduce((a, s) => a + s.queued_rows, 0);
    if (queued === 0) return;
    if (Date.now() > deadline) throw new Error(`soak: the relay still holds ${queued} rows ${DRAIN_TIMEOUT_MS / 1000} s after the load stopped`);
    await sleep(1000);
  }
}

/** Sums every target's arrival log. */
async function delivered(name, worker) {
  const targets = Array.from({ length: TARGETS }, (_, t) => `soak-t${t}`);
  const logs = await pool(targets, READ_CONCURRENCY, (t) => SYSTEMS[name].arrivals(worker, t));
  return { distinct: logs.reduce((a, l) => a + l.distinct, 0), duplicates: logs.reduce((a, l) => a + l.duplicates, 0) };
}

/** The percentile `p` (0-1) of a list of numbers. */
function percentile(list, p) {
  if (!list.length) return null;
  const sorted = [...list].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))];
}

const fmt = (x, d = 2) => (x === null || x === undefined ? "-" : x.toFixed(d));

/** The samples as a Markdown table. */
function sampleTable(samples) {
  const lines = [
    "| t (s) | relay JS heap (as found) | relay wasm memory | relay wasm_heap | relay isolate | relay workerd RSS | relay proxy RSS | pair JS heap (as found) | pair workerd RSS | pair proxy RSS |",
    "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
  ];
  for (const { relay: r, pair: p } of samples) {
    lines.push(
      `| ${r.t_s} | ${fmt(r.js_heap_mb)} (${fmt(r.js_heap_found_mb)}) | ${fmt(r.wasm_memory_mb)} | ${fmt(r.wasm_heap_mb)} | ${fmt(r.isolate_mb)} | ${fmt(r.workerd_rss_mb, 0)} | ${fmt(r.proxy_rss_mb, 0)} | ${fmt(p.js_heap_mb)} (${fmt(p.js_heap_found_mb)}) | ${fmt(p.workerd_rss_mb, 0)} | ${fmt(p.proxy_rss_mb, 0)} |`,
    );
  }
  return lines.join("\n");
}

/**
 * A system's samples split where its isolate was started again: workerd's
 * pid changed or could not be read after it could, or (the relay) wasm
 * memory shrank, which one isolate's linear memory never does.
 */
function stretches(samples, name) {
  const out = [];
  let prev = null;
  for (const { [name]: s } of samples) {
    const restarted =
      prev !== null &&
      ((s.workerd_pid != null && prev.workerd_pid != null && s.workerd_pid !== prev.workerd_pid) ||
        (s.workerd_rss_mb === null && prev.workerd_rss_mb !== null) ||
        s.wasm_memory_mb < prev.wasm_memory_mb);
    if (prev === null || restarted) out.push([]);
    out[out.length - 1].push(s);
    prev = s;
  }
  return out;
}

/** Per system: rows, loss and doubles, latency, and memory after warm-up in its longest stretch in one process. */
function summarise(name, counts, samples, warmupS) {
  const all = stretches(samples, name);
  const longest = all.reduce((a, b) => (b[b.length - 1].t_s - b[0].t_s > a[a.length - 1].t_s - a[0].t_s ? b : a));
  const steady = longest.filter((s) => s.t_s >= longest[0].t_s + warmupS);
  const xs = steady.map((s) => s.t_s);
  const first = longest[0];
  const last = longest[longest.length - 1];
  const arrivals = counts.arrivals;
  return {
    restarts: all.length - 1,
    stretch_s: [first.t_s, last.t_s],
    enqueued_rows: counts.enqueued,
    burst_rows: counts.burst_rows,
    failed_rows: counts.failed,
    failures: counts.failures,
    delivered_rows: arrivals.distinct,
    lost_rows: counts.enqueued - arrivals.distinct,
    applied_twice: arrivals.duplicates,
    enqueue_p50_ms: counts.enqueue_p50_ms,
    enqueue_p99_ms: counts.enqueue_p99_ms,
    isolate_max_mb: steady.length ? Math.max(...steady.map((s) => s.isolate_mb)) : null,
    isolate_slope_mb_per_10_min: slopePer10Min(xs, steady.map((s) => s.isolate_mb)),
    js_heap_slope_mb_per_10_min: slopePer10Min(xs, steady.map((s) => s.js_heap_mb)),
    wasm_heap_max_mb: name === "relay" && steady.length ? Math.max(...steady.map((s) => s.wasm_heap_mb)) : null,
    wasm_heap_slope_mb_per_10_min: name === "relay" ? slopePer10Min(xs, steady.map((s) => s.wasm_heap_mb)) : null,
    workerd_rss_mb: [first.workerd_rss_mb, last.workerd_rss_mb],
    proxy_rss_mb: [first.proxy_rss_mb, last.proxy_rss_mb],
  };
}

/** The summary as a Markdown table. */
function summaryTable(summary) {
  const rows = [
    ["rows enqueued (of which in bursts)", (s) => `${s.enqueued_rows} (${s.burst_rows})`],
    ["workerd restarts; figures below from t =", (s) => `${s.restarts}; ${s.stretch_s[0]}-${s.stretch_s[1]} s`],
    ["enqueues refused or failed, rows", (s) => String(s.failed_rows ?? "-")],
    ["rows delivered / lost / applied twice", (s) => `${s.delivered_rows} / ${s.lost_rows} / ${s.applied_twice}`],
    ["single-row enqueue p50 / p99, ms", (s) => `${s.enqueue_p50_ms ?? "-"} / ${s.enqueue_p99_ms ?? "-"}`],
    ["isolate (JS heap + wasm memory) after warm-up: max, MB", (s) => fmt(s.isolate_max_mb)],
    ["isolate slope after warm-up, MB / 10 min", (s) => fmt(s.isolate_slope_mb_per_10_min)],
    ["wasm_heap after warm-up: max, MB; slope, MB / 10 min", (s) => (s.wasm_heap_max_mb === null ? "-" : `${fmt(s.wasm_heap_max_mb)}; ${fmt(s.wasm_heap_slope_mb_per_10_min)}`)],
    ["workerd RSS first -> last of the stretch, MB", (s) => `${fmt(s.workerd_rss_mb[0], 0)} -> ${fmt(s.workerd_rss_mb[1], 0)}`],
    ["wrangler's proxy workerd RSS first -> last of the stretch, MB", (s) => `${fmt(s.proxy_rss_mb[0], 0)} -> ${fmt(s.proxy_rss_mb[1], 0)}`],
  ];
  return [
    "| | relay (Free preset) | JavaScript pair |",
    "| --- | ---: | ---: |",
    ...rows.map(([label, f]) => `| ${label} | ${f(summary.relay)} | ${f(summary.pair)} |`),
  ].join("\n");
}

/** Starts the pair's workerd. */
async function startPair() {
  const persistDir = mkdtempSync(join(tmpdir(), "relay-soak-pair-"));
  const worker = await startWrangler({ configs: [join(ROOT, "bench", "soak", "wrangler.toml")], persistDir });
  const stop = worker.stop.bind(worker);
  worker.stop = async () => {
    await stop();
    rmSync(persistDir, { recursive: true, force: true });
  };
  return worker;
}

/** The report of a run's results, and what in it fails the run. */
function render({ opts, t0, run_ms: runMs, sample_every_ms: sampleEveryMs, warmup_s: warmupS, burst_every_ms: burstEveryMs, counts, samples, note }) {
  const summary = {
    relay: summarise("relay", counts.relay, samples, warmupS),
    pair: summarise("pair", counts.pair, samples, warmupS),
  };
  const achieved = (s) => (s.enqueued_rows / (runMs / 1000)).toFixed(1);
  const report = [
    `# Memory soak, ${new Date(t0).toISOString().slice(0, 16)} UTC`,
    "",
    `\`npm run soak -- ${opts.quick ? "--quick" : `--minutes ${opts.minutes}`}\`: ${runMs / 60_000} min, aiming at ${opts.rate} single-row enqueues a second per system from ${PRODUCERS} producers over ${SOURCES} sources and ${TARGETS} targets, plus ${BURST_ROWS} rows of ${BURST_VALUE_BYTES} B every ${burstEveryMs / 1000} s; achieved ${achieved(summary.relay)} rows/s (relay) and ${achieved(summary.pair)} rows/s (pair). Samples every ${sampleEveryMs / 1000} s; warm-up is the first ${warmupS} s of a stretch in one process. JS heap is live (after a full garbage collection; as found in brackets), the isolate figure is live JS heap plus wasm linear memory, \`wasm_heap\` is the bytes the wasm allocator holds. MB are MiB; "-" is a process that could not be read.`,
    "",
    ...(note ? [note, ""] : []),
    summaryTable(summary),
    "",
    sampleTable(samples),
    "",
  ].join("\n");
  const problems = [];
  for (const [name, s] of Object.entries(summary)) {
    if (s.lost_rows !== 0) problems.push(`${name}: ${s.lost_rows} rows lost`);
    if (s.applied_twice !== 0) problems.push(`${name}: ${s.applied_twice} rows applied twice`);
  }
  if (opts.quick && !(summary.relay.isolate_max_mb < QUICK_RELAY_BOUND_MB)) {
    problems.push(`relay: isolate memory ${fmt(summary.relay.isolate_max_mb)} MB, over the quick bound of ${QUICK_RELAY_BOUND_MB} MB`);
  }
  return { report, problems };
}

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  if (opts.render) {
    const dir = resolve(opts.render);
    const { report, problems } = render(JSON.parse(readFileSync(join(dir, "results.json"), "utf8")));
    writeFileSync(join(dir, "report.md"), report);
    console.log(report);
    if (problems.length) throw new Error(`soak failed:\n${problems.join("\n")}`);
    return;
  }
  const runMs = opts.quick ? QUICK_MS : opts.minutes * 60_000;
  const sampleEveryMs = opts.quick ? SAMPLE_EVERY_MS_QUICK : SAMPLE_EVERY_MS;
  const warmupS = (opts.quick ? WARMUP_MS_QUICK : Math.min(WARMUP_MS, runMs / 3)) / 1000;
  const out = resolve(opts.out ?? join(ROOT, "results", `${new Date().toISOString().slice(0, 10)}-soak`));
  const say = (line) => console.error(`soak: ${line}`);
  if (opts.build) {
    say("building the test Worker (scripts/build-worker test)");
    execFileSync(join(ROOT, "scripts", "build-worker"), ["test"], { cwd: ROOT, stdio: ["ignore", "ignore", "inherit"] });
  }
  const workers = {};
  try {
    workers.relay = await startBenchWorker();
    workers.pair = await startPair();
    for (const w of Object.values(workers)) w.workerd = workerdPids(w.child.pid);
    say(`${runMs / 60_000} min at ${opts.rate} rows/s per system (${PRODUCERS} producers, ${SOURCES} sources, ${TARGETS} targets), a burst of ${BURST_ROWS} x ${BURST_VALUE_BYTES} B every ${(opts.quick ? BURST_EVERY_MS_QUICK : BURST_EVERY_MS) / 1000} s`);
    const t0 = Date.now();
    const endAt = t0 + runMs;
    const samples = [];
    const take = async () => {
      const s = { relay: await sample("relay", workers.relay, t0), pair: await sample("pair", workers.pair, t0) };
      samples.push(s);
      say(`t=${s.relay.t_s}s relay isolate ${fmt(s.relay.isolate_mb)} MB (JS ${fmt(s.relay.js_heap_mb)}, wasm ${fmt(s.relay.wasm_memory_mb)}, wasm_heap ${fmt(s.relay.wasm_heap_mb)}), workerd ${fmt(s.relay.workerd_rss_mb, 0)} MB; pair JS ${fmt(s.pair.js_heap_mb)} MB, workerd ${fmt(s.pair.workerd_rss_mb, 0)} MB`);
    };
    await take();
    const sampler = (async () => {
      for (let k = 1; t0 + k * sampleEveryMs <= endAt; k++) {
        await sleep(Math.max(0, t0 + k * sampleEveryMs - Date.now()));
        await take();
      }
    })();
    const burstEveryMs = opts.quick ? BURST_EVERY_MS_QUICK : BURST_EVERY_MS;
    const [relayCounts, pairCounts] = await Promise.all([
      load("relay", workers.relay, { endAt, rate: opts.rate, burstEveryMs }),
      load("pair", workers.pair, { endAt, rate: opts.rate, burstEveryMs }),
    ]);
    await sampler;
    say("load stopped; waiting for the relay to drain");
    await drainRelay(workers.relay);
    const counts = {
      relay: { ...relayCounts, arrivals: await delivered("relay", workers.relay) },
      pair: { ...pairCounts, arrivals: await delivered("pair", workers.pair) },
    };
    for (const c of Object.values(counts)) delete c.latencies;
    const latencies = { relay: relayCounts.latencies, pair: pairCounts.latencies };
    for (const [name, list] of Object.entries(latencies)) {
      counts[name].enqueue_p50_ms = percentile(list, 0.5);
      counts[name].enqueue_p99_ms = percentile(list, 0.99);
    }
    const result = { opts, t0, run_ms: runMs, sample_every_ms: sampleEveryMs, warmup_s: warmupS, burst_every_ms: burstEveryMs, counts, samples };
    mkdirSync(out, { recursive: true });
    writeFileSync(join(out, "results.json"), JSON.stringify(result, null, 2));
    const { report, problems } = render(result);
    writeFileSync(join(out, "report.md"), report);
    console.log(report);
    say(`wrote ${relative(ROOT, out)}/report.md`);
    if (problems.length) throw new Error(`soak failed:\n${problems.join("\n")}`);
  } finally {
    for (const w of Object.values(workers)) await w.stop();
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  main().catch((e) => {
    console.error(e.message ?? e);
    process.exit(1);
  });
}
