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
//! | `GET /delivered-through?seq=N` | | `{"seq":N,"delivered":bool}` |
//! | `GET /watermark` | | `{"relay_watermark":ms,"now_ms":ms}` |
//! | `POST /faults` | test-only: `{"crash_checkpoints":n,"drop_alarm":bool}` | |

use std::cell::{Cell, OnceCell};

use serde::{Deserialize, Serialize};
use wasm_bindgen::JsValue;
use worker::{durable_object, wasm_bindgen, DurableObject, Env, Request, Response, State};

use super::config::RelayConfig;
use super::http::{json, parse_json, read_body, respond, HttpError};
use super::outbox::SourceFaults;
use super::outbox::{EnqueueFailure, Outbox};
use super::relay::{lagging, run_alarm, AlarmError, DoTargets};
use super::storage::{Db, StoreError};
use super::TARGET_BINDING;
use crate::core::{
    delivered_through, relay_watermark, EnqueueError, EnqueueRow, JsonValue, Name, ScanState,
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

/// An enqueue request body.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EnqueueBody {
    rows: Vec<WireRow>,
}

/// A row as sent, before its target name is validated.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WireRow {
    target: String,
    #[serde(default)]
    puts: Vec<(String, JsonValue)>,
    #[serde(default)]
    deletes: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FaultsBody {
    #[serde(default)]
    crash_checkpoints: u32,
    #[serde(default)]
    drop_alarm: bool,
}

#[derive(Serialize)]
struct Status {
    source: String,
    os: u64,
    queued_rows: u64,
    queued_bytes: u64,
    oldest_row_age_ms: Option<u64>,
    lag_exceeded: bool,
    rs: Option<ScanState>,
    rs_corrupt: bool,
    blocked_targets: Vec<String>,
    alarm_at_ms: Option<u64>,
    rearmed: bool,
    enqueued_rows: u64,
    delivered_rows: u64,
    sql_rows_written: u64,
    sql_rows_written_per_delivered_row: Option<f64>,
    alarms: u64,
    fires: u64,
    subrequests: u64,
    conflicts: u64,
    last_alarm: Option<serde_json::Value>,
    budget: crate::core::RelayBudget,
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
        RelaySource {
            state,
            env,
            db,
            outbox: OnceCell::new(),
            alarm: Cell::new(AlarmCache::Unknown),
        }
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
                worker::console_error!(
                    "{}",
                    serde_json::json!({"event": "relay_alarm_error", "error": e})
                );
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
            HttpError::bad_request(
                "unnamed_source",
                "address the source with idFromName(<name>)",
            )
        })?;
        Name::new(name).map_err(|e| HttpError::bad_request("invalid_source", e.to_string()))
    }

    fn outbox(&self) -> Result<&Outbox, HttpError> {
        if let Some(o) = self.outbox.get() {
            return Ok(o);
        }
        let outbox = Outbox::open(self.db.clone()).map_err(store_error)?;
        Ok(self.outbox.get_or_init(|| outbox))
    }

    async fn route(&self, req: &mut Request) -> Result<Response, HttpError> {
        let url = req
            .url()
            .map_err(|e| HttpError::bad_request("bad_url", e.to_string()))?;
        let method = req.method().to_string();
        match (method.as_str(), url.path()) {
            ("POST", "/enqueue") => self.enqueue(req).await,
            ("GET", "/status") => self.status().await,
            ("GET", "/delivered-through") => self.delivered_through(&url),
            ("GET", "/watermark") => {
                let now = now_ms();
                let head = self.outbox()?.head().map_err(store_error)?;
                json(&serde_json::json!({"relay_watermark": relay_watermark(head, now), "now_ms": now}))
                    .map_err(|e| HttpError::internal(e.to_string()))
            }
            ("POST", "/faults") => self.set_faults(req).await,
            (m, p) => Err(HttpError::new(
                404,
                "no_route",
                format!("no route for {m} {p} on a source"),
            )),
        }
    }

    async fn enqueue(&self, req: &mut Request) -> Result<Response, HttpError> {
        let _ = self.name()?;
        let body: EnqueueBody = parse_json(&read_body(req).await?)?;
        let rows = validate_rows(body.rows)?;
        let outbox = self.outbox()?;
        self.load_alarm().await?;
        // No await from here until the alarm is armed: the rows, the new
        // os and the arming commit together.
        // Validation happens before any write, so a refused enqueue commits
        // an empty transaction.
        let enqueued = outbox
            .db()
            .transaction(|| match outbox.enqueue(now_ms(), &rows) {
                Ok(e) => Ok(Ok(e)),
                Err(EnqueueFailure::Invalid(e)) => Ok(Err(e)),
                Err(EnqueueFailure::Store(e)) => Err(e),
            })
            .map_err(store_error)?
            .map_err(enqueue_error)?;
        self.arm(0).await?;
        json(&serde_json::json!({
            "seqs": enqueued.plan.seqs(),
            "os": enqueued.plan.os,
            "queued_rows": enqueued.queued_rows,
        }))
        .map_err(|e| HttpError::internal(e.to_string()))
    }

    /// Loads the alarm cache from storage if this instance does not know.
    async fn load_alarm(&self) -> Result<(), HttpError> {
        if self.alarm.get() != AlarmCache::Unknown {
            return Ok(());
        }
        let stored = self
            .state
            .storage()
            .get_alarm()
            .await
            .map_err(|e| HttpError::internal(e.to_string()))?;
        // An alarm handler may have started meanwhile and knows better.
        if self.alarm.get() == AlarmCache::Unknown {
            self.alarm
                .set(stored.map_or(AlarmCache::None, |t| AlarmCache::At(t.max(0) as u64)));
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
        self.state
            .storage()
            .set_alarm(worker::ScheduledTime::new(when))
            .await
            .map_err(|e| HttpError::internal(e.to_string()))
    }

    async fn run(&self) -> Result<(), String> {
        let config = self.config().map_err(|e| e.message)?;
        let name = self.name().map_err(|e| e.message)?;
        let outbox = self.outbox().map_err(|e| e.message)?;
        let namespace = self
            .env
            .durable_object(TARGET_BINDING)
            .map_err(|e| e.to_string())?;
        let targets = DoTargets { namespace };
        let result = run_alarm(
            outbox,
            &name,
            config.budget,
            config.max_in_flight,
            &targets,
            now_ms,
        )
        .await;
        let summary = match result {
            Ok(s) => s,
            Err(AlarmError::InjectedCrash) => {
                return Err("injected crash before the checkpoint".into())
            }
            Err(AlarmError::Store(e)) => {
                // Do not rely on the platform's few retries: back off ourselves.
                self.arm(crate::core::RETRY_BACKOFF_MAX_MS)
                    .await
                    .map_err(|e| e.message)?;
                return Err(e.to_string());
            }
        };
        worker::console_log!(
            "{}",
            serde_json::json!({"event": "relay_alarm", "alarm": summary})
        );
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

    async fn status(&self) -> Result<Response, HttpError> {
        let name = self.name()?;
        let outbox = self.outbox()?;
        let config = self.config()?;
        let stored_alarm = self
            .state
            .storage()
            .get_alarm()
            .await
            .map_err(|e| HttpError::internal(e.to_string()))?;
        let state = outbox.state().map_err(store_error)?;
        let head = outbox.head().map_err(store_error)?;
        let now = now_ms();
        // A dropped alarm (retries used up) must not strand queued rows.
        let rearmed = state.queued_rows > 0 && stored_alarm.is_none();
        if rearmed {
            self.alarm.set(AlarmCache::None);
            self.arm(0).await?;
        }
        let rs = state.rs.as_deref().map(ScanState::decode);
        let scan = rs.clone().and_then(Result::ok);
        let oldest = head.map(|h| now.saturating_sub(h.at_ms));
        let status = Status {
            source: name.to_string(),
            os: state.os,
            queued_rows: state.queued_rows,
            queued_bytes: state.queued_bytes,
            oldest_row_age_ms: oldest,
            lag_exceeded: head.is_some_and(|h| lagging(h.at_ms, now)),
            blocked_targets: scan.as_ref().map_or_else(Vec::new, |s| {
                s.blocked.iter().map(|n| n.to_string()).collect()
            }),
            rs: scan,
            rs_corrupt: matches!(rs, Some(Err(_))),
            alarm_at_ms: if rearmed {
                Some(now)
            } else {
                stored_alarm.map(|t| t.max(0) as u64)
            },
            rearmed,
            enqueued_rows: state.enqueued_rows,
            delivered_rows: state.delivered_rows,
            sql_rows_written: state.sql_rows_written,
            sql_rows_written_per_delivered_row: (state.delivered_rows > 0)
                .then(|| state.sql_rows_written as f64 / state.delivered_rows as f64),
            alarms: state.alarms,
            fires: state.fires,
            subrequests: state.calls,
            conflicts: state.conflicts,
            last_alarm: state
                .last_alarm
                .as_deref()
                .and_then(|t| serde_json::from_str(t).ok()),
            budget: config.budget,
        };
        json(&status).map_err(|e| HttpError::internal(e.to_string()))
    }

    fn delivered_through(&self, url: &worker::Url) -> Result<Response, HttpError> {
        let seq = url
            .query_pairs()
            .find(|(k, _)| k == "seq")
            .and_then(|(_, v)| v.parse::<u64>().ok())
            .filter(|s| *s <= crate::core::SEQ_MAX)
            .ok_or_else(|| {
                HttpError::bad_request("invalid_seq", "query parameter seq must be 0..=2^53-1")
            })?;
        let outbox = self.outbox()?;
        let os = outbox.state().map_err(store_error)?.os;
        let head = outbox.head().map_err(store_error)?;
        json(&serde_json::json!({"seq": seq, "delivered": delivered_through(seq, os, head)}))
            .map_err(|e| HttpError::internal(e.to_string()))
    }

    async fn set_faults(&self, req: &mut Request) -> Result<Response, HttpError> {
        if !self.config()?.faults {
            return Err(HttpError::new(
                403,
                "faults_disabled",
                "test faults are off (RELAY_TEST_FAULTS)",
            ));
        }
        let body: FaultsBody = parse_json(&read_body(req).await?)?;
        self.outbox()?.inject_faults(SourceFaults {
            crash_checkpoints: body.crash_checkpoints,
        });
        if body.drop_alarm {
            self.state
                .storage()
                .delete_alarm()
                .await
                .map_err(|e| HttpError::internal(e.to_string()))?;
            self.alarm.set(AlarmCache::None);
        }
        json(&serde_json::json!({"ok": true})).map_err(|e| HttpError::internal(e.to_string()))
    }
}

/// Validates target names, naming the row that is wrong.
fn validate_rows(rows: Vec<WireRow>) -> Result<Vec<EnqueueRow>, HttpError> {
    rows.into_iter()
        .enumerate()
        .map(|(i, r)| {
            let target = Name::new(r.target).map_err(|e| {
                HttpError::bad_request("invalid_target", format!("rows[{i}].target: {e}"))
            })?;
            Ok(EnqueueRow {
                target,
                puts: r.puts,
                deletes: r.deletes,
            })
        })
        .collect()
}

/// The HTTP form of an enqueue refusal.
pub fn enqueue_error(e: EnqueueError) -> HttpError {
    let status = match e {
        EnqueueError::TooManyBytes(_) => 413,
        EnqueueError::SequenceExhausted => 507,
        _ => 400,
    };
    HttpError::new(status, e.code(), e.to_string())
}
