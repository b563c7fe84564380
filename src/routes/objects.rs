//! The requests a reference source or target object serves: the relay's
//! own protocol ([`SourceOp`], [`TargetOp`]) and the operations the
//! reference objects add to it (the alarm history, retiring from the
//! directory, the test switches and audits, the apply log).

#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]
#![deny(clippy::unreachable, clippy::todo, clippy::unimplemented)]

use durable_relay::core::{ErrorCode, Name};
use durable_relay::protocol::Refusal;
use durable_relay::routes::{name, no_query, params, refs, segments, SourceOp, TargetOp};
use worker::Url;

/// What a request asks of a reference source object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SourceRoute {
    /// An operation of the relay's own protocol.
    Relay(SourceOp),
    /// `GET /alarms`: the recent alarms' figures.
    Alarms,
    /// `POST /retire`: leave the source directory; refused unless nothing
    /// is queued or parked.
    Retire,
    /// `POST /faults` (test builds only): arm the source's faults.
    Faults,
    /// `GET /audit` (test builds only): the outbox's invariants on its tables.
    Audit,
    /// `POST /conformance` (test builds only, on an object never used):
    /// the storage suite over this object's SQLite.
    Conformance,
}

/// What a request asks of a reference target object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TargetRoute {
    /// An operation of the relay's own protocol.
    Relay(TargetOp),
    /// `POST /faults` (test builds only): set the target's fault switch.
    Faults,
    /// `GET /log?source=` (test builds only): the sequences applied from a source.
    Log(Name),
    /// `GET /audit` (test builds only): watermarks against the apply log.
    Audit,
}

impl SourceRoute {
    /// Parses a source request from `method` and the path `segments` after
    /// the source's own prefix.
    pub fn parse(method: &str, segments: &[&str], url: &Url) -> Result<SourceRoute, Refusal> {
        let route = match (method, segments) {
            ("GET", ["alarms"]) => SourceRoute::Alarms,
            ("POST", ["retire"]) => SourceRoute::Retire,
            ("POST", ["faults"]) => SourceRoute::Faults,
            ("GET", ["audit"]) => SourceRoute::Audit,
            ("POST", ["conformance"]) => SourceRoute::Conformance,
            _ => return SourceOp::parse(method, segments, url).map(SourceRoute::Relay),
        };
        no_query(url)?;
        Ok(route)
    }

    /// Parses a request to a source object.
    pub fn from_url(method: &str, url: &Url) -> Result<SourceRoute, Refusal> {
        SourceRoute::parse(method, &refs(&segments(url)), url)
    }

    /// The route's HTTP method.
    pub fn method(&self) -> &'static str {
        match self {
            SourceRoute::Relay(op) => op.method(),
            SourceRoute::Alarms | SourceRoute::Audit => "GET",
            SourceRoute::Retire | SourceRoute::Faults | SourceRoute::Conformance => "POST",
        }
    }

    /// The route's path in the source object's protocol, with its query.
    pub fn path(&self) -> String {
        match self {
            SourceRoute::Relay(op) => op.path(),
            SourceRoute::Alarms => "/alarms".into(),
            SourceRoute::Retire => "/retire".into(),
            SourceRoute::Faults => "/faults".into(),
            SourceRoute::Audit => "/audit".into(),
            SourceRoute::Conformance => "/conformance".into(),
        }
    }
}

impl TargetRoute {
    /// Parses a target request from `method` and the path `segments` after
    /// the target's own prefix.
    pub fn parse(method: &str, segments: &[&str], url: &Url) -> Result<TargetRoute, Refusal> {
        let route = match (method, segments) {
            ("POST", ["faults"]) => TargetRoute::Faults,
            ("GET", ["audit"]) => TargetRoute::Audit,
            ("GET", ["log"]) => {
                let [source] = params(url, ["source"])?;
                let source = source
                    .ok_or_else(|| Refusal::bad_request(ErrorCode::InvalidQuery, "source is required"))?;
                return Ok(TargetRoute::Log(name(&source, ErrorCode::InvalidName)?));
            }
            _ => return TargetOp::parse(method, segments, url).map(TargetRoute::Relay),
        };
        no_query(url)?;
        Ok(route)
    }

    /// Parses a request to a target object.
    pub fn from_url(method: &str, url: &Url) -> Result<TargetRoute, Refusal> {
        TargetRoute::parse(method, &refs(&segments(url)), url)
    }

    /// The route's HTTP method.
    pub fn method(&self) -> &'static str {
        match self {
            TargetRoute::Relay(op) => op.method(),
            TargetRoute::Faults => "POST",
            TargetRoute::Log(_) | TargetRoute::Audit => "GET",
        }
    }

    /// The route's path in the target object's protocol, with its query.
    pub fn path(&self) -> String {
        match self {
            TargetRoute::Relay(op) => op.path(),
            TargetRoute::Faults => "/faults".into(),
            TargetRoute::Log(s) => format!("/log?source={s}"),
            TargetRoute::Audit => "/audit".into(),
        }
    }
}
