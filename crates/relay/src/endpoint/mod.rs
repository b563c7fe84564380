//! HTTPS endpoints as targets: the operator's table of them
//! (`RELAY_ENDPOINTS`, a variable or a secret), read and checked in full
//! before anything is sent, the signature each request carries
//! ([`sign`]), and what an endpoint's answer means to the fire
//! ([`outcome_of`]). Pure, so tested natively; the fetch that sends a row
//! is [`crate::durable::endpoint`].
//!
//! A producer names an endpoint (`endpoint:<name>`), never a URL: no row
//! can make the relay fetch an address the operator did not configure.

pub mod sign;

use std::collections::{BTreeMap, BTreeSet};

use serde::Deserialize;

use crate::core::{
    CallOutcome, Failure, Name, ENDPOINT_PREFIX, MAX_CALL_TIMEOUT_MS, MAX_RETRY_AFTER_MS, MIN_CALL_TIMEOUT_MS,
};
use crate::vars::ConfigError;
pub use sign::{batch_id, message_id, parse_secret, signature, signatures, SecretError, SigningKey};

/// The variable that holds the endpoint table.
pub const ENDPOINTS_VAR: &str = "RELAY_ENDPOINTS";

/// Most endpoints one Worker configures: each is checked whenever the
/// configuration is read, and a table this size already fits the platform's
/// 5 KB per variable only with short entries.
pub const MAX_ENDPOINTS: u32 = 64;

/// Most bytes of an endpoint's URL.
pub const MAX_ENDPOINT_URL_BYTES: u32 = 2_048;

/// Most extra headers an endpoint's requests carry.
pub const MAX_ENDPOINT_HEADERS: u32 = 16;

/// Most bytes of one extra header, name and value together.
pub const MAX_ENDPOINT_HEADER_BYTES: u32 = 1_024;

/// Most secrets one endpoint signs with at once: the new one and the old
/// one while its receivers move over (each request then carries a
/// signature by each, and a receiver that knows either accepts it).
pub const MAX_ENDPOINT_SECRETS: u32 = 2;

/// Headers the relay writes itself, which the table may not set (nor any
/// `webhook-` header): a receiver must be able to trust them.
const RESERVED_HEADERS: [&str; 5] = ["content-type", "content-length", "host", "traceparent", "user-agent"];

/// One configured endpoint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    /// Where rows are POSTed. Invariant: `https` (or `http` outside
    /// production), no credentials, at most [`MAX_ENDPOINT_URL_BYTES`].
    pub url: String,
    /// The signing keys, each request signed by every one (their `Debug`
    /// is redacted). Invariant: 1..=[`MAX_ENDPOINT_SECRETS`].
    pub keys: Vec<SigningKey>,
    /// How long one request may take before it counts as failed and is
    /// aborted, ms.
    pub timeout_ms: u64,
    /// Extra headers, lower-cased names. Invariant: none reserved.
    pub headers: Vec<(String, String)>,
    /// Whether a request carries many rows (a JSON array of them, up to the
    /// relay's rows per call) instead of one: fewer requests for a busy
    /// endpoint, at the cost of a receiver that deduplicates per row.
    pub batch: bool,
}

/// The configured endpoints by name.
pub type Endpoints = BTreeMap<String, Endpoint>;

/// One entry as written in the table.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    url: String,
    #[serde(default)]
    secret: Option<String>,
    #[serde(default)]
    secret_var: Option<String>,
    #[serde(default)]
    timeout_ms: Option<u64>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    #[serde(default)]
    batch: bool,
}

/// Reads and checks `RELAY_ENDPOINTS` through `get`; `timeout_ms` is the
/// relay's call timeout, the default of an entry that sets none.
pub fn endpoints(get: &impl Fn(&str) -> Option<String>, timeout_ms: u64) -> Result<Endpoints, ConfigError> {
    let bad = |message: String| ConfigError { var: ENDPOINTS_VAR, message };
    let Some(text) = get(ENDPOINTS_VAR).filter(|t| !t.trim().is_empty()) else { return Ok(Endpoints::new()) };
    let entries: BTreeMap<String, Entry> =
        serde_json::from_str(&text).map_err(|e| bad(format!("not an object of endpoints: {e}")))?;
    if entries.len() > MAX_ENDPOINTS as usize {
        return Err(bad(format!("{} endpoints; at most {MAX_ENDPOINTS}", entries.len())));
    }
    let production = get("RELAY_ENV").is_none_or(|e| e.trim() == "production");
    entries
        .into_iter()
        .map(|(name, e)| {
            let endpoint =
                entry(get, &name, e, timeout_ms, production).map_err(|m| bad(format!("{name}: {m}")))?;
            Ok((name, endpoint))
        })
        .collect()
}

/// One entry, checked.
fn entry(
    get: &impl Fn(&str) -> Option<String>,
    name: &str,
    e: Entry,
    default_timeout_ms: u64,
    production: bool,
) -> Result<Endpoint, String> {
    if name.is_empty() {
        return Err("an endpoint needs a name".into());
    }
    Name::new(format!("{ENDPOINT_PREFIX}{name}"))
        .map_err(|e| format!("as a target name, {ENDPOINT_PREFIX}{name}: {e}"))?;
    let url = checked_url(&e.url, production)?;
    let secret = match (e.secret, e.secret_var) {
        (Some(s), None) => s,
        (None, Some(var)) => get(&var).ok_or_else(|| format!("secret_var {var:?} is not set"))?,
        _ => return Err("set exactly one of secret and secret_var".into()),
    };
    let keys = checked_secrets(&secret)?;
    let timeout_ms = e.timeout_ms.unwrap_or(default_timeout_ms);
    if !(MIN_CALL_TIMEOUT_MS..=MAX_CALL_TIMEOUT_MS).contains(&timeout_ms) {
        return Err(format!(
            "timeout_ms must be within {MIN_CALL_TIMEOUT_MS}..={MAX_CALL_TIMEOUT_MS}, got {timeout_ms}"
        ));
    }
    Ok(Endpoint { url, keys, timeout_ms, headers: checked_headers(e.headers)?, batch: e.batch })
}

/// The secrets of `text`, separated by spaces: one, or while it is being
/// rotated the new and the old, at most [`MAX_ENDPOINT_SECRETS`].
fn checked_secrets(text: &str) -> Result<Vec<SigningKey>, String> {
    let secrets: Vec<&str> = text.split_whitespace().collect();
    if secrets.is_empty() || secrets.len() > MAX_ENDPOINT_SECRETS as usize {
        return Err(format!(
            "{} secrets; set 1, or {MAX_ENDPOINT_SECRETS} separated by a space while rotating",
            secrets.len()
        ));
    }
    secrets.into_iter().map(|s| parse_secret(s).map_err(|e| e.to_string())).collect()
}

/// The URL, if the relay may send to it: `https` (`http` too outside
/// production), a host that is a name in production (Workers cannot fetch
/// an IP address there), no credentials.
fn checked_url(text: &str, production: bool) -> Result<String, String> {
    if text.len() > MAX_ENDPOINT_URL_BYTES as usize {
        return Err(format!("url is {} bytes; at most {MAX_ENDPOINT_URL_BYTES}", text.len()));
    }
    let url = url::Url::parse(text).map_err(|e| format!("url {text:?}: {e}"))?;
    match (url.scheme(), production) {
        ("https", _) | ("http", false) => {}
        (scheme, true) => return Err(format!("url scheme {scheme:?}: endpoints are https")),
        (scheme, false) => {
            return Err(format!("url scheme {scheme:?}: endpoints are https (or http outside production)"))
        }
    }
    match url.host() {
        None => return Err("url has no host".into()),
        Some(url::Host::Domain(_)) => {}
        Some(_) if production => {
            return Err("url names an IP address, which Workers cannot fetch; use a host name".into())
        }
        Some(_) => {}
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err("url carries credentials; put them in headers".into());
    }
    Ok(url.into())
}

/// The extra headers, lower-cased, if each is a valid header none of the
/// relay's own.
fn checked_headers(headers: BTreeMap<String, String>) -> Result<Vec<(String, String)>, String> {
    if headers.len() > MAX_ENDPOINT_HEADERS as usize {
        return Err(format!("{} headers; at most {MAX_ENDPOINT_HEADERS}", headers.len()));
    }
    let token = |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c);
    let mut seen = BTreeSet::new();
    headers
        .into_iter()
        .map(|(name, value)| {
            let lower = name.to_ascii_lowercase();
            if lower.is_empty() || !lower.chars().all(token) {
                return Err(format!("header {name:?} is not a header name"));
            }
            if RESERVED_HEADERS.contains(&lower.as_str()) || lower.starts_with("webhook-") {
                return Err(format!("header {name:?} is written by the relay itself"));
            }
            if !value.chars().all(|c| c == '\t' || (' '..='~').contains(&c)) {
                return Err(format!("header {name:?} has a value with a control or non-ASCII character"));
            }
            if name.len() + value.len() > MAX_ENDPOINT_HEADER_BYTES as usize {
                return Err(format!("header {name:?} is over {MAX_ENDPOINT_HEADER_BYTES} bytes"));
            }
            if !seen.insert(lower.clone()) {
                return Err(format!("header {name:?} is set twice"));
            }
            Ok((lower, value))
        })
        .collect()
}

/// The pause a `Retry-After` value asks for, ms, at most
/// [`MAX_RETRY_AFTER_MS`]: whole seconds, or an HTTP date less `now_ms`
/// (read by `date_ms`, the runtime's date parser, ms since the epoch);
/// `None` for a value that is neither.
pub fn retry_after_ms(value: &str, now_ms: u64, date_ms: impl Fn(&str) -> Option<u64>) -> Option<u64> {
    let value = value.trim();
    if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) {
        // Digits past u64 are a pause past any bound.
        let seconds = value.parse::<u64>().unwrap_or(u64::MAX);
        return Some(seconds.saturating_mul(1_000).min(MAX_RETRY_AFTER_MS));
    }
    date_ms(value).map(|at| at.saturating_sub(now_ms).min(MAX_RETRY_AFTER_MS))
}

/// What an endpoint's answer to a request of `rows` rows ending at `last`
/// means to the fire, with the pause its `Retry-After` asked for, if any
/// (see [`retry_after_ms`]).
///
/// | answer | outcome |
/// | --- | --- |
/// | 2xx | delivered |
/// | 429, 503 | `Overloaded`: back off, never park |
/// | 408, other 5xx | `Transient`: back off, counts toward parking |
/// | 3xx | `Permanent`: redirects are not followed; fix the URL |
/// | other 4xx, 1xx | `Permanent`: park the endpoint for this source |
///
/// A 429, 408 or 5xx with a pause is `Throttled`: not called again before
/// the pause, nor before the back-off.
pub fn outcome_of(status: u16, last: u64, rows: u32, pause_ms: Option<u64>) -> CallOutcome {
    match (kind_of(status, last, rows), pause_ms) {
        (CallOutcome::Failed(failure), Some(retry_after_ms)) if !matches!(failure, Failure::Permanent(_)) => {
            CallOutcome::Throttled { failure, retry_after_ms }
        }
        (outcome, _) => outcome,
    }
}

/// [`outcome_of`] without the pause.
fn kind_of(status: u16, last: u64, rows: u32) -> CallOutcome {
    match status {
        200..=299 => CallOutcome::Applied { watermark: last, applied: rows },
        429 | 503 => CallOutcome::Failed(Failure::Overloaded(format!("the endpoint answered {status}"))),
        408 | 500..=599 => CallOutcome::Failed(Failure::Transient(format!("the endpoint answered {status}"))),
        300..=399 => CallOutcome::Failed(Failure::Permanent(format!(
            "the endpoint answered {status}: redirects are not followed; configure the URL it redirects to"
        ))),
        _ => CallOutcome::Failed(Failure::Permanent(format!("the endpoint refused the row with {status}"))),
    }
}

#[cfg(test)]
mod tests;
