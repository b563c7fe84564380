//! `RelayTarget`: the reference target Durable Object, a thin shell around
//! the library's [`Inbox`]: its `fetch` serves the target protocol
//! ([`durable_relay::durable::target`]) with no hook of its own. `/apply`
//! is reached only through the DO binding (the front door has no route
//! to it).
//!
//! Test builds (feature `testing`, and only with `RELAY_TEST_FAULTS=on`)
//! add the fault switch (`POST /faults`: `{"reject","permanent","delay_ms","throw","times","after_apply"}`,
//! and `"seed_watermarks":n` to write that many synthetic source watermarks),
//! the apply log (`GET /log?source=`, written by a hook inside every apply)
//! and `GET /audit` (every watermark equals the last sequence its apply
//! log holds). Bench builds add `/bench/...` (see `crate::bench::target`).
//! That plumbing lives in `target_do/testing.rs`; this file is the
//! reference object as it ships.

use durable_relay::core::ErrorCode;
use std::cell::OnceCell;

use crate::routes::TargetRoute;
use durable_relay::core::NoHook;
use durable_relay::durable::DoSql;
use durable_relay::http::{respond, RelayError};
use durable_relay::Inbox;
use worker::{durable_object, wasm_bindgen, DurableObject, Env, Request, Response, State};

#[cfg(feature = "testing")]
mod testing;

/// The reference target Durable Object.
#[durable_object]
pub struct RelayTarget {
    /// The variables: only test builds read any (`RELAY_TEST_FAULTS`).
    #[cfg_attr(not(feature = "testing"), allow(dead_code))]
    env: Env,
    /// The object's database.
    sql: DoSql,
    /// The inbox, opened on first use.
    inbox: OnceCell<Inbox<DoSql>>,
    /// The test builds' plumbing, opened on first use.
    #[cfg(feature = "testing")]
    test: testing::TestPlumbing,
}

impl DurableObject for RelayTarget {
    fn new(state: State, env: Env) -> Self {
        RelayTarget {
            env,
            sql: DoSql::new(&state),
            inbox: OnceCell::new(),
            #[cfg(feature = "testing")]
            test: testing::TestPlumbing::default(),
        }
    }

    async fn fetch(&self, mut req: Request) -> worker::Result<Response> {
        let resp = respond(self.route(&mut req).await).map(durable_relay::durable::announce);
        #[cfg(feature = "testing")]
        if let Some(thrown) = self.take_thrown() {
            // Thrown, not answered: the caller's call fails as the platform's would.
            return Err(worker::Error::RustError(thrown.message().into()));
        }
        resp
    }
}

impl RelayTarget {
    fn inbox(&self) -> Result<&Inbox<DoSql>, RelayError> {
        if let Some(i) = self.inbox.get() {
            return Ok(i);
        }
        let inbox = Inbox::open(self.sql.clone())?;
        Ok(self.inbox.get_or_init(|| inbox))
    }

    async fn route(&self, req: &mut Request) -> Result<Response, RelayError> {
        let url = req.url().map_err(|e| RelayError::bad_request(ErrorCode::BadUrl, e.to_string()))?;
        let inbox = self.inbox()?;
        #[cfg(feature = "bench")]
        if url.path().starts_with(crate::bench::TARGET_PREFIX) {
            return self.bench(inbox, req, url.path()).await;
        }
        let route = TargetRoute::from_url(req.method().as_ref(), &url)?;
        #[cfg(feature = "testing")]
        if crate::test_faults(&self.env)? {
            return self.testing(inbox, req, route).await;
        }
        match route {
            TargetRoute::Relay(op) => durable_relay::durable::target::serve(inbox, req, op, &NoHook).await,
            TargetRoute::Faults | TargetRoute::Log(_) | TargetRoute::Audit => Err(RelayError::new(
                404,
                ErrorCode::NoRoute,
                "the fault switch, the apply log and the audit exist only in test builds with faults on",
            )),
        }
    }
}
