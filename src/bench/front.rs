//! The front door's `/v1/bench/...` routes. Like the test-only routes
//! they need an operator's bearer token; they answer 403 `bench_disabled`
//! unless `RELAY_BENCH=on`.
//!
//! | method and path | what |
//! | --- | --- |
//! | `POST /v1/bench/direct/{source}/enqueue` | direct writes: allocate, call every target, then answer |
//! | `POST /v1/bench/queue/{source}/enqueue` | allocate, send each row as a queue message |
//! | `GET /v1/bench/sources/{source}/status` | a bench source's sequences, writes, calls, sends |
//! | `GET /v1/bench/targets/{target}/stats` | a target's arrival log, summarised |
//! | `GET /v1/bench/work` | this isolate's work counts, its wasm memory (live heap, linear memory), and its JS/wasm boundary calls when counted |

use crate::front::forward;
use durable_relay::core::ErrorCode;
use worker::{Env, Method, Request, Response};

use super::{flag, BENCH_SOURCE_BINDING, FRONT_PREFIX};
use crate::TARGET_BINDING;
use durable_relay::http::{json_headers, read_body, RelayError};

/// The JS global where `bench/boundary.mjs` counts calls across the
/// JS/wasm boundary, when the profile loaded it.
const BOUNDARY_GLOBAL: &str = "__relayBoundary";

/// The work counts, written without [`json`](durable_relay::http::json)
/// so that reading them adds no JSON bytes to what they count.
fn work_reply() -> Result<Response, RelayError> {
    let body = serde_json::json!({
        "work": durable_relay::work::snapshot(),
        "boundary": boundary_calls(),
        "statements": durable_relay::work::statement_texts(),
        "memory": super::heap::snapshot(),
    });
    let resp = Response::ok(body.to_string()).map_err(|e| RelayError::internal(e.to_string()))?;
    Ok(resp.with_headers(json_headers()))
}

/// This isolate's boundary call counts (`{imports, exports}`), or null when
/// nothing counts them (every run but the profile's).
fn boundary_calls() -> serde_json::Value {
    use worker::js_sys::{global, Reflect, JSON};
    let counts = Reflect::get(&global(), &BOUNDARY_GLOBAL.into()).unwrap_or_default();
    if counts.is_undefined() {
        return serde_json::Value::Null;
    }
    JSON::stringify(&counts)
        .ok()
        .and_then(|text| text.as_string())
        .and_then(|text| serde_json::from_str(&text).ok())
        .unwrap_or_default()
}

/// Whether `path` is a bench route.
pub fn is_bench_path(path: &str) -> bool {
    path.starts_with(FRONT_PREFIX)
}

/// Routes one bench request.
pub async fn handle(mut req: Request, env: &Env) -> Result<Response, RelayError> {
    // Benchmark plumbing: an operator's, like the test-only routes.
    crate::front::authorize(&req, env)?.allows(crate::routes::Scope::Operator)?;
    flag::require(env)?;
    let url = req.url().map_err(|e| RelayError::bad_request(ErrorCode::BadUrl, e.to_string()))?;
    let method = req.method();
    let segments: Vec<&str> = url.path().trim_matches('/').split('/').collect();
    let name = |n: &str| {
        durable_relay::core::Name::new(n)
            .map_err(|e| RelayError::bad_request(ErrorCode::InvalidName, format!("{n:?}: {e}")))
    };
    match (method.clone(), segments.as_slice()) {
        (Method::Post, ["v1", "bench", mode @ ("direct" | "queue"), s, "enqueue"]) => {
            let body = read_body(&mut req).await?;
            let path = format!("/{mode}");
            forward(env, BENCH_SOURCE_BINDING, &name(s)?, Method::Post, &path, Some(body)).await
        }
        (Method::Get, ["v1", "bench", "sources", s, "status"]) => {
            forward(env, BENCH_SOURCE_BINDING, &name(s)?, Method::Get, "/status", None).await
        }
        (Method::Get, ["v1", "bench", "targets", t, "stats"]) => {
            forward(env, TARGET_BINDING, &name(t)?, Method::Get, "/bench/stats", None).await
        }
        (Method::Get, ["v1", "bench", "work"]) => work_reply(),
        _ => Err(RelayError::new(404, ErrorCode::NoRoute, format!("no route for {method} {}", url.path()))),
    }
}
