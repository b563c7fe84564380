//! The operator's console: three static files compiled into the Worker
//! (this directory), served by the front door at `/`,
//! `/console.js` and `/console.css`. They hold no data and need no token;
//! the page asks for the token, keeps it in `sessionStorage` (this tab
//! only, never a cookie or a URL) and sends it as a bearer header on every
//! API call. No build step, no external assets, no framework.

use worker::{Headers, Response};

use crate::routes::ConsoleAsset;
use durable_relay::http::RelayError;

const PAGE: &str = include_str!("index.html");
const SCRIPT: &str = include_str!("console.js");
const STYLE: &str = include_str!("console.css");

/// Only this origin's script and style, no frames, no referrer, API calls
/// to this origin only.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; \
                   img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// Serves one console file.
pub fn serve(asset: ConsoleAsset) -> Result<Response, RelayError> {
    let internal = |e: worker::Error| RelayError::internal(e.to_string());
    let (body, kind) = match asset {
        ConsoleAsset::Page => (PAGE, "text/html; charset=utf-8"),
        ConsoleAsset::Script => (SCRIPT, "text/javascript; charset=utf-8"),
        ConsoleAsset::Style => (STYLE, "text/css; charset=utf-8"),
    };
    let headers = Headers::new();
    for (k, v) in [
        ("content-type", kind),
        ("content-security-policy", CSP),
        ("x-content-type-options", "nosniff"),
        ("referrer-policy", "no-referrer"),
        ("x-frame-options", "DENY"),
        ("cache-control", "no-store"),
    ] {
        headers.set(k, v).map_err(internal)?;
    }
    Ok(Response::ok(body).map_err(internal)?.with_headers(headers))
}
