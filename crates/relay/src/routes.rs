//! The one decode point for request lines: method, path and query of the
//! front door (`/v1/...`) and of the source and target Durable Objects'
//! `fetch` protocols. Pure (a parsed [`Url`] in, a typed operation or a 4xx
//! [`HttpError`] out), so it is fuzzed natively.
//!
//! A source's protocol path is the front door's path without its
//! `/v1/sources/{source}` prefix (and likewise for targets), so both are
//! parsed by the same [`SourceOp::parse`] and [`TargetOp::parse`]. Unknown
//! or repeated query parameters are refused; names are validated.

#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]
#![deny(clippy::unreachable, clippy::todo, clippy::unimplemented)]

use crate::core::ErrorCode;
use worker::Url;

use crate::core::{
    Name, MAX_KEYS_PER_PAGE, MAX_KEY_BYTES, MAX_PARKED_ROWS_PER_PAGE, MAX_PARTITIONS, MAX_SOURCES_PER_PAGE,
    SEQ_MAX,
};
use crate::http::HttpError;

/// What a request asks of a source.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SourceOp {
    /// `POST /enqueue`.
    Enqueue,
    /// `GET /status`.
    Status,
    /// `GET /watermark`.
    Watermark,
    /// `GET /delivered-through/{seq}`.
    DeliveredThrough(u64),
    /// `POST /faults` (test builds only).
    Faults,
    /// `GET /parked`.
    ParkedTargets,
    /// `GET /parked/{target}?after=&limit=`.
    ParkedRows {
        /// The parked target.
        target: Name,
        /// Rows after this sequence.
        after: u64,
        /// At most this many, 1..=[`MAX_PARKED_ROWS_PER_PAGE`].
        limit: u32,
    },
    /// `POST /parked/{target}/redrive`.
    Redrive(Name),
    /// `POST /parked/{target}/discard`.
    Discard(Name),
    /// `GET /audit` (test builds only): the outbox's invariants on its tables.
    Audit,
    /// `GET /alarms`: the recent alarms' figures (reference Worker).
    Alarms,
    /// `POST /retire`: leave the source directory; refused unless nothing
    /// is queued or parked (reference Worker).
    Retire,
    /// `POST /adopt` (routers only, through the DO binding): adopt a
    /// partition map, body `{"map":{...}}`.
    Adopt,
    /// `POST /claim` (routers only, through the DO binding): as the home
    /// of an idempotency key, record the content it names, body
    /// `{"key","digest","probe"}`.
    Claim,
    /// `GET /foreign-targets/{partitions}/{index}`: as partition `index` of
    /// a logical source routed over `partitions`, how many targets it holds
    /// rows for whose home is elsewhere (0 everywhere: a resize settled).
    ForeignTargets {
        /// The partition count routed to now.
        partitions: u32,
        /// This partition's index.
        index: u32,
    },
}

/// What a request asks of the source directory (reference Worker).
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

/// What a request asks of a target.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TargetOp {
    /// `POST /apply`: only sources, through the DO binding.
    Apply,
    /// `GET /status`.
    Status,
    /// `GET /keys?prefix=&after=&limit=`.
    Keys {
        /// Keys starting with this.
        prefix: String,
        /// Keys after this one.
        after: String,
        /// At most this many, 1..=[`MAX_KEYS_PER_PAGE`].
        limit: u32,
    },
    /// `GET /watermarks`.
    Watermarks,
    /// `DELETE /watermarks/{source}`.
    ForgetWatermark(Name),
    /// `POST /faults` (test builds only).
    Faults,
    /// `GET /log?source=` (test builds only).
    Log(Name),
    /// `GET /audit` (test builds only): watermarks against the apply log.
    Audit,
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
    Source(Name, SourceOp),
    /// `/v1/targets/{target}/...` (never `/apply`).
    Target(Name, TargetOp),
}

fn no_route(method: &str, url: &Url) -> HttpError {
    HttpError::new(404, ErrorCode::NoRoute, format!("no route for {method} {}", url.path()))
}

/// A path's segments, percent-decoded (`/a/b` is `["a", "b"]`; `/` is
/// `[]`). Callers that build paths with `encodeURIComponent` send `x%3A1`
/// for the name `x:1`; both spellings name the same object. A segment whose
/// escapes do not decode to UTF-8 is kept as sent, so name validation refuses
/// it for its `%`.
fn segments(url: &Url) -> Vec<String> {
    url.path().trim_start_matches('/').split('/').filter(|s| !s.is_empty()).map(percent_decode).collect()
}

/// Decodes `%XX` escapes; text without a valid escape comes back unchanged.
fn percent_decode(segment: &str) -> String {
    if !segment.contains('%') {
        return segment.to_owned();
    }
    let bytes = segment.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        let hex = |j: usize| bytes.get(j).and_then(|c| char::from(*c).to_digit(16));
        match (b, hex(i + 1), hex(i + 2)) {
            (b'%', Some(hi), Some(lo)) => {
                out.push(u8::try_from(hi * 16 + lo).unwrap_or(b'%'));
                i += 3;
            }
            _ => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).unwrap_or_else(|_| segment.to_owned())
}

/// The segments as string slices, for matching.
fn refs(segments: &[String]) -> Vec<&str> {
    segments.iter().map(String::as_str).collect()
}

/// Validates a name taken from the path.
fn name(segment: &str, code: ErrorCode) -> Result<Name, HttpError> {
    Name::new(segment).map_err(|e| HttpError::bad_request(code, format!("{segment:?}: {e}")))
}

/// The query's parameters, each of `allowed` at most once; anything else is
/// refused. Returns values in the order of `allowed`.
fn params<const N: usize>(url: &Url, allowed: [&'static str; N]) -> Result<[Option<String>; N], HttpError> {
    let mut out: [Option<String>; N] = std::array::from_fn(|_| None);
    for (k, v) in url.query_pairs() {
        let Some(i) = allowed.iter().position(|a| *a == k) else {
            return Err(HttpError::bad_request(
                ErrorCode::InvalidQuery,
                format!("unknown query parameter {k:?}"),
            ));
        };
        let slot = out.get_mut(i).ok_or_else(|| HttpError::internal("query slot"))?;
        if slot.replace(v.into_owned()).is_some() {
            return Err(HttpError::bad_request(
                ErrorCode::InvalidQuery,
                format!("query parameter {k:?} given twice"),
            ));
        }
    }
    Ok(out)
}

/// A sequence number `0..=SEQ_MAX` from text.
fn seq(text: &str, code: ErrorCode) -> Result<u64, HttpError> {
    text.parse::<u64>()
        .ok()
        .filter(|s| *s <= SEQ_MAX)
        .ok_or_else(|| HttpError::bad_request(code, format!("{text:?} is not a sequence number 0..=2^53-1")))
}

/// A page size `1..=max`, defaulting to `max`.
fn limit(text: Option<String>, max: u32) -> Result<u32, HttpError> {
    let Some(text) = text else { return Ok(max) };
    text.parse::<u32>().ok().filter(|n| (1..=max).contains(n)).ok_or_else(|| {
        HttpError::bad_request(ErrorCode::InvalidLimit, format!("limit must be 1..={max}, got {text:?}"))
    })
}

/// A key bound for listings: at most [`MAX_KEY_BYTES`].
fn key_bound(text: Option<String>, param: &str) -> Result<String, HttpError> {
    let text = text.unwrap_or_default();
    if text.len() > MAX_KEY_BYTES as usize {
        return Err(HttpError::bad_request(
            ErrorCode::InvalidQuery,
            format!("{param} is {} bytes; keys are at most {MAX_KEY_BYTES}", text.len()),
        ));
    }
    Ok(text)
}

fn no_query(url: &Url) -> Result<(), HttpError> {
    params(url, []).map(|_| ())
}

impl SourceOp {
    /// Parses a source operation from `method` and the path `segments`
    /// after the source's own prefix.
    pub fn parse(method: &str, segments: &[&str], url: &Url) -> Result<SourceOp, HttpError> {
        let op = match (method, segments) {
            ("POST", ["enqueue"]) => SourceOp::Enqueue,
            ("GET", ["status"]) => SourceOp::Status,
            ("GET", ["watermark"]) => SourceOp::Watermark,
            ("GET", ["delivered-through", s]) => SourceOp::DeliveredThrough(seq(s, ErrorCode::InvalidSeq)?),
            ("POST", ["faults"]) => SourceOp::Faults,
            ("GET", ["parked"]) => SourceOp::ParkedTargets,
            ("GET", ["parked", t]) => {
                let target = name(t, ErrorCode::InvalidTarget)?;
                let [after, limit_text] = params(url, ["after", "limit"])?;
                let after = after.map_or(Ok(0), |a| seq(&a, ErrorCode::InvalidQuery))?;
                let limit = limit(limit_text, MAX_PARKED_ROWS_PER_PAGE)?;
                return Ok(SourceOp::ParkedRows { target, after, limit });
            }
            ("POST", ["parked", t, "redrive"]) => SourceOp::Redrive(name(t, ErrorCode::InvalidTarget)?),
            ("POST", ["parked", t, "discard"]) => SourceOp::Discard(name(t, ErrorCode::InvalidTarget)?),
            ("GET", ["audit"]) => SourceOp::Audit,
            ("GET", ["alarms"]) => SourceOp::Alarms,
            ("POST", ["retire"]) => SourceOp::Retire,
            ("POST", ["adopt"]) => SourceOp::Adopt,
            ("POST", ["claim"]) => SourceOp::Claim,
            ("GET", ["foreign-targets", n, i]) => {
                let bad = |s: &str| {
                    HttpError::bad_request(
                        ErrorCode::InvalidPartition,
                        format!("{s:?}: 1..={MAX_PARTITIONS} partitions, an index below {MAX_PARTITIONS}"),
                    )
                };
                let partitions = n.parse::<u32>().ok().filter(|v| (1..=MAX_PARTITIONS).contains(v));
                let partitions = partitions.ok_or_else(|| bad(n))?;
                // While a shrink settles, partitions past the new count still
                // hold rows: any index a map can name is asked.
                let index = i.parse::<u32>().ok().filter(|&v| v < MAX_PARTITIONS).ok_or_else(|| bad(i))?;
                SourceOp::ForeignTargets { partitions, index }
            }
            _ => return Err(no_route(method, url)),
        };
        no_query(url)?;
        Ok(op)
    }

    /// Parses a request to a source Durable Object.
    pub fn from_url(method: &str, url: &Url) -> Result<SourceOp, HttpError> {
        SourceOp::parse(method, &refs(&segments(url)), url)
    }

    /// The operation's HTTP method.
    pub fn method(&self) -> &'static str {
        match self {
            SourceOp::Enqueue
            | SourceOp::Faults
            | SourceOp::Redrive(_)
            | SourceOp::Discard(_)
            | SourceOp::Retire
            | SourceOp::Adopt
            | SourceOp::Claim => "POST",
            SourceOp::Status
            | SourceOp::Watermark
            | SourceOp::DeliveredThrough(_)
            | SourceOp::ParkedTargets
            | SourceOp::ParkedRows { .. }
            | SourceOp::Audit
            | SourceOp::Alarms
            | SourceOp::ForeignTargets { .. } => "GET",
        }
    }

    /// The operation's path in the source's protocol, with its query.
    pub fn path(&self) -> String {
        match self {
            SourceOp::Enqueue => "/enqueue".into(),
            SourceOp::Status => "/status".into(),
            SourceOp::Watermark => "/watermark".into(),
            SourceOp::DeliveredThrough(s) => format!("/delivered-through/{s}"),
            SourceOp::Faults => "/faults".into(),
            SourceOp::ParkedTargets => "/parked".into(),
            SourceOp::ParkedRows { target, after, limit } => {
                format!("/parked/{target}?after={after}&limit={limit}")
            }
            SourceOp::Redrive(t) => format!("/parked/{t}/redrive"),
            SourceOp::Discard(t) => format!("/parked/{t}/discard"),
            SourceOp::Audit => "/audit".into(),
            SourceOp::Alarms => "/alarms".into(),
            SourceOp::Retire => "/retire".into(),
            SourceOp::Adopt => "/adopt".into(),
            SourceOp::Claim => "/claim".into(),
            SourceOp::ForeignTargets { partitions, index } => {
                format!("/foreign-targets/{partitions}/{index}")
            }
        }
    }
}

/// A directory page's bounds from the query.
fn page(url: &Url) -> Result<(Option<Name>, u32), HttpError> {
    let [after, limit_text] = params(url, ["after", "limit"])?;
    let after = after.filter(|a| !a.is_empty()).map(|a| name(&a, ErrorCode::InvalidQuery)).transpose()?;
    Ok((after, limit(limit_text, MAX_SOURCES_PER_PAGE)?))
}

impl DirectoryOp {
    /// Parses a request to the directory Durable Object.
    pub fn from_url(method: &str, url: &Url) -> Result<DirectoryOp, HttpError> {
        let segs = segments(url);
        let op = match (method, refs(&segs).as_slice()) {
            ("GET", ["sources"]) => {
                let (after, limit) = page(url)?;
                return Ok(DirectoryOp::List { after, limit });
            }
            ("POST", ["sources", s]) => DirectoryOp::Register(name(s, ErrorCode::InvalidName)?),
            ("DELETE", ["sources", s]) => DirectoryOp::Retire(name(s, ErrorCode::InvalidName)?),
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

impl TargetOp {
    /// Parses a target operation from `method` and the path `segments`
    /// after the target's own prefix.
    pub fn parse(method: &str, segments: &[&str], url: &Url) -> Result<TargetOp, HttpError> {
        let op = match (method, segments) {
            ("POST", ["apply"]) => TargetOp::Apply,
            ("GET", ["status"]) => TargetOp::Status,
            ("GET", ["keys"]) => {
                let [prefix, after, limit_text] = params(url, ["prefix", "after", "limit"])?;
                return Ok(TargetOp::Keys {
                    prefix: key_bound(prefix, "prefix")?,
                    after: key_bound(after, "after")?,
                    limit: limit(limit_text, MAX_KEYS_PER_PAGE)?,
                });
            }
            ("GET", ["watermarks"]) => TargetOp::Watermarks,
            ("DELETE", ["watermarks", s]) => TargetOp::ForgetWatermark(name(s, ErrorCode::InvalidName)?),
            ("POST", ["faults"]) => TargetOp::Faults,
            ("GET", ["audit"]) => TargetOp::Audit,
            ("GET", ["log"]) => {
                let [source] = params(url, ["source"])?;
                let source = source
                    .ok_or_else(|| HttpError::bad_request(ErrorCode::InvalidQuery, "source is required"))?;
                return Ok(TargetOp::Log(name(&source, ErrorCode::InvalidName)?));
            }
            _ => return Err(no_route(method, url)),
        };
        no_query(url)?;
        Ok(op)
    }

    /// Parses a request to a target Durable Object.
    pub fn from_url(method: &str, url: &Url) -> Result<TargetOp, HttpError> {
        TargetOp::parse(method, &refs(&segments(url)), url)
    }

    /// The operation's HTTP method.
    pub fn method(&self) -> &'static str {
        match self {
            TargetOp::Apply | TargetOp::Faults => "POST",
            TargetOp::ForgetWatermark(_) => "DELETE",
            TargetOp::Status
            | TargetOp::Keys { .. }
            | TargetOp::Watermarks
            | TargetOp::Log(_)
            | TargetOp::Audit => "GET",
        }
    }

    /// The operation's path in the target's protocol, with its query.
    pub fn path(&self) -> String {
        match self {
            TargetOp::Apply => "/apply".into(),
            TargetOp::Status => "/status".into(),
            TargetOp::Keys { prefix, after, limit } => {
                let q: String = worker::Url::parse_with_params(
                    "https://relay/keys",
                    [("prefix", prefix.as_str()), ("after", after.as_str()), ("limit", &limit.to_string())],
                )
                .map(|u| u.query().unwrap_or_default().to_owned())
                .unwrap_or_default();
                format!("/keys?{q}")
            }
            TargetOp::Watermarks => "/watermarks".into(),
            TargetOp::ForgetWatermark(s) => format!("/watermarks/{s}"),
            TargetOp::Faults => "/faults".into(),
            TargetOp::Log(s) => format!("/log?source={s}"),
            TargetOp::Audit => "/audit".into(),
        }
    }
}

impl FrontRoute {
    /// Parses a front-door request.
    pub fn parse(method: &str, url: &Url) -> Result<FrontRoute, HttpError> {
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
                match SourceOp::parse(method, rest, url)? {
                    // A router's own steps: reachable only through the DO binding.
                    SourceOp::Adopt | SourceOp::Claim => Err(no_route(method, url)),
                    op => Ok(FrontRoute::Source(source, op)),
                }
            }
            ["v1", "targets", t, rest @ ..] if !rest.is_empty() => {
                let target = name(t, ErrorCode::InvalidName)?;
                match TargetOp::parse(method, rest, url)? {
                    TargetOp::Apply => Err(no_route(method, url)),
                    op => Ok(FrontRoute::Target(target, op)),
                }
            }
            _ => Err(no_route(method, url)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn front(method: &str, path: &str) -> Result<FrontRoute, HttpError> {
        FrontRoute::parse(method, &Url::parse(&format!("https://relay.example{path}")).unwrap())
    }

    fn code(method: &str, path: &str) -> ErrorCode {
        front(method, path).unwrap_err().code
    }

    #[test]
    fn front_routes_parse_to_typed_operations() {
        let s = |n: &str| Name::new(n).unwrap();
        assert_eq!(front("GET", "/v1/health").unwrap(), FrontRoute::Health);
        assert_eq!(
            front("POST", "/v1/sources/a/enqueue").unwrap(),
            FrontRoute::Source(s("a"), SourceOp::Enqueue)
        );
        assert_eq!(
            front("GET", "/v1/sources/a/parked/t?limit=5").unwrap(),
            FrontRoute::Source(s("a"), SourceOp::ParkedRows { target: s("t"), after: 0, limit: 5 })
        );
        assert_eq!(
            front("GET", "/v1/targets/t/keys?prefix=a%20b").unwrap(),
            FrontRoute::Target(
                s("t"),
                TargetOp::Keys { prefix: "a b".into(), after: String::new(), limit: MAX_KEYS_PER_PAGE }
            )
        );
    }

    #[test]
    fn the_directory_pages_at_its_limit_and_its_operations_round_trip() {
        let s = |n: &str| Name::new(n).unwrap();
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
            FrontRoute::Source(s("a"), SourceOp::Retire)
        );
        assert_eq!(
            front("GET", "/v1/sources/a/alarms").unwrap(),
            FrontRoute::Source(s("a"), SourceOp::Alarms)
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
        assert_eq!(code("GET", "/v1/sources/a/delivered-through/9007199254740992"), "invalid_seq");
        assert_eq!(code("GET", "/v1/sources/a/parked/t?after=9007199254740992"), "invalid_query");
        assert_eq!(code("GET", "/v1/sources/a/parked/t?limit=501"), "invalid_limit");
        assert_eq!(code("GET", "/v1/sources/a/parked/t?limit=1&limit=2"), "invalid_query");
        assert_eq!(code("GET", "/v1/sources/a/status?x=1"), "invalid_query");
        assert_eq!(code("GET", "/v1/targets/t/keys?limit=0"), "invalid_limit");
        assert_eq!(code("GET", &format!("/v1/targets/t/keys?after={}", "k".repeat(513))), "invalid_query");
    }

    #[test]
    fn percent_encoded_names_in_the_path_are_the_names_they_spell() {
        let s = |n: &str| Name::new(n).unwrap();
        assert_eq!(
            front("GET", "/v1/sources/x%3A1/status").unwrap(),
            FrontRoute::Source(s("x:1"), SourceOp::Status)
        );
        assert_eq!(
            front("POST", "/v1/sources/orders/parked/cust%3a9/redrive").unwrap(),
            FrontRoute::Source(s("orders"), SourceOp::Redrive(s("cust:9")))
        );
        let url = Url::parse("https://relay/parked/cust%3A9?after=0&limit=5").unwrap();
        assert_eq!(
            SourceOp::from_url("GET", &url).unwrap(),
            SourceOp::ParkedRows { target: s("cust:9"), after: 0, limit: 5 }
        );
        assert_eq!(code("GET", "/v1/sources/a%2Fb/status"), "invalid_name", "a decoded '/' is no name");
        assert_eq!(code("GET", "/v1/sources/a%zz/status"), "invalid_name", "a bad escape stays as sent");
        assert_eq!(code("GET", "/v1/sources/a%ff/status"), "invalid_name", "escapes that are not UTF-8");
        assert_eq!(percent_decode("%41%"), "A%");
        assert_eq!(percent_decode("%4"), "%4");
    }

    #[test]
    fn a_shrinking_source_is_asked_about_partitions_past_its_new_count() {
        let url = |p: &str| Url::parse(&format!("https://relay{p}")).unwrap();
        assert_eq!(
            SourceOp::from_url("GET", &url("/foreign-targets/3/3")).unwrap(),
            SourceOp::ForeignTargets { partitions: 3, index: 3 }
        );
        let last = format!("/foreign-targets/1/{}", MAX_PARTITIONS - 1);
        assert!(SourceOp::from_url("GET", &url(&last)).is_ok());
        let past = format!("/foreign-targets/1/{MAX_PARTITIONS}");
        assert_eq!(SourceOp::from_url("GET", &url(&past)).unwrap_err().code, "invalid_partition");
    }

    #[test]
    fn an_operation_survives_its_trip_to_the_object() {
        let ops = [
            SourceOp::DeliveredThrough(SEQ_MAX),
            SourceOp::ParkedRows { target: Name::new("t").unwrap(), after: 7, limit: 1 },
            SourceOp::Redrive(Name::new("t").unwrap()),
        ];
        for op in ops {
            let url = Url::parse(&format!("https://relay{}", op.path())).unwrap();
            assert_eq!(SourceOp::from_url(op.method(), &url).unwrap(), op);
        }
        let keys = TargetOp::Keys { prefix: "a&b=c %".into(), after: "é".into(), limit: 3 };
        let url = Url::parse(&format!("https://relay{}", keys.path())).unwrap();
        assert_eq!(TargetOp::from_url("GET", &url).unwrap(), keys);
    }
}
