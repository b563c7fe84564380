//! The one alarm driver: the sequence of an alarm, written once, over any
//! [`Sql`] outbox and any [`Targets`]. The Durable Object runs it on its
//! SQLite storage against target DOs; the simulator runs the same code on a
//! native SQLite against simulated targets.
//!
//! An alarm runs fires while the budget lasts and the last fire asks to go
//! on. One fire: read `os`, `rs` and the failing targets; begin (the core
//! decides the cycle and the window); read the window; make the calls the
//! core hands out, distinct targets concurrently (at most `max_in_flight`)
//! and one target never concurrently with itself; settle; write the
//! guarded checkpoint. After the fires: prune, and decide the next wake-up.
//!
//! Every target call is one subrequest, counted by the core against the
//! alarm's cap; local workerd does not enforce the cap, so this count is
//! what keeps an alarm within the Free plan's 50.
//!
//! CPU is bounded the same way (see [`crate::core::cpu`]): the driver counts
//! the work it does on a [`Cpu`] and asks it between call rounds, between
//! fires and before each checkpoint whether to stop; a cut fire settles what
//! its calls did, and the alarm ends and re-arms at once. Each fire makes
//! its first round of calls whatever the gauge says, so every alarm makes
//! progress.

use futures::stream::{self, StreamExt};
use serde::Serialize;

use crate::core::schedule::next_alarm_at;
use crate::core::{
    begin, call_work, encode_request, read_work, AlarmRun, AlarmTotals, BudgetError, CallOutcome, Checkpoint,
    CpuGauge, Effects, Fire, FireReport, Name, QueuedRow, RelayBudget, ScanState, SourceId, TargetCall, Wake,
    MAX_IN_FLIGHT, MAX_TRACES_PER_LOG,
};
pub use durable_relay_protocol::wire::AlarmOptions;

use crate::store::outbox::{Commit, LastRun, Outbox};
use crate::store::{Sql, StoreError};

/// How the relay reaches a target.
#[allow(async_fn_in_trait)]
pub trait Targets {
    /// Sends one apply batch (its JSON body) to `target` and reports how it
    /// went. Never fails otherwise: a failure is an outcome.
    async fn apply(&self, target: &Name, body: String) -> CallOutcome;
}

/// What one fire did and wrote: for logs, status, and the simulator.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FireRecord {
    /// The core's report.
    pub report: FireReport,
    /// When the core asked to fire next.
    pub wake: Wake,
    /// The scan state the checkpoint wrote (or would have written).
    pub scan: ScanState,
    /// The guarded write the fire settled on.
    pub checkpoint: Checkpoint,
    /// How the checkpoint ended.
    pub commit: Commit,
    /// The `traceparent` of every row a target took in this fire, in call
    /// order (rows enqueued without one are not listed).
    pub traces: Vec<String>,
    /// When the fire took its window from an enqueue's handover and no
    /// enqueue ran beside it: the rows the outbox held (all handed) and the
    /// rows parked, as the enqueue saw them.
    pub handed: Option<(u64, u64)>,
}

/// Watches an alarm's fires (the simulator audits after each; a shell may
/// log). The default watches nothing.
pub trait FireObserver {
    /// Called after each fire's checkpoint, committed or not.
    fn fire_settled(&self, _record: &FireRecord) {}
}

/// Watches nothing.
pub struct NoObserver;

impl FireObserver for NoObserver {}

/// The runtime's near-CPU-limit signal, given the work units the
/// invocation has spent so far (workerd's signal ignores them; the
/// simulator raises it at a work count). `false` where the runtime has none.
pub type NearLimit<'a> = dyn Fn(u64) -> bool + 'a;

/// One invocation's CPU: the work it counted and the runtime's signal.
pub struct Cpu<'a> {
    /// Work spent against the alarm's work budget.
    pub gauge: CpuGauge,
    /// The runtime's near-limit signal.
    pub near_limit: &'a NearLimit<'a>,
}

impl<'a> Cpu<'a> {
    /// A gauge for `budget`'s work per alarm, reading `near_limit`.
    pub fn new(budget: &RelayBudget, near_limit: &'a NearLimit<'a>) -> Cpu<'a> {
        Cpu { gauge: CpuGauge::new(u64::from(budget.work_per_alarm)), near_limit }
    }

    /// Whether to stop now (sticky, see [`CpuGauge::cut`]).
    pub fn cut(&mut self) -> bool {
        let near = (self.near_limit)(self.gauge.spent());
        self.gauge.cut(near)
    }
}

/// Raises no signal: for runtimes without one.
pub fn no_signal(_: u64) -> bool {
    false
}

/// Why an alarm (or a fire) stopped early.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AlarmError {
    /// Storage failed; nothing past the last committed checkpoint stands.
    Store(StoreError),
    /// The budget is outside its ranges (a configuration error).
    Budget(BudgetError),
}

impl std::fmt::Display for AlarmError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AlarmError::Store(e) => e.fmt(f),
            AlarmError::Budget(e) => write!(f, "invalid budget: {e}"),
        }
    }
}

impl From<StoreError> for AlarmError {
    fn from(e: StoreError) -> Self {
        AlarmError::Store(e)
    }
}

impl From<BudgetError> for AlarmError {
    fn from(e: BudgetError) -> Self {
        AlarmError::Budget(e)
    }
}

/// What one alarm did: the per-alarm log line and the status figures.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
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
    /// When the next alarm is due, ms from the end of this one, if any.
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
    /// Age of the oldest owed row when the alarm ended, ms.
    pub oldest_row_age_ms: Option<u64>,
    /// Targets this alarm parked: (target, rows moved, reason).
    pub parked: Vec<(Name, u64, String)>,
    /// Distinct `traceparent`s of the rows delivered, at most
    /// `MAX_TRACES_PER_LOG` (left out of the log line when none).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub traces: Vec<String>,
    /// Rows delivered that carried a `traceparent`.
    #[serde(skip_serializing_if = "is_zero")]
    pub traced_rows: u32,
    /// Whether the platform refused a write for the account's daily
    /// allowance (Workers Free), so the alarm stopped and sleeps until
    /// 00:00 UTC (`next_in_ms`); nothing it did after its last checkpoint
    /// stands. Left out of the log line when not.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub write_limited: bool,
    /// Whether the alarm stopped early to stay inside the invocation's CPU
    /// (the runtime's signal, or its work budget spent) and re-armed at once.
    pub cpu_cut: bool,
    /// Work units the alarm spent (see [`crate::core::cpu`]).
    pub work: u64,
    /// Which retry of a failed alarm this was, as the platform counts them
    /// (0: not a retry); a retry runs a smaller fire.
    pub retry_count: u32,
    /// Whether the host's own alarm time (set through the relay, see
    /// [`Relay::set_host_alarm`](crate::Relay::set_host_alarm)) had come
    /// when this alarm ended: the host runs its own alarm work then. The
    /// relay cleared the time, as the platform clears an alarm that fired.
    /// Left out of the log line when not.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub host_alarm: bool,
    /// Whether this was an in-turn delivery (run by an enqueue's
    /// invocation after its reply) rather than the platform's alarm. Left
    /// out of the log line when not.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub in_turn: bool,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// Given a settled fire's report, wake-up and the invocation's CPU gauge,
/// the alarm's figures as JSON when this is the alarm's last fire (stored
/// with its checkpoint).
pub type AlarmFigures<'a> = dyn Fn(&FireReport, Wake, &CpuGauge) -> Option<LastRun> + 'a;

/// Runs one fire with `calls_left` calls and writes its checkpoint.
/// `last_alarm` (JSON figures) is stored with the checkpoint. Every batch
/// names the source by `source` and its object's `id`. The fire reads at
/// most the rows `cpu`'s work left allows (one at least), counts its work
/// there, and makes no further round of calls once `cpu` says stop.
#[allow(clippy::too_many_arguments, reason = "the fire's inputs, each from its own owner")]
pub async fn fire<S: Sql>(
    outbox: &Outbox<S>,
    source: &Name,
    id: &SourceId,
    options: &AlarmOptions,
    calls_left: u32,
    targets: &impl Targets,
    now: &dyn Fn() -> u64,
    last_alarm: Option<&AlarmFigures<'_>>,
    cpu: &mut Cpu<'_>,
) -> Result<FireRecord, AlarmError> {
    let start = outbox.fire_start(source, options.budget, calls_left, now())?;
    let mut begun = begin(start)?;
    begun.window = begun.window.within_work(cpu.gauge.left());
    let (window, exhausted) = outbox.read_window(&mut begun)?;
    let bytes: u64 = window.iter().map(|r| r.body.len() as u64).sum();
    cpu.gauge.spend(read_work(window.len() as u64, bytes));
    let mut fire = Fire::new(begun, &window, exhausted);
    let traces = call_targets(&mut fire, source, id, options.max_in_flight, targets, cpu).await;
    // The last check before the checkpoint statement: its answer ends the
    // alarm after this fire.
    cpu.cut();
    let settlement = fire.settle();
    let figures = last_alarm.and_then(|f| f(&settlement.report, settlement.wake, &cpu.gauge));
    let commit = outbox.checkpoint(&settlement.checkpoint, &settlement.report, now(), figures.as_ref());
    let handed = outbox.end_handed();
    let commit = commit?;
    Ok(FireRecord {
        handed,
        report: settlement.report,
        wake: settlement.wake,
        scan: settlement.scan,
        checkpoint: settlement.checkpoint,
        commit,
        traces,
    })
}

/// Makes the fire's calls, round by round, until it hands out none.
/// Returns the trace context of every row a target took (see [`traces_of`]).
async fn call_targets(
    fire: &mut Fire,
    source: &Name,
    id: &SourceId,
    max_in_flight: u32,
    targets: &impl Targets,
    cpu: &mut Cpu<'_>,
) -> Vec<String> {
    let mut traces = Vec::new();
    loop {
        if fire.calls_made() > 0 && cpu.cut() {
            fire.cut();
        }
        let calls = fire.next_calls();
        if calls.is_empty() {
            return traces;
        }
        let requests: Vec<_> =
            calls.iter().map(|c| (c, encode_request(source, id, c, fire.rows()))).collect();
        for (_, body) in &requests {
            cpu.gauge.spend(call_work(body.len() as u64));
        }
        let outcomes: Vec<_> = stream::iter(requests)
            .map(|(call, body)| async move { (call, targets.apply(&call.target, body).await) })
            .buffer_unordered(max_in_flight.clamp(1, MAX_IN_FLIGHT) as usize)
            .collect()
            .await;
        for (call, outcome) in outcomes {
            if matches!(outcome, CallOutcome::Applied { .. }) {
                traces.extend(traces_of(call, fire.rows()));
            }
            fire.record(call, outcome);
        }
    }
}

/// The `traceparent`s the rows of `call` carry, read from their bodies.
fn traces_of<'a>(call: &'a TargetCall, rows: &'a [QueuedRow]) -> impl Iterator<Item = String> + 'a {
    rows.iter()
        .filter(|r| call.seqs.binary_search(&r.seq).is_ok())
        .filter_map(|r| Effects::trace_of(&r.body).map(str::to_owned))
}

/// Runs one alarm's worth of fires for `source` (whose object's id is
/// `id`), then prunes and decides the next wake-up (`next_in_ms` in the
/// summary; the caller arms it). `retry_count` is the platform's count of
/// this alarm's retries: a retry runs under [`RelayBudget::for_retry`].
/// `near_limit` is the runtime's CPU signal ([`no_signal`] where it has
/// none). `counted`: whether this is the platform's alarm, counted in the
/// source's `alarms`; an in-turn delivery (see
/// [`Relay::deliver`](crate::Relay::deliver)) runs the same fires
/// uncounted. Either stores its figures as the last delivery's.
#[allow(clippy::too_many_arguments, reason = "the alarm's inputs, each from its own owner")]
pub async fn run_alarm<S: Sql>(
    outbox: &Outbox<S>,
    source: &Name,
    id: &SourceId,
    options: &AlarmOptions,
    targets: &impl Targets,
    now: &dyn Fn() -> u64,
    observer: &impl FireObserver,
    (retry_count, counted): (u32, bool),
    near_limit: &NearLimit<'_>,
) -> Result<AlarmSummary, AlarmError> {
    let started = now();
    let options = &AlarmOptions { budget: options.budget.for_retry(retry_count), ..*options };
    let mut run = AlarmRun::new(options.budget)?;
    let mut cpu = Cpu::new(&options.budget, near_limit);
    let mut parked = Vec::new();
    let mut traces = Traces::default();
    let mut quiet = None;
    while let Some(calls_left) = run.next_fire() {
        // The alarm's last fire stores the alarm's figures with its
        // checkpoint, so they cost no row write of their own.
        let figures = |report: &FireReport, wake: Wake, gauge: &CpuGauge| {
            let mut probe = run.clone();
            probe.committed(report, wake);
            if gauge.was_cut() {
                probe.cut();
            }
            probe.next_fire().is_none().then(|| {
                let mut s = summarise(source, &probe, options, started, now(), None);
                (s.work, s.retry_count, s.in_turn) = (gauge.spent(), retry_count, !counted);
                LastRun { figures: serde_json::to_string(&s).unwrap_or_default(), alarm: counted }
            })
        };
        let record =
            fire(outbox, source, id, options, calls_left, targets, now, Some(&figures), &mut cpu).await?;
        if cpu.gauge.was_cut() {
            run.cut();
        }
        match &record.commit {
            Commit::Committed { parked: p } => {
                run.committed(&record.report, record.wake);
                parked.extend(p.iter().cloned());
            }
            Commit::Conflict => run.conflicted(&record.report),
        }
        traces.add(&record.traces);
        quiet = quiet_end(&record, !counted && run.totals().fires == 1);
        observer.fire_settled(&record);
    }
    let mut summary = match quiet {
        Some(parked_rows) => quiet_finish(source, options, &run, started, now(), parked_rows),
        None => finish(outbox, source, options, &run, started, now, parked)?,
    };
    (summary.traces, summary.traced_rows) = (traces.listed, traces.rows);
    (summary.work, summary.retry_count) = (cpu.gauge.spent(), retry_count);
    Ok(summary)
}

/// The distinct `traceparent`s an alarm delivered, at most
/// [`MAX_TRACES_PER_LOG`] listed, and how many rows carried one.
#[derive(Default)]
struct Traces {
    listed: Vec<String>,
    rows: u32,
}

impl Traces {
    fn add(&mut self, traces: &[String]) {
        for t in traces {
            self.rows = self.rows.saturating_add(1);
            if self.listed.len() < MAX_TRACES_PER_LOG as usize && !self.listed.contains(t) {
                self.listed.push(t.clone());
            }
        }
    }
}

/// When an in-turn delivery's only fire (`first_in_turn`) took its
/// window from an enqueue's handover, no enqueue ran beside it, and it
/// delivered every row the outbox held and committed: the rows parked, for
/// a summary read from memory (see [`quiet_finish`]).
fn quiet_end(record: &FireRecord, first_in_turn: bool) -> Option<u64> {
    let (rows, parked_rows) = record.handed.filter(|_| first_in_turn)?;
    let all = u64::from(record.report.rows_delivered) == rows;
    (all && matches!(record.commit, Commit::Committed { .. })).then_some(parked_rows)
}

/// The end of an in-turn delivery that left the outbox empty, read from
/// memory: the enqueue that started it armed the safety-net alarm, which
/// prunes and arms what comes next within a second.
fn quiet_finish(
    source: &Name,
    options: &AlarmOptions,
    run: &AlarmRun,
    started: u64,
    ended: u64,
    parked_rows: u64,
) -> AlarmSummary {
    let mut summary = summarise(source, run, options, started, ended, None);
    (summary.next_in_ms, summary.parked_rows) = (None, parked_rows);
    summary
}

/// After the fires: prune, read the gauges, and decide the next wake-up.
fn finish<S: Sql>(
    outbox: &Outbox<S>,
    source: &Name,
    options: &AlarmOptions,
    run: &AlarmRun,
    started: u64,
    now: &dyn Fn() -> u64,
    parked: Vec<(Name, u64, String)>,
) -> Result<AlarmSummary, AlarmError> {
    let (pruned, unchanged) = outbox.prune_reading(now())?;
    let state = outbox.state()?;
    let ended = now();
    let prune_due = outbox.prune_wake(unchanged, state.last_prune_ms)?;
    let next_at = next_alarm_at(run.final_wake(), state.os, ended, prune_due);
    let mut summary =
        summarise(source, run, options, started, ended, next_at.map(|at| at.saturating_sub(ended)));
    summary.pruned = pruned;
    summary.queued_rows = state.queued_rows;
    summary.queued_bytes = state.queued_bytes;
    summary.parked_rows = state.parked_rows;
    summary.oldest_row_age_ms = outbox.owed_head()?.map(|h| ended.saturating_sub(h.at_ms));
    summary.parked = parked;
    Ok(summary)
}

fn summarise(
    source: &Name,
    run: &AlarmRun,
    options: &AlarmOptions,
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
        cpu_cut: run.was_cut(),
        duration_ms: ended.saturating_sub(started),
        next_in_ms: next_in_ms.or(match run.final_wake() {
            Wake::Now => Some(0),
            Wake::After { delay_ms } => Some(delay_ms),
            Wake::Until { delay_ms, .. } => Some(delay_ms),
            Wake::Idle { .. } => None,
        }),
        subrequest_cap: options.budget.calls_per_alarm(),
        started_at_ms: started,
        ..AlarmSummary::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_alarm_lists_at_most_max_traces_per_log_distinct_traces_and_counts_every_traced_row() {
        let trace = |i: u32| format!("00-{i:032x}-00f067aa0ba902b7-01");
        let mut t = Traces::default();
        let at_limit: Vec<String> = (1..=MAX_TRACES_PER_LOG).map(trace).collect();
        t.add(&at_limit);
        t.add(&at_limit[..1]);
        assert_eq!(t.listed, at_limit, "at the limit: every distinct trace, once");
        t.add(&[trace(MAX_TRACES_PER_LOG + 1)]);
        assert_eq!(t.listed.len(), MAX_TRACES_PER_LOG as usize, "past it: not listed");
        assert_eq!(t.rows, MAX_TRACES_PER_LOG + 2, "but counted");
    }
}
