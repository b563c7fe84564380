//! The source object's operations, each declared once: its variant of
//! [`SourceOp`] (doc and fields), then its method, path and query (each
//! parameter with the codec that reads and writes it, from
//! [`crate::params`]), who may call it, its request and reply types, its
//! RPC method and its codes. `operations!` derives the rest.

#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]
#![deny(clippy::unreachable, clippy::todo, clippy::unimplemented)]

use url::Url;

use super::*;
use crate::core::{Layout, Name, MAX_PARKED_ROWS_PER_PAGE, MAX_QUEUED_ROWS_PER_PAGE, MAX_TARGETS_PER_PAGE};
use crate::line::{no_route, params};
use crate::params::{
    with_query, AfterName, AfterSeq, Limit, PathLayout, QueryParam, QueryTarget, Seq, TargetName,
};
use crate::refusal::Refusal;
use crate::wire::{
    ActionOutcome, Activated, DeliveredThrough, Enqueued, KeyReply, ParkedPage, PlainKeyReply, PrepareReply,
    QueuedPage, Rearmed, Sealed, Settling, SourceStatus, TargetPage, WatermarkReply,
};

operations! {
    /// What a request asks of a source.
    pub enum SourceOp;
    /// Every operation of a source's protocol.
    pub const SOURCE_OPERATIONS;

    /// `POST /enqueue`.
    Enqueue => ENQUEUE {
        name: "enqueue",
        method: POST,
        path: /"enqueue",
        reach: Public,
        scope: Producer,
        request: Some("EnqueueBody"),
        reply: Enqueued,
        rpc: Some(Rpc {
            method: "enqueue",
            unwraps: None,
            returns: "Enqueued",
            doc: "Commits rows to the outbox in one transaction and answers their positions.",
        }),
        codes: ENQUEUE_CODES,
    }

    /// `GET /status`.
    Status => STATUS {
        name: "status",
        method: GET,
        path: /"status",
        reach: Public,
        scope: Reader,
        request: None,
        reply: SourceStatus,
        rpc: Some(Rpc {
            method: "status",
            unwraps: None,
            returns: "SourceStatus",
            doc: "The source's status.",
        }),
        codes: &[],
    }

    /// `GET /watermark`.
    Watermark => RELAY_WATERMARK {
        name: "relay_watermark",
        method: GET,
        path: /"watermark",
        reach: Public,
        scope: Reader,
        request: None,
        reply: WatermarkReply,
        rpc: Some(Rpc {
            method: "relayWatermark",
            unwraps: Some("relay_watermark"),
            returns: "number",
            doc: "A commit-time lower bound of the rows still owed, ms since the epoch.",
        }),
        codes: &[],
    }

    /// `GET /delivered-through/{seq}`.
    DeliveredThrough(seq: u64) => DELIVERED_THROUGH {
        name: "delivered_through",
        method: GET,
        path: /"delivered-through"/{seq: Seq},
        reach: Public,
        scope: Reader,
        request: None,
        reply: DeliveredThrough,
        rpc: Some(Rpc {
            method: "deliveredThrough",
            unwraps: Some("delivered"),
            returns: "boolean",
            doc: "Whether every row through `seq` was applied (or discarded by an operator).",
        }),
        codes: &[ErrorCode::InvalidSeq],
    }

    /// `GET /parked?after=&limit=`.
    ParkedTargets {
        /// Targets after this name (none: from the first).
        after: Option<Name>,
        /// At most this many, 1..=[`MAX_TARGETS_PER_PAGE`].
        limit: u32,
    } => TARGETS {
        name: "targets",
        method: GET,
        path: /"parked",
        query: [after: AfterName, limit: Limit<MAX_TARGETS_PER_PAGE>],
        reach: Public,
        scope: Reader,
        request: None,
        reply: TargetPage,
        rpc: Some(Rpc {
            method: "parkedTargets",
            unwraps: None,
            returns: "TargetPage",
            doc: "A page of the parked and failing targets, in name order.",
        }),
        codes: &[ErrorCode::InvalidQuery, ErrorCode::InvalidLimit],
    }

    /// `GET /parked/{target}?after=&limit=`.
    ParkedRows {
        /// The parked target.
        target: Name,
        /// Rows after this sequence.
        after: u64,
        /// At most this many, 1..=[`MAX_PARKED_ROWS_PER_PAGE`].
        limit: u32,
    } => PARKED_ROWS {
        name: "parked_rows",
        method: GET,
        path: /"parked"/{target: TargetName},
        query: [after: AfterSeq, limit: Limit<MAX_PARKED_ROWS_PER_PAGE>],
        reach: Public,
        scope: Reader,
        request: None,
        reply: ParkedPage,
        rpc: Some(Rpc {
            method: "parkedRows",
            unwraps: None,
            returns: "ParkedPage",
            doc: "A page of a parked target's rows, in sequence order.",
        }),
        codes: &[ErrorCode::InvalidTarget, ErrorCode::InvalidLimit],
    }

    /// `GET /queued?target=&after=&limit=`.
    Queued {
        /// The target whose rows are listed.
        target: Name,
        /// Rows after this sequence.
        after: u64,
        /// At most this many, 1..=[`MAX_QUEUED_ROWS_PER_PAGE`].
        limit: u32,
    } => QUEUED {
        name: "queued",
        method: GET,
        path: /"queued",
        query: [target: QueryTarget, after: AfterSeq, limit: Limit<MAX_QUEUED_ROWS_PER_PAGE>],
        reach: Public,
        scope: Reader,
        request: None,
        reply: QueuedPage,
        rpc: Some(Rpc {
            method: "queuedRows",
            unwraps: None,
            returns: "QueuedPage",
            doc: "A page of the rows still queued for one target, in the order it receives them.",
        }),
        codes: &[ErrorCode::InvalidQuery, ErrorCode::InvalidTarget, ErrorCode::InvalidLimit],
    }

    /// `POST /parked/{target}/redrive`.
    Redrive(target: Name) => REDRIVE {
        name: "redrive",
        method: POST,
        path: /"parked"/{target: TargetName}/"redrive",
        reach: Public,
        scope: Operator,
        request: None,
        reply: ActionOutcome,
        rpc: Some(Rpc {
            method: "redrive",
            unwraps: None,
            returns: "ActionOutcome",
            doc: "Puts a parked target's rows back, in their original order.",
        }),
        codes: &[ErrorCode::InvalidTarget],
    }

    /// `POST /parked/{target}/discard`.
    Discard(target: Name) => DISCARD {
        name: "discard",
        method: POST,
        path: /"parked"/{target: TargetName}/"discard",
        reach: Public,
        scope: Operator,
        request: None,
        reply: ActionOutcome,
        rpc: Some(Rpc {
            method: "discard",
            unwraps: None,
            returns: "ActionOutcome",
            doc: "Drops a parked target's rows (kept until the discard horizon).",
        }),
        codes: &[ErrorCode::InvalidTarget],
    }

    /// `POST /rearm`: sets the alarm if rows are queued and none is set
    /// (the platform drops an alarm after its retries fail); a scheduled
    /// sweep calls it on every source.
    Rearm => REARM {
        name: "rearm",
        method: POST,
        path: /"rearm",
        reach: Public,
        scope: Operator,
        request: None,
        reply: Rearmed,
        rpc: Some(Rpc {
            method: "rearm",
            unwraps: None,
            returns: "Rearmed",
            doc: "Sets the alarm if rows are queued and none is set: call it from a scheduled handler (a dropped alarm).",
        }),
        codes: &[],
    }

    /// `POST /prepare` (routers only, through the DO binding): the first
    /// phase of adopting a partition map, body `{"map":{...}}`.
    Prepare => PREPARE {
        name: "prepare",
        method: POST,
        path: /"prepare",
        reach: Router,
        scope: Operator,
        request: Some("AdoptBody"),
        reply: PrepareReply,
        rpc: None,
        codes: &[
            ErrorCode::InvalidPartition,
            ErrorCode::StaleEpoch,
            ErrorCode::MapChanged,
            ErrorCode::UnsettledLayout,
        ],
    }

    /// `POST /activate` (routers only): the second phase, body `{"map":{...}}`.
    Activate => ACTIVATE {
        name: "activate",
        method: POST,
        path: /"activate",
        reach: Router,
        scope: Operator,
        request: Some("AdoptBody"),
        reply: Activated,
        rpc: None,
        codes: &[ErrorCode::InvalidPartition, ErrorCode::StaleEpoch, ErrorCode::EpochNotAdopted],
    }

    /// `POST /keys` (routers only): as the home of an idempotency key,
    /// record an attempt, body `{"key","digest","reach"}`.
    RecordKey => RECORD_KEY {
        name: "record_key",
        method: POST,
        path: /"keys",
        reach: Router,
        scope: Operator,
        request: Some("KeyBody"),
        reply: KeyReply,
        rpc: None,
        codes: &[ErrorCode::IdempotencyConflict, ErrorCode::InvalidIdempotencyKey, ErrorCode::Superseded],
    }

    /// `POST /seal` (routers only): seal a key for a retry, body
    /// `{"key","digest","ticket"}`.
    Seal => SEAL {
        name: "seal",
        method: POST,
        path: /"seal",
        reach: Router,
        scope: Operator,
        request: Some("SealBody"),
        reply: Sealed,
        rpc: None,
        codes: &[ErrorCode::InvalidIdempotencyKey, ErrorCode::Superseded],
    }

    /// `POST /plain-key` (routers only, with the partition headers): at
    /// the plain object, the enqueue its plain enqueues recorded under a
    /// key, body `{"key","digest"}`.
    PlainKey => PLAIN_KEY {
        name: "plain_key",
        method: POST,
        path: /"plain-key",
        reach: Router,
        scope: Operator,
        request: Some("PlainKeyBody"),
        reply: PlainKeyReply,
        rpc: None,
        codes: &[
            ErrorCode::InvalidPartition,
            ErrorCode::StaleEpoch,
            ErrorCode::EpochNotAdopted,
            ErrorCode::IdempotencyConflict,
            ErrorCode::InvalidIdempotencyKey,
        ],
    }

    /// `GET /settling/{layout}`: as an object of a logical source now
    /// routed by `layout` (a count or `plain`), what keeps its last change
    /// from settling (nothing everywhere: it settled).
    Settling(layout: Layout) => SETTLING {
        name: "settling",
        method: GET,
        path: /"settling"/{layout: PathLayout},
        reach: Router,
        scope: Operator,
        request: None,
        reply: Settling,
        rpc: None,
        codes: &[ErrorCode::InvalidPartition],
    }
}
