//! The operator console's static files ([`ConsoleAsset`]): only the exact
//! request lines that name one.

#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]
#![deny(clippy::unreachable, clippy::todo, clippy::unimplemented)]

use worker::Url;

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
