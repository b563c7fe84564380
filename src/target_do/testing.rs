//! The reference target's test-build plumbing (feature `testing`): the
//! fault switch, the apply log and the audit, every apply through the
//! switch and the log, and in a bench build the benchmark's routes and
//! arrival log. Nothing here is reachable unless `RELAY_TEST_FAULTS=on`
//! (or, for the benchmark, `RELAY_BENCH=on`).

use durable_relay::core::{ErrorCode, NoHook};
use durable_relay::durable::DoSql;
use durable_relay::http::RelayError;
use durable_relay::routes::TargetOp;
use durable_relay::Inbox;
use std::cell::OnceCell;
use worker::{Request, Response};

use super::RelayTarget;
use crate::routes::TargetRoute;

/// What a test build keeps beside the inbox: the fault switch and apply
/// log, and in a bench build the arrival log.
#[derive(Default)]
pub(super) struct TestPlumbing {
    /// The fault switch and the apply log.
    tables: OnceCell<durable_relay::testing::TestTables<DoSql>>,
    /// The benchmark's arrival log.
    #[cfg(feature = "bench")]
    bench: OnceCell<crate::bench::target::Arrivals>,
    /// A platform failure this request throws from `fetch` (see
    /// `testing::Thrown`), set by the apply that took it.
    throw: std::cell::Cell<Option<durable_relay::testing::Thrown>>,
}

impl RelayTarget {
    /// The platform failure this request's apply took, to throw from `fetch`.
    pub(super) fn take_thrown(&self) -> Option<durable_relay::testing::Thrown> {
        self.test.throw.take()
    }

    /// A benchmark route (`/bench/...`), with the benchmark switch on.
    #[cfg(feature = "bench")]
    pub(super) async fn bench(
        &self,
        inbox: &Inbox<DoSql>,
        req: &mut Request,
        path: &str,
    ) -> Result<Response, RelayError> {
        crate::bench::flag::require(&self.env)?;
        let arrivals = crate::bench::target::arrivals(&self.test.bench, &self.sql)?;
        let tables = self.tables()?;
        let method = req.method();
        crate::bench::target::route(inbox, tables, arrivals, req, method.as_ref(), path).await
    }

    pub(super) fn tables(&self) -> Result<&durable_relay::testing::TestTables<DoSql>, RelayError> {
        if let Some(t) = self.test.tables.get() {
            return Ok(t);
        }
        let tables = durable_relay::testing::TestTables::open(self.sql.clone())?;
        Ok(self.test.tables.get_or_init(|| tables))
    }

    /// With the test faults on: the fault switch, the apply log, the audit,
    /// and every apply through the switch and the log.
    pub(super) async fn testing(
        &self,
        inbox: &Inbox<DoSql>,
        req: &mut Request,
        route: TargetRoute,
    ) -> Result<Response, RelayError> {
        use durable_relay::http::{json, parse_json, read_body};
        use durable_relay::testing::TargetFaultsBody;
        let tables = self.tables()?;
        let internal = |e: worker::Error| RelayError::internal(e.to_string());
        match route {
            TargetRoute::Faults => {
                let body: TargetFaultsBody = parse_json(&read_body(req).await?)?;
                let faults =
                    body.faults().map_err(|m| RelayError::bad_request(ErrorCode::InvalidDelay, m))?;
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
                    let id = id.map_err(|e| RelayError::internal(e.to_string()))?;
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
    async fn faulty_apply(
        &self,
        inbox: &Inbox<DoSql>,
        tables: &durable_relay::testing::TestTables<DoSql>,
        req: &mut Request,
    ) -> Result<Response, RelayError> {
        if let Some((thrown, after_apply)) = tables.take_throw()? {
            self.test.throw.set(Some(thrown));
            if !after_apply {
                return Err(RelayError::internal("thrown before the apply"));
            }
        }
        let faults = tables.faults()?;
        if faults.delay_ms > 0 {
            worker::Delay::from(std::time::Duration::from_millis(faults.delay_ms)).await;
        }
        match faults.reject {
            0 => {}
            1 => {
                return Err(RelayError::new(503, ErrorCode::Unavailable, "test fault: target rejects calls"))
            }
            _ => {
                return Err(RelayError::new(
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
