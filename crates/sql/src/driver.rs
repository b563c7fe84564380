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
//!
//! What an alarm reports, and the end that reads the outbox's gauges for
//! it, is `summary.rs`.

use futures::stream::{self, StreamExt};

use crate::core::{
    begin, call_work, encode_request, read_work, AlarmRun, BudgetError, CallOutcome, Checkpoint, CpuGauge,
    Effects, Fire, FireReport, Name, QueuedRow, RelayBudget, ScanState, SourceId, TargetCall, Wake,
    MAX_IN_FLIGHT,
};
pub use durable_relay_protocol::wire::AlarmOptions;

mod summary;

pub use summary::AlarmSummary;
use summary::{finish, quiet_end, quiet_finish, summarise, Traces};

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
