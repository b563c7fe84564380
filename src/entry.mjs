// The reference Worker's module entry: everything the Rust build exports
// (the front door's fetch handler, RelaySource, RelayTarget) plus RelayRpc,
// a typed RPC entrypoint for JavaScript and TypeScript callers, and
// RelaySource's alarm handed the platform's retry count.
//
// RelayRpc holds no relay logic: each method calls the named source object
// through its Durable Object binding, speaking the same protocol the Rust
// client and the front door speak, and turns a refusal into a thrown
// RelayError that carries the HTTP API's code. Workers RPC keeps an error's
// name, message and own properties when both sides have a compatibility
// date of 2026-04-21 or later; the code also leads the message
// ("outbox_full: ...") for callers on older dates. Types for callers:
// clients/typescript/durable-relay.d.ts.

import { WorkerEntrypoint } from "cloudflare:workers";

import FrontDoor, { RelaySource as RustRelaySource } from "./worker/shim.mjs";

export * from "./worker/shim.mjs";
export { default } from "./worker/shim.mjs";

/**
 * The source object as the Rust build exports it, but with its alarm told
 * which retry of a failed alarm it is: workers-rs calls `alarm()` without
 * the platform's `alarmInfo`, and a retry (an alarm that threw, or one the
 * CPU limit cut off) should run a smaller fire so it fits. This explicit
 * export takes the place of the one `export *` would give.
 */
export class RelaySource extends RustRelaySource {
  alarm(alarmInfo) {
    this.alarmRetried(alarmInfo?.retryCount ?? 0);
    return super.alarm(alarmInfo);
  }
}

/** RELAY_PARTITIONS as last parsed: { text, names }. */
let partitioned = { text: undefined, names: new Set() };

/**
 * The bearer token RelayRpc hands the front door for a call that needs
 * `scope` (at a partitioned source, the only calls that pass through it):
 * RELAY_TOKEN, the all-scopes token, when set; otherwise the first token of
 * the scope's list (RELAY_PRODUCER_TOKENS for enqueue, RELAY_READER_TOKENS
 * or else RELAY_OPERATOR_TOKENS for reads, RELAY_OPERATOR_TOKENS for
 * redrive and discard). The scopes mirror FrontRoute::scope
 * (src/routes.rs); a caller reaching RelayRpc holds a service
 * binding, which is its authority.
 */
function frontToken(env, scope) {
  if (env.RELAY_TOKEN) return env.RELAY_TOKEN;
  const lists = { producer: ["RELAY_PRODUCER_TOKENS"], reader: ["RELAY_READER_TOKENS", "RELAY_OPERATOR_TOKENS"], operator: ["RELAY_OPERATOR_TOKENS"] };
  for (const name of lists[scope]) {
    const first = String(env[name] ?? "").split(",")[0].trim();
    if (first) return first;
  }
  return "";
}

/** The front door's scope for a RelayRpc call: enqueue, a read, or an operator's action. */
const scopeOf = (method, path) => (path === "/enqueue" ? "producer" : method === "GET" ? "reader" : "operator");

/** Whether `source` is a partitioned logical source of this deployment. */
function isPartitioned(env, source) {
  const text = env.RELAY_PARTITIONS;
  if (text !== partitioned.text) {
    let names = new Set();
    try {
      names = new Set(Object.keys(text ? JSON.parse(text) : {}));
    } catch {
      // A bad value is the front door's 500 bad_configuration, which the call then reports.
      names = new Set();
    }
    partitioned = { text, names };
  }
  return partitioned.names.has(source);
}

/**
 * A refusal or failure from the relay, with the HTTP API's code. At a
 * partitioned source, `committed` lists the positions some partitions took
 * before another refused (a keyed retry completes the enqueue).
 */
export class RelayError extends Error {
  constructor(code, message, status, retryAfterS, committed) {
    super(`${code}: ${message}`);
    this.name = "RelayError";
    this.code = code;
    this.status = status;
    if (retryAfterS !== undefined) this.retryAfterS = retryAfterS;
    if (committed !== undefined) this.committed = committed;
  }
}

const seqOf = (n) => {
  if (!Number.isSafeInteger(n) || n < 0) throw new RelayError("invalid_seq", `${n} is not a sequence 0..=2^53-1`, 400);
  return n;
};

export class RelayRpc extends WorkerEntrypoint {
  /**
   * Calls the source object `source` at `path`; parses the JSON reply or
   * throws a RelayError. A partitioned logical source is served by the
   * front door's own handler (the Rust router), in this isolate.
   */
  async #call(source, method, path, body, headers) {
    if (typeof source !== "string") throw new RelayError("invalid_name", "source must be a string", 400);
    const init = { method };
    if (headers !== undefined) init.headers = { ...headers };
    if (body !== undefined) init.body = JSON.stringify(body);
    let res;
    if (isPartitioned(this.env, source)) {
      init.headers = { ...init.headers, authorization: `Bearer ${frontToken(this.env, scopeOf(method, path))}` };
      const url = `https://relay/v1/sources/${encodeURIComponent(source)}${path}`;
      res = await FrontDoor.prototype.fetch.call(this, new Request(url, init));
    } else {
      res = await this.env.RELAY_SOURCE.getByName(source).fetch(`https://relay${path}`, init);
    }
    const text = await res.text();
    let parsed;
    try {
      parsed = JSON.parse(text);
    } catch {
      throw new RelayError("internal", text, res.status);
    }
    if (res.ok) return parsed;
    const retry = res.headers.get("retry-after");
    const error = parsed?.error ?? { code: "internal", message: text };
    throw new RelayError(error.code, error.message, res.status, retry === null ? undefined : Number(retry), error.committed);
  }

  /**
   * Enqueues `rows` at `source`, atomically; `options.idempotencyKey` makes
   * it repeatable, `options.traceparent` (W3C) travels with every row. At a
   * partitioned source the rows are routed by target and the reply gives
   * each row's `positions` (partition, seq); see docs/partitioned-sources.md.
   */
  async enqueue(source, rows, options = {}) {
    const body = { rows };
    if (options?.idempotencyKey !== undefined) body.idempotency_key = options.idempotencyKey;
    const headers = options?.traceparent !== undefined ? { traceparent: String(options.traceparent) } : undefined;
    return this.#call(source, "POST", "/enqueue", body, headers);
  }

  /** The source's status. */
  async status(source) {
    return this.#call(source, "GET", "/status");
  }

  /** Whether every row of `source` through `seq` was applied (or discarded by an operator). */
  async deliveredThrough(source, seq) {
    const reply = await this.#call(source, "GET", `/delivered-through/${seqOf(seq)}`);
    return reply.delivered;
  }

  /** A commit-time lower bound of the rows `source` still owes, ms since the epoch. */
  async relayWatermark(source) {
    const reply = await this.#call(source, "GET", "/watermark");
    return reply.relay_watermark;
  }

  /** A page of the source's parked and failing targets, in name order. */
  async parkedTargets(source, { after, limit = 200 } = {}) {
    const q = `${after === undefined ? "" : `after=${encodeURIComponent(after)}&`}limit=${encodeURIComponent(limit)}`;
    return this.#call(source, "GET", `/parked?${q}`);
  }

  /** A page of a parked target's rows. */
  async parkedRows(source, target, { after = 0, limit = 500 } = {}) {
    const q = `after=${seqOf(after)}&limit=${encodeURIComponent(limit)}`;
    return this.#call(source, "GET", `/parked/${encodeURIComponent(target)}?${q}`);
  }

  /** Sets the source's alarm if rows are queued and none is set (a dropped alarm). */
  async rearm(source) {
    return this.#call(source, "POST", "/rearm");
  }

  /** Puts a parked target's rows back, in their original order. */
  async redrive(source, target) {
    return this.#call(source, "POST", `/parked/${encodeURIComponent(target)}/redrive`);
  }

  /** Drops a parked target's rows (kept until the discard horizon). */
  async discard(source, target) {
    return this.#call(source, "POST", `/parked/${encodeURIComponent(target)}/discard`);
  }
}
