// What crosses the npm package's boundary, in workerd: JavaScript values
// built here from the test's JSON descriptions (so NaN, undefined, a Date,
// a cycle... can be sent at all) go through both enqueue methods, and each
// verdict goes back to the test; callbacks that return promises are given
// to `enqueue` (`writes`) and to `RelayTarget` (`onApply`, at objects named
// async-*), which the package must refuse.

import { DurableObject } from "cloudflare:workers";
import { RelayError, RelaySource, RelayTarget, type AppliedFrom, type AppliedRow, type JsonValue, type Row } from "../../../../packages/durable-relay/src/index.js";

// workerd reports a promise rejected with no handler to this event (it
// logs nothing by itself): the test reads these lines.
addEventListener("unhandledrejection", (event) => {
  const reason = (event as PromiseRejectionEvent).reason as { message?: string } | undefined;
  console.error(`unhandled rejection: ${reason?.message ?? String(reason)}`);
});

interface Env {
  WRITERS: DurableObjectNamespace<Writer>;
  READERS: DurableObjectNamespace<Reader>;
}

/** One enqueue to try: its rows as described (see `revive`), its key, and how to call. */
interface Attempt {
  rows: unknown;
  key?: unknown;
  /** `enqueueSync` inside the object's own `transactionSync`, instead of `enqueue`. */
  sync?: boolean;
  /** Give `enqueue` a `writes` that inserts one row into the object's own table. */
  writes?: boolean;
  /** Refuse every write for this attempt as the platform does past Workers Free's daily rows written. */
  refuseWrites?: boolean;
}

/** The platform's refusal of a write past the account's daily allowance (Workers Free). */
const WRITE_LIMIT = "Exceeded allowed rows written in Durable Objects free tier.";

/**
 * Makes `sql.exec` refuse every statement but a `SELECT` with the platform's
 * error while `body` runs, as the platform does once the account's rows
 * written for the day are used up; reads still run.
 */
async function refusingWrites<T>(sql: SqlStorage, body: () => Promise<T> | T): Promise<T> {
  const exec = sql.exec;
  sql.exec = ((query: string, ...bindings: unknown[]) => {
    if (!/^\s*SELECT/i.test(query)) throw new Error(WRITE_LIMIT);
    return exec.call(sql, query, ...bindings);
  }) as typeof sql.exec;
  try {
    return await body();
  } finally {
    sql.exec = exec;
  }
}

/** What the caller saw. */
type Verdict =
  | { ok: true; seqs: number[]; duplicate: boolean }
  | { ok: false; instance: boolean; name: string; code?: string; status?: number; retryAfterS?: number; message: string };

/** A thrown value as a verdict; `instance` says whether it is a `RelayError` by `instanceof`. */
function refused(e: unknown): Verdict {
  const err = e as { name?: string; code?: string; status?: number; message?: string };
  if (e instanceof RelayError) {
    // The class's type: `code` is an ErrorCode.
    const code: string = e.code;
    return { ok: false, instance: true, name: e.name, code, status: e.status, retryAfterS: e.retryAfterS, message: e.message };
  }
  return { ok: false, instance: false, name: String(err?.name), code: err?.code, status: err?.status, message: String(err?.message ?? e) };
}

class Point {
  constructor(
    public x: number,
    public y: number,
  ) {}
}

/**
 * A value the test described, made real: `{ "$": kind }` stands for a value
 * JSON cannot describe (`NaN`, `undefined`, a Map, a cycle, ...; `bare` is a
 * plain object with a null prototype holding `v`); anything else is itself,
 * with its members revived in place (so an own `__proto__` key stays one).
 */
function revive(v: unknown): unknown {
  if (Array.isArray(v)) {
    for (let i = 0; i < v.length; i++) v[i] = revive(v[i]);
    return v;
  }
  if (v === null || typeof v !== "object") return v;
  const o = v as Record<string, unknown>;
  if (typeof o.$ === "string") return special(o.$, o.v);
  for (const k of Object.keys(o)) o[k] = revive(o[k]);
  return o;
}

function special(kind: string, v: unknown): unknown {
  switch (kind) {
    case "NaN":
      return NaN;
    case "Infinity":
      return Infinity;
    case "-Infinity":
      return -Infinity;
    case "-0":
      return -0;
    case "undefined":
      return undefined;
    case "function":
      return () => 1;
    case "symbol":
      return Symbol("s");
    case "BigInt":
      return 10n;
    case "Map":
      return new Map([["k", 1]]);
    case "Set":
      return new Set([1]);
    case "Date":
      return new Date(0);
    case "class":
      return new Point(1, 2);
    case "toJSON":
      return { toJSON: () => "x" };
    case "sparse": {
      const a: unknown[] = [1];
      a[2] = 3; // index 1 is a hole
      return a;
    }
    case "named":
      return Object.assign([1, 2], { extra: 3 });
    case "symbolKey":
      return { a: 1, [Symbol("k")]: 2 };
    case "hidden":
      return Object.defineProperty({ a: 1 }, "b", { value: 2, enumerable: false });
    case "cycle": {
      const o: Record<string, unknown> = { a: 1 };
      o.self = o;
      return o;
    }
    case "bare":
      return Object.assign(Object.create(null), revive(v));
    default:
      throw new Error(`no such kind ${kind}`);
  }
}

/** The `alarm` option the test names: a store without `set`, a number, a whole store, or none. */
function alarmOption(kind?: string): any {
  switch (kind) {
    case "no-set":
      return { get: () => null, delete: () => undefined };
    case "number":
      return 7;
    case "whole":
      return { get: () => null, set: () => undefined, delete: () => undefined };
    default:
      return undefined;
  }
}

export class Writer extends DurableObject<Env> {
  relay = new RelaySource(this.ctx, this.env, { targets: "READERS" });

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    ctx.storage.sql.exec("CREATE TABLE IF NOT EXISTS mine (what TEXT)");
  }

  /** Each attempt in turn, each its own enqueue: their verdicts. */
  async attempt(attempts: Attempt[]): Promise<Verdict[]> {
    const out: Verdict[] = [];
    for (const a of attempts) {
      const rows = revive(a.rows) as Row[];
      const idempotencyKey = a.key === undefined ? undefined : (revive(a.key) as string);
      const enqueue = async () =>
        a.sync
          ? this.ctx.storage.transactionSync(() => this.relay.enqueueSync(rows, { idempotencyKey }))
          : await this.relay.enqueue(rows, {
              idempotencyKey,
              writes: a.writes
                ? () => {
                    this.ctx.storage.sql.exec("INSERT INTO mine VALUES ('writes')");
                  }
                : undefined,
            });
      try {
        const done = a.refuseWrites ? await refusingWrites(this.ctx.storage.sql, enqueue) : await enqueue();
        out.push({ ok: true, seqs: done.seqs, duplicate: done.duplicate });
      } catch (e) {
        out.push(refused(e));
      }
    }
    return out;
  }

  /**
   * An enqueue whose `writes` is an async function: it writes before any
   * await, then resolves (or, with `reject`, throws).
   */
  async asyncWrites(target: string, reject: boolean): Promise<Verdict> {
    const writes = async () => {
      this.ctx.storage.sql.exec("INSERT INTO mine VALUES ('async writes')");
      if (reject) throw new Error("the async writes failed");
    };
    try {
      // @ts-expect-error: the types refuse an async writes (it returns a promise, not undefined).
      const done = await this.relay.enqueue([{ target, puts: [["k", 1]] }], { writes });
      return { ok: true, seqs: done.seqs, duplicate: done.duplicate };
    } catch (e) {
      return refused(e);
    }
  }

  mine() {
    return this.ctx.storage.sql.exec("SELECT what FROM mine").toArray();
  }

  /**
   * A second `RelaySource` on this object, built with `targets` and env's
   * variables overridden by `vars`: its construction's verdict (the relay
   * this object already has is untouched).
   */
  construct(targets: string, vars: Record<string, string>, alarm?: string): Verdict | { ok: true } {
    try {
      // Typed as any binding and any store: the run-time check is what this tries.
      new RelaySource<any>(this.ctx, { ...this.env, ...vars }, { targets, alarm: alarmOption(alarm) });
      return { ok: true };
    } catch (e) {
      return refused(e);
    }
  }

  /** `parkedTargets` with `after`: rejects with the package's refusal, which RPC carries to the caller. */
  async parkedAfter(after: string) {
    return this.relay.parkedTargets({ after });
  }

  /** The rows still queued for `target`, through the package's method. */
  async queuedRows(target: string, after: number) {
    return this.relay.queuedRows({ target, after });
  }

  /** `parkedRows` with `after`, refused as `parkedAfter` is. */
  async parkedRowsAfter(after: number) {
    return this.relay.parkedRows("t", { after });
  }

  /**
   * Everything the package returns and hands its callbacks, for a row to
   * `target` putting `key`: the enqueue reply (and what `writes` got), a
   * synchronous enqueue's reply, an alarm's summary, the status, both pages,
   * a re-arm, a redrive and a discard.
   */
  async shapes(target: string, key: string) {
    const row: Row = { target, puts: [[key, { [key]: 1 }]], delayMs: 60_000 };
    let written: unknown;
    const enqueued = await this.relay.enqueue([row], { writes: (done) => void (written = done) });
    const enqueuedSync = this.ctx.storage.transactionSync(() => this.relay.enqueueSync([{ target, deletes: [key] }]));
    return {
      enqueued,
      written,
      enqueuedSync,
      alarm: await this.relay.alarm(),
      status: await this.relay.status(),
      targets: await this.relay.parkedTargets(),
      rows: await this.relay.parkedRows(target),
      rearmed: await this.relay.rearm(),
      redriven: await this.relay.redrive(target),
      discarded: await this.relay.discard(target),
    };
  }

  async fetch(request: Request) {
    return this.relay.fetch(request);
  }

  async alarm() {
    await this.relay.alarm();
  }
}

export class Reader extends DurableObject<Env> {
  relay: RelayTarget;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    ctx.storage.sql.exec("CREATE TABLE IF NOT EXISTS seen (source TEXT, source_id TEXT, seq INTEGER)");
    const note = (source: string, rows: AppliedRow[], sourceId: string | null) => {
      for (const row of rows) ctx.storage.sql.exec("INSERT INTO seen VALUES (?, ?, ?)", source, sourceId, row.seq);
      this.#applied.push(rows);
    };
    ctx.storage.sql.exec(
      "CREATE TABLE IF NOT EXISTS keyed (n INTEGER PRIMARY KEY, callback TEXT, key TEXT, value TEXT, source TEXT, source_id TEXT, seq INTEGER)",
    );
    const keyed = (callback: string, key: string | null, value: unknown, from: AppliedFrom) => {
      const text = value === undefined ? null : JSON.stringify(value);
      ctx.storage.sql.exec("INSERT INTO keyed (callback, key, value, source, source_id, seq) VALUES (?, ?, ?, ?, ?, ?)", callback, key, text, from.source, from.sourceId, from.seq);
    };
    if (ctx.id.name?.startsWith("keys-")) {
      // Key by key, after the batch's own hook; a put of `boom` throws.
      this.relay = new RelayTarget(ctx, {
        onApply: (source, rows, sourceId) => {
          keyed("apply", null, rows.length, { source, sourceId, seq: rows[0]?.seq ?? 0 });
        },
        onPut: (key, value, from) => {
          keyed("put", key, value, from);
          if (key === "boom") throw new Error("the put hook refused boom");
        },
        onDelete: (key, from) => {
          keyed("delete", key, undefined, from);
        },
      });
    } else if (ctx.id.name?.startsWith("async-put-")) {
      // An async onPut: it writes before its await, so inside the transaction.
      const onPut = async (key: string, value: JsonValue, from: AppliedFrom) => keyed("put", key, value, from);
      // @ts-expect-error: the types refuse an async onPut (it returns a promise, not undefined).
      this.relay = new RelayTarget(ctx, { onPut });
    } else if (ctx.id.name?.startsWith("async-")) {
      // Writes before any await (so inside the apply's transaction), then
      // resolves, or rejects for a row putting the key `boom`.
      const onApply = async (source: string, rows: AppliedRow[], sourceId: string | null) => {
        note(source, rows, sourceId);
        if (rows.some((r) => r.effects.puts.some(([key]) => key === "boom"))) throw new Error("the async hook failed");
      };
      // @ts-expect-error: the types refuse an async onApply (it returns a promise, not undefined).
      this.relay = new RelayTarget(ctx, { onApply });
    } else {
      this.relay = new RelayTarget(ctx, {
        onApply: (source, rows, sourceId) => {
          note(source, rows, sourceId);
        },
      });
    }
  }

  /** The rows `onApply` was handed since this object started, batch by batch. */
  #applied: AppliedRow[][] = [];

  seen() {
    return this.ctx.storage.sql.exec("SELECT source, source_id, seq FROM seen ORDER BY seq").toArray();
  }

  /** What `onApply`, `onPut` and `onDelete` were told, in the order they ran. */
  keyed() {
    return this.ctx.storage.sql.exec("SELECT callback, key, value, source, source_id, seq FROM keyed ORDER BY n").toArray();
  }

  /** As JSON text: RPC's type mapping cannot follow the recursive `JsonValue`. */
  applied(): string {
    return JSON.stringify(this.#applied);
  }

  async fetch(request: Request) {
    return this.relay.fetch(request);
  }
}

export default {
  async fetch(request: Request, env: Env): Promise<Response> {
    const url = new URL(request.url);
    const [kind, name, op, ...rest] = url.pathname.split("/").filter(Boolean);
    if (kind === "health") return new Response("ok");
    const inner = () => new Request(`https://relay/${rest.join("/")}${url.search}`, request);
    if (kind === "writer" && name) {
      const writer = env.WRITERS.getByName(name);
      if (op === "relay") return writer.fetch(inner());
      if (op === "attempt") return Response.json(await writer.attempt(await request.json()));
      if (op === "async-writes") {
        return Response.json(await writer.asyncWrites(url.searchParams.get("target") ?? "t", url.searchParams.has("reject")));
      }
      if (op === "mine") return Response.json(await writer.mine());
      if (op === "construct") {
        const { targets, vars, alarm } = (await request.json()) as { targets: string; vars: Record<string, string>; alarm?: string };
        return Response.json(await writer.construct(targets, vars, alarm));
      }
      if (op === "shapes") {
        return Response.json(await writer.shapes(url.searchParams.get("target") ?? "t", url.searchParams.get("key") ?? "k"));
      }
      if (op === "parked-after") {
        // What arrives over RPC of the RelayError the object's method rejects with.
        try {
          return Response.json({ ok: true, page: await writer.parkedAfter(url.searchParams.get("after") ?? "") });
        } catch (e) {
          return Response.json(refused(e));
        }
      }
      if (op === "queued") {
        try {
          const target = url.searchParams.get("target") ?? "";
          return Response.json({ ok: true, page: await writer.queuedRows(target, Number(url.searchParams.get("after") ?? 0)) });
        } catch (e) {
          return Response.json(refused(e));
        }
      }
      if (op === "parked-rows-after") {
        try {
          return Response.json({ ok: true, page: await writer.parkedRowsAfter(Number(url.searchParams.get("after"))) });
        } catch (e) {
          return Response.json(refused(e));
        }
      }
    }
    if (kind === "unique") {
      // A source object made with newUniqueId(): what its caller gets.
      try {
        await env.WRITERS.get(env.WRITERS.newUniqueId()).mine();
        return Response.json({ ok: true });
      } catch (e) {
        return Response.json(refused(e));
      }
    }
    if (kind === "reader" && name) {
      const reader = env.READERS.getByName(name);
      if (op === "relay") return reader.fetch(inner());
      if (op === "seen") return Response.json(await reader.seen());
      if (op === "keyed") return Response.json(await reader.keyed());
      if (op === "applied") return new Response(await reader.applied(), { headers: { "content-type": "application/json" } });
    }
    return new Response("no route", { status: 404 });
  },
};
