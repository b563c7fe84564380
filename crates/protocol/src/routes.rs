//! The relay's own protocol: every operation of the source and target
//! Durable Objects' `fetch`, parsed from a request line
//! ([`SourceOp::from_url`], [`TargetOp::from_url`]) and built back
//! ([`SourceOp::path`], [`TargetOp::path`]). The operations and their
//! parse and path are declared in [`crate::operations`]; this module is
//! their door for callers. Pure (a parsed [`Url`] in, a typed operation or
//! a 4xx [`Refusal`] out), so it is fuzzed natively.
//!
//! A Worker that serves more operations than the relay's (the reference
//! Worker's front door, directory, console and test switches) parses its
//! own first and hands the rest here, with the same request-line pieces
//! ([`segments`], [`params`], [`name`], [`limit`], [`no_query`],
//! [`no_route`], from [`crate::line`] and re-exported here).

#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]
#![deny(clippy::unreachable, clippy::todo, clippy::unimplemented)]

use crate::core::ErrorCode;
use url::Url;

use crate::core::{Name, SourceId};
use crate::refusal::Refusal;

pub use crate::operations::{SourceOp, TargetOp};

#[cfg(test)]
use crate::core::{Layout, MAX_TARGETS_PER_PAGE};
pub use crate::line::{limit, name, no_query, no_route, params, refs, segments};

/// Where a page of a target's watermarks starts: after this source's row.
/// Written `source` for a source's legacy row (no id) and `source/source_id`
/// otherwise: `/` is in neither alphabet, so the text parses back exactly.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WatermarkCursor {
    /// The source's name.
    pub source: Name,
    /// Its id; `None` for its legacy row, which sorts first.
    pub source_id: Option<SourceId>,
}

impl WatermarkCursor {
    /// Parses a cursor as a page's `next` writes it; a bad one is refused
    /// with `invalid_query` naming `after`.
    pub fn parse(text: &str) -> Result<WatermarkCursor, Refusal> {
        let bad = |e: String| Refusal::bad_request(ErrorCode::InvalidQuery, format!("after {text:?}: {e}"));
        let (source, id) = match text.split_once('/') {
            Some((source, id)) => (source, Some(SourceId::new(id).map_err(|e| bad(e.to_string()))?)),
            None => (text, None),
        };
        Ok(WatermarkCursor { source: Name::new(source).map_err(|e| bad(e.to_string()))?, source_id: id })
    }
}

impl std::fmt::Display for WatermarkCursor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.source_id {
            Some(id) => write!(f, "{}/{}", self.source, id.as_str()),
            None => write!(f, "{}", self.source),
        }
    }
}

impl SourceOp {
    /// Parses a request to a source Durable Object.
    pub fn from_url(method: &str, url: &Url) -> Result<SourceOp, Refusal> {
        SourceOp::parse(method, &refs(&segments(url)), url)
    }

    /// The operation's HTTP method, from [`crate::operations`].
    pub fn method(&self) -> &'static str {
        self.operation().method
    }
}

impl TargetOp {
    /// Parses a request to a target Durable Object.
    pub fn from_url(method: &str, url: &Url) -> Result<TargetOp, Refusal> {
        TargetOp::parse(method, &refs(&segments(url)), url)
    }

    /// The operation's HTTP method, from [`crate::operations`].
    pub fn method(&self) -> &'static str {
        self.operation().method
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::{MAX_PARTITIONS, SEQ_MAX};

    fn url(path: &str) -> Url {
        Url::parse(&format!("https://relay{path}")).unwrap()
    }

    fn source(method: &str, path: &str) -> Result<SourceOp, Refusal> {
        SourceOp::from_url(method, &url(path))
    }

    fn target(method: &str, path: &str) -> Result<TargetOp, Refusal> {
        TargetOp::from_url(method, &url(path))
    }

    #[test]
    fn bad_request_lines_get_their_codes() {
        let code = |r: Result<SourceOp, Refusal>| r.unwrap_err().code;
        assert_eq!(code(source("GET", "/enqueue")), "no_route");
        assert_eq!(code(source("POST", "/faults")), "no_route", "test switches are not the relay's");
        assert_eq!(code(source("GET", "/delivered-through/9007199254740992")), "invalid_seq");
        assert_eq!(code(source("GET", "/parked/t?after=9007199254740992")), "invalid_query");
        assert_eq!(code(source("GET", "/parked/t?limit=501")), "invalid_limit");
        assert_eq!(code(source("GET", "/parked/t?limit=1&limit=2")), "invalid_query");
        assert_eq!(code(source("GET", "/status?x=1")), "invalid_query");
        assert_eq!(target("GET", "/keys?limit=0").unwrap_err().code, "invalid_limit");
        let long = format!("/keys?after={}", "k".repeat(513));
        assert_eq!(target("GET", &long).unwrap_err().code, "invalid_query");
        assert_eq!(target("GET", "/log?source=a").unwrap_err().code, "no_route");
    }

    #[test]
    fn watermark_pages_take_a_cursor_and_a_limit_and_refuse_bad_ones() {
        let id = "ab".repeat(32);
        let op = target("GET", &format!("/watermarks?after=s:1/{id}&limit=500")).unwrap();
        let TargetOp::Watermarks { after: Some(after), limit: 500 } = &op else { panic!("{op:?}") };
        assert_eq!((after.source.as_str(), after.to_string()), ("s:1", format!("s:1/{id}")));
        assert_eq!(target("GET", &op.path()).unwrap(), op, "the path parses back");
        let op = target("GET", "/watermarks?after=s").unwrap();
        assert_eq!(
            op,
            TargetOp::Watermarks { after: Some(WatermarkCursor::parse("s").unwrap()), limit: 500 }
        );
        assert_eq!(target("GET", "/watermarks").unwrap(), TargetOp::Watermarks { after: None, limit: 500 });
        let error = |path: &str| {
            let e = target("GET", path).unwrap_err();
            (e.status, e.code.as_str().to_owned(), e.message)
        };
        let (status, code, message) = error("/watermarks?limit=501");
        assert_eq!((status, code.as_str()), (400, "invalid_limit"));
        assert!(message.contains("limit must be 1..=500"), "{message}");
        assert_eq!(error("/watermarks?limit=0").1, "invalid_limit", "one below the edge");
        for bad in ["a%20b", "s/xyz", "s/", "/ab", ""] {
            let (_, code, message) = error(&format!("/watermarks?after={bad}"));
            assert_eq!(code, "invalid_query", "{bad:?}");
            assert!(message.starts_with("after "), "{message}");
        }
        assert_eq!(error("/watermarks?page=2").1, "invalid_query");
    }

    #[test]
    fn percent_encoded_names_in_the_path_are_the_names_they_spell() {
        let s = |n: &str| Name::new(n).unwrap();
        assert_eq!(source("POST", "/parked/cust%3a9/redrive").unwrap(), SourceOp::Redrive(s("cust:9")));
        assert_eq!(
            source("GET", "/parked/cust%3A9?after=0&limit=5").unwrap(),
            SourceOp::ParkedRows { target: s("cust:9"), after: 0, limit: 5 }
        );
        let code = |p: &str| source("POST", p).unwrap_err().code;
        assert_eq!(code("/parked/a%2Fb/redrive"), "invalid_target", "a decoded '/' is no name");
        let get = |p: &str| source("GET", p);
        let max = MAX_TARGETS_PER_PAGE;
        assert_eq!(
            get("/parked").unwrap(),
            SourceOp::ParkedTargets { after: None, limit: max },
            "default: a full page"
        );
        assert_eq!(
            get(&format!("/parked?limit={max}")).unwrap(),
            SourceOp::ParkedTargets { after: None, limit: max }
        );
        assert_eq!(get(&format!("/parked?limit={}", max + 1)).unwrap_err().code, "invalid_limit");
        assert_eq!(get("/parked?limit=0").unwrap_err().code, "invalid_limit");
        assert_eq!(get("/parked?after=a%20b").unwrap_err().code, "invalid_query", "after is a target name");
        assert_eq!(get("/parked?page=2").unwrap_err().code, "invalid_query");
        assert_eq!(code("/parked/a%zz/redrive"), "invalid_target", "a bad escape stays as sent");
        assert_eq!(code("/parked/a%ff/redrive"), "invalid_target", "escapes that are not UTF-8");
    }

    #[test]
    fn an_object_is_asked_how_it_settles_under_a_count_or_plain() {
        let url = |p: &str| Url::parse(&format!("https://relay{p}")).unwrap();
        let op = |p: &str| SourceOp::from_url("GET", &url(p));
        assert_eq!(op("/settling/3").unwrap(), SourceOp::Settling(Layout::Count(3)));
        assert_eq!(op("/settling/plain").unwrap(), SourceOp::Settling(Layout::Plain));
        assert!(op(&format!("/settling/{MAX_PARTITIONS}")).is_ok());
        for bad in
            [format!("/settling/{}", MAX_PARTITIONS + 1), "/settling/0".into(), "/settling/Plain".into()]
        {
            assert_eq!(op(&bad).unwrap_err().code, "invalid_partition", "{bad}");
        }
    }

    #[test]
    fn an_operation_survives_its_trip_to_the_object() {
        let ops = [
            SourceOp::DeliveredThrough(SEQ_MAX),
            SourceOp::ParkedRows { target: Name::new("t").unwrap(), after: 7, limit: 1 },
            SourceOp::ParkedTargets { after: None, limit: MAX_TARGETS_PER_PAGE },
            SourceOp::ParkedTargets { after: Some(Name::new("cust:9").unwrap()), limit: 1 },
            SourceOp::Redrive(Name::new("t").unwrap()),
            SourceOp::Settling(Layout::Plain),
            SourceOp::Settling(Layout::Count(MAX_PARTITIONS)),
            SourceOp::Seal,
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
