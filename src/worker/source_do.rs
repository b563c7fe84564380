//! `RelaySource`: the reference source Durable Object. It owns an outbox
//! in its SQLite storage, accepts enqueues (JSON over `fetch`), runs the
//! relay from its alarm, and reports status.
//!
//! Its `fetch` protocol is public: other Workers with a binding to this
//! class call it through a stub, addressed by name (`idFromName`):
//!
//! | method and path | body / query | reply |
//! | --- | --- | --- |
//! | `POST /enqueue` | `{"rows":[{"target","puts":[[k,v]..],"deletes":[k..]}]}` | `{"seqs":[..],"os":N,"queued_rows":N}` |
//! | `GET /status` | | backlog, `rs`, alarm, counters, last alarm |
//! | `GET /delivered-through/{seq}` | | `{"seq":N,"delivered":bool}` |
//! | `GET /watermark` | | `{"relay_watermark":ms,"now_ms":ms}` |
//! | `GET /parked` | | parked and failing targets: reason, rows, first and last failure |
//! | `GET /parked/{target}?after=&limit=` | | parked rows, ascending |
//! | `POST /parked/{target}/redrive` | | `{"rows":n,"was_parked":bool}`; rows return to the outbox in order |
//! | `POST /parked/{target}/discard` | | `{"rows":n,"was_parked":bool}`; rows dropped, kept until the discard horizon |
//! | `POST /faults` | test-only: `{"crash_checkpoints":n,"drop_alarm":bool}` | |
//!
//! An enqueue may carry `"idempotency_key"`: the same key and rows again
//! answer the original sequences with `"duplicate":true`; other rows under
//! the same key get 409. A full outbox answers 429 with `Retry-After`.

#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]
#![deny(clippy::unreachable, clippy::todo, clippy::unimplemented)]

use std::cell::{Cell, OnceCell};

use serde::Deserialize;
use wasm_bindgen::JsValue;
use worker::{durable_object, wasm_bindgen, DurableObject, Env, Request, Response, State};

use super::config::RelayConfig;
use super::http::{json, parse_json, read_body, respond, HttpError};
use super::outbox::SourceFaults;
use super::outbox::{EnqueueFailure, Outbox, SourceState};
use super::parking::ParkedPage;
use super::relay::{lagging, run_alarm, AlarmError, AlarmSummary, DoTargets};
use super::routes::SourceOp;
use super::storage::{Db, StoreError};
use super::{METRICS_BINDING, TARGET_BINDING};
use crate::core::{
    decode_enqueue, delivered_through, relay_watermark, EnqueueError, EnqueueRefusal, Name, ScanState,
    BACKPRESSURE_RETRY_AFTER_S,
};

/// What this instance knows of its alarm. The platform clears an alarm
/// when it fires, and only this code sets one, so the cache is exact
/// once loaded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum AlarmCache {
    /// Not loaded yet (a new instance, or after a handler threw).
    Unknown,
    /// No alarm is set.
    None,
    /// An alarm is set for this time, ms since the epoch.
    At(u64),
}

/// The reference source Durable Object.
#[durable_object]
pub struct RelaySource {
    state: State,
    env: Env,
    db: Db,
    outbox: OnceCell<Outbox>,
    alarm: Cell<AlarmCache>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FaultsBody {
    #[serde(default)]
    crash_checkpoints: u32,
    #[serde(default)]
    drop_alarm: bool,
}

fn now_ms() -> u64 {
    worker::Date::now().as_millis()
}

fn store_error(e: StoreError) -> HttpError {
    HttpError::internal(e.to_string())
}

impl DurableObject for RelaySource {
    fn new(state: State, env: Env) -> Self {
        let (state, db) = Db::from_state(state);
        RelaySource { state, env, db, outbox: OnceCell::new(), alarm: Cell::new(AlarmCache::Unknown) }
    }

    async fn fetch(&self, mut req: Request) -> worker::Result<Response> {
        respond(self.route(&mut req).await)
    }

    async fn alarm(&self) -> worker::Result<Response> {
        // The platform consumed the alarm that woke us.
        self.alarm.set(AlarmCache::None);
        match self.run().await {
            Ok(()) => Response::ok("ok"),
            Err(e) => {
                self.alarm.set(AlarmCache::Unknown);
                worker::console_error!("{}", serde_json::json!({"event": "relay_alarm_error", "error": e}));
                Err(worker::Error::RustError(e))
            }
        }
    }
}

impl RelaySource {
    fn config(&self) -> Result<RelayConfig, HttpError> {
        RelayConfig::from_vars(|k| self.env.var(k).ok().map(|v| v.to_string()))
            .map_err(|e| HttpError::new(500, "bad_configuration", e.to_string()))
    }

    fn name(&self) -> Result<Name, HttpError> {
        let name = self.state.id().name().ok_or_else(|| {
            HttpError::bad_request("unnamed_source", "address the source with idFromName(<name>)")
        })?;
        Name::new(name).map_err(|e| HttpError::bad_request("invalid_source", e.to_string()))
    }

    fn outbox(&self) -> Result<&Outbox, HttpError> {
        if let Some(o) = self.outbox.get() {
            return Ok(o);
        }
        let settings = self.config()?.settings;
        let outbox = Outbox::open(self.db.clone(), settings).map_err(store_error)?;
        Ok(self.outbox.get_or_init(|| outbox))
    }

    async fn route(&self, req: &mut Request) -> Result<Response, HttpError> {
        let url = req.url().map_err(|e| HttpError::bad_request("bad_url", e.to_string()))?;
        let internal = |e: worker::Error| HttpError::internal(e.to_string());
        match SourceOp::from_url(req.method().as_ref(), &url)? {
            SourceOp::Enqueue => self.enqueue(req).await,
            SourceOp::Status => self.status().await,
            SourceOp::DeliveredThrough(seq) => self.delivered_through(seq),
            SourceOp::Watermark => {
                let now = now_ms();
                let head = self.outbox()?.head().map_err(store_error)?;
                json(&serde_json::json!({"relay_watermark": relay_watermark(head, now), "now_ms": now}))
                    .map_err(internal)
            }
            SourceOp::Faults => self.set_faults(req).await,
            SourceOp::ParkedTargets => {
                let targets = self.outbox()?.target_reports().map_err(store_error)?;
                json(&serde_json::json!({ "targets": targets })).map_err(internal)
            }
            SourceOp::ParkedRows { target, after, limit } => self.parked_rows(&target, after, limit),
            SourceOp::Redrive(target) => self.operate(&target, "redrive").await,
            SourceOp::Discard(target) => self.operate(&target, "discard").await,
        }
    }

    async fn enqueue(&self, req: &mut Request) -> Result<Response, HttpError> {
        let _ = self.name()?;
        let body = decode_enqueue(&read_body(req).await?)?;
        let rows = body.rows;
        let outbox = self.outbox()?;
        self.load_alarm().await?;
        // No await from here until the alarm is armed: the rows, the new
        // os and the arming commit together.
        // Validation happens before any write, so a refused enqueue commits
        // an empty transaction.
        let key = body.idempotency_key.as_deref();
        let enqueued = outbox
            .db()
            .transaction(|| match outbox.enqueue(now_ms(), key, &rows) {
                Ok(e) => Ok(Ok(e)),
                Err(EnqueueFailure::Refused(e)) => Ok(Err(e)),
                Err(EnqueueFailure::Store(e)) => Err(e),
            })
            .map_err(store_error)?
            .map_err(refusal)?;
        if !enqueued.duplicate {
            self.arm(0).await?;
        }
        json(&enqueued).map_err(|e| HttpError::internal(e.to_string()))
    }

    /// `GET /parked/{target}`: a page of the target's parked rows.
    fn parked_rows(&self, target: &Name, after: u64, limit: u32) -> Result<Response, HttpError> {
        let rows = self.outbox()?.parked_rows(target.as_str(), after, limit).map_err(store_error)?;
        let next = (rows.len() as u64 == u64::from(limit)).then(|| rows.last().map(|r| r.seq)).flatten();
        json(&ParkedPage { target: target.as_str(), rows, next })
            .map_err(|e| HttpError::internal(e.to_string()))
    }

    /// `POST /parked/{target}/redrive|discard`: idempotent, audited.
    async fn operate(&self, target: &Name, action: &'static str) -> Result<Response, HttpError> {
        let outbox = self.outbox()?;
        // Loaded first, so the redrive and its arming share one turn.
        self.load_alarm().await?;
        let outcome = if action == "redrive" {
            outbox.redrive(target.as_str())
        } else {
            outbox.discard(target.as_str(), now_ms())
        }
        .map_err(store_error)?;
        worker::console_log!(
            "{}",
            serde_json::json!({"event": "relay_operator", "action": action, "source": self.name()?.as_str(),
                "target": target.as_str(), "rows": outcome.rows, "was_parked": outcome.was_parked})
        );
        if action == "redrive" && outcome.rows > 0 {
            self.arm(0).await?;
        }
        json(&outcome).map_err(|e| HttpError::internal(e.to_string()))
    }

    /// Loads the alarm cache from storage if this instance does not know.
    async fn load_alarm(&self) -> Result<(), HttpError> {
        if self.alarm.get() != AlarmCache::Unknown {
            return Ok(());
        }
        let stored =
            self.state.storage().get_alarm().await.map_err(|e| HttpError::internal(e.to_string()))?;
        // An alarm handler may have started meanwhile and knows better.
        if self.alarm.get() == AlarmCache::Unknown {
            self.alarm.set(stored.map_or(AlarmCache::None, |t| AlarmCache::At(t.max(0) as u64)));
        }
        Ok(())
    }

    /// Ensures an alarm is due no later than `delay_ms` from now. Keeps an
    /// earlier one; writes nothing when it is already early enough.
    async fn arm(&self, delay_ms: u64) -> Result<(), HttpError> {
        let due = now_ms() + delay_ms;
        if let AlarmCache::At(t) = self.alarm.get() {
            if t <= due {
                return Ok(());
            }
        }
        self.alarm.set(AlarmCache::At(due));
        if let Some(o) = self.outbox.get() {
            o.note_write();
        }
        let when = worker::js_sys::Date::new(&JsValue::from_f64(due as f64));
        let set = self.state.storage().set_alarm(worker::ScheduledTime::new(when)).await;
        set.map_err(|e| {
            // We no longer know what is stored; the next use reloads it.
            self.alarm.set(AlarmCache::Unknown);
            HttpError::internal(e.to_string())
        })
    }

    async fn run(&self) -> Result<(), String> {
        let config = self.config().map_err(|e| e.message)?;
        let name = self.name().map_err(|e| e.message)?;
        let outbox = self.outbox().map_err(|e| e.message)?;
        let namespace = self.env.durable_object(TARGET_BINDING).map_err(|e| e.to_string())?;
        let targets = DoTargets { namespace, timeout_ms: config.call_timeout_ms };
        let result = run_alarm(outbox, &name, config.budget, config.max_in_flight, &targets, now_ms).await;
        let mut summary = match result {
            Ok(s) => s,
            Err(AlarmError::InjectedCrash) => return Err("injected crash before the checkpoint".into()),
            Err(AlarmError::Store(e)) => {
                // Do not rely on the platform's few retries: back off ourselves.
                self.arm(crate::core::RETRY_BACKOFF_MAX_MS).await.map_err(|e| e.message)?;
                return Err(e.to_string());
            }
        };
        summary.metrics_written = self.write_metrics(&summary);
        worker::console_log!("{}", serde_json::json!({"event": "relay_alarm", "alarm": summary}));
        if summary.lag_exceeded {
            worker::console_warn!(
                "{}",
                serde_json::json!({"event": "relay_lag_exceeded", "source": name.as_str(),
                    "bound_ms": crate::core::RELAY_LAG_BOUND_MS})
            );
        }
        if let Some(delay) = summary.next_in_ms {
            self.arm(delay).await.map_err(|e| e.message)?;
        }
        Ok(())
    }

    /// Writes the alarm's figures to Workers Analytics Engine when the
    /// `RELAY_METRICS` dataset is bound; without it, does nothing. Returns
    /// whether a data point was written.
    fn write_metrics(&self, s: &AlarmSummary) -> bool {
        let Ok(dataset) = self.env.analytics_engine(METRICS_BINDING) else {
            return false;
        };
        let state = self.outbox().ok().and_then(|o| o.state().ok());
        let (hits, full) = state.as_ref().map_or((0, 0), |st| (st.dedup_hits, st.rejected_full));
        let point = worker::AnalyticsEngineDataPointBuilder::new()
            .indexes([s.source.as_str()])
            .add_blob(s.source.as_str())
            .doubles([
                f64::from(s.fires),
                f64::from(s.subrequests),
                f64::from(s.rows_delivered),
                f64::from(s.rows_applied),
                s.queued_rows as f64,
                s.queued_bytes as f64,
                s.parked_rows as f64,
                s.oldest_row_age_ms.unwrap_or(0) as f64,
                f64::from(u8::from(s.lag_exceeded)),
                hits as f64,
                full as f64,
                s.duration_ms as f64,
            ])
            .build();
        match dataset.write_data_point(&point) {
            Ok(()) => true,
            Err(e) => {
                let error = e.to_string();
                worker::console_warn!(
                    "{}",
                    serde_json::json!({"event": "relay_metrics_error", "error": error})
                );
                false
            }
        }
    }

    async fn status(&self) -> Result<Response, HttpError> {
        let name = self.name()?;
        let outbox = self.outbox()?;
        let config = self.config()?;
        let internal = |e: worker::Error| HttpError::internal(e.to_string());
        let stored_alarm = self.state.storage().get_alarm().await.map_err(internal)?;
        let state = outbox.state().map_err(store_error)?;
        let now = now_ms();
        // A dropped alarm (retries used up) must not strand queued rows.
        let rearmed = state.queued_rows > 0 && stored_alarm.is_none();
        if rearmed {
            self.alarm.set(AlarmCache::None);
            self.arm(0).await?;
        }
        let mut status = self.status_body(&name, &state, now).map_err(store_error)?;
        let alarm_at = if rearmed { Some(now) } else { stored_alarm.map(|t| t.max(0) as u64) };
        status.insert("alarm_at_ms".into(), serde_json::json!(alarm_at));
        status.insert("rearmed".into(), serde_json::json!(rearmed));
        status.insert("budget".into(), serde_json::json!(config.budget));
        status.insert("settings".into(), serde_json::json!(config.settings));
        json(&status).map_err(internal)
    }

    /// Everything status reports that storage alone answers.
    fn status_body(
        &self,
        name: &Name,
        state: &SourceState,
        now: u64,
    ) -> Result<serde_json::Map<String, serde_json::Value>, StoreError> {
        let outbox = self.outbox().map_err(|e| StoreError::Sql(e.message))?;
        let head = outbox.head()?;
        let rs = state.rs.as_deref().map(ScanState::decode);
        let scan = rs.clone().and_then(Result::ok);
        let targets = outbox.target_reports()?;
        let parked: Vec<_> = targets.iter().filter(|t| t.parked != 0).map(|t| (&t.target, t.rows)).collect();
        let failing: Vec<_> =
            targets.iter().filter(|t| t.parked == 0).map(|t| (&t.target, t.failed_cycles)).collect();
        let capacity = outbox.capacity(state);
        let written = state.sql_rows_written + outbox.unwritten_counts().0;
        let per_row = (state.delivered_rows > 0).then(|| written as f64 / state.delivered_rows as f64);
        let serde_json::Value::Object(mut body) =
            serde_json::to_value(state).map_err(|e| StoreError::Sql(e.to_string()))?
        else {
            return Err(StoreError::Sql("the state row did not serialise to an object".into()));
        };
        body.insert("source".into(), serde_json::json!(name));
        body.insert("rs".into(), serde_json::json!(scan));
        body.insert("rs_corrupt".into(), serde_json::json!(matches!(rs, Some(Err(_)))));
        let last: Option<serde_json::Value> =
            state.last_alarm.as_deref().and_then(|t| serde_json::from_str(t).ok());
        body.insert("last_alarm".into(), serde_json::json!(last));
        body.insert("oldest_row_age_ms".into(), serde_json::json!(head.map(|h| now.saturating_sub(h.at_ms))));
        body.insert("lag_exceeded".into(), serde_json::json!(head.is_some_and(|h| lagging(h.at_ms, now))));
        body.insert("blocked_targets".into(), serde_json::json!(scan.map_or_else(Vec::new, |s| s.blocked)));
        body.insert(
            "parked_targets".into(),
            serde_json::json!(parked.into_iter().collect::<std::collections::BTreeMap<_, _>>()),
        );
        body.insert(
            "failing_targets".into(),
            serde_json::json!(failing.into_iter().collect::<std::collections::BTreeMap<_, _>>()),
        );
        body.insert(
            "capacity".into(),
            serde_json::json!({
                "rows": capacity.rows, "bytes": capacity.bytes, "max_rows": capacity.max_rows,
                "max_bytes": capacity.max_bytes, "percent_full": capacity.percent_full(),
            }),
        );
        body.insert("subrequests".into(), serde_json::json!(state.calls));
        let (writes, hits, full) = outbox.unwritten_counts();
        body.insert("dedup_hits".into(), serde_json::json!(state.dedup_hits + hits));
        body.insert("rejected_full".into(), serde_json::json!(state.rejected_full + full));
        body.insert("sql_rows_written".into(), serde_json::json!(state.sql_rows_written + writes));
        body.insert("sql_rows_written_per_delivered_row".into(), serde_json::json!(per_row));
        body.insert("dedup_records".into(), serde_json::json!(outbox.dedup_records()?));
        Ok(body)
    }

    fn delivered_through(&self, seq: u64) -> Result<Response, HttpError> {
        let outbox = self.outbox()?;
        let os = outbox.state().map_err(store_error)?.os;
        let head = outbox.head().map_err(store_error)?;
        json(&serde_json::json!({"seq": seq, "delivered": delivered_through(seq, os, head)}))
            .map_err(|e| HttpError::internal(e.to_string()))
    }

    async fn set_faults(&self, req: &mut Request) -> Result<Response, HttpError> {
        if !self.config()?.faults {
            return Err(HttpError::new(403, "faults_disabled", "test faults are off (RELAY_TEST_FAULTS)"));
        }
        let body: FaultsBody = parse_json(&read_body(req).await?)?;
        self.outbox()?.inject_faults(SourceFaults { crash_checkpoints: body.crash_checkpoints });
        if body.drop_alarm {
            self.state.storage().delete_alarm().await.map_err(|e| HttpError::internal(e.to_string()))?;
            self.alarm.set(AlarmCache::None);
        }
        json(&serde_json::json!({"ok": true})).map_err(|e| HttpError::internal(e.to_string()))
    }
}

/// The HTTP form of an enqueue refusal; a full outbox adds `Retry-After`.
pub fn refusal(e: EnqueueRefusal) -> HttpError {
    let error = HttpError::new(e.status(), e.code(), e.to_string());
    match e {
        EnqueueRefusal::Invalid(EnqueueError::OutboxFull { .. }) => {
            error.retry_after(BACKPRESSURE_RETRY_AFTER_S)
        }
        _ => error,
    }
}
