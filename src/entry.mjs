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

import { OPERATIONS, SCOPES } from "./operations.js";
import { pathOf, replyOf } from "./calls.js";

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

/**
 * The bearer token RelayRpc hands the front door for a call that needs
 * `scope` (at a partitioned source, the only calls that pass through it):
 * RELAY_TOKEN, the all-scopes token, when set; otherwise the first token of
 * the first variable whose tokens cover the scope, as the protocol's table
 * lists them. A caller reaching RelayRpc holds a service binding, which is its
 * authority.
 */
function frontToken(env, scope) {
  if (env.RELAY_TOKEN) return env.RELAY_TOKEN;
  for (const name of SCOPES[scope] ?? []) {
    const first = String(env[name] ?? "").split(",")[0].trim();
    if (first) return first;
  }
  return "";
}

/** The operations RelayRpc offers, by method name. */
const rpcOperations = new Map(OPERATIONS.map((op) => [op.rpc.method, op]));

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

export class RelayRpc extends WorkerEntrypoint {
  /**
   * Calls the source object `source` at `path`; parses the JSON reply or
   * throws a RelayError. A partitioned logical source is served by the
   * front door's own handler (the Rust router), in this isolate.
   */
  async #call(source, op, path, body, headers) {
    const method = op.method;
    if (typeof source !== "string") throw new RelayError("invalid_name", "source must be a string", 400);
    const init = { method };
    if (headers !== undefined) init.headers = { ...headers };
    if (body !== undefined) init.body = JSON.stringify(body);
    let res;
    if (RustRelaySource.isPartitioned(this.env, source)) {
      init.headers = { ...init.headers, authorization: `Bearer ${frontToken(this.env, op.scope)}` };
      const url = `https://relay/v1/sources/${encodeURIComponent(source)}${path}`;
      res = await FrontDoor.prototype.fetch.call(this, new Request(url, init));
    } else {
      res = await this.env.RELAY_SOURCE.getByName(source).fetch(`https://relay${path}`, init);
    }
    return replyOf(res, (...error) => new RelayError(...error));
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
    return this.#call(source, rpcOperations.get("enqueue"), "/enqueue", body, headers);
  }

  /**
   * Every other operation of the table's with an RPC method (status,
   * deliveredThrough, relayWatermark, the parked pages, rearm, redrive,
   * discard), built from its entry: the same method, path and scope as the
   * HTTP API, and the reply (or the one field of it the entry names).
   */
  static {
    for (const [name, op] of rpcOperations) {
      if (op.request !== null) continue;
      const field = op.rpc.unwraps;
      const method = async function (source, ...args) {
        const reply = await this.#call(source, op, pathOf(op, args));
        return field === null ? reply : reply[field];
      };
      Object.defineProperty(method, "name", { value: name });
      Object.defineProperty(this.prototype, name, { value: method, writable: true, configurable: true });
    }
  }
}
