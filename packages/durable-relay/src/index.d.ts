// The package's API. The wire types (rows, replies, error codes) are the
// repository's one TypeScript description of the relay's protocol
// (clients/typescript/durable-relay.d.ts), which scripts/build-package
// copies to dist/wire.d.ts and whose every field a Rust test checks.

import type {
  ActionOutcome,
  AlarmSummary,
  Enqueued,
  ErrorCode,
  JsonValue,
  ParkedPage,
  Rearmed,
  Row,
  SourceStatus,
  TargetPage,
  TargetReport,
} from "../dist/wire.js";

export type {
  ActionOutcome,
  AlarmSummary,
  Enqueued,
  ErrorCode,
  JsonValue,
  ParkedPage,
  Rearmed,
  Row,
  SourceStatus,
  TargetPage,
  TargetReport,
} from "../dist/wire.js";

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

/** How to enqueue. */
export interface EnqueueOptions {
  /** Names the request: a repeat with the same rows is a duplicate and writes nothing (nor runs `writes`). */
  idempotencyKey?: string;
  /** W3C trace context, stored and sent with every row. */
  traceparent?: string;
  /**
   * Your own writes, run inside the enqueue's transaction with what it did: a throw rolls both back.
   * Synchronous only (its type refuses an async function): one that returns a promise is refused
   * with `async_callback` and nothing is written.
   */
  writes?: (enqueued: Enqueued) => undefined;
}

/** The source side of the relay in your Durable Object. */
export declare class RelaySource {
  /** `targets` names the Durable Object binding of the target objects (default `RELAY_TARGET`). */
  constructor(ctx: DurableObjectState, env: object, options?: { targets?: string });
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
  /** The source's status. */
  status(): Promise<SourceStatus>;
  /** Whether every row through `seq` was applied (or discarded by an operator). */
  deliveredThrough(seq: number): Promise<boolean>;
  /** A commit-time lower bound of the rows still owed, ms since the epoch. */
  relayWatermark(): Promise<number>;
  /** A page of the parked and failing targets, in name order (`limit` 1..=200). */
  parkedTargets(page?: { after?: string; limit?: number }): Promise<TargetPage>;
  /** A page of a parked target's rows (`limit` 1..=500). */
  parkedRows(target: string, page?: { after?: number; limit?: number }): Promise<ParkedPage>;
  /** Sets the alarm if rows are queued and none is set: call it from a scheduled handler (a dropped alarm). */
  rearm(): Promise<Rearmed>;
  /** Puts a parked target's rows back, in their original order. */
  redrive(target: string): Promise<ActionOutcome>;
  /** Drops a parked target's rows (kept until the discard horizon). */
  discard(target: string): Promise<ActionOutcome>;
  /** Serves the relay's own protocol (status, parked targets, redrive, discard, enqueue). */
  fetch(request: Request): Promise<Response>;
}

/** One row a target applies: its source sequence and its effects. */
export interface AppliedRow {
  seq: number;
  effects: { puts: [key: string, value: JsonValue][]; deletes: string[] };
}

/** The target side of the relay in your Durable Object. */
export declare class RelayTarget {
  /**
   * `onApply` runs inside each apply's transaction with the rows new to this object; a throw rolls
   * the batch back and the source retries it. Synchronous only (its type refuses an async
   * function): one that returns a promise fails the apply the same way (`async_callback`, logged).
   */
  constructor(ctx: DurableObjectState, options?: { onApply?: (source: string, rows: AppliedRow[]) => undefined });
  /** Serves the relay's target protocol: pass it the requests sources send. */
  fetch(request: Request): Promise<Response>;
}
