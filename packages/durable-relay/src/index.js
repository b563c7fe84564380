// durable-relay for JavaScript and TypeScript Durable Objects. This file is
// binding glue only: the relay (the outbox, the alarm, delivery, the inbox)
// is the Rust engine in dist/relay_bg.wasm, the same code the Rust crates
// ship. workerd does not compile wasm from bytes at run time, so the module
// is imported statically (wrangler uploads it as a module of its own) and
// instantiated synchronously here, once per isolate.

import wasm from "../dist/relay_bg.wasm";
import { initSync, RawSource, RawTarget, useErrorClass } from "../dist/relay.js";

initSync({ module: wasm });

/**
 * A refusal of the caller's input (or a failure of the relay): `code` and
 * `status` are the HTTP API's, the message leads with the code. Every
 * error the package throws or rejects with is one, so `instanceof
 * RelayError` catches them; `name` is "RelayError" too.
 */
export class RelayError extends Error {
  /**
   * @param {string} code the stable error code
   * @param {string} message what was wrong
   * @param {number} [status] the HTTP status the same refusal has (400)
   * @param {number} [retryAfterS] seconds to wait before a retry (with `outbox_full`)
   */
  constructor(code, message, status = 400, retryAfterS = undefined) {
    super(`${code}: ${message}`);
    this.name = "RelayError";
    this.code = code;
    this.status = status;
    if (retryAfterS !== undefined) this.retryAfterS = retryAfterS;
  }
}

// The engine's own refusals are built as instances of the class above.
useErrorClass(RelayError);

/** A refusal of the caller's input (400). */
function relayError(code, message) {
  return new RelayError(code, message);
}

/**
 * The request body as JSON text, the form the relay decodes on every path.
 * A value JSON cannot carry (a BigInt, a cycle) is the caller's bad input:
 * a RelayError like any other refusal, not a TypeError from deep inside.
 */
function bodyText(rows, idempotencyKey) {
  const body = idempotencyKey === undefined ? { rows } : { rows, idempotency_key: idempotencyKey };
  try {
    return JSON.stringify(body);
  } catch (e) {
    throw relayError("invalid_value", `the rows are not JSON: ${e.message}`);
  }
}

/**
 * Only strings cross into the engine as text, only numbers as numbers, only
 * functions as handlers: anything else is refused here, typed, before it
 * reaches the wasm boundary (which would read a non-string as a string).
 */
function text(value, code, what) {
  if (typeof value !== "string") throw relayError(code, `${what} must be a string`);
  return value;
}

function optionalText(value, code, what) {
  return value === undefined ? undefined : text(value, code, what);
}

function number(value, code, what) {
  if (typeof value !== "number") throw relayError(code, `${what} must be a number`);
  return value;
}

function handler(value, what) {
  if (value !== undefined && typeof value !== "function") throw relayError("invalid_request", `${what} must be a function`);
  return value;
}

/**
 * `callback` as the engine runs it, inside a synchronous transaction: a
 * result that is a promise (any thenable) is refused by a throw, which
 * rolls the transaction back with whatever the callback wrote before its
 * first `await`. Its rejection is handled here, so it is never reported as
 * unhandled; `refused(error, args)` hears of each refusal.
 */
function synchronous(callback, what, refused) {
  if (callback === undefined) return undefined;
  return (...args) => {
    const result = callback(...args);
    if (typeof result?.then !== "function") return;
    Promise.resolve(result).catch(() => {});
    const error = relayError(
      "async_callback",
      `${what} returned a promise; it runs inside the relay's synchronous transaction, so it must be synchronous ` +
        "(what an async function writes after its first await would land outside the transaction)",
    );
    refused(error, args);
    throw error;
  };
}

/** Runs `f`, turning a synchronous refusal into a rejected promise. */
function rejecting(f) {
  try {
    return f();
  } catch (e) {
    return Promise.reject(e);
  }
}

/**
 * The source side of the relay in your Durable Object: an outbox in the
 * object's own SQLite, written in the same transaction as your writes, and
 * an alarm that delivers it to target objects in order.
 */
export class RelaySource {
  #raw;
  #ctx;
  /** Whether a check of the alarm is already queued after a synchronous enqueue. */
  #recheck = false;

  /**
   * Opens the relay as the object starts (in `blockConcurrencyWhile`), so
   * `enqueueSync` can run inside your own `transactionSync`.
   *
   * @param {DurableObjectState} ctx your object's state
   * @param {object} env your Worker's env (RELAY_* variables configure the relay)
   * @param {{ targets?: string }} [options] the binding of the target objects (default RELAY_TARGET)
   */
  constructor(ctx, env, { targets = "RELAY_TARGET" } = {}) {
    this.#ctx = ctx;
    this.#raw = new RawSource(ctx, env, text(targets, "invalid_request", "targets"));
    ctx.blockConcurrencyWhile(() => this.#raw.ready());
  }

  /**
   * Enqueues rows without awaiting: call it inside your own
   * `ctx.storage.transactionSync(() => ...)`, and the rows commit or roll
   * back with your writes. Throws a `RelayError` on a refusal (which then
   * rolls your transaction back too, unless you catch it).
   */
  enqueueSync(rows, { idempotencyKey, traceparent } = {}) {
    const trace = optionalText(traceparent, "invalid_traceparent", "traceparent");
    const { enqueued, alarm_at: at } = this.#raw.enqueueNow(bodyText(rows, idempotencyKey), trace);
    if (at !== null) this.#ctx.storage.setAlarm(at).catch(() => this.#raw.alarmUnknown());
    if (!this.#recheck) {
      // Once the caller's transaction is over: if it rolled back the alarm
      // with the rows, nothing is owed; if it kept the rows, they have one.
      this.#recheck = true;
      queueMicrotask(() => {
        this.#recheck = false;
        this.#raw.recheckAlarm().catch(() => this.#raw.alarmUnknown());
      });
    }
    return enqueued;
  }

  /**
   * Enqueues rows; `writes(enqueued)` runs inside the same transaction, so
   * your writes and the rows commit together or not at all. `writes` must
   * be synchronous (one that returns a promise is refused, `async_callback`,
   * and nothing is written).
   */
  enqueue(rows, { idempotencyKey, traceparent, writes } = {}) {
    return rejecting(() => {
      const body = bodyText(rows, idempotencyKey);
      const trace = optionalText(traceparent, "invalid_traceparent", "traceparent");
      // The engine answers a throw from `writes` as `aborted`; a promise
      // from it is the caller's mistake and answers as itself.
      let refusal;
      const run = synchronous(handler(writes, "writes"), "writes", (error) => (refusal = error));
      return this.#raw.enqueue(body, trace, run).catch((e) => {
        throw refusal ?? e;
      });
    });
  }

  /** Delivers what is due; return it from your object's `alarm()`. */
  alarm() {
    return this.#raw.alarm();
  }

  /** The source's status. */
  status() {
    return this.#raw.status();
  }

  /** Whether every row through `seq` was applied (or discarded by an operator). */
  deliveredThrough(seq) {
    return rejecting(() => this.#raw.deliveredThrough(number(seq, "invalid_seq", "seq")));
  }

  /** A commit-time lower bound of the rows still owed, ms since the epoch. */
  relayWatermark() {
    return this.#raw.relayWatermark();
  }

  /** A page of the parked and failing targets, in name order. */
  parkedTargets({ after = "", limit = 200 } = {}) {
    return rejecting(() =>
      this.#raw.parkedTargets(text(after, "invalid_query", "after"), number(limit, "invalid_limit", "limit")),
    );
  }

  /** A page of a parked target's rows. */
  parkedRows(target, { after = 0, limit = 500 } = {}) {
    return rejecting(() =>
      this.#raw.parkedRows(
        text(target, "invalid_target", "target"),
        number(after, "invalid_seq", "after"),
        number(limit, "invalid_limit", "limit"),
      ),
    );
  }

  /**
   * Sets the alarm if rows are queued and none is set. The platform drops an
   * alarm whose retries all failed; call this from a scheduled handler over
   * your source objects so none keeps rows with no alarm.
   */
  rearm() {
    return this.#raw.rearm();
  }

  /** Puts a parked target's rows back, in their original order. */
  redrive(target) {
    return rejecting(() => this.#raw.redrive(text(target, "invalid_target", "target")));
  }

  /** Drops a parked target's rows (kept until the discard horizon). */
  discard(target) {
    return rejecting(() => this.#raw.discard(text(target, "invalid_target", "target")));
  }

  /** Serves the relay's own protocol (status, parked targets, redrive, discard, enqueue). */
  fetch(request) {
    return this.#raw.fetch(request);
  }
}

/**
 * Logs an `onApply` that returned a promise, at the target where the
 * mistake is: the source only sees its apply fail (`hook_refused`, with
 * this message) and retries it until it parks the target.
 */
function logRefusal(error, [source, rows]) {
  const seqs = Array.isArray(rows) ? rows.map((row) => row.seq) : [];
  console.error(JSON.stringify({ event: "relay_async_callback", callback: "onApply", source, seqs, message: error.message }));
}

/**
 * The target side of the relay in your Durable Object: applies the relay's
 * batches once each, in order, with an optional handler that runs inside
 * the apply's transaction.
 */
export class RelayTarget {
  #raw;

  /**
   * @param {DurableObjectState} ctx your object's state
   * @param {{ onApply?: (source: string, rows: object[]) => undefined }} [options] a synchronous handler
   */
  constructor(ctx, { onApply } = {}) {
    this.#raw = new RawTarget(ctx, synchronous(handler(onApply, "onApply"), "onApply", logRefusal));
  }

  /** Serves the relay's target protocol: pass it the requests sources send. */
  fetch(request) {
    return this.#raw.fetch(request);
  }
}
