// Both directions over the one wire protocol: a TypeScript source (the npm
// package) delivering to the reference Worker's Rust target, and the Rust
// source delivering to a TypeScript target. Each object's own protocol is
// reached through its binding.

import { DurableObject } from "cloudflare:workers";
import { RelaySource, RelayTarget, type Row } from "../../../../packages/durable-relay/src/index.js";

interface Env {
  TS_SOURCES: DurableObjectNamespace<TsSource>;
  TS_TARGETS: DurableObjectNamespace<TsTarget>;
  RUST_SOURCES: DurableObjectNamespace;
  RUST_TARGETS: DurableObjectNamespace;
}

/** The wire's row fields the package spells in camelCase. */
const ROW_FIELDS: Record<string, string> = { delay_ms: "delayMs", not_before_ms: "notBeforeMs" };

/**
 * Wire rows as the package takes them: only a row's own delay fields are
 * renamed; anything that is not an array of objects passes as it is, for
 * the package to refuse as the wire would.
 */
function packageRows(rows: unknown): unknown {
  if (!Array.isArray(rows)) return rows;
  return rows.map((row) =>
    row === null || typeof row !== "object" || Array.isArray(row)
      ? row
      : Object.fromEntries(Object.entries(row).map(([k, v]) => [ROW_FIELDS[k] ?? k, v])),
  );
}

export class TsSource extends DurableObject<Env> {
  relay = new RelaySource(this.ctx, this.env, { targets: "RUST_TARGETS" });

  /**
   * An enqueue that arrived in the wire's format (the HTTP body, snake_case),
   * made through the package (camelCase) and answered in the wire's format
   * again, so the same request can be compared with the HTTP path's answer.
   */
  async enqueue(body: { rows: unknown; idempotency_key?: string }, traceparent?: string) {
    const done = await this.relay.enqueue(packageRows(body.rows) as Row[], { idempotencyKey: body.idempotency_key, traceparent });
    return Object.fromEntries(Object.entries(done).map(([k, v]) => [k.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`), v]));
  }

  /**
   * Generated JavaScript values (seeded) as rows and options, through both
   * enqueue methods: every outcome must be a result or a RelayError.
   */
  async attack(seed: number, n: number) {
    const random = rng(seed);
    const outcome = { accepted: 0, rows: 0, codes: {} as Record<string, number>, other: [] as string[], operator: {} as Record<string, number> };
    for (let i = 0; i < n; i++) {
      if (random() < 0.2) {
        // An operator call with any argument: a result or a RelayError.
        const arg = anyValue(random);
        const call = pick(random, [
          () => this.relay.redrive(arg as string),
          () => this.relay.discard(arg as string),
          () => this.relay.deliveredThrough(arg as number),
          () => this.relay.parkedRows(arg as string, { after: anyValue(random) as number, limit: anyValue(random) as number }),
          () => this.relay.parkedRows("t-a", { after: anyValue(random) as number, limit: anyValue(random) as number }),
        ]);
        try {
          await call();
          outcome.operator.ok = (outcome.operator.ok ?? 0) + 1;
        } catch (e) {
          const err = e as { name?: string; code?: string; message?: string };
          if (err.name === "RelayError" && typeof err.code === "string") outcome.operator[err.code] = (outcome.operator[err.code] ?? 0) + 1;
          else outcome.other.push(`operator call: ${err.name}: ${err.message}`);
        }
        continue;
      }
      const rows = anyRows(random);
      const options = anyOptions(random);
      try {
        const done =
          random() < 0.5
            ? await this.relay.enqueue(rows as Row[], options)
            : this.ctx.storage.transactionSync(() => this.relay.enqueueSync(rows as Row[], options));
        outcome.accepted += 1;
        if (!done.duplicate) outcome.rows += done.seqs.length;
      } catch (e) {
        const err = e as { name?: string; code?: string; status?: number; message?: string };
        if (err.name === "RelayError" && typeof err.code === "string" && (err.status ?? 0) >= 400 && (err.status ?? 0) < 500) {
          outcome.codes[err.code] = (outcome.codes[err.code] ?? 0) + 1;
        } else {
          const shown = (v: unknown) =>
            String(JSON.stringify(v, (_k, x) => (typeof x === "bigint" ? `${x}n` : x)) ?? typeof v).slice(0, 200);
          outcome.other.push(`${err.name}: ${err.message} (request ${i}: options ${shown(options)}, rows ${shown(rows)})`);
        }
      }
    }
    return outcome;
  }

  /** The package's operator methods, by name. */
  async operate(op: string, target: string, seq: number, limit = 10) {
    switch (op) {
      case "parkedTargets":
        return this.relay.parkedTargets();
      case "parkedRows":
        return this.relay.parkedRows(target, { after: 0, limit });
      case "redrive":
        return this.relay.redrive(target);
      case "discard":
        return this.relay.discard(target);
      case "deliveredThrough":
        return this.relay.deliveredThrough(seq);
      case "relayWatermark":
        return this.relay.relayWatermark();
      default:
        return this.relay.status();
    }
  }

  async fetch(request: Request) {
    return this.relay.fetch(request);
  }

  async alarm() {
    await this.relay.alarm();
  }
}

export class TsTarget extends DurableObject<Env> {
  relay = new RelayTarget(this.ctx);

  async fetch(request: Request) {
    return this.relay.fetch(request);
  }
}

/** A small seeded generator (mulberry32), so a failure can be replayed. */
function rng(seed: number) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const pick = <T,>(random: () => number, xs: T[]): T => xs[Math.floor(random() * xs.length)];

/** Any JavaScript value a caller might pass where the relay wants JSON. */
function anyValue(random: () => number, depth = 0): unknown {
  const nest = (): unknown => {
    let v: unknown = 1;
    for (let d = 0; d < 70; d++) v = [v];
    return v;
  };
  return pick(random, [
    () => null, () => true, () => 0, () => -0, () => 1.5, () => 2 ** 53, () => 1e308, () => NaN, () => Infinity,
    () => 10n, () => undefined, () => "text", () => "\ud800", () => "é😀", () => "x".repeat(70_000),
    () => (depth < 3 ? [anyValue(random, depth + 1), anyValue(random, depth + 1)] : []),
    () => (depth < 3 ? { a: anyValue(random, depth + 1), b: anyValue(random, depth + 1) } : {}),
    () => nest(), () => () => 1, () => new Date(0), () => new Map(),
  ])();
}

function anyRow(random: () => number): unknown {
  if (random() < 0.6) {
    // A valid row, with a value JSON carries (possibly oddly: -0, 2^53, nesting).
    const value = pick(random, [null, true, -0, 1.5, 2 ** 53, "é😀", { a: [1, { b: "c" }] }, [[[]]]]);
    return { target: pick(random, ["t-a", "t-b", "t-c", "t:1"]), puts: [["k", value]] };
  }
  const row: Record<string, unknown> = {};
  if (random() < 0.9) row.target = pick(random, ["t-a", "t-b", "t-c", "", "x".repeat(65), "bad name", 7, null, "t:1"]);
  if (random() < 0.85) {
    row.puts = pick(random, [
      () => [["k", anyValue(random)]],
      () => [[pick(random, ["k", "", "k".repeat(600), 5]), anyValue(random)], ["k2", anyValue(random)]],
      () => [["k", 1], ["k", 2]],
      () => "not a list",
      () => [[]],
      () => [],
    ])();
  }
  if (random() < 0.2) row.deletes = pick(random, [["gone"], [""], "gone", [1]]);
  if (random() < 0.1) row.delayMs = pick(random, [0, 10, -1, 86_400_001, "5", 1.5]);
  if (random() < 0.05) row.notBeforeMs = pick(random, [0, Date.now() + 10, -5]);
  if (random() < 0.05) row.extra = 1;
  return row;
}

function anyRows(random: () => number): unknown {
  return pick(random, [
    () => Array.from({ length: 1 + Math.floor(random() * 4) }, () => anyRow(random)),
    () => Array.from({ length: 1 + Math.floor(random() * 4) }, () => anyRow(random)),
    () => Array.from({ length: 257 }, () => ({ target: "t-a", puts: [["k", 1]] })),
    () => [], () => undefined, () => null, () => 5, () => "rows", () => ({}),
  ])();
}

function anyOptions(random: () => number): Record<string, unknown> {
  const options: Record<string, unknown> = {};
  if (random() < 0.4) options.idempotencyKey = pick(random, ["key-1", "key-2", "", "k".repeat(300), 5, null]);
  if (random() < 0.2) {
    options.traceparent = pick(random, ["00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "garbage", "", 7, null]);
  }
  return options;
}

export default {
  async fetch(request: Request, env: Env): Promise<Response> {
    const url = new URL(request.url);
    const [kind, name, ...rest] = url.pathname.split("/").filter(Boolean);
    if (kind === "health") return new Response("ok");
    const inner = new Request(`https://relay/${rest.join("/")}${url.search}`, request);
    if (kind === "ts-source" && rest[0] === "attack") {
      const seed = Number(url.searchParams.get("seed") ?? 1);
      const n = Number(url.searchParams.get("n") ?? 100);
      return Response.json(await env.TS_SOURCES.getByName(name).attack(seed, n));
    }
    if (kind === "ts-source" && rest[0] === "operate") {
      const target = url.searchParams.get("target") ?? "";
      const seq = Number(url.searchParams.get("seq") ?? 0);
      try {
        const limit = Number(url.searchParams.get("limit") ?? 10);
        return Response.json(await env.TS_SOURCES.getByName(name).operate(rest[1], target, seq, limit));
      } catch (e) {
        const err = e as { code?: string; status?: number; message: string };
        return Response.json({ error: { code: err.code, message: err.message } }, { status: err.status ?? 500 });
      }
    }
    if (kind === "ts-source" && request.method === "POST") {
      try {
        const trace = request.headers.get("traceparent") ?? undefined;
        return Response.json(await env.TS_SOURCES.getByName(name).enqueue(await request.json(), trace));
      } catch (e) {
        const err = e as { code?: string; status?: number; message: string };
        return Response.json({ error: { code: err.code, message: err.message } }, { status: err.status ?? 500 });
      }
    }
    const namespace = { "ts-source": env.TS_SOURCES, "ts-target": env.TS_TARGETS, "rust-source": env.RUST_SOURCES, "rust-target": env.RUST_TARGETS }[kind];
    if (!namespace || !name) return new Response("no route", { status: 404 });
    return namespace.getByName(name).fetch(inner);
  },
};
