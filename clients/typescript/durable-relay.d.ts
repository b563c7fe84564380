// Types for callers of durable-relay from JavaScript and TypeScript Workers:
// the rows you enqueue, the replies, the status, the error codes, and the
// typed RPC entrypoint `RelayRpc` of the reference Worker. Bind it with a
// service binding (`entrypoint = "RelayRpc"`) and type the binding as
// `Service<RelayRpc>`; or bind the `RelaySource` class by `script_name` and
// speak its fetch protocol (the same JSON).
//
// Integers are JavaScript numbers: sequences stay within 2^53 - 1. A put's
// value is any JSON value; the relay carries its text exactly (numbers digit
// for digit), but a JavaScript reader parses it into a double.

import { WorkerEntrypoint } from "cloudflare:workers";

/** Any JSON value. */
export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };

type JsonScalar = null | boolean | number | string;
type Json1 = JsonScalar | JsonScalar[] | { [key: string]: JsonScalar };
type Json2 = JsonScalar | Json1[] | { [key: string]: Json1 };
/**
 * A JSON value in what the relay returns over RPC. Workers RPC's type
 * mapping cannot follow the recursive `JsonValue` ("excessively deep"), so
 * results spell out three levels; deeper values are typed `JsonValue` at
 * the third level's leaves by a cast on your side.
 */
export type JsonResult = JsonScalar | Json2[] | { [key: string]: Json2 };

/** One row: puts and deletes for one target object, applied in order there. */
export interface Row {
  /** The target object's name: 1 to 64 characters of A-Z a-z 0-9 . _ : - */
  target: string;
  /** Keys to set, each with a JSON value. */
  puts?: [key: string, value: JsonValue][];
  /** Keys to remove. */
  deletes?: string[];
  /** Deliver no earlier than this time, ms since the epoch (at most 24 h ahead). Not with `delay_ms`. */
  not_before_ms?: number;
  /** Deliver no earlier than this long after the enqueue, ms (at most 86,400,000). Not with `not_before_ms`. */
  delay_ms?: number;
}

/** Options of an enqueue over RPC (the npm package's `EnqueueOptions` adds `writes`). */
export interface RpcEnqueueOptions {
  /** 1 to 128 bytes: the same key and rows again answer the original sequences. */
  idempotencyKey?: string;
  /**
   * W3C trace context, version 00 (`00-<32 hex>-<16 hex>-<2 hex>`): stored and
   * sent with every row, named in the source's alarm log line and the
   * target's apply log line. A retry with a new one is still a duplicate.
   */
  traceparent?: string;
}

/**
 * Where a row of a partitioned source went: its partition (`"plain"`: the logical source's own
 * object, while the map lists the plain layout) and its sequence there.
 */
export interface Position {
  partition: number | "plain";
  seq: number;
}

/** What an enqueue did. */
export interface Enqueued {
  /** The sequences the rows were given (the original ones for a duplicate); at a partitioned source, each in its partition. */
  seqs: number[];
  /** The source's last allocated sequence afterwards (absent at a partitioned source). */
  last_seq?: number;
  /** At a partitioned source: each row's partition and sequence, in request order. */
  positions?: Position[];
  /** Whether this repeated an earlier keyed enqueue and wrote nothing. */
  duplicate: boolean;
  /** Rows in the outbox afterwards (status's `queued_rows`; at a partitioned source, summed over the partitions reached). */
  queued_rows: number;
  /** Rows parked afterwards (status's `parked_rows`); backpressure counts both. */
  parked_rows: number;
  /** When the rows committed (the original enqueue's, for a duplicate), ms since the epoch. */
  at_ms: number;
  /**
   * Present when a row is delayed: each row's effective due time in the order of `seqs`, ms since
   * the epoch (0: due at once; later than asked when an older row for the same target waits longer).
   */
  due_ms?: number[];
}

/** A parked or failing target, as a source reports it. */
export interface TargetReport {
  target: string;
  failed_cycles: number;
  parked: boolean;
  reason: string | null;
  first_failure_ms: number | null;
  last_failure_ms: number | null;
  last_error: string | null;
  /** Parked rows (not discarded). */
  rows: number;
  /** For a failing target that is not parked: when a cycle may call it again, ms since the epoch. */
  retry_at_ms: number | null;
}

/** A page of a source's parked and failing targets, in name order. */
export interface TargetPage {
  targets: TargetReport[];
  /** The `after` of the next page, when more follow. */
  next: string | null;
}

/** One parked row. */
export interface ParkedRow {
  seq: number;
  at_ms: number;
  effects: { puts: [string, JsonResult][]; deletes: string[] };
}

/** A page of a parked target's rows. */
export interface ParkedPage {
  target: string;
  rows: ParkedRow[];
  /** The `after` of the next page, when this one is full. */
  next: number | null;
}

/** One row still queued for a target. */
export interface QueuedRow {
  seq: number;
  at_ms: number;
  /** When it becomes due, ms since the epoch (its commit time unless delayed). */
  due_ms: number;
  effects: { puts: [string, JsonResult][]; deletes: string[] };
}

/** A page of the rows still queued for one target, in the order it receives them. */
export interface QueuedPage {
  /** The source object they are queued at (at a partitioned source, the partition). */
  source: string;
  target: string;
  rows: QueuedRow[];
  /** The `after` of the next page, at `source`, when this one is full. */
  next: number | null;
}

/** What a re-arm check found and did. */
export interface Rearmed {
  /** Whether it set the alarm (rows were queued and none was set). */
  rearmed: boolean;
  /** The stored alarm afterwards, ms since the epoch. */
  alarm_at_ms: number | null;
  queued_rows: number;
}

/** What a redrive or discard did. */
export interface ActionOutcome {
  rows: number;
  was_parked: boolean;
}

/** A fire budget. */
export interface RelayBudget {
  rows_per_fire: number;
  targets_per_fire: number;
  calls_per_target: number;
  fires_per_alarm: number;
  subrequests_per_alarm: number;
  batch_rows: number;
  /** Work units one alarm may spend before it settles and re-arms (`RELAY_WORK_PER_ALARM`). */
  work_per_alarm: number;
}

/** The `rs` scan cycle. */
export interface ScanState {
  v: number;
  generation: number;
  cycle_end: number;
  cursor: number;
  /** Targets an older version listed as blocked (absent when none). */
  blocked?: string[];
  idle_fires: number;
  clock_ms?: number;
  next_due_ms?: number;
  /** Whether this cycle passed over a failing target's row (absent when not). */
  passed_failing?: boolean;
  /** The earliest retry time of a failing target this cycle passed over, ms since the epoch. */
  next_retry_ms?: number;
  /** Failing targets retried this cycle that did not answer (absent when none). */
  retries?: number;
  /** Failing targets retried this cycle that answered (absent when none). */
  recovered?: number;
  /** This cycle retries only failing targets whose retry time is at most this (those that waited longest), ms since the epoch (absent: every due one). */
  retry_through_ms?: number;
  /** The next cycle's `retry_through_ms`: a share's worth of the due failing targets this cycle left waiting. */
  waiting_retry_ms?: number;
}

/** What one alarm did (the `relay_alarm` log line, and a status's `last_alarm`). */
export interface AlarmSummary {
  source: string;
  fires: number;
  subrequests: number;
  targets_called: number;
  rows_applied: number;
  rows_delivered: number;
  conflicts: number;
  lag_exceeded: boolean;
  duration_ms: number;
  next_in_ms: number | null;
  subrequest_cap: number;
  started_at_ms: number;
  pruned: number;
  queued_rows: number;
  queued_bytes: number;
  parked_rows: number;
  oldest_row_age_ms: number | null;
  /** Targets parked: [target, rows moved, reason]. */
  parked: [string, number, string][];
  /** Distinct `traceparent`s of the rows delivered, at most 16 (absent when none). */
  traces?: string[];
  /** Rows delivered that carried a `traceparent` (absent when none). */
  traced_rows?: number;
  /** The platform refused a write for the account's daily allowance (Workers Free): the alarm stopped and sleeps until 00:00 UTC (absent when not). */
  write_limited?: boolean;
  /** The alarm stopped early to stay inside the invocation's CPU (the runtime's signal, or its work budget spent) and re-armed at once. */
  cpu_cut: boolean;
  /** Work units the alarm spent: 1 per row read, 1 per KiB read or sent, 8 per target call. */
  work: number;
  /** Which retry of a failed alarm this was (0: not a retry); a retry runs a smaller fire. */
  retry_count: number;
  /** The host's own alarm time (set through the relay) had come, and was cleared (absent when not). */
  host_alarm?: boolean;
}

/** A source's status (`GET /status`, `RelayRpc.status`). */
export interface SourceStatus {
  source: string;
  /** The source object's id (64 lowercase hex digits): with `source`, what its targets key its watermark by (absent from a relay older than ids). */
  source_id?: string | null;
  last_seq: number;
  queued_rows: number;
  queued_bytes: number;
  parked_rows: number;
  parked_bytes: number;
  enqueued_rows: number;
  delivered_rows: number;
  alarms: number;
  fires: number;
  subrequests: number;
  conflicts: number;
  dedup_hits: number;
  rejected_full: number;
  lag_breaches: number;
  sql_rows_written: number;
  sql_rows_written_per_delivered_row: number | null;
  /** SQLite rows this source wrote in the UTC day `rows_written_day` (counts not yet stored included). */
  rows_written_today: number;
  /** The UTC date `rows_written_today` counts, `YYYY-MM-DD`. */
  rows_written_day: string;
  /** What the day's rate so far projects for the whole UTC day. */
  rows_written_projected_today: number;
  /** Workers Free's daily rows written, per account (100,000), to compare the projection with. */
  rows_written_free_limit: number;
  scan_state: ScanState | null;
  scan_state_corrupt: boolean;
  blocked_targets: string[];
  /** The first STATUS_TARGETS (50) parked targets by name, with their parked rows. */
  parked_targets: { [target: string]: number };
  /** The first STATUS_TARGETS (50) failing targets by name, with their failed cycles. */
  failing_targets: { [target: string]: number };
  /** Whether more parked or failing targets exist than listed: page them with parkedTargets. */
  targets_truncated: boolean;
  oldest_row_age_ms: number | null;
  lag_exceeded: boolean;
  relay_watermark: number;
  capacity: { rows: number; bytes: number; max_rows: number; max_bytes: number; percent_full: number };
  /** Counted up to STATUS_COUNT_MAX (1,000), which then means "at least". */
  dedup_records: number;
  /** Counted up to STATUS_COUNT_MAX (1,000). */
  discarded_rows: number;
  last_prune_ms: number;
  last_alarm: AlarmSummary | null;
  alarm_at_ms: number | null;
  rearmed: boolean;
  config: {
    alarm: { budget: RelayBudget; max_in_flight: number };
    settings: {
      policy: { park_after_failed_cycles: number | null };
      max_rows: number;
      max_bytes: number;
      dedup_horizon_ms: number;
      discard_horizon_ms: number;
    };
  };
}

/** Every code an error can carry (the HTTP API's `error.code`). */
export type ErrorCode =
  | "empty_body"
  | "malformed_json"
  | "invalid_request"
  | "invalid_utf8"
  | "unreadable_body"
  | "body_too_large"
  | "no_rows"
  | "too_many_rows"
  | "request_too_large"
  | "invalid_target"
  | "invalid_name"
  | "row_without_effects"
  | "too_many_effects"
  | "empty_key"
  | "key_too_long"
  | "value_too_large"
  | "value_too_deep"
  | "invalid_value"
  | "duplicate_object_key"
  | "lone_surrogate"
  | "duplicate_key"
  | "row_too_large"
  | "sequence_exhausted"
  | "outbox_full"
  | "invalid_idempotency_key"
  | "idempotency_conflict"
  | "aborted"
  | "async_callback"
  | "invalid_seq"
  | "invalid_limit"
  | "invalid_query"
  | "no_route"
  | "bad_url"
  | "unauthorized"
  | "unnamed_source"
  | "invalid_source"
  | "malformed_batch"
  | "empty_batch"
  | "batch_too_large"
  | "bad_sequence"
  | "bad_row"
  | "invalid_source_id"
  | "hook_refused"
  | "unavailable"
  | "bad_configuration"
  | "internal"
  | "faults_disabled"
  | "invalid_delay"
  | "source_not_empty"
  | "invalid_traceparent"
  | "conflicting_delay"
  | "stale_epoch"
  | "invalid_gate"
  | "target_moved"
  | "invalid_partition"
  | "partitioned_source"
  | "unknown_endpoint"
  | "partition_enqueue"
  | "delay_too_long"
  | "no_directory"
  | "bench_disabled"
  | "queue_send_failed"
  | "epoch_not_adopted"
  | "unsettled_layout"
  | "misrouted_row"
  | "map_changed"
  | "superseded"
  | "forbidden_scope"
  | "daily_write_limit";

/**
 * What `RelayRpc` throws. Over Workers RPC the error arrives as an `Error`
 * (not an instance of this class) with these properties kept, when both
 * Workers have a compatibility date of 2026-04-21 or later: branch on
 * `code`, never on `instanceof`. The message also starts with the code.
 */
export interface RelayError extends Error {
  name: "RelayError";
  code: ErrorCode;
  /** The HTTP status the same refusal has on the HTTP API. */
  status: number;
  /** Seconds to wait before retrying (with `outbox_full`; with `daily_write_limit`, until 00:00 UTC). */
  retryAfterS?: number;
  /**
   * At a partitioned source: the rows committed before another partition refused (by this attempt
   * or an earlier one of the same key). A retry with the same idempotency key completes the
   * enqueue and answers these positions again.
   */
  committed?: Position[];
}

/**
 * The reference Worker's RPC entrypoint (`entrypoint = "RelayRpc"`): each operation of a source's
 * protocol, named by the source first.
 */
export interface RelayRpcMethods extends RelayRpcOperations {
  /** Commits rows to the outbox in one transaction and answers their positions. */
  enqueue(source: string, rows: Row[], options?: RpcEnqueueOptions): Promise<Enqueued>;
}

// Written from the protocol's table by `scripts/generate`: do not edit.
/** `RelayRpc`'s methods for the operations without a body. */
export interface RelayRpcOperations {
  /** The source's status. */
  status(source: string): Promise<SourceStatus>;
  /** A commit-time lower bound of the rows still owed, ms since the epoch. */
  relayWatermark(source: string): Promise<number>;
  /** Whether every row through `seq` was applied (or discarded by an operator). */
  deliveredThrough(source: string, seq: number): Promise<boolean>;
  /** A page of the parked and failing targets, in name order (`limit` 1..=200). */
  parkedTargets(source: string, page?: { after?: string; limit?: number }): Promise<TargetPage>;
  /** A page of a parked target's rows, in sequence order (`limit` 1..=500). */
  parkedRows(source: string, target: string, page?: { after?: number; limit?: number }): Promise<ParkedPage>;
  /** A page of the rows still queued for one target, in the order it receives them (`limit` 1..=500). */
  queuedRows(source: string, page: { target: string; after?: number; limit?: number }): Promise<QueuedPage>;
  /** Puts a parked target's rows back, in their original order. */
  redrive(source: string, target: string): Promise<ActionOutcome>;
  /** Drops a parked target's rows (kept until the discard horizon). */
  discard(source: string, target: string): Promise<ActionOutcome>;
  /** Sets the alarm if rows are queued and none is set: call it from a scheduled handler (a dropped alarm). */
  rearm(source: string): Promise<Rearmed>;
}
// End of what the protocol's table writes.

/** `RelayRpcMethods` as a WorkerEntrypoint class, for `Service<RelayRpc>` (the interface below
 * merges the methods into the class). */
export declare abstract class RelayRpc extends WorkerEntrypoint {}
export interface RelayRpc extends RelayRpcMethods {}
