//! The front door Worker: the `/v1/` HTTP API in front of the source and
//! target Durable Objects. Every route needs `Authorization: Bearer
//! <RELAY_TOKEN>`; names are validated here, bodies are bounded, and the
//! request is forwarded to the named object's `fetch` protocol. A target's
//! `/apply` is deliberately not routed: only sources reach it, through the
//! DO binding.

use worker::{Env, Method, Request, RequestInit, Response};

use super::config::RelayConfig;
use super::http::{check_bearer, json, read_body, HttpError};
use super::{SOURCE_BINDING, TARGET_BINDING, TOKEN_SECRET};
use crate::core::Name;

/// Checks the request's bearer token against the `RELAY_TOKEN` secret (or
/// variable); with none set, nobody is admitted.
pub(crate) fn authorize(req: &Request, env: &Env) -> Result<(), HttpError> {
    let token = env
        .secret(TOKEN_SECRET)
        .map(|s| s.to_string())
        .or_else(|_| env.var(TOKEN_SECRET).map(|v| v.to_string()))
        .unwrap_or_default();
    check_bearer(req.headers().get("authorization").ok().flatten().as_deref(), &token)
}

/// Routes one request.
pub async fn handle(mut req: Request, env: &Env) -> Result<Response, HttpError> {
    authorize(&req, env)?;
    let url = req.url().map_err(|e| HttpError::bad_request("bad_url", e.to_string()))?;
    let method = req.method();
    let segments: Vec<&str> = url.path().trim_matches('/').split('/').collect();
    let query = url.query().map(|q| format!("?{q}")).unwrap_or_default();
    match (method.clone(), segments.as_slice()) {
        (Method::Get, ["v1", "health"]) => health(env),
        (Method::Post, ["v1", "sources", s, "enqueue"]) => {
            let body = read_body(&mut req).await?;
            forward(env, SOURCE_BINDING, s, Method::Post, "/enqueue", Some(body)).await
        }
        (Method::Get, ["v1", "sources", s, "status"]) => {
            forward(env, SOURCE_BINDING, s, Method::Get, "/status", None).await
        }
        (Method::Get, ["v1", "sources", s, "watermark"]) => {
            forward(env, SOURCE_BINDING, s, Method::Get, "/watermark", None).await
        }
        (Method::Get, ["v1", "sources", s, "delivered-through", seq]) => {
            let path = format!(
                "/delivered-through?seq={}",
                seq.parse::<u64>().map_err(|_| {
                    HttpError::bad_request("invalid_seq", format!("{seq:?} is not a sequence number"))
                })?
            );
            forward(env, SOURCE_BINDING, s, Method::Get, &path, None).await
        }
        (Method::Post, ["v1", "sources", s, "faults"]) => {
            let body = read_body(&mut req).await?;
            forward(env, SOURCE_BINDING, s, Method::Post, "/faults", Some(body)).await
        }
        (Method::Get, ["v1", "sources", s, "parked"]) => {
            forward(env, SOURCE_BINDING, s, Method::Get, "/parked", None).await
        }
        (Method::Get, ["v1", "sources", s, "parked", t]) => {
            let t = valid(t)?;
            forward(env, SOURCE_BINDING, s, Method::Get, &format!("/parked/{t}{query}"), None).await
        }
        (Method::Post, ["v1", "sources", s, "parked", t, action])
            if matches!(*action, "redrive" | "discard") =>
        {
            let t = valid(t)?;
            forward(env, SOURCE_BINDING, s, Method::Post, &format!("/parked/{t}/{action}"), None).await
        }
        (Method::Get, ["v1", "targets", t, "status"]) => {
            forward(env, TARGET_BINDING, t, Method::Get, "/status", None).await
        }
        (Method::Delete, ["v1", "targets", t, "watermarks", s]) => {
            let s = valid(s)?;
            forward(env, TARGET_BINDING, t, Method::Delete, &format!("/watermarks/{s}"), None).await
        }
        (Method::Get, ["v1", "targets", t, "keys"]) => {
            forward(env, TARGET_BINDING, t, Method::Get, &format!("/keys{query}"), None).await
        }
        (Method::Get, ["v1", "targets", t, "watermarks"]) => {
            forward(env, TARGET_BINDING, t, Method::Get, "/watermarks", None).await
        }
        (Method::Post, ["v1", "targets", t, "faults"]) => {
            let body = read_body(&mut req).await?;
            forward(env, TARGET_BINDING, t, Method::Post, "/faults", Some(body)).await
        }
        (Method::Get, ["v1", "targets", t, "log"]) => {
            forward(env, TARGET_BINDING, t, Method::Get, &format!("/log{query}"), None).await
        }
        _ => Err(HttpError::new(404, "no_route", format!("no route for {method} {}", url.path()))),
    }
}

fn health(env: &Env) -> Result<Response, HttpError> {
    let config = RelayConfig::from_vars(|k| env.var(k).ok().map(|v| v.to_string()))
        .map_err(|e| HttpError::new(500, "bad_configuration", e.to_string()))?;
    json(&serde_json::json!({
        "ok": true,
        "plan": format!("{:?}", config.plan).to_lowercase(),
        "budget": config.budget,
        "max_in_flight": config.max_in_flight,
        "test_faults": config.faults,
    }))
    .map_err(|e| HttpError::internal(e.to_string()))
}

/// Validates a name taken from the path.
fn valid(name: &str) -> Result<Name, HttpError> {
    Name::new(name).map_err(|e| HttpError::bad_request("invalid_name", format!("{name:?}: {e}")))
}

/// Sends a request to the Durable Object `name` in `binding`.
pub(crate) async fn forward(
    env: &Env,
    binding: &str,
    name: &str,
    method: Method,
    path: &str,
    body: Option<String>,
) -> Result<Response, HttpError> {
    let name = valid(name)?;
    let internal = |e: worker::Error| HttpError::internal(e.to_string());
    let namespace = env.durable_object(binding).map_err(internal)?;
    let stub = namespace.id_from_name(name.as_str()).map_err(internal)?.get_stub().map_err(internal)?;
    let mut init = RequestInit::new();
    init.with_method(method).with_body(body.map(Into::into));
    let req = Request::new_with_init(&format!("https://relay{path}"), &init).map_err(internal)?;
    stub.fetch_with_request(req).await.map_err(internal)
}
