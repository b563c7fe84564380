//! The target object's operations, one constant each, and their table:
//! an operation's `operation()` and the table name the same item.

use super::*;

pub(crate) const APPLY: Operation = Operation {
    name: "apply",
    method: "POST",
    path: "/apply",
    reach: Reach::Source,
    scope: Scope::Operator,
    request: Some("ApplyRequest"),
    reply: "ApplyReply",
    rpc: None,
    codes: &[
        ErrorCode::MalformedBatch,
        ErrorCode::EmptyBatch,
        ErrorCode::BatchTooLarge,
        ErrorCode::BadSequence,
        ErrorCode::BadRow,
        ErrorCode::InvalidSourceId,
        ErrorCode::HookRefused,
        ErrorCode::Unavailable,
    ],
};

pub(crate) const STATUS: Operation = Operation {
    name: "status",
    method: "GET",
    path: "/status",
    reach: Reach::Public,
    scope: Scope::Reader,
    request: None,
    reply: "TargetStatus",
    rpc: None,
    codes: &[],
};

pub(crate) const KEYS: Operation = Operation {
    name: "keys",
    method: "GET",
    path: "/keys?prefix&after&limit",
    reach: Reach::Public,
    scope: Scope::Reader,
    request: None,
    reply: "KeysPage",
    rpc: None,
    codes: &[ErrorCode::InvalidLimit],
};

pub(crate) const WATERMARKS: Operation = Operation {
    name: "watermarks",
    method: "GET",
    path: "/watermarks?after&limit",
    reach: Reach::Public,
    scope: Scope::Reader,
    request: None,
    reply: "WatermarkPage",
    rpc: None,
    codes: &[ErrorCode::InvalidLimit],
};

pub(crate) const FORGET_WATERMARK: Operation = Operation {
    name: "forget_watermark",
    method: "DELETE",
    path: "/watermarks/{source}",
    reach: Reach::Public,
    scope: Scope::Operator,
    request: None,
    reply: "Forgotten",
    rpc: None,
    codes: &[],
};

/// Every operation of a target's protocol.
pub const TARGET_OPERATIONS: &[Operation] = &[APPLY, STATUS, KEYS, WATERMARKS, FORGET_WATERMARK];
