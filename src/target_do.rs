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

use durable_relay::core::ErrorCode;
use std::cell::OnceCell;

use durable_relay::core::NoHook;
use durable_relay::durable::DoSql;
use durable_relay::http::{respond, HttpError};
#[cfg(feature = "testing")]
use durable_relay::routes::TargetOp;

use crate::routes::TargetRoute;
use durable_relay::Inbox;
use worker::{durable_object, wasm_bindgen, DurableObject, Env, Request, Response, State};

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
    test: TestPlumbing,
}

/// What a test build keeps beside the inbox: the fault switch and apply
/// log, and in a bench build the arrival log.
#[cfg(feature = "testing")]
#[derive(Default)]
struct TestPlumbing {
    /// The fault switch and the apply log.
    tables: OnceCell<durable_relay::testing::TestTables<DoSql>>,
    /// The benchmark's arrival log.
    #[cfg(feature = "bench")]
    bench: OnceCell<crate::bench::target::Arrivals>,
    /// A platform failure this request throws from `fetch` (see
    /// `testing::Thrown`), set by the apply that took it.
    throw: std::cell::Cell<Option<durable_relay::testing::Thrown>>,
}

impl DurableObject for RelayTarget {
    fn new(state: State, env: Env) -> Self {
        RelayTarget {
            env,
            sql: DoSql::new(&state),
            inbox: OnceCell::new(),
            #[cfg(feature = "testing")]
            test: TestPlumbing::default(),
        }
    }

    async fn fetch(&self, mut req: Request) -> worker::Result<Response> {
        let resp = respond(self.route(&mut req).await).map(durable_relay::durable::announce);
        #[cfg(feature = "testing")]
        if let Some(thrown) = self.test.throw.take() {
            // Thrown, not answered: the caller's call fails as the platform's would.
            return Err(worker::Error::RustError(thrown.message().into()));
        }
        resp
    }
}

impl RelayTarget {
    fn inbox(&self) -> Result<&Inbox<DoSql>, HttpError> {
        if let Some(i) = self.inbox.get() {
            return Ok(i);
        }
        let inbox = Inbox::open(self.sql.clone())?;
        Ok(self.inbox.get_or_init(|| inbox))
    }

    async fn route(&self, req: &mut Request) -> Result<Response, HttpError> {
        let url = req.url().map_err(|e| HttpError::bad_request(ErrorCode::BadUrl, e.to_string()))?;
        let inbox = self.inbox()?;
        #[cfg(feature = "bench")]
        if url.path().starts_with(crate::bench::TARGET_PREFIX) {
            crate::bench::flag::require(&self.env)?;
            let arrivals = crate::bench::target::arrivals(&self.test.bench, &self.sql)?;
            let tables = self.tables()?;
            return crate::bench::target::route(
                inbox,
                tables,
                arrivals,
                req,
                req.method().as_ref(),
                url.path(),
            )
            .await;
        }
        let route = TargetRoute::from_url(req.method().as_ref(), &url)?;
        #[cfg(feature = "testing")]
        if crate::test_faults(&self.env)? {
            return self.testing(inbox, req, route).await;
        }
        match route {
            TargetRoute::Relay(op) => durable_relay::durable::target::serve(inbox, req, op, &NoHook).await,
            TargetRoute::Faults | TargetRoute::Log(_) | TargetRoute::Audit => Err(HttpError::new(
                404,
                ErrorCode::NoRoute,
                "the fault switch, the apply log and the audit exist only in test builds with faults on",
            )),
        }
    }

    #[cfg(feature = "testing")]
    fn tables(&self) -> Result<&durable_relay::testing::TestTables<DoSql>, HttpError> {
        if let Some(t) = self.test.tables.get() {
            return Ok(t);
        }
        let tables = durable_relay::testing::TestTables::open(self.sql.clone())?;
        Ok(self.test.tables.get_or_init(|| tables))
    }

    /// With the test faults on: the fault switch, the apply log, the audit,
    /// and every apply through the switch and the log.
    #[cfg(feature = "testing")]
    async fn testing(
        &self,
        inbox: &Inbox<DoSql>,
        req: &mut Request,
        route: TargetRoute,
    ) -> Result<Response, HttpError> {
        use durable_relay::http::{json, parse_json, read_body};
        use durable_relay::testing::TargetFaultsBody;
        let tables = self.tables()?;
        let internal = |e: worker::Error| HttpError::internal(e.to_string());
        match route {
            TargetRoute::Faults => {
                let body: TargetFaultsBody = parse_json(&read_body(req).await?)?;
                let faults = body.faults().map_err(|m| HttpError::bad_request(ErrorCode::InvalidDelay, m))?;
                tables.set_faults(faults)?;
                body.seed(inbox)?;
                json(&serde_json::json!({"ok": true})).map_err(internal)
            }
            TargetRoute::Log(source) => {
                let seqs = tables.applied(source.as_str(), None)?;
                json(&serde_json::json!({"source": source, "seqs": seqs})).map_err(internal)
            }
            TargetRoute::Audit => {
                let mut breaches = Vec::new();
                for w in inbox.watermarks()? {
                    // Each sender's own log; a watermark without an id
                    // (written before ids) is compared with the name's.
                    let id = w.source_id.as_deref().map(durable_relay::core::SourceId::new).transpose();
                    let id = id.map_err(|e| HttpError::internal(e.to_string()))?;
                    let last = tables.applied(&w.source, id.as_ref())?.last().copied().unwrap_or(0);
                    if last != w.watermark {
                        breaches.push(format!(
                            "{}: watermark {} but the log ends at {last}",
                            w.source, w.watermark
                        ));
                    }
                }
                json(&serde_json::json!({"ok": breaches.is_empty(), "breaches": breaches})).map_err(internal)
            }
            TargetRoute::Relay(TargetOp::Apply) => self.faulty_apply(inbox, tables, req).await,
            TargetRoute::Relay(other) => {
                durable_relay::durable::target::serve(inbox, req, other, &NoHook).await
            }
        }
    }

    /// An apply through the fault switch, logged (or, in a benchmark run,
    /// recorded in the arrival log).
    #[cfg(feature = "testing")]
    async fn faulty_apply(
        &self,
        inbox: &Inbox<DoSql>,
        tables: &durable_relay::testing::TestTables<DoSql>,
        req: &mut Request,
    ) -> Result<Response, HttpError> {
        if let Some((thrown, after_apply)) = tables.take_throw()? {
            self.test.throw.set(Some(thrown));
            if !after_apply {
                return Err(HttpError::internal("thrown before the apply"));
            }
        }
        let faults = tables.faults()?;
        if faults.delay_ms > 0 {
            worker::Delay::from(std::time::Duration::from_millis(faults.delay_ms)).await;
        }
        match faults.reject {
            0 => {}
            1 => return Err(HttpError::new(503, ErrorCode::Unavailable, "test fault: target rejects calls")),
            _ => {
                return Err(HttpError::new(
                    422,
                    ErrorCode::MalformedBatch,
                    "test fault: target rejects calls as invalid",
                ))
            }
        }
        #[cfg(feature = "bench")]
        if crate::bench::flag::enabled(&self.env)? {
            let arrivals = crate::bench::target::arrivals(&self.test.bench, &self.sql)?;
            let hook = crate::bench::target::ArrivalHook::new(arrivals);
            return durable_relay::durable::target::serve(inbox, req, TargetOp::Apply, &hook).await;
        }
        durable_relay::durable::target::serve(inbox, req, TargetOp::Apply, &tables.log_hook()).await
    }
}
