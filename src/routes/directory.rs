//! The source directory's protocol ([`DirectoryOp`]): listing, paging,
//! unlisting and the scheduled sweep's pages.

#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]
#![deny(clippy::unreachable, clippy::todo, clippy::unimplemented)]

use durable_relay::core::{ErrorCode, Name, MAX_SOURCES_PER_PAGE};
use durable_relay::protocol::Refusal;
use durable_relay::routes::{limit, name, no_query, no_route, params, refs, segments};
use worker::Url;

use super::page;

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
