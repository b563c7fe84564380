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

#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]
#![deny(clippy::unreachable, clippy::todo, clippy::unimplemented)]

use durable_relay::core::{ErrorCode, Name, MAX_SOURCES_PER_PAGE};
use durable_relay::protocol::Reach;
use durable_relay::protocol::Refusal;
use durable_relay::routes::{limit, name, no_query, no_route, params, refs, segments, SourceOp, TargetOp};
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

/// What a request asks of the source directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DirectoryOp {
    /// `POST /sources/{source}`: list a source (idempotent).
    Register(Name),
    /// `GET /sources?after=&limit=`: a page of sources in name order.
    List {
        /// Sources after this name (none: from the first).
        after: Option<Name>,
        /// At most this many, 1..=[`MAX_SOURCES_PER_PAGE`].
        limit: u32,
    },
    /// `DELETE /sources/{source}`: unlist a source (idempotent).
    Retire(Name),
    /// `POST /sweep?limit=`: the next page of the scheduled sweep's round,
    /// after the cursor the directory keeps, which it advances (and wraps
    /// at the end) in the same call.
    Sweep {
        /// At most this many, 1..=[`MAX_SOURCES_PER_PAGE`].
        limit: u32,
    },
}

/// A static file of the operator console (served without the token: it
/// holds no data, and every API call it makes sends the token).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConsoleAsset {
    /// `GET /`: the page.
    Page,
    /// `GET /console.js`.
    Script,
    /// `GET /console.css`.
    Style,
}

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

/// A directory page's bounds from the query.
fn page(url: &Url) -> Result<(Option<Name>, u32), Refusal> {
    let [after, limit_text] = params(url, ["after", "limit"])?;
    let after = after.filter(|a| !a.is_empty()).map(|a| name(&a, ErrorCode::InvalidQuery)).transpose()?;
    Ok((after, limit(limit_text, MAX_SOURCES_PER_PAGE)?))
}

impl DirectoryOp {
    /// Parses a request to the directory Durable Object.
    pub fn from_url(method: &str, url: &Url) -> Result<DirectoryOp, Refusal> {
        let segs = segments(url);
        let op = match (method, refs(&segs).as_slice()) {
            ("GET", ["sources"]) => {
                let (after, limit) = page(url)?;
                return Ok(DirectoryOp::List { after, limit });
            }
            ("POST", ["sources", s]) => DirectoryOp::Register(name(s, ErrorCode::InvalidName)?),
            ("DELETE", ["sources", s]) => DirectoryOp::Retire(name(s, ErrorCode::InvalidName)?),
            ("POST", ["sweep"]) => {
                let [limit_text] = params(url, ["limit"])?;
                return Ok(DirectoryOp::Sweep { limit: limit(limit_text, MAX_SOURCES_PER_PAGE)? });
            }
            _ => return Err(no_route(method, url)),
        };
        no_query(url)?;
        Ok(op)
    }

    /// The method and path (with query) of the operation in the directory's protocol.
    pub fn request(&self) -> (&'static str, String) {
        match self {
            DirectoryOp::Register(s) => ("POST", format!("/sources/{s}")),
            DirectoryOp::Retire(s) => ("DELETE", format!("/sources/{s}")),
            DirectoryOp::List { after, limit } => {
                let after = after.as_ref().map_or("", |a| a.as_str());
                ("GET", format!("/sources?after={after}&limit={limit}"))
            }
            DirectoryOp::Sweep { limit } => ("POST", format!("/sweep?limit={limit}")),
        }
    }
}

impl ConsoleAsset {
    /// The console file a request line asks for, if it is one.
    pub fn from_url(method: &str, url: &Url) -> Option<ConsoleAsset> {
        if method != "GET" || url.query().is_some() {
            return None;
        }
        match url.path() {
            "/" => Some(ConsoleAsset::Page),
            "/console.js" => Some(ConsoleAsset::Script),
            "/console.css" => Some(ConsoleAsset::Style),
            _ => None,
        }
    }
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
mod tests {
    use super::*;
    use durable_relay::core::MAX_KEYS_PER_PAGE;

    fn front(method: &str, path: &str) -> Result<FrontRoute, Refusal> {
        FrontRoute::parse(method, &Url::parse(&format!("https://relay.example{path}")).unwrap())
    }

    fn code(method: &str, path: &str) -> ErrorCode {
        front(method, path).unwrap_err().code
    }

    fn s(n: &str) -> Name {
        Name::new(n).unwrap()
    }

    fn relay(op: SourceOp) -> SourceRoute {
        SourceRoute::Relay(op)
    }

    #[test]
    fn front_routes_parse_to_typed_operations() {
        assert_eq!(front("GET", "/v1/health").unwrap(), FrontRoute::Health);
        assert_eq!(
            front("POST", "/v1/sources/a/enqueue").unwrap(),
            FrontRoute::Source(s("a"), relay(SourceOp::Enqueue))
        );
        assert_eq!(
            front("GET", "/v1/sources/a/parked/t?limit=5").unwrap(),
            FrontRoute::Source(s("a"), relay(SourceOp::ParkedRows { target: s("t"), after: 0, limit: 5 }))
        );
        assert_eq!(
            front("GET", "/v1/targets/t/keys?prefix=a%20b").unwrap(),
            FrontRoute::Target(
                s("t"),
                TargetRoute::Relay(TargetOp::Keys {
                    prefix: "a b".into(),
                    after: String::new(),
                    limit: MAX_KEYS_PER_PAGE
                })
            )
        );
        assert_eq!(
            front("POST", "/v1/sources/a/faults").unwrap(),
            FrontRoute::Source(s("a"), SourceRoute::Faults)
        );
        assert_eq!(
            front("GET", "/v1/targets/t/log?source=a").unwrap(),
            FrontRoute::Target(s("t"), TargetRoute::Log(s("a")))
        );
    }

    #[test]
    fn the_directory_pages_at_its_limit_and_its_operations_round_trip() {
        assert_eq!(
            front("GET", "/v1/sources").unwrap(),
            FrontRoute::Sources { after: None, limit: MAX_SOURCES_PER_PAGE }
        );
        assert_eq!(
            front("GET", "/v1/sources?after=b&limit=100").unwrap(),
            FrontRoute::Sources { after: Some(s("b")), limit: 100 }
        );
        assert_eq!(code("GET", "/v1/sources?limit=101"), "invalid_limit");
        assert_eq!(code("GET", "/v1/sources?limit=0"), "invalid_limit");
        assert_eq!(code("GET", "/v1/sources?after=a%2Fb"), "invalid_query");
        assert_eq!(code("POST", "/v1/sources"), "no_route");
        assert_eq!(
            front("POST", "/v1/sources/a/retire").unwrap(),
            FrontRoute::Source(s("a"), SourceRoute::Retire)
        );
        assert_eq!(
            front("GET", "/v1/sources/a/alarms").unwrap(),
            FrontRoute::Source(s("a"), SourceRoute::Alarms)
        );
        for op in [
            DirectoryOp::Register(s("a")),
            DirectoryOp::Retire(s("a")),
            DirectoryOp::List { after: None, limit: 1 },
            DirectoryOp::List { after: Some(s("x:y")), limit: 100 },
        ] {
            let (method, path) = op.request();
            let url = Url::parse(&format!("https://d{path}")).unwrap();
            assert_eq!(DirectoryOp::from_url(method, &url).unwrap(), op);
        }
    }

    /// Every front-door route, by request line, with the scope it needs.
    const SCOPES: &[(&str, &str, Scope)] = &[
        ("POST", "/v1/sources/a/enqueue", Scope::Producer),
        ("GET", "/v1/health", Scope::Reader),
        ("GET", "/v1/sources?limit=5", Scope::Reader),
        ("GET", "/v1/sources/a/status", Scope::Reader),
        ("GET", "/v1/sources/a/watermark", Scope::Reader),
        ("GET", "/v1/sources/a/delivered-through/7", Scope::Reader),
        ("GET", "/v1/sources/a/parked", Scope::Reader),
        ("GET", "/v1/sources/a/parked/t?after=3", Scope::Reader),
        ("GET", "/v1/sources/a/alarms", Scope::Reader),
        ("GET", "/v1/targets/t/status", Scope::Reader),
        ("GET", "/v1/targets/t/keys?prefix=k", Scope::Reader),
        ("GET", "/v1/targets/t/watermarks", Scope::Reader),
        ("POST", "/v1/sources/a/parked/t/redrive", Scope::Operator),
        ("POST", "/v1/sources/a/parked/t/discard", Scope::Operator),
        ("POST", "/v1/sources/a/rearm", Scope::Operator),
        ("POST", "/v1/sources/a/retire", Scope::Operator),
        ("DELETE", "/v1/targets/t/watermarks/a", Scope::Operator),
        ("POST", "/v1/sources/a/faults", Scope::Operator),
        ("GET", "/v1/sources/a/audit", Scope::Operator),
        ("POST", "/v1/sources/a/conformance", Scope::Operator),
        ("POST", "/v1/targets/t/faults", Scope::Operator),
        ("GET", "/v1/targets/t/log?source=a", Scope::Operator),
        ("GET", "/v1/targets/t/audit", Scope::Operator),
    ];

    #[test]
    fn every_front_route_needs_its_scope() {
        for (method, path, scope) in SCOPES {
            assert_eq!(front(method, path).unwrap().scope(), *scope, "{method} {path}");
        }
    }

    #[test]
    fn the_scope_table_covers_every_route_variant() {
        // One request line per variant: a variant added without a line here
        // leaves its name out of this set.
        use std::mem::discriminant as d;
        let variant = |route: FrontRoute| match route {
            FrontRoute::Source(_, SourceRoute::Relay(op)) => format!("source op {:?}", d(&op)),
            FrontRoute::Source(_, route) => format!("source route {:?}", d(&route)),
            FrontRoute::Target(_, TargetRoute::Relay(op)) => format!("target op {:?}", d(&op)),
            FrontRoute::Target(_, route) => format!("target route {:?}", d(&route)),
            other => format!("{:?}", d(&other)),
        };
        let variants: std::collections::BTreeSet<String> =
            SCOPES.iter().map(|(m, p, _)| variant(front(m, p).unwrap())).collect();
        assert_eq!(variants.len(), SCOPES.len(), "each line a different route: {variants:?}");
        let sources = SCOPES.iter().filter(|(_, p, _)| p.starts_with("/v1/sources/a/")).count();
        let targets = SCOPES.iter().filter(|(_, p, _)| p.starts_with("/v1/targets/")).count();
        let public = |table: &[durable_relay::protocol::Operation]| {
            table.iter().filter(|o| o.reach == Reach::Public).count()
        };
        // The source's own routes beyond the protocol: alarms, retire, faults, audit, conformance.
        assert_eq!(sources, public(durable_relay::protocol::SOURCE_OPERATIONS) + 5);
        // The target's own: faults, log, audit.
        assert_eq!(targets, public(durable_relay::protocol::TARGET_OPERATIONS) + 3);
    }

    #[test]
    fn the_steps_the_front_door_refuses_still_need_an_operator() {
        let layout = durable_relay::core::Layout::Count(2);
        let steps = [
            SourceOp::Prepare,
            SourceOp::Activate,
            SourceOp::RecordKey,
            SourceOp::Seal,
            SourceOp::PlainKey,
            SourceOp::Settling(layout),
        ];
        for op in steps {
            assert_eq!(FrontRoute::Source(s("a"), relay(op)).scope(), Scope::Operator);
        }
        assert_eq!(FrontRoute::Target(s("t"), TargetRoute::Relay(TargetOp::Apply)).scope(), Scope::Operator);
    }

    #[test]
    fn an_operator_reads_but_neither_enqueues_nor_lends_its_rights() {
        use Scope::{Operator, Producer, Reader};
        let covered: Vec<(Scope, Scope)> = Scope::ALL
            .iter()
            .flat_map(|held| Scope::ALL.iter().map(move |needed| (*held, *needed)))
            .filter(|(held, needed)| held.covers(*needed))
            .collect();
        assert_eq!(
            covered,
            vec![(Producer, Producer), (Reader, Reader), (Operator, Reader), (Operator, Operator)]
        );
    }

    #[test]
    fn only_the_exact_console_files_are_open() {
        let asset =
            |m: &str, p: &str| ConsoleAsset::from_url(m, &Url::parse(&format!("https://r{p}")).unwrap());
        assert_eq!(asset("GET", "/"), Some(ConsoleAsset::Page));
        assert_eq!(asset("GET", "/console.js"), Some(ConsoleAsset::Script));
        assert_eq!(asset("GET", "/console.css"), Some(ConsoleAsset::Style));
        assert_eq!(asset("POST", "/"), None);
        assert_eq!(asset("GET", "/?token=x"), None);
        assert_eq!(asset("GET", "/console.js/x"), None);
        assert_eq!(asset("GET", "/v1/health"), None);
    }

    #[test]
    fn bad_request_lines_get_their_codes() {
        assert_eq!(code("GET", "/v1/sources/a/enqueue"), "no_route");
        assert_eq!(code("POST", "/v1/targets/t/apply"), "no_route", "apply is for sources only");
        assert_eq!(code("POST", "/v1/sources/a:1/adopt"), "no_route", "adoption is for routers only");
        assert_eq!(code("POST", "/v1/sources/a:1/claim"), "no_route", "claims are for routers only");
        assert_eq!(code("GET", "/v1/sources/a%2Fb/status"), "invalid_name");
        assert_eq!(code("GET", "/v1/sources/a%zz/status"), "invalid_name", "a bad escape stays as sent");
        assert_eq!(code("GET", "/v1/sources/a/delivered-through/9007199254740992"), "invalid_seq");
        assert_eq!(code("GET", "/v1/sources/a/alarms?x=1"), "invalid_query");
        assert_eq!(code("POST", "/v1/sources/a/faults?x=1"), "invalid_query");
        assert_eq!(code("GET", "/v1/targets/t/log"), "invalid_query", "the log needs its source");
        assert_eq!(code("GET", "/v1/targets/t/log?source=a%2Fb"), "invalid_name");
        assert_eq!(
            front("GET", "/v1/sources/x%3A1/status").unwrap(),
            FrontRoute::Source(s("x:1"), relay(SourceOp::Status))
        );
    }

    #[test]
    fn every_route_survives_its_trip_to_the_object() {
        let sources = [
            SourceRoute::Alarms,
            SourceRoute::Retire,
            SourceRoute::Faults,
            SourceRoute::Audit,
            SourceRoute::Conformance,
            relay(SourceOp::Status),
        ];
        for route in sources {
            let url = Url::parse(&format!("https://relay{}", route.path())).unwrap();
            assert_eq!(SourceRoute::from_url(route.method(), &url).unwrap(), route);
        }
        let targets = [
            TargetRoute::Faults,
            TargetRoute::Log(s("a:b")),
            TargetRoute::Audit,
            TargetRoute::Relay(TargetOp::Watermarks { after: None, limit: 3 }),
            TargetRoute::Relay(TargetOp::Watermarks {
                after: Some(durable_relay::routes::WatermarkCursor::parse("a:b").unwrap()),
                limit: 500,
            }),
        ];
        for route in targets {
            let url = Url::parse(&format!("https://relay{}", route.path())).unwrap();
            assert_eq!(TargetRoute::from_url(route.method(), &url).unwrap(), route);
        }
    }
}
