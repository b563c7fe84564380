//! The reference Worker's request lines: the front door (`/v1/...`), the
//! operations its source and target objects serve beyond the relay's own
//! protocol (the alarm history, retiring from the directory, the test
//! switches and audits), the directory's protocol and the console's files.
//! Each parses its own words first and hands the rest to the library's
//! [`SourceOp`](durable_relay::routes::SourceOp) and
//! [`TargetOp`](durable_relay::routes::TargetOp), with the library's path helpers, so a bad
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
pub use durable_relay::protocol::Scope;
use durable_relay::routes::{limit, name, no_query, no_route, params, refs, segments};
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

impl FrontRoute {
    /// The scope this route needs: the one place that decides it. Every
    /// match is exhaustive, so a new route cannot compile without a scope.
    /// The test-only routes (faults, audits, the apply log, conformance)
    /// need an operator, as does anything that drops or moves rows.
    pub fn scope(&self) -> Scope {
        match self {
            FrontRoute::Health | FrontRoute::Sources { .. } => Scope::Reader,
            FrontRoute::Source(_, SourceRoute::Relay(op)) => op.operation().scope,
            FrontRoute::Source(_, SourceRoute::Alarms) => Scope::Reader,
            FrontRoute::Source(
                _,
                SourceRoute::Retire | SourceRoute::Faults | SourceRoute::Audit | SourceRoute::Conformance,
            ) => Scope::Operator,
            FrontRoute::Target(_, TargetRoute::Relay(op)) => op.operation().scope,
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
                if target.endpoint().is_some() {
                    return Err(endpoint_is_no_object(&target));
                }
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

/// The answer to a target route naming an HTTPS endpoint: no object holds
/// its state, each source's status does.
fn endpoint_is_no_object(target: &Name) -> Refusal {
    Refusal::new(
        404,
        ErrorCode::NoRoute,
        format!(
            "{target} is an HTTPS endpoint, not a target object: what each source sent it is in \
             that source's status (GET /v1/sources/{{source}}/status)"
        ),
    )
}

#[cfg(test)]
mod tests;
