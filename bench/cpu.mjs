// CPU accounting for honest timings on a shared machine: how busy the
// machine is, and how much of that busy time belongs to processes that are
// not this benchmark (the driver, wrangler and workerd it started). Reads
// /proc; where there is none, every figure is null.

import { readFileSync, readdirSync } from "node:fs";

/** Total and idle jiffies over all CPUs. */
function machine() {
  const f = readFileSync("/proc/stat", "utf8").split("\n")[0].trim().split(/\s+/).slice(1).map(Number);
  return { total: f.reduce((a, b) => a + b, 0), idle: f[3] + (f[4] ?? 0) };
}

/** utime + stime jiffies of this process and every descendant still running. */
function ours() {
  const procs = new Map();
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const text = readFileSync(`/proc/${entry}/stat`, "utf8");
      const rest = text.slice(text.lastIndexOf(")") + 2).split(" ");
      // Fields after the command: state(3) ppid(4) ... utime(14) stime(15) cutime(16) cstime(17).
      const ppid = Number(rest[1]);
      const cpu = Number(rest[11]) + Number(rest[12]) + Number(rest[13]) + Number(rest[14]);
      procs.set(Number(entry), { ppid, cpu });
    } catch {}
  }
  const children = new Map();
  for (const [pid, p] of procs) {
    if (!children.has(p.ppid)) children.set(p.ppid, []);
    children.get(p.ppid).push(pid);
  }
  let sum = 0;
  const stack = [process.pid];
  while (stack.length) {
    const pid = stack.pop();
    sum += procs.get(pid)?.cpu ?? 0;
    stack.push(...(children.get(pid) ?? []));
  }
  return sum;
}

/** A snapshot to diff later with `foreignShare`. */
export function snapshot() {
  try {
    const driver = process.cpuUsage();
    return { machine: machine(), ours: ours(), driver_us: driver.user + driver.system };
  } catch {
    return null;
  }
}

/**
 * Between two snapshots: the share of all CPU time that was busy, and the
 * share used by processes outside this benchmark.
 */
export function usage(a, b) {
  if (!a || !b) return { busy: null, foreign: null };
  const total = Math.max(1, b.machine.total - a.machine.total);
  const busy = total - (b.machine.idle - a.machine.idle);
  const mine = Math.max(0, b.ours - a.ours);
  const round = (x) => Math.round(x * 1000) / 1000;
  return { busy: round(busy / total), foreign: round(Math.max(0, busy - mine) / total) };
}

/** Jiffies per second in /proc (USER_HZ, 100 on Linux). */
const USER_HZ = 100;

/**
 * CPU milliseconds the processes this benchmark started (wrangler and
 * workerd) used between two snapshots: the tree's time less the driver's
 * own. Null where /proc is missing.
 */
export function workerCpuMs(a, b) {
  if (!a || !b) return null;
  const tree = ((b.ours - a.ours) * 1000) / USER_HZ;
  const driver = (b.driver_us - a.driver_us) / 1000;
  return Math.max(0, Math.round(tree - driver));
}
