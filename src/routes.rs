//! The reference Worker's request lines: the front door (`/v1/...`), the
//! operations its source and target objects serve beyond the relay's own
//! protocol (the alarm history, retiring from the directory, the test
//! switches and audits), the directory's protocol and the console's files.
//! Each parses its own words first and hands the rest to the library's
//! [`SourceOp`] and [`TargetOp`], with the library's path helpers, so a bad
//! request line gets the same refusal on every route. Pure, so it is fuzzed
//! natively (`tests/fuzz.rs`).
//!
//! A source's protocol path is the front door's path without its
//! `/v1/sources/{source}` prefix (and likewise for targets).
//!
//! The front door's routes and the scopes they need are here; the objects'
//! routes are in `routes/objects.rs`, the directory's protocol in
//! `routes/directory.rs` and the console's files in `routes/console.rs`.

#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]
#![deny(clippy::unreachable, clippy::todo, clippy::unimplemented)]

mod console;
mod directory;
mod objects;

use durable_relay::core::{ErrorCode, Name, MAX_SOURCES_PER_PAGE};
use durable_relay::protocol::Reach;
use durable_relay::protocol::Refusal;
use durable_relay::routes::{limit, name, no_query, no_route, params, refs, segments, SourceOp, TargetOp};
use worker::Url;

pub use console::ConsoleAsset;
pub use directory::DirectoryOp;
pub use objects::{SourceRoute, TargetRoute};

/// A front-door request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FrontRoute {
    /// `GET /v1/health`.
    Health,
    /// `GET /v1/sources?after=&limit=`: the source directory.
    Sources {
        /// Sources after this name.
        after: Option<Name>,
        /// At most this many, 1..=[`MAX_SOURCES_PER_PAGE`].
        limit: u32,
    },
    /// `/v1/sources/{source}/...`.
    Source(Name, SourceRoute),
    /// `/v1/targets/{target}/...` (never `/apply`).
    Target(Name, TargetRoute),
}

/// A directory page's bounds from the query.
fn page(url: &Url) -> Result<(Option<Name>, u32), Refusal> {
    let [after, limit_text] = params(url, ["after", "limit"])?;
    let after = after.filter(|a| !a.is_empty()).map(|a| name(&a, ErrorCode::InvalidQuery)).transpose()?;
    Ok((after, limit(limit_text, MAX_SOURCES_PER_PAGE)?))
}

/// What a bearer token may do at the front door. Each route needs exactly
/// one scope ([`FrontRoute::scope`]); a token holds the scopes of the
/// variables that list it (`RELAY_TOKEN` holds all three).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// Enqueue only: what a producing Worker or service needs.
    Producer,
    /// Read-only routes: status, watermarks, parked lists, keys, the
    /// directory, health, the alarm history.
    Reader,
    /// Everything a reader may, plus the actions that change what the
    /// relay holds without enqueueing (redrive, discard, retire, forgetting
    /// a watermark) and the test-only routes. Not enqueue: an operator's
    /// token leaking must not let anyone write rows.
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

    /// Whether a token holding this scope may call a route that needs
    /// `needed`: the same scope, or an operator reading.
    pub fn covers(self, needed: Scope) -> bool {
        self == needed || (self == Scope::Operator && needed == Scope::Reader)
    }
}

/// The scope the front door needs for a source operation. The router-only
/// steps never reach the front door (it answers 404); they need the
/// strictest scope should that ever change.
fn source_op_scope(op: &SourceOp) -> Scope {
    match op {
        SourceOp::Enqueue => Scope::Producer,
        SourceOp::Status
        | SourceOp::Watermark
        | SourceOp::DeliveredThrough(_)
        | SourceOp::ParkedTargets { .. }
        | SourceOp::ParkedRows { .. } => Scope::Reader,
        SourceOp::Redrive(_)
        | SourceOp::Discard(_)
        | SourceOp::Rearm
        | SourceOp::Prepare
        | SourceOp::Activate
        | SourceOp::RecordKey
        | SourceOp::Seal
        | SourceOp::PlainKey
        | SourceOp::Settling(_) => Scope::Operator,
    }
}

/// The scope the front door needs for a target operation (a source's
/// `apply` never reaches it: 404; the strictest scope all the same).
fn target_op_scope(op: &TargetOp) -> Scope {
    match op {
        TargetOp::Status | TargetOp::Keys { .. } | TargetOp::Watermarks { .. } => Scope::Reader,
        TargetOp::ForgetWatermark(_) | TargetOp::Apply => Scope::Operator,
    }
}

impl FrontRoute {
    /// The scope this route needs: the one place that decides it. Every
    /// match is exhaustive, so a new route cannot compile without a scope.
    /// The test-only routes (faults, audits, the apply log, conformance)
    /// need an operator, as does anything that drops or moves rows.
    pub fn scope(&self) -> Scope {
        match self {
            FrontRoute::Health | FrontRoute::Sources { .. } => Scope::Reader,
            FrontRoute::Source(_, SourceRoute::Relay(op)) => source_op_scope(op),
            FrontRoute::Source(_, SourceRoute::Alarms) => Scope::Reader,
            FrontRoute::Source(
                _,
                SourceRoute::Retire | SourceRoute::Faults | SourceRoute::Audit | SourceRoute::Conformance,
            ) => Scope::Operator,
            FrontRoute::Target(_, TargetRoute::Relay(op)) => target_op_scope(op),
            FrontRoute::Target(_, TargetRoute::Faults | TargetRoute::Log(_) | TargetRoute::Audit) => {
                Scope::Operator
            }
        }
    }

    /// Parses a front-door request.
    pub fn parse(method: &str, url: &Url) -> Result<FrontRoute, Refusal> {
        let owned = segments(url);
        let segs = refs(&owned);
        match segs.as_slice() {
            ["v1", "health"] if method == "GET" => {
                no_query(url)?;
                Ok(FrontRoute::Health)
            }
            ["v1", "sources"] if method == "GET" => {
                let (after, limit) = page(url)?;
                Ok(FrontRoute::Sources { after, limit })
            }
            ["v1", "sources", s, rest @ ..] if !rest.is_empty() => {
                let source = name(s, ErrorCode::InvalidName)?;
                match SourceRoute::parse(method, rest, url)? {
                    // A router's own steps: reachable only through the DO binding.
                    SourceRoute::Relay(op) if op.operation().reach != Reach::Public => {
                        Err(no_route(method, url))
                    }
                    route => Ok(FrontRoute::Source(source, route)),
                }
            }
            ["v1", "targets", t, rest @ ..] if !rest.is_empty() => {
                let target = name(t, ErrorCode::InvalidName)?;
                match TargetRoute::parse(method, rest, url)? {
                    // A source's apply: reachable only through the DO binding.
                    TargetRoute::Relay(op) if op.operation().reach != Reach::Public => {
                        Err(no_route(method, url))
                    }
                    route => Ok(FrontRoute::Target(target, route)),
                }
            }
            _ => Err(no_route(method, url)),
        }
    }
}

#[cfg(test)]
mod tests;
