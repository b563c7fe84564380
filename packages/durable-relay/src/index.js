// durable-relay for JavaScript and TypeScript Durable Objects. This file is
// binding glue, plus the checks only JavaScript can make of what callers
// hand over (values JSON would change, callbacks that return promises):
// the relay (the outbox, the alarm, delivery, the inbox) is the Rust engine
// in dist/relay_bg.wasm, the same code the Rust crates ship. workerd does not compile wasm from bytes at run time, so the module
// is imported statically (wrangler uploads it as a module of its own) and
// instantiated synchronously here, once per isolate.

import wasm from "../dist/relay_bg.wasm";
import { initSync, maxEnqueueDepth, RawSource, RawTarget, useErrorClass } from "../dist/relay.js";
import { OPERATIONS } from "./operations.js";
import { pathOf, replyOf } from "./calls.js";
import { RelayError, relayError } from "./errors.js";
import { applying, handler, keeping, synchronous } from "./callbacks.js";

export { RelayError };

initSync({ module: wasm });

// The engine's own refusals are built as instances of the class above.
useErrorClass(RelayError);

/**
 * The relay's own fields whose values are the caller's data, not the
 * relay's structure: a row's puts (keys and values as enqueued), and the
 * status's maps keyed by target name. `camelized` renames these fields but
 * copies their values untouched.
 */
const CALLER_DATA = new Set(["puts", "parked_targets", "failing_targets"]);

/** `snake_case` as `camelCase`, the rename the types' `CamelCase` spells. */
function camel(key) {
  return key.replace(/_([a-z0-9])/g, (_, c) => c.toUpperCase());
}

/**
 * A reply of the engine (the wire's snake_case JSON) as the package hands
 * it over: every key of the relay's own structure in camelCase, the
 * caller's data (see `CALLER_DATA`) as it was.
 */
function camelized(value) {
  if (Array.isArray(value)) return value.map(camelized);
  if (value === null || typeof value !== "object") return value;
  const out = {};
  for (const [key, v] of Object.entries(value)) out[camel(key)] = CALLER_DATA.has(key) ? v : camelized(v);
  return out;
}

/** A promise of an engine reply, resolving to it camelized. */
function camelizing(promise) {
  return promise.then(camelized);
}

/**
 * The row fields the package takes in camelCase, with their wire names;
 * the other fields (`target`, `puts`, `deletes`) are one word in both.
 */
const ROW_FIELDS = new Map([
  ["notBeforeMs", "not_before_ms"],
  ["delayMs", "delay_ms"],
]);

/** The wire names of `ROW_FIELDS`, refused from callers: the package takes one convention. */
const WIRE_ROW_FIELDS = new Map([...ROW_FIELDS].map(([name, wire]) => [wire, name]));

/** `rows` as the wire spells them: each row's camelCase fields renamed, nothing else changed. */
function wireRows(rows) {
  return rows.map((row, i) => {
    if (row === null || typeof row !== "object" || Array.isArray(row)) return row;
    const out = {};
    for (const [key, value] of Object.entries(row)) {
      const camelName = WIRE_ROW_FIELDS.get(key);
      if (camelName !== undefined) {
        throw relayError("invalid_request", `rows[${i}].${key}: the package takes ${camelName}`);
      }
      out[ROW_FIELDS.get(key) ?? key] = value;
    }
    return out;
  });
}

/**
 * The deepest nesting of arrays and objects the engine decodes in an
 * enqueue body: `MAX_VALUE_DEPTH` inside a value, plus the body's own levels
 * (`{ rows: [{ puts: [[key, value]] }] }`). The check below walks no deeper.
 */
const MAX_ENQUEUE_DEPTH = maxEnqueueDepth();

/**
 * How deep a row's own fields sit in an enqueue body (`{ rows: [row] }`): a
 * field of a row that is `undefined` is an optional field left out, as the
 * types allow; `undefined` anywhere else is refused.
 */
const ROW_LEVEL = 2;

/** `path` extended by the member `key`, as JavaScript would write it. */
function member(path, key) {
  return /^[A-Za-z_$][\w$]*$/.test(key) ? `${path}.${key}` : `${path}[${JSON.stringify(key)}]`;
}

/** The refusal of a value JSON cannot carry exactly. */
function inexact(path, what) {
  return relayError("invalid_value", `${path} is ${what}, which JSON cannot carry exactly`);
}

/** What a primitive is when JSON cannot carry it exactly, or undefined when it can. */
function inexactPrimitive(value) {
  switch (typeof value) {
    case "number":
      return Number.isFinite(value) ? undefined : String(value);
    case "undefined":
      return "undefined";
    case "function":
      return "a function";
    case "symbol":
      return "a symbol";
    case "bigint":
      return "a BigInt";
    default:
      return undefined;
  }
}

/**
 * Refuses, naming its path, anything in `value` that `JSON.stringify` would
 * not carry exactly: NaN and the infinities (they become null), undefined,
 * functions and symbols (dropped, or null in an array), BigInt (a throw),
 * objects other than plain ones (a Map or Set becomes {}, a Date a string),
 * arrays with holes or named members, properties JSON skips, and cycles.
 * Plain objects with a null prototype are fine. `level` is how many arrays
 * and objects enclose `value`; `ancestors` holds them, to find cycles.
 */
function exact(value, path, level, ancestors) {
  const primitive = inexactPrimitive(value);
  if (primitive !== undefined) throw inexact(path, primitive);
  if (value === null || typeof value !== "object") return;
  if (ancestors.has(value)) throw inexact(path, "a cycle (it contains itself)");
  if (level >= MAX_ENQUEUE_DEPTH) {
    throw relayError("value_too_deep", `${path} nests arrays and objects deeper than MAX_VALUE_DEPTH allows`);
  }
  const array = Array.isArray(value);
  const proto = Object.getPrototypeOf(value);
  if (array ? proto !== Array.prototype : proto !== Object.prototype && proto !== null) {
    const name = typeof proto?.constructor === "function" ? proto.constructor.name : "";
    throw inexact(path, `an instance of ${name || "a class"}`);
  }
  const keys = Object.keys(value);
  if (Reflect.ownKeys(value).length !== keys.length + (array ? 1 : 0)) {
    throw inexact(path, "an object with a symbol-keyed or non-enumerable property");
  }
  ancestors.add(value);
  if (array) {
    for (let i = 0; i < value.length; i++) {
      if (!Object.hasOwn(value, i)) throw inexact(`${path}[${i}]`, "a hole in a sparse array");
      exact(value[i], `${path}[${i}]`, level + 1, ancestors);
    }
    if (keys.length !== value.length) throw inexact(path, "an array with named members");
  } else {
    for (const key of keys) {
      if (value[key] === undefined && level === ROW_LEVEL) continue;
      exact(value[key], member(path, key), level + 1, ancestors);
    }
  }
  ancestors.delete(value);
}

/**
 * The request body as JSON text, the form the relay decodes on every path,
 * once every value in it is one JSON carries exactly: values arrive exactly
 * as sent, or the enqueue is refused and writes nothing.
 */
function bodyText(rows, idempotencyKey) {
  if (!Array.isArray(rows)) throw relayError("invalid_request", "rows must be an array of rows");
  const key = optionalText(idempotencyKey, "invalid_idempotency_key", "idempotencyKey");
  try {
    exact(rows, "rows", 1, new Set());
  } catch (e) {
    // A getter or a proxy that throws is the caller's bad input too.
    throw e instanceof RelayError ? e : relayError("invalid_value", `the rows could not be read: ${e?.message ?? e}`);
  }
  const wire = wireRows(rows);
  return JSON.stringify(key === undefined ? { rows: wire } : { rows: wire, idempotency_key: key });
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

/** `callback` called with its arguments camelized (the engine hands it wire JSON). */
function camelizingArgs(callback) {
  return callback && ((...args) => callback(...args.map(camelized)));
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
 * `op` at `path`, served by the engine's own protocol handler (`raw.fetch`):
 * the reply's JSON, or the refusal thrown as a RelayError with the HTTP
 * API's code, status and retry delay.
 */
async function served(raw, op, path) {
  const res = await raw.fetch(new Request(`https://relay${path}`, { method: op.method }));
  return replyOf(res, (code, message, status, retryAfterS) => new RelayError(code, message, status, retryAfterS));
}

/**
 * The source side of the relay in your Durable Object: an outbox in the
 * object's own SQLite, written in the same transaction as your writes, and
 * an alarm that delivers it to target objects in order.
 */
export class RelaySource {
  #raw;
  /**
   * Sets the relay's alarm from here (`enqueueSync`), in the store the engine
   * arms through on every other path: the `alarm` option's, or the object's
   * own alarm.
   */
  #arm;
  /** Whether a check of the alarm is already queued after a synchronous enqueue. */
  #recheck = false;

  /**
   * Opens the relay as the object starts (in `blockConcurrencyWhile`), so
   * `enqueueSync` can run inside your own `transactionSync`.
   *
   * @param {DurableObjectState} ctx your object's state
   * @param {object} env your Worker's env (RELAY_* variables configure the relay)
   * @param {{ targets?: string, alarm?: object }} [options] the binding of the target objects (default
   *   RELAY_TARGET); the scheduler to keep the relay's alarm with instead of the object's own
   */
  constructor(ctx, env, { targets = "RELAY_TARGET", alarm } = {}) {
    // Refuses (bad_configuration) a targets binding env lacks, a RELAY_*
    // variable with a bad value, or an `alarm` without get, set and delete
    // methods: the object does not start on a relay whose every alarm
    // would fail.
    this.#raw = new RawSource(ctx, env, text(targets, "invalid_request", "targets"), alarm);
    this.#arm = alarm === undefined ? (at) => ctx.storage.setAlarm(at) : (at) => alarm.set(at);
    ctx.blockConcurrencyWhile(() => this.#raw.ready());
  }

  /**
   * Enqueues rows without awaiting: call it inside your own
   * `ctx.storage.transactionSync(() => ...)`, and the rows commit or roll
   * back with your writes. Throws a `RelayError` on a refusal (which then
   * rolls your transaction back too, unless you catch it), among them a
   * value JSON cannot carry exactly (see `exact`).
   */
  enqueueSync(rows, { idempotencyKey, traceparent } = {}) {
    const trace = optionalText(traceparent, "invalid_traceparent", "traceparent");
    const { enqueued, alarm_at: at } = this.#raw.enqueueNow(bodyText(rows, idempotencyKey), trace);
    if (at !== null) {
      // Set now, inside the caller's transaction; a store that throws or
      // rejects leaves the alarm unknown, and the recheck below sets it.
      Promise.resolve(rejecting(() => this.#arm(at))).catch(() => this.#raw.alarmUnknown());
    }
    if (!this.#recheck) {
      // Once the caller's transaction is over: if it rolled back the alarm
      // with the rows, nothing is owed; if it kept the rows, they have one.
      this.#recheck = true;
      queueMicrotask(() => {
        this.#recheck = false;
        this.#raw.recheckAlarm().catch(() => this.#raw.alarmUnknown());
        // Rows the transaction kept are delivered in this invocation.
        this.#raw.deliver();
      });
    }
    return camelized(enqueued);
  }

  /**
   * Enqueues rows; `writes(enqueued)` runs inside the same transaction, so
   * your writes and the rows commit together or not at all. `writes` must
   * be synchronous (one that returns a promise is refused, `async_callback`,
   * and nothing is written); values are checked as for `enqueueSync`.
   */
  enqueue(rows, { idempotencyKey, traceparent, writes } = {}) {
    return rejecting(() => {
      const body = bodyText(rows, idempotencyKey);
      const trace = optionalText(traceparent, "invalid_traceparent", "traceparent");
      // The engine answers a throw from `writes` as `aborted`, having
      // rolled everything back; the caller gets what `writes` threw, as
      // itself, so it tells its own failure from the relay's refusal. A
      // promise from it is the caller's mistake and answers as itself.
      let refusal;
      let thrown;
      const run = camelizingArgs(
        synchronous(keeping(handler(writes, "writes"), (error) => (thrown = { error })), "writes", (error) => (refusal = error)),
      );
      return camelizing(
        this.#raw.enqueue(body, trace, run).catch((e) => {
          throw refusal ?? (thrown === undefined ? e : thrown.error);
        }),
      );
    });
  }

  /**
   * Delivers what is due; call it from your object's `alarm(alarmInfo)`, passing `alarmInfo` on:
   * a retry (`retryCount` > 0) runs a smaller fire. Its `hostAlarm` is true when your own
   * time (set with `setAlarm`) has come (absent when not): run your own alarm work then.
   */
  alarm(alarmInfo) {
    return camelizing(this.#raw.alarm(alarmInfo?.retryCount ?? 0));
  }

  /**
   * Sets your object's own alarm time (ms since the epoch, or a Date), as
   * `ctx.storage.setAlarm` would: the object has one alarm, and the relay
   * arms it at the earlier of its own time and yours, so neither moves the
   * other. `alarm()` reports it once with `hostAlarm: true`.
   */
  setAlarm(scheduledTime) {
    return rejecting(() => {
      const at = scheduledTime instanceof Date ? scheduledTime.getTime() : scheduledTime;
      return this.#raw.setAlarm(number(at, "invalid_request", "scheduledTime"));
    });
  }

  /** Your own alarm time (set with `setAlarm`, not yet reported), or null: never the relay's. */
  getAlarm() {
    return rejecting(() => Promise.resolve(this.#raw.getAlarm()));
  }

  /** Clears your own alarm time; the relay's stays. */
  deleteAlarm() {
    return rejecting(() => Promise.resolve(this.#raw.deleteAlarm()));
  }

  /**
   * The relay's other operations with a method (status, deliveredThrough,
   * relayWatermark, parkedTargets, parkedRows, rearm, redrive, discard),
   * each built from its entry in the protocol's table: its path's
   * parameters as arguments, then its query's as an options object, served
   * by the same code as a request to `fetch`, so every argument is checked
   * as the HTTP API checks it and refused with the same code.
   */
  static {
    for (const op of OPERATIONS) {
      if (op.request !== null) continue;
      const field = op.rpc.unwraps;
      const method = async function (...args) {
        const reply = await served(this.#raw, op, pathOf(op, args));
        return camelized(field === null ? reply : reply[field]);
      };
      Object.defineProperty(method, "name", { value: op.rpc.method });
      Object.defineProperty(this.prototype, op.rpc.method, { value: method, writable: true, configurable: true });
    }
  }

  /** Serves the relay's own protocol (status, parked targets, redrive, discard, enqueue). */
  fetch(request) {
    return this.#raw.fetch(request);
  }
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
   * @param {{
   *   onApply?: (source: string, rows: object[], sourceId: string | null) => undefined,
   *   onPut?: (key: string, value: unknown, from: object) => undefined,
   *   onDelete?: (key: string, from: object) => undefined,
   * }} [options]
   *   synchronous handlers: `onApply` is told the source's name, the rows new to this object and
   *   the source object's id (its watermark here is kept by both); `onPut` and `onDelete` each key
   *   of those rows, with the row's source, source id and sequence
   */
  constructor(ctx, { onApply, onPut, onDelete } = {}) {
    const apply = applying(handler(onApply, "onApply"), handler(onPut, "onPut"), handler(onDelete, "onDelete"));
    this.#raw = new RawTarget(ctx, camelizingArgs(apply));
  }

  /** Serves the relay's target protocol: pass it the requests sources send. */
  fetch(request) {
    return this.#raw.fetch(request);
  }
}
