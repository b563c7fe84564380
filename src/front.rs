//! The front door Worker: the `/v1/` HTTP API in front of the source and
//! target Durable Objects. Names are validated here, bodies are bounded,
//! and the request is forwarded to the named object's `fetch` protocol. A
//! target's `/apply` is deliberately not routed: only sources reach it,
//! through the DO binding.
//!
//! Every route needs `Authorization: Bearer <token>` and the token must
//! hold the route's [`Scope`] ([`FrontRoute::scope`] decides it, in one
//! place):
//!
//! - `RELAY_PRODUCER_TOKENS`: enqueue only;
//! - `RELAY_READER_TOKENS`: the read-only routes (status, watermarks,
//!   parked lists and rows, keys, the directory, health, alarms);
//! - `RELAY_OPERATOR_TOKENS`: what a reader may, plus redrive, discard,
//!   retire, forgetting a watermark and the test-only routes; not enqueue;
//! - `RELAY_TOKEN`: every scope, for deployments from before scopes (and
//!   the RPC entrypoint's default); prefer the scoped lists.
//!
//! Each list is comma-separated, so two tokens of one scope are valid at
//! once while callers rotate. A missing or wrong token is a 401
//! `unauthorized`; a valid token outside its scope a 403 `forbidden_scope`
//! naming the scope needed. A list with a blank entry, more than
//! [`MAX_TOKENS_PER_SCOPE`] entries or an entry over
//! [`MAX_BEARER_TOKEN_BYTES`] is a 500 `bad_configuration` naming the
//! variable. With no token configured, nobody is admitted. The presented
//! token is compared with every configured token of every scope, in
//! constant time and without stopping at a match
//! ([`durable_relay::http::match_bearer`]).

#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]
#![deny(clippy::unreachable, clippy::todo, clippy::unimplemented)]

use durable_relay::core::{ErrorCode, MAX_BEARER_TOKEN_BYTES};
use worker::{Env, Method, Request, Response};

use durable_relay::core::Name;
use durable_relay::durable::source::TRACEPARENT_HEADER;
use durable_relay::durable::StubCall;
use durable_relay::http::{json, match_bearer, read_body, RelayError};
use durable_relay::routes::SourceOp;

use crate::routes::{ConsoleAsset, DirectoryOp, FrontRoute, Scope, SourceRoute, TargetRoute};

use crate::{SOURCE_BINDING, TARGET_BINDING, TOKEN_SECRET};

/// Most tokens one scope's variable may list: room for a rotation (the old
/// and the new token) across a few callers, while every request's
/// compare-against-all stays a few thousand byte operations.
pub const MAX_TOKENS_PER_SCOPE: u32 = 8;

/// The front door's bearer tokens, as configured. Its `Debug` shows only
/// how many there are, so no log or test failure prints a secret.
#[derive(Clone, PartialEq, Eq)]
pub struct Tokens {
    /// `RELAY_TOKEN`, the all-scopes token, when set (empty means unset, as
    /// before scopes existed).
    all: Vec<String>,
    /// Each scope's tokens, in [`Scope::ALL`]'s order.
    scoped: [Vec<String>; 3],
}

impl std::fmt::Debug for Tokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let counts = self.scoped.each_ref().map(Vec::len);
        f.debug_struct("Tokens").field("all", &self.all.len()).field("scoped", &counts).finish()
    }
}

/// The scopes a request's token holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Grant([bool; 3]);

fn bad_configuration(message: String) -> RelayError {
    RelayError::new(500, ErrorCode::BadConfiguration, message)
}

/// Checks one configured token's length; the message never shows it.
fn bounded(variable: &str, position: usize, token: &str) -> Result<(), RelayError> {
    let bytes = token.len();
    if bytes > MAX_BEARER_TOKEN_BYTES as usize {
        return Err(bad_configuration(format!(
            "{variable}: token {position} is {bytes} bytes; the limit is {MAX_BEARER_TOKEN_BYTES}"
        )));
    }
    Ok(())
}

/// A scope's comma-separated list: every entry a token (trimmed, not
/// blank), at most [`MAX_TOKENS_PER_SCOPE`] of them.
fn token_list(variable: &str, text: &str) -> Result<Vec<String>, RelayError> {
    let entries: Vec<&str> = text.split(',').map(str::trim).collect();
    let count = entries.len();
    if count > MAX_TOKENS_PER_SCOPE as usize {
        return Err(bad_configuration(format!(
            "{variable}: {count} tokens; the limit is {MAX_TOKENS_PER_SCOPE}"
        )));
    }
    for (i, entry) in entries.iter().enumerate() {
        if entry.is_empty() {
            return Err(bad_configuration(format!(
                "{variable}: entry {} of {count} is blank (comma-separated tokens, none empty)",
                i + 1
            )));
        }
        bounded(variable, i + 1, entry)?;
    }
    Ok(entries.into_iter().map(str::to_owned).collect())
}

impl Tokens {
    /// Reads `RELAY_TOKEN` and the three scope lists through `get`; a list
    /// that is unset holds no tokens.
    pub fn from_vars(get: impl Fn(&str) -> Option<String>) -> Result<Tokens, RelayError> {
        let all = get(TOKEN_SECRET).map(|t| t.trim().to_owned()).filter(|t| !t.is_empty());
        if let Some(token) = &all {
            bounded(TOKEN_SECRET, 1, token)?;
        }
        let mut scoped: [Vec<String>; 3] = Default::default();
        for (list, scope) in scoped.iter_mut().zip(Scope::ALL) {
            if let Some(text) = get(scope.variable()) {
                *list = token_list(scope.variable(), &text)?;
            }
        }
        Ok(Tokens { all: all.into_iter().collect(), scoped })
    }

    /// The scopes the `Authorization` header's token holds; 401 when it
    /// holds none. Compares with every token of every list (see
    /// [`match_bearer`]).
    pub fn grant(&self, header: Option<&str>) -> Result<Grant, RelayError> {
        let [producer, reader, operator] = &self.scoped;
        let [all, p, r, o] = match_bearer(header, [&self.all[..], producer, reader, operator])?;
        Ok(Grant([all | p, all | r, all | o]))
    }
}

impl Grant {
    /// Whether a held scope covers `needed`; else the 403 naming it.
    pub fn allows(self, needed: Scope) -> Result<(), RelayError> {
        let held = Scope::ALL.into_iter().zip(self.0).filter(|(_, h)| *h).map(|(s, _)| s);
        if held.clone().any(|s| s.covers(needed)) {
            return Ok(());
        }
        let lists: Vec<&str> =
            Scope::ALL.into_iter().filter(|s| s.covers(needed)).map(Scope::variable).collect();
        let held: Vec<&str> = held.map(Scope::as_str).collect();
        Err(RelayError::new(
            403,
            ErrorCode::ForbiddenScope,
            format!(
                "this route needs the {} scope (a token in {} or RELAY_TOKEN); this token holds: {}",
                needed.as_str(),
                lists.join(" or "),
                held.join(", ")
            ),
        ))
    }
}

/// The variable `name`, as a secret or else a plain variable.
fn secret_or_var(env: &Env, name: &str) -> Option<String> {
    durable_relay::vars::text(env, name)
}

/// The scopes the request's bearer token holds, from the configured tokens
/// (500 `bad_configuration` for a bad list, 401 for no valid token).
pub fn authorize(req: &Request, env: &Env) -> Result<Grant, RelayError> {
    let tokens = Tokens::from_vars(|name| secret_or_var(env, name))?;
    tokens.grant(req.headers().get("authorization").ok().flatten().as_deref())
}

/// Routes one request. The console's static files need no token; every
/// other route needs one holding the route's scope.
pub async fn handle(mut req: Request, env: &Env) -> Result<Response, RelayError> {
    let url = req.url().map_err(|e| RelayError::bad_request(ErrorCode::BadUrl, e.to_string()))?;
    let method = req.method();
    if let Some(asset) = ConsoleAsset::from_url(method.as_ref(), &url) {
        return crate::console::serve(asset);
    }
    let grant = authorize(&req, env)?;
    let route = FrontRoute::parse(method.as_ref(), &url)?;
    grant.allows(route.scope())?;
    match route {
        FrontRoute::Health => health(env),
        FrontRoute::Sources { after, limit } => {
            crate::directory::call(env, &DirectoryOp::List { after, limit }).await?.ok_or_else(|| {
                RelayError::new(501, ErrorCode::NoDirectory, "no source directory is bound (RELAY_DIRECTORY)")
            })
        }
        FrontRoute::Source(source, route) => {
            let config = crate::config(env)?;
            if let Some(map) = config.partition_map(&source) {
                // While the map lists the plain layout, or the plain object
                // still holds rows a map without it left there, the logical
                // name's own object is one of the objects: its per-object
                // routes reach it.
                let own = matches!(route, SourceRoute::Alarms | SourceRoute::Audit | SourceRoute::Faults);
                if !(own && crate::partitioned::reaches_plain(env, &source, map).await?) {
                    return crate::partitioned::serve(env, &mut req, &source, map, route).await;
                }
            }
            let body = match route {
                SourceRoute::Relay(SourceOp::Enqueue) | SourceRoute::Faults => {
                    Some(read_body(&mut req).await?)
                }
                _ => None,
            };
            // The source validates it; an invalid one is its 400.
            let trace = match route {
                SourceRoute::Relay(SourceOp::Enqueue) => req.headers().get(TRACEPARENT_HEADER).ok().flatten(),
                _ => None,
            };
            let binding = source_binding(&req, env)?;
            forward_with(env, binding, &source, method, &route.path(), body, trace).await
        }
        FrontRoute::Target(target, route) => {
            let body = match route {
                TargetRoute::Faults => Some(read_body(&mut req).await?),
                _ => None,
            };
            forward(env, TARGET_BINDING, &target, method, &route.path(), body).await
        }
    }
}

/// Test builds: a source request carrying this header (any value) goes to
/// the second source class ([`TWIN_SOURCE_BINDING`](crate::source_do::TWIN_SOURCE_BINDING)),
/// whose objects share names with `RelaySource`'s but not ids. Honoured
/// only with `RELAY_TEST_FAULTS=on`.
pub const TWIN_SOURCE_HEADER: &str = "relay-test-source-twin";

/// The binding a source request goes to: `RELAY_SOURCE`, or in a test build
/// with test faults on, the second source class when the request asks.
#[cfg(feature = "testing")]
fn source_binding(req: &Request, env: &Env) -> Result<&'static str, RelayError> {
    let asked = req.headers().get(TWIN_SOURCE_HEADER).ok().flatten().is_some();
    if asked && crate::test_faults(env)? {
        return Ok(crate::source_do::TWIN_SOURCE_BINDING);
    }
    Ok(SOURCE_BINDING)
}

/// The binding a source request goes to: `RELAY_SOURCE`.
#[cfg(not(feature = "testing"))]
fn source_binding(_: &Request, _: &Env) -> Result<&'static str, RelayError> {
    Ok(SOURCE_BINDING)
}

fn health(env: &Env) -> Result<Response, RelayError> {
    let config = crate::config(env)?;
    json(&serde_json::json!({
        "ok": true,
        "plan": format!("{:?}", config.plan).to_lowercase(),
        "budget": config.budget,
        "max_in_flight": config.max_in_flight,
        "test_faults": crate::test_faults(env)?,
    }))
    .map_err(|e| RelayError::internal(e.to_string()))
}

/// Sends a request to the Durable Object `name` in `binding`.
pub async fn forward(
    env: &Env,
    binding: &str,
    name: &Name,
    method: Method,
    path: &str,
    body: Option<String>,
) -> Result<Response, RelayError> {
    forward_with(env, binding, name, method, path, body, None).await
}

/// [`forward`], passing the caller's `traceparent` header on (enqueues).
pub async fn forward_with(
    env: &Env,
    binding: &str,
    name: &Name,
    method: Method,
    path: &str,
    body: Option<String>,
    traceparent: Option<String>,
) -> Result<Response, RelayError> {
    let internal = |e: worker::Error| RelayError::internal(e.to_string());
    let namespace = env.durable_object(binding).map_err(internal)?;
    let stub = namespace.id_from_name(name.as_str()).map_err(internal)?.get_stub().map_err(internal)?;
    let mut call = StubCall::new(method, path).body(body);
    if let Some(value) = traceparent {
        call = call.header(TRACEPARENT_HEADER, value);
    }
    call.send(&stub).await.map_err(internal)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens(vars: &[(&str, &str)]) -> Result<Tokens, RelayError> {
        Tokens::from_vars(|k| vars.iter().find(|(n, _)| *n == k).map(|(_, v)| (*v).to_owned()))
    }

    fn grant(vars: &[(&str, &str)], token: &str) -> Result<Grant, RelayError> {
        tokens(vars)?.grant(Some(&format!("Bearer {token}")))
    }

    const SCOPED: &[(&str, &str)] = &[
        ("RELAY_PRODUCER_TOKENS", "p-old, p-new"),
        ("RELAY_READER_TOKENS", "r"),
        ("RELAY_OPERATOR_TOKENS", "o"),
        ("RELAY_TOKEN", "all"),
    ];

    #[test]
    fn each_token_holds_its_own_scope_and_relay_token_holds_every_one() {
        assert_eq!(grant(SCOPED, "p-old"), Ok(Grant([true, false, false])));
        assert_eq!(grant(SCOPED, "p-new"), Ok(Grant([true, false, false])), "both of a rotation");
        assert_eq!(grant(SCOPED, "r"), Ok(Grant([false, true, false])));
        assert_eq!(grant(SCOPED, "o"), Ok(Grant([false, false, true])));
        assert_eq!(grant(SCOPED, "all"), Ok(Grant([true, true, true])));
        assert_eq!(grant(SCOPED, "p").unwrap_err().status, 401);
        assert_eq!(grant(SCOPED, "").unwrap_err().status, 401);
        assert_eq!(tokens(SCOPED).unwrap().grant(None).unwrap_err().code, ErrorCode::Unauthorized);
        assert_eq!(grant(&[("RELAY_TOKEN", "t")], "t"), Ok(Grant([true, true, true])), "as before scopes");
    }

    #[test]
    fn with_no_token_configured_nobody_is_admitted() {
        assert_eq!(grant(&[], "").unwrap_err().status, 401);
        assert_eq!(grant(&[], "x").unwrap_err().status, 401);
        assert_eq!(
            grant(&[("RELAY_TOKEN", "")], "").unwrap_err().status,
            401,
            "an empty RELAY_TOKEN is unset"
        );
        assert_eq!(grant(&[("RELAY_TOKEN", "  ")], "").unwrap_err().status, 401);
    }

    #[test]
    fn a_token_outside_its_scope_gets_403_naming_the_scope_needed() {
        let reader = grant(SCOPED, "r").unwrap();
        let refused = reader.allows(Scope::Operator).unwrap_err();
        assert_eq!((refused.status, refused.code.clone()), (403, ErrorCode::ForbiddenScope));
        assert!(refused.message.contains("needs the operator scope"), "{}", refused.message);
        assert!(refused.message.contains("RELAY_OPERATOR_TOKENS"), "{}", refused.message);
        assert!(refused.message.ends_with("holds: reader"), "{}", refused.message);
        assert!(reader.allows(Scope::Reader).is_ok());
        let producer = grant(SCOPED, "p-new").unwrap();
        let refused = producer.allows(Scope::Reader).unwrap_err();
        assert!(
            refused.message.contains("RELAY_READER_TOKENS or RELAY_OPERATOR_TOKENS"),
            "{}",
            refused.message
        );
        assert!(!refused.message.contains("p-new"), "never the token");
        let operator = grant(SCOPED, "o").unwrap();
        assert!(operator.allows(Scope::Reader).is_ok() && operator.allows(Scope::Operator).is_ok());
        assert_eq!(operator.allows(Scope::Producer).unwrap_err().status, 403, "operators do not enqueue");
    }

    fn config_error(vars: &[(&str, &str)]) -> String {
        let e = tokens(vars).unwrap_err();
        assert_eq!((e.status, e.code.clone()), (500, ErrorCode::BadConfiguration), "{vars:?}");
        e.message
    }

    #[test]
    fn a_blank_entry_is_a_configuration_error_naming_the_variable() {
        for list in ["", " ", "a,", ",a", "a,,b", "a, ,b", " , "] {
            let message = config_error(&[("RELAY_READER_TOKENS", list)]);
            assert!(message.starts_with("RELAY_READER_TOKENS: entry"), "{list:?}: {message}");
        }
        assert!(config_error(&[("RELAY_OPERATOR_TOKENS", "o,")]).starts_with("RELAY_OPERATOR_TOKENS"));
        assert!(config_error(&[("RELAY_PRODUCER_TOKENS", ",")]).starts_with("RELAY_PRODUCER_TOKENS"));
    }

    #[test]
    fn token_counts_and_lengths_are_bounded_at_their_limits() {
        let most = vec!["t"; MAX_TOKENS_PER_SCOPE as usize].join(",");
        let too_many = format!("{most},t");
        assert!(tokens(&[("RELAY_READER_TOKENS", &most)]).is_ok(), "at the limit");
        assert!(config_error(&[("RELAY_READER_TOKENS", &too_many)]).contains("9 tokens; the limit is 8"));
        let longest = "x".repeat(MAX_BEARER_TOKEN_BYTES as usize);
        let too_long = format!("{longest}x");
        assert_eq!(grant(&[("RELAY_READER_TOKENS", &longest)], &longest), Ok(Grant([false, true, false])));
        assert_eq!(grant(&[("RELAY_TOKEN", &longest)], &longest), Ok(Grant([true, true, true])));
        let message = config_error(&[("RELAY_PRODUCER_TOKENS", &format!("a,{too_long}"))]);
        assert_eq!(message, "RELAY_PRODUCER_TOKENS: token 2 is 257 bytes; the limit is 256");
        assert!(config_error(&[("RELAY_TOKEN", &too_long)]).starts_with("RELAY_TOKEN: token 1 is 257 bytes"));
        assert_eq!(grant(&[("RELAY_READER_TOKENS", &longest)], &too_long).unwrap_err().status, 401);
    }
}
