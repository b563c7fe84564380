//! The reference Worker: the `/v1/` front door, the `RelaySource` and
//! `RelayTarget` Durable Object classes, and (in `js/entry.mjs`) the typed
//! RPC entrypoint `RelayRpc`. It deploys as-is (`wrangler deploy`); every
//! piece of relay logic it runs comes from the `durable-relay` library,
//! exactly as an embedder's own objects would use it.
//!
//! Features: `testing` (fault routes, apply log, audit routes; inert unless
//! `RELAY_TEST_FAULTS=on`, which production refuses) and `bench` (the
//! benchmark plumbing).

#![deny(unsafe_code)]
#![allow(
    missing_docs,
    reason = "#[durable_object] generates public wasm-bindgen methods that cannot carry docs"
)]

#[cfg(feature = "bench")]
pub mod bench;
pub mod console;
pub mod directory;
pub mod front;
mod metrics;
pub mod partitioned;
pub mod source_do;
pub mod target_do;

use durable_relay::core::ErrorCode;
use worker::{event, Context, Env, Request, Response};

/// Binding name of the source class's namespace.
pub const SOURCE_BINDING: &str = "RELAY_SOURCE";
/// Binding name of the target class's namespace.
pub const TARGET_BINDING: &str = "RELAY_TARGET";
/// Optional Workers Analytics Engine dataset for per-alarm data points.
pub const METRICS_BINDING: &str = "RELAY_METRICS";
/// Secret holding the front door's bearer token.
pub const TOKEN_SECRET: &str = "RELAY_TOKEN";

#[event(start)]
fn start() {
    console_error_panic_hook::set_once();
}

#[event(fetch)]
async fn fetch(req: Request, env: Env, _ctx: Context) -> worker::Result<Response> {
    #[cfg(feature = "bench")]
    if bench::front::is_bench_path(&req.path()) {
        return durable_relay::http::respond(bench::front::handle(req, &env).await);
    }
    durable_relay::http::respond(front::handle(req, &env).await)
}

/// The relay's configuration from the Worker's variables; a bad value is a
/// 500 `bad_configuration` naming the variable.
pub fn config(env: &Env) -> Result<durable_relay::RelayConfig, durable_relay::http::HttpError> {
    durable_relay::RelayConfig::from_env(env)
        .map_err(|e| durable_relay::http::HttpError::new(500, ErrorCode::BadConfiguration, e.to_string()))
}
