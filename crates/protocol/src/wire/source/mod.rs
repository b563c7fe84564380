//! What a source's public operations take and answer: the enqueue body
//! and what an enqueue did (at one object, or routed across a partitioned
//! source's objects), the watermark and delivered-through answers,
//! the parked targets and rows an operator pages through, what a redrive or
//! discard did, and what a re-arm found. The status reply, with the
//! settings it reports, is in `status.rs`.

use serde::{Deserialize, Serialize};

use crate::core::{EnqueueRow, Part};

mod status;

pub use status::{AlarmOptions, CapacityReport, OutboxSettings, SourceConfig, SourceStatus};

/// `POST /enqueue`'s body as a caller builds it:
/// `{"rows":[..],"idempotency_key"?}`. The relay reads it back with the
/// engine's [`decode_enqueue`](crate::core::decode_enqueue), which checks
/// every row and refuses unknown fields.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct EnqueueBody<'a> {
    /// The rows, in the order their sequences are allocated.
    pub rows: &'a [EnqueueRow],
    /// The idempotency key, when the caller wants a retry answered as a
    /// duplicate rather than enqueued again; left out when none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<&'a str>,
}

/// What an enqueue did (`POST /enqueue`'s reply).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Enqueued {
    /// The sequences (the original ones for a duplicate).
    pub seqs: Vec<u64>,
    /// The source's last allocated sequence afterwards (the engine's
    /// `os`). Replies of pre-release builds named it `os`, which is still
    /// read.
    #[serde(alias = "os")]
    pub last_seq: u64,
    /// Whether this repeated an earlier keyed enqueue and wrote nothing.
    pub duplicate: bool,
    /// Rows in the outbox afterwards (status's `queued_rows`).
    pub queued_rows: u64,
    /// Rows parked afterwards (status's `parked_rows`); backpressure counts
    /// both.
    #[serde(default)]
    pub parked_rows: u64,
    /// When the rows committed (the original enqueue's time for a
    /// duplicate), ms since the epoch: their `at_ms`.
    pub at_ms: u64,
    /// Each row's effective due time in the order of `seqs`, ms since the
    /// epoch (0, or a time already past: due at once; later than asked when
    /// an older row of the same target waits longer). Empty when no row
    /// waited; a duplicate answers what the original enqueue did.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub due_ms: Vec<u64>,
}

impl Enqueued {
    /// When the first of the rows bound for the outbox is due, for arming
    /// the alarm: `at_ms` when any is due at once.
    pub fn first_due_ms(&self) -> u64 {
        self.due_ms.iter().copied().min().map_or(self.at_ms, |d| d.max(self.at_ms))
    }
}

/// Where one row went: its object and its sequence there.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Position {
    /// The partition's index, or `"plain"`: the logical source's own object.
    pub partition: Part,
    /// The row's sequence at that object.
    pub seq: u64,
}

/// What an enqueue at a partitioned logical source did: the router's
/// answer to its caller (the front door's and `RelayRpc`'s reply there),
/// merged from the [`Enqueued`] of each object the rows went to.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RoutedEnqueue {
    /// Each row's sequence in its partition, in request order (the
    /// `seqs` of an unpartitioned reply; `positions` says where).
    pub seqs: Vec<u64>,
    /// Each row's position, in request order.
    pub positions: Vec<Position>,
    /// Whether every row had been committed before (a retry): nothing was
    /// written but the key's attempt.
    pub duplicate: bool,
    /// Rows in the outboxes of the objects this enqueue reached, afterwards.
    pub queued_rows: u64,
    /// Rows parked at the objects this enqueue reached, afterwards.
    #[serde(default)]
    pub parked_rows: u64,
    /// The latest commit time among the objects, ms since the epoch.
    pub at_ms: u64,
    /// Each row's effective due time, in request order (empty when none is delayed).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub due_ms: Vec<u64>,
}

/// `GET /delivered-through/{seq}`.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeliveredThrough {
    /// The sequence asked about.
    pub seq: u64,
    /// Whether every row through it was applied (or discarded).
    pub delivered: bool,
}

/// `GET /watermark`.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub struct WatermarkReply {
    /// The commit-time lower bound of the owed rows, ms.
    pub relay_watermark: u64,
    /// The source's clock when it answered, ms.
    pub now_ms: u64,
}

/// What a re-arm check found and did (`POST /rearm`'s reply).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rearmed {
    /// Whether it set the alarm: rows were queued and none was set, or the
    /// stored one was later than the relay and its host need.
    pub rearmed: bool,
    /// The stored alarm afterwards, ms since the epoch.
    pub alarm_at_ms: Option<u64>,
    /// Rows queued.
    pub queued_rows: u64,
}

/// A parked (or failing) target as operators see it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TargetReport {
    /// The target.
    pub target: String,
    /// Consecutive failed cycles (0 once parked).
    pub failed_cycles: u32,
    /// Whether it is parked.
    pub parked: bool,
    /// Why it was parked.
    pub reason: Option<String>,
    /// First failure of the current run, ms.
    pub first_failure_ms: Option<u64>,
    /// Latest failure, ms.
    pub last_failure_ms: Option<u64>,
    /// The latest failure's message.
    pub last_error: Option<String>,
    /// Parked rows (not discarded).
    pub rows: u64,
    /// For a failing target that is not parked: when a cycle may call it
    /// again (its last failure plus its back-off), ms since the epoch.
    /// Until then every cycle passes over its rows.
    #[serde(default)]
    pub retry_at_ms: Option<u64>,
}

/// One page of target records, in name order (`GET /parked`'s reply).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TargetPage {
    /// The records on this page.
    pub targets: Vec<TargetReport>,
    /// The `after` of the next page, when more follow.
    pub next: Option<String>,
}

/// One parked row.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ParkedRow {
    /// Its original sequence (kept through redrive).
    pub seq: u64,
    /// Commit-time clock reading, ms.
    pub at_ms: u64,
    /// Its effects as JSON (`{"puts":[[key, value]..],"deletes":[..]}`),
    /// written verbatim.
    #[serde(
        serialize_with = "crate::core::json::verbatim_json",
        deserialize_with = "crate::core::json::verbatim_json_text"
    )]
    pub effects: String,
}

/// One page of a parked target's rows (`GET /parked/{target}`'s reply).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ParkedPage {
    /// The target.
    pub target: String,
    /// Its parked rows, ascending.
    pub rows: Vec<ParkedRow>,
    /// The `after` of the next page; none exactly when no row follows.
    pub next: Option<u64>,
}

/// One row still queued for a target, as `GET /queued` lists it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueuedRow {
    /// Its sequence at this source object.
    pub seq: u64,
    /// Commit-time clock reading, ms.
    pub at_ms: u64,
    /// When it becomes due, ms since the epoch (its commit time unless it
    /// was enqueued with a delay).
    pub due_ms: u64,
    /// Its effects as JSON, written verbatim (as [`ParkedRow::effects`]).
    #[serde(
        serialize_with = "crate::core::json::verbatim_json",
        deserialize_with = "crate::core::json::verbatim_json_text"
    )]
    pub effects: String,
}

/// One page of the rows still queued for a target (`GET /queued`'s reply).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueuedPage {
    /// The source object the rows are queued at (at a partitioned source,
    /// the partition that holds the target's rows now): a page's `next`
    /// is a sequence of that object.
    pub source: String,
    /// The target.
    pub target: String,
    /// Its queued rows, ascending: the order it receives them in.
    pub rows: Vec<QueuedRow>,
    /// The `after` of the next page; none exactly when no row follows.
    pub next: Option<u64>,
}

/// What an operator action did (redrive's and discard's reply).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ActionOutcome {
    /// Rows moved (redrive) or discarded.
    pub rows: u64,
    /// Whether the target was parked before the action.
    pub was_parked: bool,
}
