//! The source object's operations, one constant each, and their table:
//! an operation's `operation()` and the table name the same item.

use super::*;

pub(crate) const ENQUEUE: Operation = Operation {
    name: "enqueue",
    method: "POST",
    path: "/enqueue",
    reach: Reach::Public,
    scope: Scope::Producer,
    request: Some("EnqueueBody"),
    reply: "Enqueued",
    rpc: Some(Rpc { method: "enqueue", unwraps: None }),
    codes: ENQUEUE_CODES,
};

pub(crate) const STATUS: Operation = Operation {
    name: "status",
    method: "GET",
    path: "/status",
    reach: Reach::Public,
    scope: Scope::Reader,
    request: None,
    reply: "SourceStatus",
    rpc: Some(Rpc { method: "status", unwraps: None }),
    codes: &[],
};

pub(crate) const RELAY_WATERMARK: Operation = Operation {
    name: "relay_watermark",
    method: "GET",
    path: "/watermark",
    reach: Reach::Public,
    scope: Scope::Reader,
    request: None,
    reply: "WatermarkReply",
    rpc: Some(Rpc { method: "relayWatermark", unwraps: Some("relay_watermark") }),
    codes: &[],
};

pub(crate) const DELIVERED_THROUGH: Operation = Operation {
    name: "delivered_through",
    method: "GET",
    path: "/delivered-through/{seq}",
    reach: Reach::Public,
    scope: Scope::Reader,
    request: None,
    reply: "DeliveredThrough",
    rpc: Some(Rpc { method: "deliveredThrough", unwraps: Some("delivered") }),
    codes: &[ErrorCode::InvalidSeq],
};

pub(crate) const TARGETS: Operation = Operation {
    name: "targets",
    method: "GET",
    path: "/parked?after&limit",
    reach: Reach::Public,
    scope: Scope::Reader,
    request: None,
    reply: "TargetPage",
    rpc: Some(Rpc { method: "parkedTargets", unwraps: None }),
    codes: &[ErrorCode::InvalidQuery, ErrorCode::InvalidLimit],
};

pub(crate) const PARKED_ROWS: Operation = Operation {
    name: "parked_rows",
    method: "GET",
    path: "/parked/{target}?after&limit",
    reach: Reach::Public,
    scope: Scope::Reader,
    request: None,
    reply: "ParkedPage",
    rpc: Some(Rpc { method: "parkedRows", unwraps: None }),
    codes: &[ErrorCode::InvalidTarget, ErrorCode::InvalidLimit],
};

pub(crate) const REDRIVE: Operation = Operation {
    name: "redrive",
    method: "POST",
    path: "/parked/{target}/redrive",
    reach: Reach::Public,
    scope: Scope::Operator,
    request: None,
    reply: "ActionOutcome",
    rpc: Some(Rpc { method: "redrive", unwraps: None }),
    codes: &[ErrorCode::InvalidTarget],
};

pub(crate) const DISCARD: Operation = Operation {
    name: "discard",
    method: "POST",
    path: "/parked/{target}/discard",
    reach: Reach::Public,
    scope: Scope::Operator,
    request: None,
    reply: "ActionOutcome",
    rpc: Some(Rpc { method: "discard", unwraps: None }),
    codes: &[ErrorCode::InvalidTarget],
};

pub(crate) const REARM: Operation = Operation {
    name: "rearm",
    method: "POST",
    path: "/rearm",
    reach: Reach::Public,
    scope: Scope::Operator,
    request: None,
    reply: "Rearmed",
    rpc: Some(Rpc { method: "rearm", unwraps: None }),
    codes: &[],
};

pub(crate) const PREPARE: Operation = Operation {
    name: "prepare",
    method: "POST",
    path: "/prepare",
    reach: Reach::Router,
    scope: Scope::Operator,
    request: Some("AdoptBody"),
    reply: "PrepareReply",
    rpc: None,
    codes: &[
        ErrorCode::InvalidPartition,
        ErrorCode::StaleEpoch,
        ErrorCode::MapChanged,
        ErrorCode::UnsettledLayout,
    ],
};

pub(crate) const ACTIVATE: Operation = Operation {
    name: "activate",
    method: "POST",
    path: "/activate",
    reach: Reach::Router,
    scope: Scope::Operator,
    request: Some("AdoptBody"),
    reply: "Activated",
    rpc: None,
    codes: &[ErrorCode::InvalidPartition, ErrorCode::StaleEpoch, ErrorCode::EpochNotAdopted],
};

pub(crate) const RECORD_KEY: Operation = Operation {
    name: "record_key",
    method: "POST",
    path: "/keys",
    reach: Reach::Router,
    scope: Scope::Operator,
    request: Some("KeyBody"),
    reply: "KeyReply",
    rpc: None,
    codes: &[ErrorCode::IdempotencyConflict, ErrorCode::InvalidIdempotencyKey, ErrorCode::Superseded],
};

pub(crate) const SEAL: Operation = Operation {
    name: "seal",
    method: "POST",
    path: "/seal",
    reach: Reach::Router,
    scope: Scope::Operator,
    request: Some("SealBody"),
    reply: "Sealed",
    rpc: None,
    codes: &[ErrorCode::InvalidIdempotencyKey, ErrorCode::Superseded],
};

pub(crate) const PLAIN_KEY: Operation = Operation {
    name: "plain_key",
    method: "POST",
    path: "/plain-key",
    reach: Reach::Router,
    scope: Scope::Operator,
    request: Some("PlainKeyBody"),
    reply: "PlainKeyReply",
    rpc: None,
    codes: &[
        ErrorCode::InvalidPartition,
        ErrorCode::StaleEpoch,
        ErrorCode::EpochNotAdopted,
        ErrorCode::IdempotencyConflict,
        ErrorCode::InvalidIdempotencyKey,
    ],
};

pub(crate) const SETTLING: Operation = Operation {
    name: "settling",
    method: "GET",
    path: "/settling/{layout}",
    reach: Reach::Router,
    scope: Scope::Operator,
    request: None,
    reply: "Settling",
    rpc: None,
    codes: &[ErrorCode::InvalidPartition],
};

/// Every operation of a source's protocol.
pub const SOURCE_OPERATIONS: &[Operation] = &[
    ENQUEUE,
    STATUS,
    RELAY_WATERMARK,
    DELIVERED_THROUGH,
    TARGETS,
    PARKED_ROWS,
    REDRIVE,
    DISCARD,
    REARM,
    PREPARE,
    ACTIVATE,
    RECORD_KEY,
    SEAL,
    PLAIN_KEY,
    SETTLING,
];
