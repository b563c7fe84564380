//! The relay's protocol, each operation declared once (in `source.rs` or
//! `target.rs`): its variant of [`SourceOp`] or [`TargetOp`], its name, HTTP
//! method, path and query with a typed codec per parameter, who may call
//! it, its request and reply types (by their wire names, as the TypeScript
//! types spell them), the RPC method that offers it, and the error codes it
//! can answer. The `operations!` macro (`declare.rs`) derives from each
//! declaration the variant, its constant in the table (with the path
//! template), its arm of `parse`, of `path` and of `operation()`.
//!
//! Everything else derives from this table or is checked against it:
//! [`SourceOp::method`] and [`TargetOp::method`] read it; the reference
//! Worker's front door refuses what is not [`Reach::Public`] from it; the
//! tests check the path each operation builds against its template, the
//! Rust client, the RPC entrypoint (`src/entry.mjs`), the
//! TypeScript types (`clients/typescript/durable-relay.d.ts`) and the
//! route table of the HTTP API's documentation against it, and write it out as
//! `clients/typescript/protocol.json`, which the workerd tests use to
//! check that every error a request gets is one its operation lists.

use serde::Serialize;

use crate::core::ErrorCode;
#[macro_use]
mod declare;
mod source;
mod target;
#[cfg(test)]
mod tests;
pub use source::{SourceOp, SOURCE_OPERATIONS};
pub use target::{TargetOp, TARGET_OPERATIONS};

/// The version of the wire protocol: these operations with their requests,
/// replies and codes, and the batches a source sends to a target's
/// `/apply`. Raised by any change a peer of the previous version would
/// refuse or misread: an operation, field or code removed, renamed or given
/// another meaning, or a field added to a request or a reply (decoders
/// refuse unknown fields, by name, rather than ignore them). An added
/// operation keeps it. The changelog records it per release.
///
/// - 1: the first.
/// - 2: a batch names the sending object (`source_id`), which a target of
///   version 1 refuses; a source sends it without the id to such a target
///   (see `durable_relay_core::peers`). Every request between objects and
///   every reply of an object's protocol carries the sender's version in
///   [`PROTOCOL_HEADER`].
///
/// Two releases always meet during a deploy, in both directions, so a
/// field or message a peer of the previous version would refuse is sent
/// only to a peer that has shown it understands it: a request's only once
/// the peer answered with a version that has it, a reply's only to a
/// request whose header names one.
pub const PROTOCOL_VERSION: u32 = 2;

/// The header that carries the sender's [`PROTOCOL_VERSION`] on every
/// request between the relay's objects and on every reply of an object's
/// protocol. A peer without it runs a release older than the header
/// (version 1, or version 2 before the header was sent).
pub const PROTOCOL_HEADER: &str = "relay-protocol";

/// Who may call an operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Reach {
    /// Anyone with access: the front door, RPC, the Rust client, a stub.
    Public,
    /// Only a partitioned source's router, through the Durable Object binding.
    Router,
    /// Only a source's alarm, through the Durable Object binding.
    Source,
}

/// What a bearer token must hold to call an operation at the reference
/// Worker's front door, and what its RPC entrypoint hands the front door
/// for a partitioned source. A token holds the scopes of the variables
/// that list it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// Enqueue only: what a producing Worker or service needs.
    Producer,
    /// Read-only operations: status, watermarks, parked lists, keys, the
    /// directory, health, the alarm history.
    Reader,
    /// Everything a reader may, plus the actions that change what the
    /// relay holds without enqueueing (redrive, discard, retire, forgetting
    /// a watermark) and the test-only routes. Not enqueue: an operator's
    /// token leaking must not let anyone write rows. The router-only and
    /// source-only operations need it too, should they ever reach the
    /// front door (they answer 404 there).
    Operator,
}

impl Scope {
    /// Every scope, in the order the variables are read and compared.
    pub const ALL: [Scope; 3] = [Scope::Producer, Scope::Reader, Scope::Operator];

    /// The scope's name, as a 403 names it.
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Producer => "producer",
            Scope::Reader => "reader",
            Scope::Operator => "operator",
        }
    }

    /// The variable (secret) listing this scope's tokens, comma-separated.
    pub fn variable(self) -> &'static str {
        match self {
            Scope::Producer => "RELAY_PRODUCER_TOKENS",
            Scope::Reader => "RELAY_READER_TOKENS",
            Scope::Operator => "RELAY_OPERATOR_TOKENS",
        }
    }

    /// Whether a token holding this scope may call an operation that needs
    /// `needed`: the same scope, or an operator reading.
    pub fn covers(self, needed: Scope) -> bool {
        self == needed || (self == Scope::Operator && needed == Scope::Reader)
    }
}

/// The RPC method that offers an operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Rpc {
    /// The method's name on `RelayRpc`.
    pub method: &'static str,
    /// The reply field the method returns instead of the whole reply.
    pub unwraps: Option<&'static str>,
    /// The TypeScript type its promise resolves to: the reply's type, or
    /// the unwrapped field's.
    pub returns: &'static str,
    /// What the method does, in a sentence: the doc comment of the method
    /// in the TypeScript types.
    #[serde(skip)]
    pub doc: &'static str,
}

/// Where a parameter of an operation's request line is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Place {
    /// A path segment (`{target}`): a call passes it as an argument of
    /// its own, in the path's order.
    Path,
    /// A query parameter (`?limit=`): a call passes the query's
    /// parameters together in one object, each optional.
    Query,
}

/// One parameter of an operation's request line, as a call passes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Param {
    /// Its name, as the path template spells it.
    pub name: &'static str,
    /// In the path or in the query.
    pub place: Place,
    /// Its type in the TypeScript method that sends it.
    pub ts: &'static str,
    /// The largest value it accepts, where it has one to tell a caller
    /// (a page's `limit`).
    pub max: Option<u32>,
    /// Whether a call must give it (a path's always; a query's when its
    /// codec says so).
    pub required: bool,
}

/// One operation of a source's or a target's protocol.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Operation {
    /// Its name (the Rust client's method where it has one).
    pub name: &'static str,
    /// The HTTP method.
    pub method: &'static str,
    /// The path in the object's protocol: `{name}` marks a path
    /// parameter, a query lists its parameters. The front door's path is
    /// this after `/v1/sources/{source}` (or `/v1/targets/{target}`).
    pub path: &'static str,
    /// Who may call it.
    pub reach: Reach,
    /// What a token must hold to call it at the front door.
    pub scope: Scope,
    /// The request body's type, if it takes one.
    pub request: Option<&'static str>,
    /// The reply's type.
    pub reply: &'static str,
    /// The RPC method that offers it, if one does.
    pub rpc: Option<Rpc>,
    /// The error codes it can answer beyond [`EVERY_OPERATION`] (and
    /// [`BODY`] when it takes a body).
    pub codes: &'static [ErrorCode],
}

/// Codes any operation can answer: a bad request line or name, no token
/// or a token whose scope does not cover the operation (the reference
/// Worker's front door, which RPC also passes through for a partitioned
/// source), a configuration or storage failure (a write the platform refused
/// for the account's daily allowance included), a per-partition operation
/// at a partitioned logical source.
pub const EVERY_OPERATION: &[ErrorCode] = &[
    ErrorCode::BadUrl,
    ErrorCode::NoRoute,
    ErrorCode::InvalidQuery,
    ErrorCode::InvalidName,
    ErrorCode::InvalidSource,
    ErrorCode::UnnamedSource,
    ErrorCode::Unauthorized,
    ErrorCode::ForbiddenScope,
    ErrorCode::BadConfiguration,
    ErrorCode::Internal,
    ErrorCode::DailyWriteLimit,
    ErrorCode::PartitionedSource,
];

/// Codes any operation with a JSON body can answer.
pub const BODY: &[ErrorCode] = &[
    ErrorCode::EmptyBody,
    ErrorCode::MalformedJson,
    ErrorCode::InvalidRequest,
    ErrorCode::InvalidUtf8,
    ErrorCode::UnreadableBody,
    ErrorCode::BodyTooLarge,
    ErrorCode::ValueTooDeep,
];

/// Codes only the reference Worker's own routes answer (its directory,
/// console and test switches, and the benchmark build).
pub const REFERENCE_WORKER_ONLY: &[ErrorCode] = &[
    ErrorCode::FaultsDisabled,
    ErrorCode::InvalidDelay,
    ErrorCode::SourceNotEmpty,
    ErrorCode::NoDirectory,
    ErrorCode::BenchDisabled,
    ErrorCode::QueueSendFailed,
];

/// What a refused enqueue can say about its rows and its source.
const ENQUEUE_CODES: &[ErrorCode] = &[
    ErrorCode::NoRows,
    ErrorCode::TooManyRows,
    ErrorCode::RequestTooLarge,
    ErrorCode::InvalidTarget,
    ErrorCode::RowWithoutEffects,
    ErrorCode::TooManyEffects,
    ErrorCode::EmptyKey,
    ErrorCode::KeyTooLong,
    ErrorCode::ValueTooLarge,
    ErrorCode::InvalidValue,
    ErrorCode::DuplicateObjectKey,
    ErrorCode::LoneSurrogate,
    ErrorCode::DuplicateKey,
    ErrorCode::RowTooLarge,
    ErrorCode::SequenceExhausted,
    ErrorCode::OutboxFull,
    ErrorCode::InvalidIdempotencyKey,
    ErrorCode::IdempotencyConflict,
    ErrorCode::Aborted,
    ErrorCode::AsyncCallback,
    ErrorCode::InvalidTraceparent,
    ErrorCode::ConflictingDelay,
    ErrorCode::DelayTooLong,
    ErrorCode::PartitionEnqueue,
    ErrorCode::UnknownEndpoint,
    ErrorCode::StaleEpoch,
    ErrorCode::EpochNotAdopted,
    ErrorCode::InvalidGate,
    ErrorCode::TargetMoved,
    ErrorCode::InvalidPartition,
    ErrorCode::MisroutedRow,
    ErrorCode::UnsettledLayout,
    ErrorCode::MapChanged,
    ErrorCode::Superseded,
];

impl Operation {
    /// Every code this operation can answer.
    pub fn all_codes(&self) -> Vec<ErrorCode> {
        let body = if self.request.is_some() { BODY } else { &[] };
        EVERY_OPERATION.iter().chain(body).chain(self.codes).cloned().collect()
    }
}

/// The whole protocol as JSON (`clients/typescript/protocol.json`), with
/// each operation's full list of codes.
pub fn to_json() -> serde_json::Value {
    let ops = |table: &[Operation]| -> Vec<serde_json::Value> {
        table
            .iter()
            .map(|o| {
                let mut v = serde_json::to_value(o).unwrap_or_default();
                v["codes"] = serde_json::to_value(o.all_codes()).unwrap_or_default();
                v
            })
            .collect()
    };
    serde_json::json!({
        "protocol_version": PROTOCOL_VERSION,
        "source": ops(SOURCE_OPERATIONS),
        "target": ops(TARGET_OPERATIONS),
        "reference_worker_only": REFERENCE_WORKER_ONLY,
        "scopes": scopes_json(),
    })
}

/// For each scope, the variables whose tokens cover it, in [`Scope::ALL`]'s
/// order: where the RPC entrypoint finds a token for a call it hands the
/// front door.
fn scopes_json() -> serde_json::Value {
    let covering = |needed: Scope| -> Vec<&'static str> {
        Scope::ALL.into_iter().filter(|s| s.covers(needed)).map(Scope::variable).collect()
    };
    Scope::ALL.into_iter().map(|s| (s.as_str().to_owned(), serde_json::json!(covering(s)))).collect()
}
