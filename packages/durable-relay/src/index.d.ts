// The package's API. Its rows and replies are the wire types (the
// repository's one TypeScript description of the relay's protocol,
// clients/typescript/durable-relay.d.ts, which scripts/build-package copies
// to dist/wire.d.ts and whose every field a Rust test checks) with their
// field names in camelCase: `Camelized` derives them, so they cannot drift.
// The HTTP and RPC wire format stays snake_case.

import type * as wire from "../dist/wire.js";
import type { ErrorCode, JsonValue } from "../dist/wire.js";

export type { ErrorCode, JsonValue } from "../dist/wire.js";

/** `snake_case` as `camelCase`: the package's one naming convention, from the wire's names. */
export type CamelCase<S extends string> = S extends `${infer Head}_${infer Tail}` ? `${Head}${Capitalize<CamelCase<Tail>>}` : S;

/**
 * The wire's fields whose values are the caller's data (a row's puts, the status's maps keyed by
 * target name): renamed, their contents kept as they are.
 */
export type CallerData = "puts" | "parked_targets" | "failing_targets";

/**
 * A wire type as the package takes and returns it: every field name of the relay's own structure in
 * camelCase, derived here so the two cannot drift; the caller's data ({@link CallerData}) untouched.
 */
export type Camelized<T> = T extends readonly unknown[]
  ? { [K in keyof T]: Camelized<T[K]> }
  : T extends object
    ? { [K in keyof T as K extends string ? CamelCase<K> : K]: K extends CallerData ? T[K] : Camelized<T[K]> }
    : T;

/** One row: puts and deletes for one target object (`notBeforeMs` or `delayMs` to delay it). */
export type Row = Camelized<wire.Row>;
/** What an enqueue did. */
export type Enqueued = Camelized<wire.Enqueued>;
/** Where a row of a partitioned source went. */
export type Position = Camelized<wire.Position>;
/** What one alarm did (the `relay_alarm` log line's figures). */
export type AlarmSummary = Camelized<wire.AlarmSummary>;
/** The source's status. */
export type SourceStatus = Camelized<wire.SourceStatus>;
/** A parked or failing target. */
export type TargetReport = Camelized<wire.TargetReport>;
/** A page of the parked and failing targets. */
export type TargetPage = Camelized<wire.TargetPage>;
/** One parked row. */
export type ParkedRow = Camelized<wire.ParkedRow>;
/** A page of a parked target's rows. */
export type ParkedPage = Camelized<wire.ParkedPage>;
/** A page of the rows still queued for one target. */
export type QueuedPage = Camelized<wire.QueuedPage>;
/** What a re-arm check found and did. */
export type Rearmed = Camelized<wire.Rearmed>;
/** What a redrive or discard did. */
export type ActionOutcome = Camelized<wire.ActionOutcome>;

/**
 * The names of `Env`'s Durable Object namespace bindings: what `RelaySource`'s `targets` may name.
 * With an untyped `Env` (`any`, `unknown`, or one with no fields, such as the empty `Cloudflare.Env`
 * a plain `DurableObject` has), any string: the constructor checks it at run time either way.
 */
export type DoBindingOf<Env> = unknown extends Env
  ? string
  : [keyof Env] extends [never]
    ? string
    : { [K in keyof Env]: Env[K] extends DurableObjectNamespace<any> ? K : never }[keyof Env] & string;

/**
 * A refusal (or a failure of the relay): `code` and `status` are the HTTP API's; the message leads
 * with the code. Everything the package throws or rejects with is one: catch it with
 * `instanceof RelayError` (or by `name`).
 */
export declare class RelayError extends Error {
  name: "RelayError";
  code: ErrorCode;
  /** The HTTP status the same refusal has on the HTTP API. */
  status: number;
  /** Seconds to wait before retrying (with `outbox_full`; with `daily_write_limit`, until 00:00 UTC). */
  retryAfterS?: number;
  constructor(code: ErrorCode, message: string, status?: number, retryAfterS?: number);
}

/** How to enqueue (the reference Worker's RPC takes the same, without `writes`). */
export interface EnqueueOptions {
  /** Names the request: a repeat with the same rows is a duplicate and writes nothing (nor runs `writes`). */
  idempotencyKey?: string;
  /** W3C trace context, stored and sent with every row. */
  traceparent?: string;
  /**
   * Your own writes, run inside the enqueue's transaction with what it did: a throw rolls both back,
   * and `enqueue` rejects with what was thrown, as itself (not a `RelayError`).
   * Synchronous only (its type refuses an async function): one that returns a promise is refused
   * with `async_callback` and nothing is written.
   */
  writes?: (enqueued: Enqueued) => undefined;
}

/**
 * A scheduler the relay keeps its alarm time with instead of the object's own alarm (`RelaySource`'s
 * `alarm` option), for an object whose framework owns the alarm and runs its own work from it: the
 * shape of `ctx.storage`'s `getAlarm`, `setAlarm` and `deleteAlarm`. Every path that arms the relay's
 * alarm calls `set`; the host calls `relay.alarm()` when the time it keeps comes, and forgets the time
 * then, as the platform clears an alarm that fired. `durable-relay/agents` supplies one for an Agents
 * SDK `Agent`.
 */
export interface AlarmStore {
  /** The time kept (ms since the epoch), or null. */
  get(): Promise<number | null> | number | null;
  /** Keeps `scheduledTime` (ms since the epoch), replacing the time kept before. */
  set(scheduledTime: number): Promise<unknown> | unknown;
  /** Clears the time kept. */
  delete(): Promise<unknown> | unknown;
}

/** What `RelaySource` takes beside the object's state and env. */
export interface RelaySourceOptions<Env = any> {
  /** The Durable Object binding of the target objects (default `RELAY_TARGET`). */
  targets?: DoBindingOf<Env>;
  /**
   * Keeps the relay's alarm with this scheduler instead of the object's own alarm (default: the
   * object's alarm). One without `get`, `set` and `delete` methods is refused, `bad_configuration`.
   */
  alarm?: AlarmStore;
}

/** The source side of the relay in your Durable Object, in a Worker whose env is `Env`. */
export declare class RelaySource<Env = any> {
  /**
   * `targets` names the Durable Object binding of the target objects (default `RELAY_TARGET`): typed
   * to `Env`'s Durable Object bindings, and checked at run time too. Throws a `RelayError`
   * (`bad_configuration`) when `env` has no such Durable Object binding (naming the ones it has) or
   * a `RELAY_*` variable has a bad value (naming it), or `alarm` lacks a method, so the object does
   * not start.
   */
  constructor(ctx: DurableObjectState, env: Env, options?: RelaySourceOptions<Env>);
  /**
   * Enqueues rows without awaiting, inside your own `ctx.storage.transactionSync`: they commit or
   * roll back with your writes. Throws a `RelayError` on a refusal (values as for `enqueue`).
   */
  enqueueSync(rows: Row[], options?: Omit<EnqueueOptions, "writes">): Enqueued;
  /**
   * Enqueues rows (with your writes, atomically); rejects with a `RelayError`. Every value must be
   * one JSON carries exactly (no `NaN`, `undefined`, `Date`, `Map`, class instance, cycle, ...):
   * anything else is refused as `invalid_value`, naming its path, and nothing is written.
   */
  enqueue(rows: Row[], options?: EnqueueOptions): Promise<Enqueued>;
  /**
   * Delivers what is due; call it from your object's `alarm(alarmInfo)` and pass `alarmInfo` on: an
   * alarm that is a retry (`retryCount` > 0) runs a smaller fire, so one the CPU limit cut off fits.
   */
  alarm(alarmInfo?: { retryCount: number; isRetry?: boolean }): Promise<AlarmSummary>;
  /**
   * Sets your object's own alarm time (ms since the epoch, or a Date), like `ctx.storage.setAlarm`:
   * the relay arms the object's one alarm at the earlier of its own time and yours, and `alarm()`
   * reports yours once with `hostAlarm: true` (absent when not). Never call `ctx.storage.setAlarm`
   * beside the relay.
   */
  setAlarm(scheduledTime: number | Date): Promise<void>;
  /** Your own alarm time (set with `setAlarm`, not yet reported), or null: never the relay's. */
  getAlarm(): Promise<number | null>;
  /** Clears your own alarm time; the relay's stays. */
  deleteAlarm(): Promise<void>;
  /** Serves the relay's own protocol (status, parked targets, redrive, discard, enqueue). */
  fetch(request: Request): Promise<Response>;
}

/** The class above with its methods for the relay's operations without a body, below. */
export interface RelaySource extends RelaySourceOperations {}

// Written from the protocol's table by `scripts/generate`: do not edit.
/** `RelaySource`'s methods for the operations without a body. */
export interface RelaySourceOperations {
  /** The source's status. */
  status(): Promise<SourceStatus>;
  /** A commit-time lower bound of the rows still owed, ms since the epoch. */
  relayWatermark(): Promise<number>;
  /** Whether every row through `seq` was applied (or discarded by an operator). */
  deliveredThrough(seq: number): Promise<boolean>;
  /** A page of the parked and failing targets, in name order (`limit` 1..=200). */
  parkedTargets(page?: { after?: string; limit?: number }): Promise<TargetPage>;
  /** A page of a parked target's rows, in sequence order (`limit` 1..=500). */
  parkedRows(target: string, page?: { after?: number; limit?: number }): Promise<ParkedPage>;
  /** A page of the rows still queued for one target, in the order it receives them (`limit` 1..=500). */
  queuedRows(page: { target: string; after?: number; limit?: number }): Promise<QueuedPage>;
  /** Puts a parked target's rows back, in their original order. */
  redrive(target: string): Promise<ActionOutcome>;
  /** Drops a parked target's rows (kept until the discard horizon). */
  discard(target: string): Promise<ActionOutcome>;
  /** Sets the alarm if rows are queued and none is set: call it from a scheduled handler (a dropped alarm). */
  rearm(): Promise<Rearmed>;
}
// End of what the protocol's table writes.

/** One row a target applies: its source sequence and its effects. */
export interface AppliedRow {
  /** The row's sequence at its source. */
  seq: number;
  /** The row's puts and deletes, as enqueued. */
  effects: { puts: [key: string, value: JsonValue][]; deletes: string[] };
}

/** Where a key handed to `onPut` or `onDelete` comes from: its row's source and sequence there. */
export interface AppliedFrom {
  /** The name the source object was addressed by. */
  source: string;
  /** The source object's id; `null` only as for `onApply`'s `sourceId`. */
  sourceId: string | null;
  /** The row's sequence at its source. */
  seq: number;
}

/** The target side of the relay in your Durable Object. */
export declare class RelayTarget {
  /**
   * `onApply` runs inside each apply's transaction with the rows new to this object; a throw rolls
   * the batch back and the source retries it. Synchronous only (its type refuses an async
   * function): one that returns a promise fails the apply the same way (`async_callback`, logged).
   * It is told the source's name and its object's id (`sourceId`): this object keeps the source's
   * watermark by both, since two classes or two Workers may each have an object of one name, so key
   * anything you keep per source by both too (`${source}/${sourceId}`). `sourceId` is `null` only
   * for a sender older than ids whose name's watermark no identified sender has taken over.
   *
   * `onPut` and `onDelete` are the same, key by key: each put and each delete of each of those rows,
   * in the order the target applies them (rows in sequence order, a row's puts, then its deletes),
   * after `onApply` when both are given, in the same transaction and with the same refusals.
   */
  constructor(
    ctx: DurableObjectState,
    options?: {
      onApply?: (source: string, rows: AppliedRow[], sourceId: string | null) => undefined;
      onPut?: (key: string, value: JsonValue, from: AppliedFrom) => undefined;
      onDelete?: (key: string, from: AppliedFrom) => undefined;
    },
  );
  /** Serves the relay's target protocol: pass it the requests sources send. */
  fetch(request: Request): Promise<Response>;
}
