//! The front door Worker: the `/v1/` HTTP API in front of the source and
//! target Durable Objects. Every route needs `Authorization: Bearer
//! <RELAY_TOKEN>`; names are validated here, bodies are bounded, and the
//! request is forwarded to the named object's `fetch` protocol. A target's
//! `/apply` is deliberately not routed: only sources reach it, through the
//! DO binding.

#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]
#![deny(clippy::unreachable, clippy::todo, clippy::unimplemented)]

use durable_relay::core::ErrorCode;
use worker::{Env, Method, Request, Response};

use durable_relay::core::Name;
use durable_relay::durable::source::TRACEPARENT_HEADER;
use durable_relay::durable::StubCall;
use durable_relay::http::{check_bearer, json, read_body, HttpError};
use durable_relay::routes::SourceOp;

use crate::routes::{ConsoleAsset, DirectoryOp, FrontRoute, SourceRoute, TargetRoute};

use crate::{SOURCE_BINDING, TARGET_BINDING, TOKEN_SECRET};

/// Checks the request's bearer token against the `RELAY_TOKEN` secret (or
/// variable); with none set, nobody is admitted.
pub fn authorize(req: &Request, env: &Env) -> Result<(), HttpError> {
    let token = env
        .secret(TOKEN_SECRET)
        .map(|s| s.to_string())
        .or_else(|_| env.var(TOKEN_SECRET).map(|v| v.to_string()))
        .unwrap_or_default();
    check_bearer(req.headers().get("authorization").ok().flatten().as_deref(), &token)
}

/// Routes one request. The console's static files need no token; every
/// other route does.
pub async fn handle(mut req: Request, env: &Env) -> Result<Response, HttpError> {
    let url = req.url().map_err(|e| HttpError::bad_request(ErrorCode::BadUrl, e.to_string()))?;
    let method = req.method();
    if let Some(asset) = ConsoleAsset::from_url(method.as_ref(), &url) {
        return crate::console::serve(asset);
    }
    authorize(&req, env)?;
    match FrontRoute::parse(method.as_ref(), &url)? {
        FrontRoute::Health => health(env),
        FrontRoute::Sources { after, limit } => {
            crate::directory::call(env, &DirectoryOp::List { after, limit }).await?.ok_or_else(|| {
                HttpError::new(501, ErrorCode::NoDirectory, "no source directory is bound (RELAY_DIRECTORY)")
            })
        }
        FrontRoute::Source(source, route) => {
            let config = crate::config(env)?;
            if let Some(map) = config.partition_map(&source) {
                return crate::partitioned::serve(env, &mut req, &source, map, route).await;
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
            forward_with(env, SOURCE_BINDING, &source, method, &route.path(), body, trace).await
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

fn health(env: &Env) -> Result<Response, HttpError> {
    let config = crate::config(env)?;
    json(&serde_json::json!({
        "ok": true,
        "plan": format!("{:?}", config.plan).to_lowercase(),
        "budget": config.budget,
        "max_in_flight": config.max_in_flight,
        "test_faults": crate::test_faults(env)?,
    }))
    .map_err(|e| HttpError::internal(e.to_string()))
}

/// Sends a request to the Durable Object `name` in `binding`.
pub async fn forward(
    env: &Env,
    binding: &str,
    name: &Name,
    method: Method,
    path: &str,
    body: Option<String>,
) -> Result<Response, HttpError> {
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
) -> Result<Response, HttpError> {
    let internal = |e: worker::Error| HttpError::internal(e.to_string());
    let namespace = env.durable_object(binding).map_err(internal)?;
    let stub = namespace.id_from_name(name.as_str()).map_err(internal)?.get_stub().map_err(internal)?;
    let mut call = StubCall::new(method, path).body(body);
    if let Some(value) = traceparent {
        call = call.header(TRACEPARENT_HEADER, value);
    }
    call.send(&stub).await.map_err(internal)
}
