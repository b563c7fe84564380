//! The Workers runtime shell: the reference source and target Durable
//! Objects, the front door Worker, configuration, and the storage layers
//! ([`outbox`], [`inbox`]) that embedders use in their own Durable Objects.
//!
//! Compiled for every target so `cargo clippy` checks it natively; it only
//! runs in workerd (wasm32).

#[cfg(feature = "bench")]
pub mod bench;
pub mod config;
pub mod front;
pub mod http;
pub mod inbox;
pub mod outbox;
pub mod parking;
pub mod relay;
pub mod routes;
pub mod source_do;
pub mod storage;
pub mod target_do;

pub use inbox::Inbox;
pub use outbox::Outbox;
pub use relay::{run_alarm, DoTargets, Targets};
pub use storage::Db;

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
        return http::respond(bench::front::handle(req, &env).await);
    }
    http::respond(front::handle(req, &env).await)
}
