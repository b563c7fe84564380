//! The source facade: [`RelaySource`] opens the relay in your object on first
//! use, enqueues with your own writes in one transaction, runs its alarm
//! and serves the relay's source protocol; [`Enqueue`] says how to enqueue.

#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]
#![deny(clippy::unreachable, clippy::todo, clippy::unimplemented)]

use std::borrow::Cow;
use std::cell::OnceCell;
use std::rc::Rc;

use worker::{Env, Request, Response, State};

use super::binding::target_namespace;
use super::write::{EnqueueWithError, WriteError};
use super::{config, log_alarm_as, Migrations, DEFAULT_TARGET_BINDING};
use crate::config::AlarmLog;
use crate::core::{EnqueueRow, ErrorCode, Traceparent};
use crate::driver::{AlarmSummary, NoObserver};
use crate::durable::endpoint::{EndpointTargets, RelayTargets};
use crate::durable::{now_ms, open_error, source_id, source_name, DoAlarm, DoSql, DoTargets, HostAlarm};
use crate::http::{respond, RelayError};
use crate::routes::SourceOp;
use crate::source::Relay;
use crate::store::outbox::Enqueued;
use crate::store::{schema, Sql};
use crate::work::{self, Level};

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
pub struct RelaySource<S: Sql = DoSql> {
    state: State,
    env: Env,
    targets: Cow<'static, str>,
    tables: Option<(&'static str, Migrations)>,
    store: fn(DoSql) -> S,
    /// The host's scheduler the relay keeps its alarm with, or none: the
    /// object's own alarm.
    scheduler: Option<HostAlarm>,
    /// Shared with the in-turn deliveries this object starts, which outlive
    /// the call that started them.
    relay: OnceCell<Rc<Relay<S, DoAlarm>>>,
    /// Which retry of a failed alarm the next alarm is (`alarmInfo.retryCount`),
    /// until the alarm consumes it.
    retried: std::cell::Cell<u32>,
}

impl RelaySource {
    /// The relay of the object whose `state` and `env` these are. Nothing is
    /// opened until first use.
    pub fn new(state: State, env: Env) -> RelaySource {
        RelaySource::with_store(state, env, |sql| sql)
    }
}

impl<S: Sql + 'static> RelaySource<S> {
    /// [`RelaySource::new`], writing through `store(the object's SQLite)`.
    pub fn with_store(state: State, env: Env, store: fn(DoSql) -> S) -> RelaySource<S> {
        let targets = Cow::Borrowed(DEFAULT_TARGET_BINDING);
        RelaySource {
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
    pub fn targets(mut self, binding: impl Into<Cow<'static, str>>) -> RelaySource<S> {
        self.targets = binding.into();
        self
    }

    /// Keeps the relay's alarm with `scheduler` instead of the object's own
    /// alarm, on every path that arms it: for a host whose framework owns
    /// the object's alarm and runs its own work from it (the Agents SDK),
    /// which then runs [`alarm`](RelaySource::alarm) when the time it keeps
    /// comes.
    pub fn scheduler(mut self, scheduler: HostAlarm) -> RelaySource<S> {
        self.scheduler = Some(scheduler);
        self
    }

    /// Creates or migrates your own tables (`component` names them in the
    /// schema table) when the relay opens.
    pub fn tables(mut self, component: &'static str, migrations: Migrations) -> RelaySource<S> {
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
    /// Both answer 500 `bad_configuration`. [`RelaySource::relay`] runs it as the
    /// relay opens, so the first enqueue, status or fetch is refused rather
    /// than every alarm failing; call it in your object's constructor to
    /// refuse there.
    pub fn check(&self) -> Result<(), RelayError> {
        config(&self.env)?;
        target_namespace(&self.env, &self.targets)?;
        Ok(())
    }

    /// The relay, opened on first use (after [`RelaySource::check`]).
    pub fn relay(&self) -> Result<&Relay<S, DoAlarm>, RelayError> {
        if let Some(relay) = self.relay.get() {
            return Ok(relay);
        }
        self.check()?;
        let sql = (self.store)(DoSql::new(&self.state));
        let config = config(&self.env)?;
        let relay = Relay::open(
            source_name(&self.state)?,
            source_id(&self.state)?,
            sql,
            self.scheduler.clone().map_or_else(|| DoAlarm::new(&self.state), DoAlarm::host),
            config.source(),
        )
        .map_err(open_error)?;
        let batched = config.endpoints.iter().filter(|(_, e)| e.batch).map(|(n, _)| n.clone()).collect();
        relay.set_endpoints(config.endpoints.into_keys().collect(), batched);
        if let Some((component, migrations)) = self.tables {
            schema::migrate(relay.sql(), component, migrations)?;
        }
        Ok(self.relay.get_or_init(|| Rc::new(relay)))
    }

    /// The relay if something has opened it, without opening it.
    pub fn opened(&self) -> Option<&Relay<S, DoAlarm>> {
        self.relay.get().map(|r| &**r)
    }

    /// The object's database, for your own tables.
    pub fn sql(&self) -> Result<&S, RelayError> {
        Ok(self.relay()?.sql())
    }

    /// Enqueues `rows` in a transaction of their own.
    pub async fn enqueue(&self, rows: &[EnqueueRow], options: Enqueue) -> Result<Enqueued, RelayError> {
        let (_, done) = self.enqueue_with(rows, options, |_, _| Ok(())).await?;
        Ok(done)
    }

    /// Enqueues `rows` and runs `write` (your own writes, on the object's
    /// database) in **one** transaction: both commit, or neither does. An
    /// error from `write` rolls everything back and comes back as
    /// [`EnqueueWithError::Write`], as you returned it; `?` turns it into
    /// 409 `aborted` in a handler that answers [`RelayError`]. A repeat of a
    /// keyed request writes nothing and does not run `write` (its writes
    /// were made the first time): its result is then `None`.
    pub async fn enqueue_with<R>(
        &self,
        rows: &[EnqueueRow],
        options: Enqueue,
        mut write: impl FnMut(&S, &Enqueued) -> Result<R, WriteError>,
    ) -> Result<(Option<R>, Enqueued), EnqueueWithError> {
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
            .await
            .map_err(EnqueueWithError::from)?;
        if !done.duplicate {
            self.deliver_in_turn();
        }
        Ok((written, done))
    }

    /// Starts delivering what the outbox holds in this invocation, without
    /// waiting for it: the enqueue that called it answers at once, and its
    /// rows need no alarm of their own (see
    /// [`Relay::deliver`](crate::source::Relay::deliver)). The enqueue
    /// methods here and [`fetch`](RelaySource::fetch) call it after a
    /// commit; an object that enqueues through [`relay`](RelaySource::relay)
    /// directly calls it itself. Does nothing when `RELAY_IN_TURN=off`, when
    /// nothing opened the relay, or when the configuration cannot be read
    /// (the alarm delivers, and reports that error).
    pub fn deliver_in_turn(&self) {
        self.deliver_in_turn_with(|_, _| serde_json::Map::new());
    }

    /// [`deliver_in_turn`](RelaySource::deliver_in_turn), calling `on_run`
    /// with the relay and what each run did, for an object that keeps its
    /// own figures of its deliveries; the figures it answers join the run's
    /// log line, as an alarm's do with [`log_alarm_as`].
    pub fn deliver_in_turn_with(
        &self,
        on_run: impl Fn(&Relay<S, DoAlarm>, &AlarmSummary) -> serde_json::Map<String, serde_json::Value> + 'static,
    ) {
        let Some(relay) = self.relay.get().cloned() else { return };
        if !relay.config().in_turn {
            return;
        }
        let Ok(targets) = self.relay_targets() else { return };
        let mode = self.alarm_log();
        relay.set_near_cpu_limit(Rc::new(|_| worker::signal::is_near_cpu_limit()));
        self.state.wait_until(async move {
            match relay.deliver(&targets, &now_ms, &NoObserver).await {
                Ok(runs) => runs.iter().for_each(|run| log_alarm_as(run, on_run(&relay, run), mode)),
                Err(f) => work::log_json(
                    Level::Error,
                    &serde_json::json!({"event": "relay_delivery_error", "error": f.error.to_string(),
                        "retry_at_ms": f.retry_at_ms}),
                ),
            }
        });
    }

    /// The targets: the targets' namespace, with the configured call
    /// timeout, and the configured endpoints.
    fn relay_targets(&self) -> Result<RelayTargets, RelayError> {
        let config = config(&self.env)?;
        let namespace = target_namespace(&self.env, &self.targets)?;
        Ok(RelayTargets {
            objects: DoTargets { namespace, timeout_ms: config.call_timeout_ms },
            endpoints: EndpointTargets { endpoints: Rc::new(config.endpoints) },
        })
    }

    /// Runs one alarm: the relay delivers to the targets' binding with the
    /// configured call timeout, arms its next wake-up, and logs one
    /// `relay_alarm` line. Return it from your object's `alarm()`; an error
    /// (after the relay armed its own retry) lets the platform retry too.
    pub async fn alarm(&self) -> worker::Result<Response> {
        self.alarm_summary().await?;
        Response::ok("relayed")
    }

    /// [`alarm`](RelaySource::alarm), answering what the alarm did: an object
    /// that keeps its own alarm time through [`set_alarm`](RelaySource::set_alarm)
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
    /// moves the other. The [`alarm_summary`](RelaySource::alarm_summary) that
    /// finds your time come reports it once and clears it. Setting the
    /// object's alarm directly instead would move the relay's (it is put
    /// right, with a `relay_alarm_moved` warning, at the next status read
    /// or re-arm sweep). Refused (400 `invalid_request`) past
    /// [`SEQ_MAX`](crate::core::SEQ_MAX).
    pub async fn set_alarm(&self, at_ms: u64) -> Result<(), RelayError> {
        if at_ms > crate::core::SEQ_MAX {
            return Err(RelayError::bad_request(
                ErrorCode::InvalidRequest,
                format!("the alarm time {at_ms} is past SEQ_MAX (ms since the epoch)"),
            ));
        }
        Ok(self.relay()?.set_host_alarm(at_ms, now_ms()).await?)
    }

    /// Your object's own alarm time, set with [`set_alarm`](RelaySource::set_alarm)
    /// and not yet reported: never the relay's (the object's alarm may be
    /// earlier, for the relay).
    pub fn get_alarm(&self) -> Result<Option<u64>, RelayError> {
        Ok(self.relay()?.host_alarm()?)
    }

    /// Clears your object's own alarm time; the relay's stays.
    pub fn delete_alarm(&self) -> Result<(), RelayError> {
        Ok(self.relay()?.delete_host_alarm()?)
    }

    /// Tells the relay that the next [`alarm`](RelaySource::alarm) is the
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

    /// [`alarm`](RelaySource::alarm) without its log lines (log them with
    /// [`log_alarm`](super::log_alarm) once you have added your own figures), answering what
    /// the alarm did.
    pub async fn run_alarm(&self) -> Result<AlarmSummary, String> {
        let relay = self.relay().map_err(|e| e.message)?;
        relay.alarm_retried(self.retried.replace(0));
        relay.set_near_cpu_limit(std::rc::Rc::new(|_| worker::signal::is_near_cpu_limit()));
        let targets = self.relay_targets().map_err(|e| e.message)?;
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
            Ok(relay) => match crate::durable::source::operation(&req) {
                Ok(op) => {
                    let enqueue = op == SourceOp::Enqueue;
                    crate::durable::source::serve(relay, &mut req, op).await.map(|r| (enqueue, r))
                }
                Err(e) => Err(e),
            },
            Err(e) => Err(e),
        };
        // An accepted enqueue delivers its rows after the reply, in this invocation.
        if matches!(&served, Ok((true, r)) if r.status_code() == 200) {
            self.deliver_in_turn();
        }
        respond(served.map(|(_, r)| r)).map(crate::durable::announce)
    }
}
