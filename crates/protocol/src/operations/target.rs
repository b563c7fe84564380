//! The target object's operations, each declared once: its variant of
//! [`TargetOp`] (doc and fields), then its method, path and query (each
//! parameter with the codec that reads and writes it, from
//! [`crate::params`]), who may call it, its request and reply types, its
//! RPC method and its codes. `operations!` derives the rest.

#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]
#![deny(clippy::unreachable, clippy::todo, clippy::unimplemented)]

use url::Url;

use super::*;
use crate::core::{Name, MAX_KEYS_PER_PAGE, MAX_WATERMARKS_PER_PAGE};
use crate::line::{no_route, params};
use crate::params::{with_query, AfterCursor, KeyBound, Limit, PathName, QueryParam};
use crate::refusal::Refusal;
use crate::routes::WatermarkCursor;
use crate::wire::{ApplyReply, Forgotten, KeysPage, TargetStatus, WatermarkPage};

operations! {
    /// What a request asks of a target.
    pub enum TargetOp;
    /// Every operation of a target's protocol.
    pub const TARGET_OPERATIONS;

    /// `POST /apply`: only sources, through the DO binding.
    Apply => APPLY {
        name: "apply",
        method: POST,
        path: /"apply",
        reach: Source,
        scope: Operator,
        request: Some("ApplyRequest"),
        reply: ApplyReply,
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
    }

    /// `GET /status`.
    Status => STATUS {
        name: "status",
        method: GET,
        path: /"status",
        reach: Public,
        scope: Reader,
        request: None,
        reply: TargetStatus,
        rpc: None,
        codes: &[],
    }

    /// `GET /keys?prefix=&after=&limit=`.
    Keys {
        /// Keys starting with this.
        prefix: String,
        /// Keys after this one.
        after: String,
        /// At most this many, 1..=[`MAX_KEYS_PER_PAGE`].
        limit: u32,
    } => KEYS {
        name: "keys",
        method: GET,
        path: /"keys",
        query: [prefix: KeyBound, after: KeyBound, limit: Limit<MAX_KEYS_PER_PAGE>],
        reach: Public,
        scope: Reader,
        request: None,
        reply: KeysPage,
        rpc: None,
        codes: &[ErrorCode::InvalidLimit],
    }

    /// `GET /watermarks?after=&limit=`.
    Watermarks {
        /// Watermarks after this one.
        after: Option<WatermarkCursor>,
        /// At most this many, 1..=[`MAX_WATERMARKS_PER_PAGE`].
        limit: u32,
    } => WATERMARKS {
        name: "watermarks",
        method: GET,
        path: /"watermarks",
        query: [after: AfterCursor, limit: Limit<MAX_WATERMARKS_PER_PAGE>],
        reach: Public,
        scope: Reader,
        request: None,
        reply: WatermarkPage,
        rpc: None,
        codes: &[ErrorCode::InvalidLimit],
    }

    /// `DELETE /watermarks/{source}`.
    ForgetWatermark(source: Name) => FORGET_WATERMARK {
        name: "forget_watermark",
        method: DELETE,
        path: /"watermarks"/{source: PathName},
        reach: Public,
        scope: Operator,
        request: None,
        reply: Forgotten,
        rpc: None,
        codes: &[],
    }
}
