//! What a target's operations take and answer, beside the apply batch and
//! its answer (the engine's [`ApplyRequest`](crate::core::ApplyRequest) and
//! [`ApplyReply`](crate::core::ApplyReply)): the pages of keys and of
//! watermarks, the status totals, and what forgetting a watermark did.

use serde::{Deserialize, Serialize};

use crate::core::Name;

/// One source's watermark row at a target.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, Eq)]
pub struct Watermark {
    /// The source partition's name.
    pub source: String,
    /// The source object's id; `None` for a watermark written before ids
    /// existed, or by a sender that sends none.
    pub source_id: Option<String>,
    /// Highest applied sequence from it.
    pub watermark: u64,
    /// Rows applied from it.
    pub applied_rows: u64,
    /// Batches that applied at least one row.
    pub batches: u64,
    /// SQLite rows written applying them.
    pub sql_rows_written: u64,
}

/// One page of a target's watermarks (`GET /watermarks?after=&limit=`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WatermarkPage {
    /// The watermarks, by source name, then id.
    pub watermarks: Vec<Watermark>,
    /// The `after` of the next page (`source`, or `source/source_id` for a
    /// source with an id); none exactly when no watermark follows.
    pub next: Option<String>,
}

/// One stored key.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct KeyValue {
    /// The key.
    pub key: String,
    /// Its value's canonical JSON text; it serialises as that JSON value
    /// itself, verbatim, so numbers keep every digit.
    #[serde(serialize_with = "crate::core::json::verbatim_json")]
    pub value: String,
}

/// One page of a key listing.
#[derive(Clone, Debug, Serialize)]
pub struct KeysPage {
    /// The keys, ascending.
    pub keys: Vec<KeyValue>,
    /// The `after` of the next page; none exactly when no key follows.
    pub next: Option<String>,
}

/// `GET /status`'s reply at a target: totals over every source it applied
/// rows from.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct TargetStatus {
    /// Rows applied.
    pub applied_rows: u64,
    /// Batches that applied at least one row.
    pub batches: u64,
    /// SQLite rows written applying them.
    pub sql_rows_written: u64,
    /// `sql_rows_written / applied_rows`, once anything was applied: what a
    /// row costs the account's allowance of rows written.
    pub sql_rows_written_per_applied_row: Option<f64>,
    /// Sources with a watermark here.
    pub sources: u64,
}

/// `DELETE /watermarks/{source}`'s reply.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Forgotten {
    /// The source whose watermark was forgotten.
    pub source: Name,
    /// Whether it had one here (false: there was nothing to forget).
    pub forgotten: bool,
}
