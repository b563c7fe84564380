//! The source's alarm: run bounded fires against target DOs, write each
//! fire's guarded checkpoint, and decide the next wake-up.
//!
//! Within a fire, calls to distinct targets run concurrently, at most
//! `max_in_flight` at once; one target is never called concurrently with
//! itself (the engine hands out one call per target per round). Every call
//! is one subrequest, counted by the engine against the alarm's cap.

use futures::stream::{self, StreamExt};
use serde::Serialize;
use worker::{Method, ObjectNamespace, Request, RequestInit};

use super::outbox::Outbox;
use super::storage::StoreError;
use crate::core::{
    encode_request, AlarmRun, AlarmTotals, ApplyReply, CallOutcome, Failure, Name, RelayBudget, Wake,
    RELAY_LAG_BOUND_MS,
};

/// Default and upper bound of concurrent target calls in one fire.
/// Workers allow six simultaneous outgoing connections per invocation.
pub const DEFAULT_MAX_IN_FLIGHT: u32 = 6;
/// Upper bound for a configured `max_in_flight`.
pub const MAX_IN_FLIGHT: u32 = 32;

/// How the relay reaches a target.
#[allow(async_fn_in_trait)]
pub trait Targets {
    /// Sends one apply batch to `target` and reports how it went.
    async fn apply(&self, target: &Name, body: String) -> CallOutcome;
}

/// Targets that are Durable Objects in one namespace, addressed by name.
pub struct DoTargets {
    /// The target class's namespace binding.
    pub namespace: ObjectNamespace,
    /// How long one call may take, ms (see [`DEFAULT_CALL_TIMEOUT_MS`]).
    pub timeout_ms: u64,
}

/// How long one target call may take by default before the fire counts it
/// failed. The call may still apply afterwards; the target's watermark makes
/// the redelivery harmless, exactly as for a lost reply.
pub const DEFAULT_CALL_TIMEOUT_MS: u64 = 30_000;
/// Shortest configurable call timeout.
pub const MIN_CALL_TIMEOUT_MS: u64 = 100;
/// Longest configurable call timeout: an alarm has 15 minutes in all.
pub const MAX_CALL_TIMEOUT_MS: u64 = 120_000;

impl Targets for DoTargets {
    async fn apply(&self, target: &Name, body: String) -> CallOutcome {
        let call = std::pin::pin!(self.try_apply(target, body));
        let timeout = std::pin::pin!(worker::Delay::from(std::time::Duration::from_millis(self.timeout_ms)));
        match futures::future::select(call, timeout).await {
            futures::future::Either::Left((Ok(outcome), _)) => outcome,
            futures::future::Either::Left((Err(e), _)) => {
                CallOutcome::Failed(Failure::Transient(e.to_string()))
            }
            futures::future::Either::Right(_) => {
                CallOutcome::Failed(Failure::Transient(format!("no answer within {} ms", self.timeout_ms)))
            }
        }
    }
}

impl DoTargets {
    async fn try_apply(&self, target: &Name, body: String) -> worker::Result<CallOutcome> {
        let stub = self.namespace.id_from_name(target.as_str())?.get_stub()?;
        let mut init = RequestInit::new();
        init.with_method(Method::Post).with_body(Some(body.into()));
        let req = Request::new_with_init("https://relay-target/apply", &init)?;
        let mut resp = stub.fetch_with_request(req).await?;
        let status = resp.status_code();
        let text = resp.text().await?;
        Ok(match status {
            200 => match serde_json::from_str::<ApplyReply>(&text) {
                Ok(r) => CallOutcome::Applied { watermark: r.watermark, applied: r.applied },
                Err(e) => CallOutcome::Failed(Failure::Transient(format!("bad reply: {e}"))),
            },
            400..=499 => CallOutcome::Failed(Failure::Permanent(format!("{status}: {text}"))),
            _ => CallOutcome::Failed(Failure::Transient(format!("{status}: {text}"))),
        })
    }
}

/// What one alarm did: the per-alarm log line and status figures.
#[derive(Clone, Debug, Serialize)]
pub struct AlarmSummary {
    /// Source name.
    pub source: String,
    /// Fires run.
    pub fires: u32,
    /// Target calls made; each is one subrequest.
    pub subrequests: u32,
    /// Targets called, summed over fires.
    pub targets_called: u32,
    /// Rows applied for the first time.
    pub rows_applied: u32,
    /// Rows deleted as delivered.
    pub rows_delivered: u32,
    /// Checkpoints that lost their guard.
    pub conflicts: u32,
    /// Whether a row older than the lag bound was seen.
    pub lag_exceeded: bool,
    /// Wall-clock ms the alarm took.
    pub duration_ms: u64,
    /// The next wake-up, ms from the end of the alarm, if any.
    pub next_in_ms: Option<u64>,
    /// The subrequest cap in force.
    pub subrequest_cap: u32,
    /// Start time, ms since the epoch.
    pub started_at_ms: u64,
    /// Expired dedup records and discarded rows pruned.
    pub pruned: u64,
    /// Rows queued when the alarm ended.
    pub queued_rows: u64,
    /// Body bytes queued when the alarm ended.
    pub queued_bytes: u64,
    /// Rows parked when the alarm ended.
    pub parked_rows: u64,
    /// Age of the oldest queued row when the alarm ended, ms.
    pub oldest_row_age_ms: Option<u64>,
    /// Whether the figures went to Workers Analytics Engine.
    pub metrics_written: bool,
}

/// Why an alarm ended abnormally.
#[derive(Debug)]
pub enum AlarmError {
    /// Storage failed.
    Store(StoreError),
    /// An injected crash (test only): the handler should throw.
    InjectedCrash,
}

impl From<StoreError> for AlarmError {
    fn from(e: StoreError) -> Self {
        AlarmError::Store(e)
    }
}

/// Runs one alarm's worth of fires for `source`. Returns the summary; the
/// caller arms the next alarm from `next_in_ms`. `now` reads the clock.
pub async fn run_alarm(
    outbox: &Outbox,
    source: &Name,
    budget: RelayBudget,
    max_in_flight: u32,
    targets: &impl Targets,
    now: impl Fn() -> u64,
) -> Result<AlarmSummary, AlarmError> {
    let started = now();
    let mut run = AlarmRun::new(budget);
    while let Some(calls_left) = run.next_fire() {
        let mut fire = outbox.read_fire(source, budget, calls_left, now())?;
        loop {
            let calls = fire.next_calls();
            if calls.is_empty() {
                break;
            }
            let requests: Vec<_> =
                calls.iter().map(|c| (c, encode_request(source, c, fire.rows()))).collect();
            let outcomes: Vec<_> = stream::iter(requests)
                .map(|(call, body)| async move { (call, targets.apply(&call.target, body).await) })
                .buffer_unordered(max_in_flight.clamp(1, MAX_IN_FLIGHT) as usize)
                .collect()
                .await;
            for (call, outcome) in outcomes {
                fire.record(call, outcome);
            }
        }
        let settlement = fire.settle();
        if outbox.take_crash() {
            return Err(AlarmError::InjectedCrash);
        }
        let report = &settlement.report;
        // The last fire's checkpoint also records the alarm's figures, so
        // they cost no extra row write.
        let mut probe = run.clone();
        probe.committed(report, settlement.wake);
        let summary =
            probe.next_fire().is_none().then(|| summarise(source, &probe, budget, started, now(), None));
        let text = summary.as_ref().map(|s| serde_json::to_string(s).expect("summary serialises"));
        if outbox.checkpoint(&settlement.checkpoint, report, now(), text.as_deref())? {
            run.committed(report, settlement.wake);
        } else {
            run.conflicted(report);
        }
    }
    let pruned = outbox.prune(now())?;
    let state = outbox.state()?;
    let ended = now();
    let next = run
        .final_wake()
        .delay_ms(state.os)
        .or(outbox.idle_prune_at(state.last_prune_ms)?.map(|at| at.saturating_sub(ended)));
    let mut summary = summarise(source, &run, budget, started, ended, next);
    summary.pruned = pruned;
    summary.queued_rows = state.queued_rows;
    summary.queued_bytes = state.queued_bytes;
    summary.parked_rows = state.parked_rows;
    summary.oldest_row_age_ms = outbox.head()?.map(|h| ended.saturating_sub(h.at_ms));
    Ok(summary)
}

fn summarise(
    source: &Name,
    run: &AlarmRun,
    budget: RelayBudget,
    started: u64,
    ended: u64,
    next_in_ms: Option<u64>,
) -> AlarmSummary {
    let t: &AlarmTotals = run.totals();
    AlarmSummary {
        source: source.to_string(),
        fires: t.fires,
        subrequests: t.calls,
        targets_called: t.targets_called,
        rows_applied: t.rows_applied,
        rows_delivered: t.rows_delivered,
        conflicts: t.conflicts,
        lag_exceeded: t.lag_exceeded,
        duration_ms: ended.saturating_sub(started),
        next_in_ms: next_in_ms.or(match run.final_wake() {
            Wake::Now => Some(0),
            Wake::After { delay_ms } => Some(delay_ms),
            Wake::Idle { .. } => None,
        }),
        subrequest_cap: budget.calls_per_alarm(),
        started_at_ms: started,
        pruned: 0,
        queued_rows: 0,
        queued_bytes: 0,
        parked_rows: 0,
        oldest_row_age_ms: None,
        metrics_written: false,
    }
}

/// Whether a row committed at `at_ms` is past the lag bound at `now_ms`.
pub fn lagging(at_ms: u64, now_ms: u64) -> bool {
    now_ms.saturating_sub(at_ms) > RELAY_LAG_BOUND_MS
}
