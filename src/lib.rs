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
pub mod routes;
pub mod source_do;
pub mod sweep;
pub mod target_do;

use durable_relay::core::ErrorCode;
use durable_relay::http::RelayError;
use durable_relay::work::{self, Level};
use worker::{event, Context, Env, Request, Response, ScheduleContext, ScheduledEvent};

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

/// The Cron Trigger: one run of the sweep that re-arms sources holding
/// rows with no alarm ([`sweep`]), logged as one JSON line.
#[event(scheduled)]
async fn scheduled(_event: ScheduledEvent, env: Env, _ctx: ScheduleContext) {
    match sweep::run(&env).await {
        Ok(report) => {
            let mut line = serde_json::to_value(&report).unwrap_or_default();
            if let Some(fields) = line.as_object_mut() {
                fields.insert("event".into(), "relay_sweep".into());
            }
            work::log(Level::Info, &line.to_string());
        }
        Err(e) => work::log_json(
            Level::Error,
            &serde_json::json!({"event": "relay_sweep_error", "error": e.message}),
        ),
    }
}

/// The relay's configuration from the Worker's variables; a bad value is a
/// 500 `bad_configuration` naming the variable. Test faults switched on in
/// production make every read fail the same way, so the misconfiguration
/// cannot go unnoticed.
pub fn config(env: &Env) -> Result<durable_relay::RelayConfig, RelayError> {
    test_faults(env)?;
    durable_relay::RelayConfig::from_env(env)
        .map_err(|e| RelayError::new(500, ErrorCode::BadConfiguration, e.to_string()))
}

/// Whether the test builds' fault routes are on (`RELAY_TEST_FAULTS=on`).
pub fn test_faults(env: &Env) -> Result<bool, RelayError> {
    test_faults_from(durable_relay::vars::reader(env))
}

/// [`test_faults`] over any variable lookup: `RELAY_TEST_FAULTS=on` is
/// refused (500 `bad_configuration`) unless `RELAY_ENV` names an
/// environment other than `production` (unset means production).
pub fn test_faults_from(get: impl Fn(&str) -> Option<String>) -> Result<bool, RelayError> {
    let faults = get("RELAY_TEST_FAULTS").is_some_and(|v| v.trim() == "on");
    let production = get("RELAY_ENV").is_none_or(|e| e.trim() == "production");
    if faults && production {
        return Err(RelayError::new(
            500,
            ErrorCode::BadConfiguration,
            "RELAY_TEST_FAULTS: test faults are refused when RELAY_ENV is production (or unset)",
        ));
    }
    Ok(faults)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn faults(vars: &[(&str, &str)]) -> Result<bool, RelayError> {
        test_faults_from(|k| vars.iter().find(|(n, _)| *n == k).map(|(_, v)| (*v).to_owned()))
    }

    #[test]
    fn test_faults_are_refused_in_production() {
        assert_eq!(faults(&[]), Ok(false));
        assert_eq!(faults(&[("RELAY_ENV", "test")]), Ok(false));
        let refused = faults(&[("RELAY_TEST_FAULTS", "on")]).unwrap_err();
        assert_eq!(
            (refused.status, refused.code),
            (500, ErrorCode::BadConfiguration),
            "unset means production"
        );
        assert!(faults(&[("RELAY_TEST_FAULTS", "on"), ("RELAY_ENV", "production")]).is_err());
        assert_eq!(faults(&[("RELAY_TEST_FAULTS", "on"), ("RELAY_ENV", "test")]), Ok(true));
    }
}
