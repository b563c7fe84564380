//! `RelaySource`: the reference source Durable Object. It is a thin shell
//! around the library's [`Relay`]: its `fetch` serves the source protocol
//! ([`durable_relay::durable::source`]), its `alarm` runs [`Relay::alarm`]
//! and logs what the alarm did. An embedder's own source object is the same
//! few lines around the same type.
//!
//! Test builds (feature `testing`, and only with `RELAY_TEST_FAULTS=on`)
//! also serve `POST /faults` (`{"crash_checkpoints":n,"drop_alarm":bool}`)
//! and `GET /audit` (the outbox's invariants on its tables).

use std::cell::OnceCell;

use durable_relay::core::{Name, RELAY_LAG_BOUND_MS};
use durable_relay::durable::{now_ms, DoAlarm, DoSql, DoTargets};
use durable_relay::http::{respond, HttpError};
use durable_relay::routes::SourceOp;
use durable_relay::{AlarmSummary, NoObserver, Relay, RelayConfig};
use worker::{durable_object, wasm_bindgen, DurableObject, Env, Request, Response, State};

use crate::{config, TARGET_BINDING};

/// The source's store: in test builds, behind the fault-injecting wrapper.
#[cfg(feature = "testing")]
type SourceSql = durable_relay::testing::FaultySql<DoSql>;
/// The source's store.
#[cfg(not(feature = "testing"))]
type SourceSql = DoSql;

/// The reference source Durable Object.
#[durable_object]
pub struct RelaySource {
    state: State,
    env: Env,
    relay: OnceCell<Relay<SourceSql, DoAlarm>>,
}

impl DurableObject for RelaySource {
    fn new(state: State, env: Env) -> Self {
        RelaySource { state, env, relay: OnceCell::new() }
    }

    async fn fetch(&self, mut req: Request) -> worker::Result<Response> {
        respond(self.route(&mut req).await)
    }

    async fn alarm(&self) -> worker::Result<Response> {
        match self.run().await {
            Ok(()) => Response::ok("ok"),
            Err(e) => {
                worker::console_error!("{}", serde_json::json!({"event": "relay_alarm_error", "error": e}));
                Err(worker::Error::RustError(e))
            }
        }
    }
}

impl RelaySource {
    /// The relay, opened on first use.
    fn relay(&self) -> Result<&Relay<SourceSql, DoAlarm>, HttpError> {
        if let Some(r) = self.relay.get() {
            return Ok(r);
        }
        let name = self.state.id().name().ok_or_else(|| {
            HttpError::bad_request(
                "unnamed_source",
                "address the source with idFromName(<name>) or getByName",
            )
        })?;
        let name = Name::new(name).map_err(|e| HttpError::bad_request("invalid_source", e.to_string()))?;
        #[cfg(feature = "testing")]
        let sql = durable_relay::testing::FaultySql::new(DoSql::new(&self.state));
        #[cfg(not(feature = "testing"))]
        let sql = DoSql::new(&self.state);
        let relay = Relay::open(name, sql, DoAlarm::new(&self.state), config(&self.env)?.source())
            .map_err(|e| HttpError::new(500, "bad_configuration", e.to_string()))?;
        Ok(self.relay.get_or_init(|| relay))
    }

    async fn route(&self, req: &mut Request) -> Result<Response, HttpError> {
        let url = req.url().map_err(|e| HttpError::bad_request("bad_url", e.to_string()))?;
        let op = SourceOp::from_url(req.method().as_ref(), &url)?;
        let relay = self.relay()?;
        #[cfg(feature = "testing")]
        if matches!(op, SourceOp::Faults | SourceOp::Audit) {
            return self.testing(relay, req, op).await;
        }
        durable_relay::durable::source::serve(relay, req, op).await
    }

    #[cfg(feature = "testing")]
    async fn testing(
        &self,
        relay: &Relay<SourceSql, DoAlarm>,
        req: &mut Request,
        op: SourceOp,
    ) -> Result<Response, HttpError> {
        use durable_relay::http::{json, parse_json, read_body};
        use durable_relay::testing::SourceFaultsBody;
        if !config(&self.env)?.faults {
            return Err(HttpError::new(403, "faults_disabled", "test faults are off (RELAY_TEST_FAULTS)"));
        }
        let internal = |e: worker::Error| HttpError::internal(e.to_string());
        if op == SourceOp::Audit {
            let verdict = relay.outbox().audit()?;
            return json(&serde_json::json!({"ok": verdict.is_ok(), "breach": verdict.err().map(|b| b.0)}))
                .map_err(internal);
        }
        let body: SourceFaultsBody = parse_json(&read_body(req).await?)?;
        relay.sql().crash_checkpoints(body.crash_checkpoints);
        if body.drop_alarm {
            relay.drop_alarm().await?;
        }
        json(&serde_json::json!({"ok": true})).map_err(internal)
    }

    async fn run(&self) -> Result<(), String> {
        let config: RelayConfig = config(&self.env).map_err(|e| e.message)?;
        let relay = self.relay().map_err(|e| e.message)?;
        let namespace = self.env.durable_object(TARGET_BINDING).map_err(|e| e.to_string())?;
        let targets = DoTargets { namespace, timeout_ms: config.call_timeout_ms };
        let mut summary = relay.alarm(&targets, &now_ms, &NoObserver).await.map_err(|f| {
            let retry = f
                .retry_at_ms
                .map_or_else(|| "no retry armed".to_owned(), |at| format!("retry armed at {at}"));
            format!("{} ({retry})", f.error)
        })?;
        summary.metrics_written = crate::metrics::write(&self.env, relay, &summary);
        log(&summary);
        Ok(())
    }
}

/// The per-alarm log lines: one `relay_alarm` with the figures, one
/// `relay_target_parked` per target parked, and `relay_lag_exceeded` when a
/// row older than the lag bound was seen.
fn log(summary: &AlarmSummary) {
    worker::console_log!("{}", serde_json::json!({"event": "relay_alarm", "alarm": summary}));
    for (target, rows, reason) in &summary.parked {
        worker::console_warn!(
            "{}",
            serde_json::json!({"event": "relay_target_parked", "source": summary.source, "target": target,
                "rows": rows, "reason": reason})
        );
    }
    if summary.lag_exceeded {
        worker::console_warn!(
            "{}",
            serde_json::json!({"event": "relay_lag_exceeded", "source": summary.source, "bound_ms": RELAY_LAG_BOUND_MS})
        );
    }
}
