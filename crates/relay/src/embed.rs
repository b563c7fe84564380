//! The relay inside your own Durable Objects, in a few lines: a [`Source`]
//! for the object that writes rows, a [`Target`] for the object that
//! applies them. Both are opened on first use, read the same variables as
//! the reference Worker ([`RelayConfig`]), and serve the relay's own
//! `fetch` protocol for what your object does not handle itself.
//!
//! ```no_run
//! use durable_relay::prelude::*;
//!
//! const ORDERS_TABLE: Migrations =
//!     &[&["CREATE TABLE IF NOT EXISTS orders (id TEXT PRIMARY KEY, seq INTEGER NOT NULL)"]];
//!
//! #[durable_object]
//! pub struct Orders {
//!     relay: Source,
//! }
//!
//! impl DurableObject for Orders {
//!     fn new(state: State, env: Env) -> Self {
//!         Orders { relay: Source::new(state, env).targets("CUSTOMERS").tables("orders", ORDERS_TABLE) }
//!     }
//!
//!     async fn fetch(&self, _req: Request) -> worker::Result<Response> {
//!         respond(self.place().await)
//!     }
//!
//!     async fn alarm(&self) -> worker::Result<Response> {
//!         self.relay.alarm().await
//!     }
//! }
//!
//! impl Orders {
//!     async fn place(&self) -> Result<Response, HttpError> {
//!         // Your write and the row commit together, or neither does.
//!         let row = row("customer-7")?.put("order:17", serde_json::json!({"amount": 30}));
//!         let (_, done) = self
//!             .relay
//!             .enqueue_with(&[row], Enqueue::key("order-17"), |sql, done| {
//!                 let seq = done.seqs.first().copied().unwrap_or(0);
//!                 sql.run("INSERT INTO orders (id, seq) VALUES (?, ?)", vec!["order-17".into(), int(seq)])
//!             })
//!             .await?;
//!         Ok(json(&done)?)
//!     }
//! }
//! # fn main() {}
//! ```

#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]
#![deny(clippy::unreachable, clippy::todo, clippy::unimplemented)]

use crate::core::ErrorCode;
use crate::work::{self, Level};
use std::borrow::Cow;
use std::cell::OnceCell;

use worker::{Env, Request, Response, State};

use crate::config::{AlarmLog, RelayConfig};
use crate::core::{EnqueueRow, Name, Traceparent, RELAY_LAG_BOUND_MS};
use crate::driver::{AlarmSummary, NoObserver};
use crate::durable::{now_ms, open_error, source_id, source_name, DoAlarm, DoSql, DoTargets, HostAlarm};
use crate::hook::Hook;
pub use crate::hook::{HookError, KeysOnly, OnApply};
use crate::http::{respond, HttpError};
use crate::source::Relay;
use crate::store::inbox::Inbox;
use crate::store::outbox::Enqueued;
use crate::store::{schema, Sql, StoreError};

/// The binding a [`Source`] calls its targets through unless told another
/// ([`Source::targets`]): the reference Worker's.
pub const DEFAULT_TARGET_BINDING: &str = "RELAY_TARGET";

/// Your own tables, as versioned migrations: each entry is one version's
/// statements, applied once, in order, with the relay's own (see
/// [`schema::migrate`]).
pub type Migrations = &'static [&'static [&'static str]];

/// How to enqueue: an idempotency key, a `traceparent`. The default is
/// neither.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Enqueue {
    /// Names the request: a repeat with the same rows is answered as a
    /// duplicate and writes nothing.
    pub key: Option<String>,
    /// W3C trace context stored and sent with every row.
    pub trace: Option<Traceparent>,
}

impl Enqueue {
    /// Options with idempotency key `key`.
    pub fn key(key: impl Into<String>) -> Enqueue {
        Enqueue { key: Some(key.into()), trace: None }
    }

    /// These options, carrying `trace`.
    pub fn traced(mut self, trace: Option<Traceparent>) -> Enqueue {
        self.trace = trace;
        self
    }
}

/// The source side of the relay in your Durable Object. `S` is the store
/// the relay writes through: the object's own SQLite ([`DoSql`]), or a
/// wrapper around it (the reference Worker's test build injects faults so).
pub struct Source<S: Sql = DoSql> {
    state: State,
    env: Env,
    targets: Cow<'static, str>,
    tables: Option<(&'static str, Migrations)>,
    store: fn(DoSql) -> S,
    /// The host's scheduler the relay keeps its alarm with, or none: the
    /// object's own alarm.
    scheduler: Option<HostAlarm>,
    relay: OnceCell<Relay<S, DoAlarm>>,
    /// Which retry of a failed alarm the next alarm is (`alarmInfo.retryCount`),
    /// until the alarm consumes it.
    retried: std::cell::Cell<u32>,
}

impl Source {
    /// The relay of the object whose `state` and `env` these are. Nothing is
    /// opened until first use.
    pub fn new(state: State, env: Env) -> Source {
        Source::with_store(state, env, |sql| sql)
    }
}

impl<S: Sql> Source<S> {
    /// [`Source::new`], writing through `store(the object's SQLite)`.
    pub fn with_store(state: State, env: Env, store: fn(DoSql) -> S) -> Source<S> {
        let targets = Cow::Borrowed(DEFAULT_TARGET_BINDING);
        Source {
            state,
            env,
            targets,
            tables: None,
            store,
            scheduler: None,
            relay: OnceCell::new(),
            retried: std::cell::Cell::new(0),
        }
    }

    /// Calls targets through the Durable Object binding `binding`.
    pub fn targets(mut self, binding: impl Into<Cow<'static, str>>) -> Source<S> {
        self.targets = binding.into();
        self
    }

    /// Keeps the relay's alarm with `scheduler` instead of the object's own
    /// alarm, on every path that arms it: for a host whose framework owns
    /// the object's alarm and runs its own work from it (the Agents SDK),
    /// which then runs [`alarm`](Source::alarm) when the time it keeps
    /// comes.
    pub fn scheduler(mut self, scheduler: HostAlarm) -> Source<S> {
        self.scheduler = Some(scheduler);
        self
    }

    /// Creates or migrates your own tables (`component` names them in the
    /// schema table) when the relay opens.
    pub fn tables(mut self, component: &'static str, migrations: Migrations) -> Source<S> {
        self.tables = Some((component, migrations));
        self
    }

    /// The object's state and environment.
    pub fn object(&self) -> (&State, &Env) {
        (&self.state, &self.env)
    }

    /// Refuses, before anything is written, a configuration the relay
    /// cannot run with: a `RELAY_*` variable with a bad value (naming it),
    /// or a target binding that `env` lacks or that is not a Durable Object
    /// namespace (naming it and the Durable Object bindings `env` has).
    /// Both answer 500 `bad_configuration`. [`Source::relay`] runs it as the
    /// relay opens, so the first enqueue, status or fetch is refused rather
    /// than every alarm failing; call it in your object's constructor to
    /// refuse there.
    pub fn check(&self) -> Result<(), HttpError> {
        config(&self.env)?;
        target_namespace(&self.env, &self.targets)?;
        Ok(())
    }

    /// The relay, opened on first use (after [`Source::check`]).
    pub fn relay(&self) -> Result<&Relay<S, DoAlarm>, HttpError> {
        if let Some(relay) = self.relay.get() {
            return Ok(relay);
        }
        self.check()?;
        let sql = (self.store)(DoSql::new(&self.state));
        let relay = Relay::open(
            source_name(&self.state)?,
            source_id(&self.state)?,
            sql,
            self.scheduler.clone().map_or_else(|| DoAlarm::new(&self.state), DoAlarm::host),
            config(&self.env)?.source(),
        )
        .map_err(open_error)?;
        if let Some((component, migrations)) = self.tables {
            schema::migrate(relay.sql(), component, migrations)?;
        }
        Ok(self.relay.get_or_init(|| relay))
    }

    /// The relay if something has opened it, without opening it.
    pub fn opened(&self) -> Option<&Relay<S, DoAlarm>> {
        self.relay.get()
    }

    /// The object's database, for your own tables.
    pub fn sql(&self) -> Result<&S, HttpError> {
        Ok(self.relay()?.sql())
    }

    /// Enqueues `rows` in a transaction of their own.
    pub async fn enqueue(&self, rows: &[EnqueueRow], options: Enqueue) -> Result<Enqueued, HttpError> {
        let (_, done) = self.enqueue_with(rows, options, |_, _| Ok::<(), StoreError>(())).await?;
        Ok(done)
    }

    /// Enqueues `rows` and runs `write` (your own writes, on the object's
    /// database) in **one** transaction: both commit, or neither does. An
    /// error from `write` rolls everything back and is answered 409
    /// `aborted`. A repeat of a keyed request writes nothing and does not
    /// run `write` (its writes were made the first time): its result is
    /// then `None`.
    pub async fn enqueue_with<R, E: std::fmt::Display>(
        &self,
        rows: &[EnqueueRow],
        options: Enqueue,
        mut write: impl FnMut(&S, &Enqueued) -> Result<R, E>,
    ) -> Result<(Option<R>, Enqueued), HttpError> {
        let relay = self.relay()?;
        let rows: Vec<EnqueueRow> =
            rows.iter().cloned().map(|r| r.with_trace(options.trace.clone())).collect();
        let sql = relay.sql();
        let (written, done) = relay
            .enqueue_with(now_ms(), options.key.as_deref(), &rows, |done| {
                if done.duplicate {
                    return Ok(None);
                }
                write(sql, done).map(Some)
            })
            .await?;
        Ok((written, done))
    }

    /// Runs one alarm: the relay delivers to the targets' binding with the
    /// configured call timeout, arms its next wake-up, and logs one
    /// `relay_alarm` line. Return it from your object's `alarm()`; an error
    /// (after the relay armed its own retry) lets the platform retry too.
    pub async fn alarm(&self) -> worker::Result<Response> {
        self.alarm_summary().await?;
        Response::ok("relayed")
    }

    /// [`alarm`](Source::alarm), answering what the alarm did: an object
    /// that keeps its own alarm time through [`set_alarm`](Source::set_alarm)
    /// runs its own alarm work when the summary's
    /// [`host_alarm`](AlarmSummary::host_alarm) says that time has come.
    pub async fn alarm_summary(&self) -> worker::Result<AlarmSummary> {
        let summary = self.run_alarm().await.map_err(worker::Error::RustError)?;
        log_alarm_as(&summary, serde_json::Map::new(), self.alarm_log());
        Ok(summary)
    }

    /// Sets your object's own alarm time, `at_ms` ms since the epoch
    /// (replacing the one set before): the object has one alarm, and the
    /// relay arms it at the earlier of its own time and yours, so neither
    /// moves the other. The [`alarm_summary`](Source::alarm_summary) that
    /// finds your time come reports it once and clears it. Setting the
    /// object's alarm directly instead would move the relay's (it is put
    /// right, with a `relay_alarm_moved` warning, at the next status read
    /// or re-arm sweep). Refused (400 `invalid_request`) past
    /// [`SEQ_MAX`](crate::core::SEQ_MAX).
    pub async fn set_alarm(&self, at_ms: u64) -> Result<(), HttpError> {
        if at_ms > crate::core::SEQ_MAX {
            return Err(HttpError::bad_request(
                ErrorCode::InvalidRequest,
                format!("the alarm time {at_ms} is past SEQ_MAX (ms since the epoch)"),
            ));
        }
        Ok(self.relay()?.set_host_alarm(at_ms, now_ms()).await?)
    }

    /// Your object's own alarm time, set with [`set_alarm`](Source::set_alarm)
    /// and not yet reported: never the relay's (the object's alarm may be
    /// earlier, for the relay).
    pub fn get_alarm(&self) -> Result<Option<u64>, HttpError> {
        Ok(self.relay()?.host_alarm()?)
    }

    /// Clears your object's own alarm time; the relay's stays.
    pub fn delete_alarm(&self) -> Result<(), HttpError> {
        Ok(self.relay()?.delete_host_alarm()?)
    }

    /// Tells the relay that the next [`alarm`](Source::alarm) is the
    /// platform's `retry_count`th retry of a failed one (JavaScript's
    /// `alarmInfo.retryCount`; 0: not a retry), so it runs a smaller fire
    /// (see [`RelayBudget::for_retry`](crate::core::RelayBudget::for_retry)).
    /// workers-rs does not pass `alarmInfo` to `alarm()`, so a module entry
    /// that wraps the object calls this first.
    pub fn alarm_retried(&self, retry_count: u32) {
        self.retried.set(retry_count);
    }

    /// Which alarms get a `relay_alarm` line (`RELAY_ALARM_LOG`), for an
    /// embedding that logs with [`log_alarm_as`] itself; every alarm when
    /// the configuration cannot be read (the alarm reports that error).
    pub fn alarm_log(&self) -> AlarmLog {
        config(&self.env).map(|c| c.alarm_log).unwrap_or_default()
    }

    /// [`alarm`](Source::alarm) without its log lines (log them with
    /// [`log_alarm`] once you have added your own figures), answering what
    /// the alarm did.
    pub async fn run_alarm(&self) -> Result<AlarmSummary, String> {
        let relay = self.relay().map_err(|e| e.message)?;
        relay.alarm_retried(self.retried.replace(0));
        relay.set_near_cpu_limit(std::rc::Rc::new(|_| worker::signal::is_near_cpu_limit()));
        let config = config(&self.env).map_err(|e| e.message)?;
        let namespace = target_namespace(&self.env, &self.targets).map_err(|e| e.message)?;
        let targets = DoTargets { namespace, timeout_ms: config.call_timeout_ms };
        match relay.alarm(&targets, &now_ms, &NoObserver).await {
            Ok(summary) => Ok(summary),
            Err(f) => {
                let retry = f
                    .retry_at_ms
                    .map_or_else(|| "no retry armed".to_owned(), |at| format!("retry armed at {at}"));
                let error = format!("{} ({retry})", f.error);
                work::log_json(
                    Level::Error,
                    &serde_json::json!({"event": "relay_alarm_error", "error": error}),
                );
                Err(error)
            }
        }
    }

    /// Serves the relay's own source protocol (status, parked targets,
    /// redrive, enqueue from other Workers): see
    /// [`durable::source`](crate::durable::source).
    pub async fn fetch(&self, mut req: Request) -> worker::Result<Response> {
        let served = match self.relay() {
            Ok(relay) => crate::durable::source::handle(relay, &mut req).await,
            Err(e) => Err(e),
        };
        respond(served)
    }
}

/// A row for the target named `target`, to add effects to: refused (400
/// `invalid_target`) when the name is not one.
pub fn row(target: &str) -> Result<EnqueueRow, HttpError> {
    let name = Name::new(target)
        .map_err(|e| HttpError::bad_request(ErrorCode::InvalidTarget, format!("{target:?}: {e}")))?;
    Ok(EnqueueRow::to(name))
}

/// The relay's configuration from the Worker's variables.
fn config(env: &Env) -> Result<RelayConfig, HttpError> {
    RelayConfig::from_env(env).map_err(|e| HttpError::new(500, ErrorCode::BadConfiguration, e.to_string()))
}

/// The Durable Object namespace bound as `binding`, or 500
/// `bad_configuration` naming it and the Durable Object bindings `env` has.
fn target_namespace(env: &Env, binding: &str) -> Result<worker::ObjectNamespace, HttpError> {
    env.durable_object(binding).map_err(|_| {
        let object: &worker::wasm_bindgen::JsValue = env.as_ref();
        let found = worker::js_sys::Reflect::get(object, &binding.into()).ok().filter(|v| !v.is_undefined());
        let kind = found.map(|v| constructor_name(&v));
        let message = missing_binding(binding, kind.as_deref(), &durable_object_bindings(object));
        HttpError::new(500, ErrorCode::BadConfiguration, message)
    })
}

/// What made `value`: `DurableObjectNamespace` for a Durable Object
/// binding, `String` for a variable, `null` for null.
fn constructor_name(value: &worker::wasm_bindgen::JsValue) -> String {
    if !value.is_object() {
        return value.js_typeof().as_string().unwrap_or_default();
    }
    String::from(worker::js_sys::Object::from(value.clone()).constructor().name())
}

/// The names of `env`'s Durable Object namespace bindings, in `env`'s
/// order.
fn durable_object_bindings(env: &worker::wasm_bindgen::JsValue) -> Vec<String> {
    let Some(object) = worker::wasm_bindgen::JsCast::dyn_ref::<worker::js_sys::Object>(env) else {
        return Vec::new();
    };
    worker::js_sys::Object::keys(object)
        .iter()
        .filter_map(|key| {
            let value = worker::js_sys::Reflect::get(env, &key).ok()?;
            let namespace = value.is_object() && constructor_name(&value) == DURABLE_OBJECT_NAMESPACE;
            namespace.then(|| key.as_string()).flatten()
        })
        .collect()
}

/// The constructor name the runtime gives a Durable Object namespace
/// binding (what `Env::durable_object` checks for).
const DURABLE_OBJECT_NAMESPACE: &str = "DurableObjectNamespace";

/// The refusal of target binding `binding`: `found` is what `env` holds
/// under that name (its constructor's name), if anything; `bindings` are
/// the Durable Object bindings it does have.
fn missing_binding(binding: &str, found: Option<&str>, bindings: &[String]) -> String {
    let what = match found {
        None => "env has no binding of that name".to_owned(),
        Some(kind) => format!("env holds a {kind} under that name, not a {DURABLE_OBJECT_NAMESPACE}"),
    };
    let have = if bindings.is_empty() {
        "env has no Durable Object bindings".to_owned()
    } else {
        format!("env's Durable Object bindings: {}", bindings.join(", "))
    };
    format!("the targets binding {binding:?} is not a Durable Object namespace ({what}); {have}")
}

/// The per-alarm log lines: one `relay_alarm` with the figures, one
/// `relay_target_parked` per target parked, and `relay_lag_exceeded` when a
/// row older than the lag bound was seen.
pub fn log_alarm(summary: &AlarmSummary) {
    log_alarm_with(summary, serde_json::Map::new());
}

/// [`log_alarm`], with figures of your own (`figures`) added to the
/// `relay_alarm` line's `alarm` object beside the relay's.
pub fn log_alarm_with(summary: &AlarmSummary, figures: serde_json::Map<String, serde_json::Value>) {
    log_alarm_as(summary, figures, AlarmLog::Every);
}

/// Whether an alarm is worth its `relay_alarm` line under `mode` (see
/// [`AlarmLog`]).
pub fn alarm_is_logged(summary: &AlarmSummary, mode: AlarmLog) -> bool {
    let failing = summary.subrequests > 0 && summary.rows_delivered == 0;
    mode == AlarmLog::Every
        || !summary.parked.is_empty()
        || summary.conflicts > 0
        || summary.lag_exceeded
        || summary.traced_rows > 0
        || failing
}

/// [`log_alarm_with`] under `mode` (`RELAY_ALARM_LOG`): the `relay_alarm`
/// line only when [`alarm_is_logged`]; the warnings always.
pub fn log_alarm_as(
    summary: &AlarmSummary,
    figures: serde_json::Map<String, serde_json::Value>,
    mode: AlarmLog,
) {
    if !alarm_is_logged(summary, mode) {
        log_warnings(summary);
        return;
    }
    if figures.is_empty() {
        work::log_json(Level::Info, &serde_json::json!({"event": "relay_alarm", "alarm": summary}));
    } else {
        let mut alarm = serde_json::to_value(summary).unwrap_or(serde_json::Value::Null);
        if let Some(fields) = alarm.as_object_mut() {
            fields.extend(figures);
        }
        work::log_json(Level::Info, &serde_json::json!({"event": "relay_alarm", "alarm": alarm}));
    }
    log_warnings(summary);
}

/// The warnings of an alarm: a target it parked, a row past the lag bound.
fn log_warnings(summary: &AlarmSummary) {
    for (target, rows, reason) in &summary.parked {
        work::log_json(
            Level::Warn,
            &serde_json::json!({"event": "relay_target_parked", "source": summary.source, "target": target,
                "rows": rows, "reason": reason}),
        );
    }
    if summary.lag_exceeded {
        work::log_json(
            Level::Warn,
            &serde_json::json!({"event": "relay_lag_exceeded", "source": summary.source, "bound_ms": RELAY_LAG_BOUND_MS}),
        );
    }
}

/// The target side of the relay in your Durable Object.
pub struct Target<H = KeysOnly> {
    sql: DoSql,
    handler: H,
    tables: Option<(&'static str, Migrations)>,
    inbox: OnceCell<Inbox<DoSql>>,
}

impl Target {
    /// The inbox of the object whose `state` this is, keeping the rows'
    /// keys. Nothing is opened until first use.
    pub fn new(state: &State) -> Target {
        Target { sql: DoSql::new(state), handler: KeysOnly, tables: None, inbox: OnceCell::new() }
    }
}

impl<H: OnApply> Target<H> {
    /// Runs `handler` on every batch applied, inside its transaction.
    pub fn on_apply<G: OnApply>(self, handler: G) -> Target<G> {
        Target { sql: self.sql, handler, tables: self.tables, inbox: self.inbox }
    }

    /// Creates or migrates your own tables when the inbox opens.
    pub fn tables(mut self, component: &'static str, migrations: Migrations) -> Target<H> {
        self.tables = Some((component, migrations));
        self
    }

    /// The inbox, opened on first use.
    pub fn inbox(&self) -> Result<&Inbox<DoSql>, HttpError> {
        if let Some(inbox) = self.inbox.get() {
            return Ok(inbox);
        }
        let inbox = Inbox::open(self.sql.clone())?;
        if let Some((component, migrations)) = self.tables {
            schema::migrate(&self.sql, component, migrations)?;
        }
        Ok(self.inbox.get_or_init(|| inbox))
    }

    /// The object's database, for your own tables (opened, with them).
    pub fn sql(&self) -> Result<&DoSql, HttpError> {
        self.inbox()?;
        Ok(&self.sql)
    }

    /// Serves the relay's target protocol (`/apply` from sources, keys,
    /// watermarks): see [`durable::target`](crate::durable::target).
    pub async fn fetch(&self, mut req: Request) -> worker::Result<Response> {
        let served = match self.inbox() {
            Ok(inbox) => {
                let hook = Hook { sql: &self.sql, handler: &self.handler };
                crate::durable::target::handle(inbox, &mut req, &hook).await
            }
            Err(e) => Err(e),
        };
        respond(served)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_binding_is_named_with_the_bindings_env_has() {
        let have = ["CUSTOMERS".to_owned(), "ORDERS".to_owned()];
        let message = missing_binding("CUSTOMERZ", None, &have);
        assert_eq!(
            message,
            "the targets binding \"CUSTOMERZ\" is not a Durable Object namespace (env has no binding of \
             that name); env's Durable Object bindings: CUSTOMERS, ORDERS"
        );
    }

    #[test]
    fn a_binding_of_another_kind_says_what_it_is() {
        let message = missing_binding("RELAY_PLAN", Some("string"), &[]);
        assert!(message.contains("holds a string under that name"), "{message}");
        assert!(message.ends_with("env has no Durable Object bindings"), "{message}");
    }
}
