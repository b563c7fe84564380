//! `RelaySource`: the reference source Durable Object. It is a thin shell
//! around the library's [`Relay`]: its `fetch` serves the source protocol
//! ([`durable_relay::durable::source`]) and, after an accepted enqueue's
//! reply, delivers in the same invocation ([`Relay::deliver`]); its `alarm`
//! runs [`Relay::alarm`] and logs what the alarm did. An embedder's own
//! source object is the same few lines around the same type.
//!
//! Beyond the library's protocol it serves, for the operator's console:
//! `GET /alarms` (the figures of the last [`ALARM_HISTORY_LEN`] alarms and
//! in-turn deliveries, kept in memory: a restarted object starts a new
//! history, and keeping it costs no write) and `POST /retire` (leave the source directory; 409
//! `source_not_empty` while rows are queued or parked). After its first
//! accepted enqueue it lists itself in the directory ([`crate::directory`])
//! and keeps a one-row mark so it never asks again.
//!
//! Test builds (feature `testing`, and only with `RELAY_TEST_FAULTS=on`)
//! also serve `POST /faults` (`{"crash_checkpoints":n,"drop_alarm":bool,"refuse_writes":bool,
//! "fail_alarms":n}`)
//! and `GET /audit` (the outbox's invariants on its tables); that plumbing
//! lives in `source_do/testing.rs`, so this file is the object as it ships.

use durable_relay::core::ErrorCode;
use durable_relay::work::{self, Level};
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::rc::Rc;

use serde::Serialize;

use durable_relay::core::Name;
use durable_relay::durable::{now_ms, DoAlarm, DoSql};
use durable_relay::embed::log_alarm_as;
use durable_relay::http::{json, respond, RelayError};
use durable_relay::routes::SourceOp;
use durable_relay::store::{int, schema, Sql};
use durable_relay::{embed, AlarmSummary, Relay};
use worker::{durable_object, wasm_bindgen, DurableObject, Env, Request, Response, State};

use crate::routes::{DirectoryOp, SourceRoute};
use crate::{config, directory, TARGET_BINDING};

#[cfg(feature = "testing")]
mod testing;
#[cfg(feature = "testing")]
pub use testing::{RelaySourceTwin, TWIN_SOURCE_BINDING};

/// Alarms whose figures `GET /alarms` keeps: two minutes of a source that
/// re-fires every second, in about 10 KB of memory.
pub const ALARM_HISTORY_LEN: usize = 120;

/// The reference source's own table: the directory mark.
const COMPONENT: &str = "reference_source";
const MIGRATIONS: &[&[&str]] = &[&["CREATE TABLE reference_listed (id INTEGER PRIMARY KEY CHECK (id = 1), \
     listed_ms INTEGER NOT NULL)"]];

/// One alarm's or in-turn delivery's figures in the history.
#[derive(Clone, Debug, Serialize)]
pub struct AlarmPoint {
    /// When the alarm started, ms since the epoch.
    pub at_ms: u64,
    /// How long it ran, ms.
    pub duration_ms: u64,
    /// Rows delivered (left the outbox).
    pub rows_delivered: u32,
    /// Target calls made.
    pub subrequests: u32,
    /// Rows queued when it ended.
    pub queued_rows: u64,
    /// Rows parked when it ended.
    pub parked_rows: u64,
    /// Age of the oldest owed row when it ended, ms.
    pub oldest_row_age_ms: Option<u64>,
    /// Whether it saw a row older than the lag bound.
    pub lag_exceeded: bool,
    /// Whether an enqueue's invocation ran it (an in-turn delivery), not
    /// the platform's alarm.
    pub in_turn: bool,
}

/// The source's store: in test builds, behind the fault-injecting wrapper.
#[cfg(feature = "testing")]
type SourceSql = durable_relay::testing::FaultySql<DoSql>;
/// The source's store.
#[cfg(not(feature = "testing"))]
type SourceSql = DoSql;

/// The store a test build wraps around the object's SQLite.
#[cfg(feature = "testing")]
fn source_sql(sql: DoSql) -> SourceSql {
    durable_relay::testing::FaultySql::new(sql)
}

/// The store: the object's SQLite as it is.
#[cfg(not(feature = "testing"))]
fn source_sql(sql: DoSql) -> SourceSql {
    sql
}

/// The reference source Durable Object.
#[durable_object]
pub struct RelaySource {
    /// The library's source facade, as an embedder's object holds it.
    source: embed::RelaySource<SourceSql>,
    /// The last [`ALARM_HISTORY_LEN`] alarms and in-turn deliveries,
    /// oldest first; shared with the in-turn deliveries, which outlive the
    /// request that started them.
    history: Rc<RefCell<VecDeque<AlarmPoint>>>,
    /// Whether this source is in the directory (or none is bound), once read.
    listed: Cell<Option<bool>>,
    /// Test builds: how long the next retire waits before its directory
    /// call, ms (see `SourceFaultsBody::retire_delay_ms`).
    #[cfg(feature = "testing")]
    retire_delay_ms: Cell<u32>,
    /// Test builds: alarms still to fail (see `SourceFaultsBody::fail_alarms`).
    #[cfg(feature = "testing")]
    failing_alarms: Cell<u32>,
}

impl DurableObject for RelaySource {
    fn new(state: State, env: Env) -> Self {
        RelaySource {
            source: embed::RelaySource::with_store(state, env, source_sql).targets(TARGET_BINDING),
            history: Rc::new(RefCell::new(VecDeque::with_capacity(ALARM_HISTORY_LEN))),
            listed: Cell::new(None),
            #[cfg(feature = "testing")]
            retire_delay_ms: Cell::new(0),
            #[cfg(feature = "testing")]
            failing_alarms: Cell::new(0),
        }
    }

    async fn fetch(&self, mut req: Request) -> worker::Result<Response> {
        #[cfg(feature = "testing")]
        let before = self.source.opened().map(|r| r.sql().io()).unwrap_or_default();
        let resp = respond(self.route(&mut req).await).map(durable_relay::durable::announce);
        #[cfg(feature = "testing")]
        let resp = resp.and_then(|r| self.with_io(r, before));
        resp
    }

    async fn alarm(&self) -> worker::Result<Response> {
        #[cfg(feature = "testing")]
        if let Some(left) = self.failing_alarms.get().checked_sub(1) {
            self.failing_alarms.set(left);
            return Err(worker::Error::RustError(format!(
                "test fault: this alarm fails ({left} more to fail)"
            )));
        }
        let summary = self.source.run_alarm().await.map_err(worker::Error::RustError)?;
        let metrics_written =
            self.relay().is_ok_and(|relay| crate::metrics::write(self.env(), relay, &summary));
        remember(&self.history, &summary);
        let mut figures = serde_json::Map::new();
        figures.insert("metrics_written".into(), metrics_written.into());
        let mode = crate::config(self.env()).map(|c| c.alarm_log).unwrap_or_default();
        log_alarm_as(&summary, figures, mode);
        Response::ok("ok")
    }
}

#[wasm_bindgen::prelude::wasm_bindgen(wasm_bindgen = ::worker::wasm_bindgen)]
impl RelaySource {
    /// Tells the next alarm that it is the platform's `retry_count`th retry
    /// of a failed one, so it runs a smaller fire. workers-rs does not hand
    /// `alarm()` the platform's `alarmInfo`, so the module entry
    /// (`src/entry.mjs`) calls this with `alarmInfo.retryCount` first.
    #[wasm_bindgen(js_name = "alarmRetried")]
    pub fn alarm_retried(&self, retry_count: u32) {
        self.source.alarm_retried(retry_count);
    }

    /// Whether `source` is a partitioned logical source of this deployment
    /// (`RELAY_PARTITIONS`, read as the front door reads it), whose calls
    /// the module entry's `RelayRpc` hands the front door's router. False
    /// for a configuration that does not parse: the source object then
    /// refuses the call with the configuration's error.
    #[wasm_bindgen(js_name = "isPartitioned")]
    pub fn is_partitioned(env: wasm_bindgen::JsValue, source: String) -> bool {
        use wasm_bindgen::JsCast;
        let env: Env = env.unchecked_into();
        let Ok(name) = Name::new(&source) else { return false };
        crate::config(&env).is_ok_and(|c| c.partition_map(&name).is_some())
    }
}

impl RelaySource {
    /// The relay, opened on first use.
    fn relay(&self) -> Result<&Relay<SourceSql, DoAlarm>, RelayError> {
        self.source.relay()
    }

    fn state(&self) -> &State {
        self.source.object().0
    }

    fn env(&self) -> &Env {
        self.source.object().1
    }

    async fn route(&self, req: &mut Request) -> Result<Response, RelayError> {
        let url = req.url().map_err(|e| RelayError::bad_request(ErrorCode::BadUrl, e.to_string()))?;
        let route = SourceRoute::from_url(req.method().as_ref(), &url)?;
        if route == SourceRoute::Conformance {
            // Before the relay opens: the suite needs a database with nothing in it.
            return self.conformance().await;
        }
        let relay = self.relay()?;
        let internal = |e: worker::Error| RelayError::internal(e.to_string());
        match route {
            SourceRoute::Faults | SourceRoute::Audit | SourceRoute::Conformance => {
                self.testing(relay, req, route).await
            }
            SourceRoute::Alarms => {
                let history: Vec<AlarmPoint> = self.history.borrow().iter().cloned().collect();
                json(&serde_json::json!({"alarms": history, "kept": ALARM_HISTORY_LEN})).map_err(internal)
            }
            SourceRoute::Retire => self.retire(relay).await,
            SourceRoute::Relay(op @ SourceOp::Enqueue) => {
                if durable_relay::durable::source::fence(req)?.epoch == 0 {
                    if let Some(refusal) = config(self.env())?.unrouted_refusal(relay.name()) {
                        return Err(refusal.into());
                    }
                }
                let resp = durable_relay::durable::source::serve(relay, req, op).await?;
                if resp.status_code() == 200 {
                    // Delivers after the reply, in this invocation.
                    let (history, env) = (Rc::clone(&self.history), self.env().clone());
                    self.source.deliver_in_turn_with(move |relay, run| {
                        remember(&history, run);
                        let written = crate::metrics::write(&env, relay, run);
                        serde_json::Map::from_iter([("metrics_written".to_owned(), written.into())])
                    });
                    // The rows are committed: a directory failure must not
                    // turn into an error the caller would retry.
                    if let Err(e) = self.list(relay.name()).await {
                        work::log_json(
                            Level::Warn,
                            &serde_json::json!({"event": "relay_directory_error", "source": relay.name(), "error": e.message}),
                        );
                    }
                }
                Ok(resp)
            }
            SourceRoute::Relay(op) => durable_relay::durable::source::serve(relay, req, op).await,
        }
    }

    /// Whether the mark says this source is listed (read once).
    fn listed(&self) -> Result<bool, RelayError> {
        if let Some(listed) = self.listed.get() {
            return Ok(listed);
        }
        let db = DoSql::new(self.state());
        let store = |e: durable_relay::StoreError| RelayError::internal(e.to_string());
        schema::migrate(&db, COMPONENT, MIGRATIONS).map_err(store)?;
        let row = db.first("SELECT listed_ms FROM reference_listed WHERE id = 1", vec![]).map_err(store)?;
        self.listed.set(Some(row.is_some()));
        Ok(row.is_some())
    }

    /// Lists this source in the directory once: one directory call and one
    /// mark row, the first time only.
    async fn list(&self, name: &Name) -> Result<(), RelayError> {
        if self.listed()? {
            return Ok(());
        }
        let Some(resp) = directory::call(self.env(), &DirectoryOp::Register(name.clone())).await? else {
            // No directory bound: nothing to do, and nothing to ask again.
            self.listed.set(Some(true));
            return Ok(());
        };
        if resp.status_code() != 200 {
            return Err(RelayError::internal(format!("the directory answered {}", resp.status_code())));
        }
        DoSql::new(self.state())
            .run(
                "INSERT INTO reference_listed (id, listed_ms) VALUES (1, ?) ON CONFLICT(id) DO NOTHING",
                vec![int(now_ms())],
            )
            .map_err(|e| RelayError::internal(e.to_string()))?;
        self.listed.set(Some(true));
        Ok(())
    }

    /// Leaves the directory, if nothing is owed.
    ///
    /// Enqueues interleave with the directory call (it awaits another
    /// object), so the mark goes first: an enqueue that commits meanwhile
    /// finds the source unmarked and lists it again itself. Whatever order
    /// the two directory calls then land in, a retire that sees rows
    /// arrived (`os` moved) lists the source again and answers 409: a
    /// source that holds rows never stays unlisted.
    async fn retire(&self, relay: &Relay<SourceSql, DoAlarm>) -> Result<Response, RelayError> {
        let status = relay.status(now_ms()).await?;
        if status.queued_rows > 0 || status.parked_rows > 0 {
            return Err(not_empty(status.queued_rows, status.parked_rows));
        }
        let was_listed = self.listed()?;
        self.unmark()?;
        #[cfg(feature = "testing")]
        {
            let delay = self.retire_delay_ms.replace(0);
            if delay > 0 {
                worker::Delay::from(std::time::Duration::from_millis(u64::from(delay))).await;
            }
        }
        let resp = directory::call(self.env(), &DirectoryOp::Retire(relay.name().clone()))
            .await?
            .ok_or_else(|| {
                RelayError::new(501, ErrorCode::NoDirectory, "no source directory is bound (RELAY_DIRECTORY)")
            })?;
        if resp.status_code() != 200 {
            return Err(RelayError::internal(format!("the directory answered {}", resp.status_code())));
        }
        let after = relay.outbox().state()?;
        if after.os != status.last_seq {
            // Rows arrived while the directory was asked: stay listed.
            self.unmark()?;
            self.list(relay.name()).await?;
            return Err(not_empty(after.queued_rows, after.parked_rows));
        }
        json(&serde_json::json!({"source": relay.name(), "retired": true, "was_listed": was_listed}))
            .map_err(|e| RelayError::internal(e.to_string()))
    }

    /// Forgets the mark: the next enqueue lists the source again.
    fn unmark(&self) -> Result<(), RelayError> {
        DoSql::new(self.state())
            .run("DELETE FROM reference_listed WHERE id = 1", vec![])
            .map_err(|e| RelayError::internal(e.to_string()))?;
        self.listed.set(Some(false));
        Ok(())
    }

    /// Without the test plumbing there is no storage suite.
    #[cfg(not(feature = "testing"))]
    async fn conformance(&self) -> Result<Response, RelayError> {
        Err(RelayError::new(404, ErrorCode::NoRoute, "the storage suite exists only in test builds"))
    }

    /// Without the test plumbing there is no fault switch and no audit.
    #[cfg(not(feature = "testing"))]
    async fn testing(
        &self,
        _relay: &Relay<SourceSql, DoAlarm>,
        _req: &mut Request,
        _route: SourceRoute,
    ) -> Result<Response, RelayError> {
        Err(RelayError::new(
            404,
            ErrorCode::NoRoute,
            "the fault switch and the audit exist only in test builds",
        ))
    }
}

/// The refusal of a retire while rows are owed.
fn not_empty(queued: u64, parked: u64) -> RelayError {
    RelayError::new(
        409,
        ErrorCode::SourceNotEmpty,
        format!("{queued} rows queued and {parked} parked: deliver, redrive or discard them first"),
    )
}

/// Adds what an alarm or an in-turn delivery did to `history`, dropping the
/// oldest past [`ALARM_HISTORY_LEN`].
fn remember(history: &RefCell<VecDeque<AlarmPoint>>, summary: &AlarmSummary) {
    let mut history = history.borrow_mut();
    if history.len() == ALARM_HISTORY_LEN {
        history.pop_front();
    }
    history.push_back(AlarmPoint {
        at_ms: summary.started_at_ms,
        duration_ms: summary.duration_ms,
        rows_delivered: summary.rows_delivered,
        subrequests: summary.subrequests,
        queued_rows: summary.queued_rows,
        parked_rows: summary.parked_rows,
        oldest_row_age_ms: summary.oldest_row_age_ms,
        lag_exceeded: summary.lag_exceeded,
        in_turn: summary.in_turn,
    });
}
