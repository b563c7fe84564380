//! Why an enqueue wrote nothing: the limit a request broke ([`EnqueueError`]),
//! an invalid idempotency key ([`KeyError`]), every other refusal an enqueue
//! may meet on its way to a source ([`EnqueueRefusal`]), and the occupancy and backpressure bounds a request
//! is checked against ([`Capacity`]).

#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]
#![deny(clippy::unreachable, clippy::todo, clippy::unimplemented)]

use std::fmt;

use crate::codes::ErrorCode;
use crate::limits::{
    DEFAULT_MAX_QUEUED_BYTES, DEFAULT_MAX_QUEUED_ROWS, MAX_ENQUEUE_BYTES, MAX_IDEMPOTENCY_KEY_BYTES,
    MAX_ROWS_PER_ENQUEUE, SEQ_MAX,
};
use crate::row::RowError;

/// Why an enqueue was refused. Nothing was written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EnqueueError {
    /// The request has no rows.
    NoRows,
    /// More than [`MAX_ROWS_PER_ENQUEUE`] rows; carries the count.
    TooManyRows(u32),
    /// Rows encode to more than [`MAX_ENQUEUE_BYTES`]; carries the total.
    TooManyBytes(u64),
    /// Row `index` (0-based) is invalid.
    Row {
        /// Position of the row in the request.
        index: u32,
        /// What is wrong with it.
        error: RowError,
    },
    /// Allocating the rows would pass [`SEQ_MAX`].
    SequenceExhausted,
    /// The outbox would pass a backpressure bound; nothing was written.
    /// Carries what it would have held.
    OutboxFull {
        /// Rows it would hold.
        rows: u64,
        /// Bytes it would hold.
        bytes: u64,
        /// The bounds.
        capacity: Capacity,
    },
}

/// A source's occupancy and its backpressure bounds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Capacity {
    /// Rows waiting now (queued plus parked).
    pub rows: u64,
    /// Body bytes waiting now.
    pub bytes: u64,
    /// Bound on rows.
    pub max_rows: u64,
    /// Bound on bytes.
    pub max_bytes: u64,
}

impl Capacity {
    /// Occupancy `rows`/`bytes` under the default bounds.
    pub fn with_defaults(rows: u64, bytes: u64) -> Capacity {
        Capacity { rows, bytes, max_rows: DEFAULT_MAX_QUEUED_ROWS, max_bytes: DEFAULT_MAX_QUEUED_BYTES }
    }

    /// How full the source is, as the larger of its two ratios, in percent.
    pub fn percent_full(&self) -> f64 {
        let r = self.rows as f64 / self.max_rows.max(1) as f64;
        let b = self.bytes as f64 / self.max_bytes.max(1) as f64;
        100.0 * r.max(b)
    }
}

impl EnqueueError {
    /// Stable machine-readable code.
    pub fn code(&self) -> ErrorCode {
        match self {
            EnqueueError::NoRows => ErrorCode::NoRows,
            EnqueueError::TooManyRows(_) => ErrorCode::TooManyRows,
            EnqueueError::TooManyBytes(_) => ErrorCode::RequestTooLarge,
            EnqueueError::Row { error, .. } => error.code(),
            EnqueueError::SequenceExhausted => ErrorCode::SequenceExhausted,
            EnqueueError::OutboxFull { .. } => ErrorCode::OutboxFull,
        }
    }
}

impl fmt::Display for EnqueueError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EnqueueError::NoRows => write!(f, "request has no rows"),
            EnqueueError::TooManyRows(n) => {
                write!(
                    f,
                    "request has {n} rows; the limit is {MAX_ROWS_PER_ENQUEUE}"
                )
            }
            EnqueueError::TooManyBytes(n) => write!(
                f,
                "rows encode to {n} bytes; one request may carry {MAX_ENQUEUE_BYTES}"
            ),
            EnqueueError::Row { index, error } => write!(f, "rows[{index}]: {error}"),
            EnqueueError::SequenceExhausted => {
                write!(f, "the source has allocated its last sequence ({SEQ_MAX})")
            }
            EnqueueError::OutboxFull { rows, bytes, capacity } => write!(
                f,
                "the outbox would hold {rows} rows and {bytes} bytes; its bounds are {} rows and {} bytes; retry later",
                capacity.max_rows, capacity.max_bytes
            ),
        }
    }
}

impl std::error::Error for EnqueueError {}

/// Why an enqueue (keyed or not) wrote nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EnqueueRefusal {
    /// The rows broke a limit, or the outbox is full.
    Invalid(EnqueueError),
    /// The idempotency key is malformed.
    Key(KeyError),
    /// The key was used before for different rows.
    Conflict {
        /// The key.
        key: String,
    },
    /// A partition refused a router running an older partition map (see
    /// [`crate::partition`]): the router must reload its map and retry.
    StaleEpoch {
        /// The router's epoch.
        sent: u64,
        /// The newest epoch this partition has seen.
        stored: u64,
    },
    /// A gated enqueue named more than one target (a router's bug).
    GateTargets,
    /// A routed request carries a newer epoch than this partition adopted:
    /// the router adopts its map at every partition (see
    /// [`crate::partition`]) and retries.
    EpochNotAdopted {
        /// The router's epoch.
        sent: u64,
        /// The newest epoch this partition adopted.
        stored: u64,
    },
    /// A map this object cannot prepare: a router running it would no
    /// longer reach rows the object holds.
    UnsettledLayout {
        /// The object.
        partition: String,
        /// A target it holds rows for.
        target: String,
        /// The layout under which those rows were routed here, if this
        /// object knows it: the one to keep in `from`.
        keep: Option<crate::partition::Layout>,
    },
    /// A map the plain object of a logical source cannot prepare: it does
    /// not list `plain`, and the object still remembers idempotency keys
    /// its plain enqueues recorded, which a retry must find.
    PlainKeys {
        /// The plain object.
        source: String,
        /// Keys still remembered.
        keys: u64,
        /// When the last of them expires, ms since the epoch.
        until_ms: u64,
    },
    /// Another map under an epoch this object adopted a map under: every
    /// change of a partition map must raise its epoch.
    MapChanged {
        /// The epoch.
        epoch: u64,
    },
    /// A newer attempt of the same keyed request took over at this object
    /// (a retry overlapped this attempt): this attempt can commit nothing
    /// more; retry to read the outcome.
    Superseded {
        /// The key.
        key: String,
    },
    /// A routed row for a target this partition is no home of under its
    /// adopted map (a router's bug).
    Misrouted {
        /// The target.
        target: String,
    },
    /// An enqueue addressed straight to one partition of a partitioned
    /// source: only the router may write there, or a target's rows could
    /// overtake older ones at its home.
    PartitionEnqueue {
        /// The partition.
        source: String,
    },
    /// A row addressed to an endpoint (`endpoint:<name>`) the operator has
    /// not configured: it could never be delivered.
    UnknownEndpoint {
        /// Position of the row in the request (in the share an object
        /// received, when it is the object that refuses).
        index: u32,
        /// The target as the row named it.
        target: String,
    },
    /// An enqueue addressed to a partitioned logical source's own object,
    /// past the router.
    PartitionedSource {
        /// The logical source.
        source: String,
        /// When its object takes plain enqueues again, ms since the epoch:
        /// a horizon after it went back to a plain layout (none while the
        /// source is partitioned).
        plain_at_ms: Option<u64>,
    },
}

impl EnqueueRefusal {
    /// Stable machine-readable code.
    pub fn code(&self) -> ErrorCode {
        match self {
            EnqueueRefusal::Invalid(e) => e.code(),
            EnqueueRefusal::Key(_) => ErrorCode::InvalidIdempotencyKey,
            EnqueueRefusal::Conflict { .. } => ErrorCode::IdempotencyConflict,
            EnqueueRefusal::StaleEpoch { .. } => ErrorCode::StaleEpoch,
            EnqueueRefusal::GateTargets => ErrorCode::InvalidGate,
            EnqueueRefusal::EpochNotAdopted { .. } => ErrorCode::EpochNotAdopted,
            EnqueueRefusal::UnsettledLayout { .. } | EnqueueRefusal::PlainKeys { .. } => {
                ErrorCode::UnsettledLayout
            }
            EnqueueRefusal::MapChanged { .. } => ErrorCode::MapChanged,
            EnqueueRefusal::Superseded { .. } => ErrorCode::Superseded,
            EnqueueRefusal::Misrouted { .. } => ErrorCode::MisroutedRow,
            EnqueueRefusal::PartitionEnqueue { .. } => ErrorCode::PartitionEnqueue,
            EnqueueRefusal::UnknownEndpoint { .. } => ErrorCode::UnknownEndpoint,
            EnqueueRefusal::PartitionedSource { .. } => ErrorCode::PartitionedSource,
        }
    }
}

impl fmt::Display for EnqueueRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EnqueueRefusal::Invalid(e) => e.fmt(f),
            EnqueueRefusal::Key(e) => e.fmt(f),
            EnqueueRefusal::Conflict { key } => write!(
                f,
                "idempotency_key {key:?} was used for different rows; use a new key for new content"
            ),
            EnqueueRefusal::StaleEpoch { sent, stored } => write!(
                f,
                "routed by partition epoch {sent}, but this partition has seen epoch {stored}; reload the partition map"
            ),
            EnqueueRefusal::GateTargets => write!(f, "a gated enqueue carries rows for exactly one target"),
            EnqueueRefusal::EpochNotAdopted { sent, stored } => write!(
                f,
                "routed by partition epoch {sent}, which this partition has not adopted (it has {stored}); \
                 adopt the map at every partition first"
            ),
            EnqueueRefusal::UnsettledLayout { partition, target, keep } => {
                write!(f, "{partition} still holds rows for {target}, which this map would no longer route there")?;
                match keep {
                    Some(l) => write!(f, "; keep {l} in from (every layout not yet settled, oldest first)"),
                    None => write!(f, "; keep every layout not yet settled in from, oldest first"),
                }
            }
            EnqueueRefusal::PlainKeys { source, keys, until_ms } => write!(
                f,
                "{source} remembers {keys} idempotency keys from when it was a plain source, the last until \
                 {until_ms} ms; keep \"plain\" in from until then, so that their retries are answered"
            ),
            EnqueueRefusal::MapChanged { epoch } => write!(
                f,
                "this object adopted another partition map under epoch {epoch}; every change of a map raises its epoch"
            ),
            EnqueueRefusal::Superseded { key } => write!(
                f,
                "a newer attempt of the request keyed {key:?} took over; retry it to read what was committed"
            ),
            EnqueueRefusal::Misrouted { target } => {
                write!(f, "{target} is not routed to this partition under its partition map")
            }
            EnqueueRefusal::PartitionEnqueue { source } => write!(
                f,
                "{source} is a partition of a partitioned source: enqueue at the logical source, whose router keeps each target's rows at one partition"
            ),
            EnqueueRefusal::UnknownEndpoint { index, target } => write!(
                f,
                "rows[{index}].target: {target} names no configured endpoint; endpoints are named in RELAY_ENDPOINTS"
            ),
            EnqueueRefusal::PartitionedSource { source, plain_at_ms: None } => write!(
                f,
                "{source} is partitioned: enqueue through the front door, RPC or RelayClient::partitioned, which route by target"
            ),
            EnqueueRefusal::PartitionedSource { source, plain_at_ms: Some(at) } => write!(
                f,
                "{source} went back to a plain layout and takes plain enqueues from {at} ms, when every key \
                 recorded while it was partitioned has expired; keep its entry in RELAY_PARTITIONS until then"
            ),
        }
    }
}

/// The refusal of `rows` if one is addressed to an endpoint (`endpoint:<name>`)
/// that `known` does not name: it could never be delivered. Checked where
/// rows are taken (the source) and, when it knows the endpoints, by the
/// router before it sends anything anywhere.
pub fn unknown_endpoint(
    rows: &[crate::enqueue::EnqueueRow],
    known: &std::collections::BTreeSet<String>,
) -> Option<EnqueueRefusal> {
    let (index, row) =
        (0u32..).zip(rows).find(|(_, r)| r.target.endpoint().is_some_and(|e| !known.contains(e)))?;
    Some(EnqueueRefusal::UnknownEndpoint { index, target: row.target.to_string() })
}

impl From<EnqueueError> for EnqueueRefusal {
    fn from(e: EnqueueError) -> Self {
        EnqueueRefusal::Invalid(e)
    }
}

/// An invalid idempotency key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyError {
    /// The key is empty.
    Empty,
    /// The key is over [`MAX_IDEMPOTENCY_KEY_BYTES`]; carries its length.
    TooLong(u32),
}

impl fmt::Display for KeyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyError::Empty => write!(f, "idempotency_key is empty"),
            KeyError::TooLong(n) => {
                write!(f, "idempotency_key is {n} bytes; the limit is {MAX_IDEMPOTENCY_KEY_BYTES}")
            }
        }
    }
}
