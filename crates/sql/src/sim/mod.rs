//! A deterministic simulator that runs the code that ships (cargo feature
//! `sim`): every source is a real [`Relay`](crate::Relay), its outbox the
//! real SQL on a native SQLite, its alarms run by the real driver and the
//! real alarm keeper; every target is a real [`Inbox`](crate::Inbox). What
//! the simulator adds is only what workerd would provide: a manual clock,
//! simulated target calls with injectable faults, the interleavings a
//! Durable Object allows while an alarm awaits its targets, the platform's
//! alarm retry, and seeded choices, so a schedule replays exactly.
//!
//! ```
//! use durable_relay_sql::core::RelayBudget;
//! use durable_relay_sql::sim::Sim;
//!
//! let mut sim = Sim::new(42);                       // every random choice derives from this seed
//! sim.put("orders", "customer-1", "balance", serde_json::json!(10)).unwrap();
//! sim.fail_target("customer-1");                    // refuses calls until healed
//! let alarm = sim.run_alarm("orders", RelayBudget::FREE);
//! assert_eq!(alarm.fires[0].report.failed.len(), 1);
//! sim.heal_target("customer-1");
//! let drain = sim.run_until_idle("orders", RelayBudget::FREE, 100);
//! assert!(drain.drained);
//! assert_eq!(sim.applied("customer-1", "orders"), vec![1]);
//! sim.audit().unwrap();                             // order, nothing lost, nothing twice
//! ```

mod adopt;
mod audit;
mod cpu;
pub mod explore;
mod logical;
mod ops;
mod partitions;
mod rng;
mod sqlite;
mod switches;
mod targets;
mod world;

use std::cell::RefCell;
use std::rc::Rc;

pub use cpu::CpuFault;
pub use ops::{Enqueued, SourcePolicy, TargetRecord};
pub use rng::SimRng;
pub use sqlite::SqliteSql;
pub use world::{PlatformFault, Release, SimRelay, SimSql, TargetFault, SIM_SOURCE_CLASS};

use crate::core::{
    AlarmTotals, Checkpoint, EnqueueError, EnqueueRow, FireReport, Name, RelayBudget, RelayHook, ScanState,
    StoredRow, Wake, PLATFORM_ALARM_RETRY_MS,
};
use crate::driver::{self, AlarmError, FireObserver, FireRecord};
use crate::store::outbox::Commit as StoreCommit;
use crate::store::{Sql, StoreError};
use targets::SimTargets;
use world::{source_config, World};

/// Delay before the platform retries an alarm whose handler threw.
pub const ALARM_RETRY_MS: u64 = PLATFORM_ALARM_RETRY_MS;

/// A simulated source's stored alarm.
pub use crate::testing::MemoryAlarm as SimAlarm;

/// The simulated world.
pub struct Sim {
    world: Rc<World>,
}

/// How a fire's checkpoint ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Commit {
    /// The checkpoint committed.
    Committed,
    /// The checkpoint lost a guard (a concurrent checkpoint) and was dropped.
    Conflict,
    /// Storage failed before the checkpoint committed (an injected crash);
    /// the alarm handler threw.
    Crashed,
}

/// What one simulated fire did.
#[derive(Clone, Debug)]
pub struct FireOutcome {
    /// The engine's report (empty for a crashed fire).
    pub report: FireReport,
    /// The engine's wake-up decision.
    pub wake: Wake,
    /// How the checkpoint ended.
    pub commit: Commit,
    /// The scan state the checkpoint wrote (or would have written).
    pub scan: ScanState,
    /// The checkpoint the fire settled on (`None` for a crashed fire).
    pub checkpoint: Option<Checkpoint>,
    /// Calls made, as (target, rows in the batch), in call order.
    pub calls: Vec<(Name, usize)>,
    /// The `traceparent`s of the rows the targets took (see
    /// [`FireRecord::traces`]).
    pub traces: Vec<String>,
}

/// What one alarm did.
#[derive(Clone, Debug)]
pub struct AlarmReport {
    /// Each fire, in order.
    pub fires: Vec<FireOutcome>,
    /// Sums over the fires.
    pub totals: AlarmTotals,
    /// When the next alarm is due, if any.
    pub next_alarm_ms: Option<u64>,
    /// The alarm's summary, as the Durable Object logs it (`None` when the
    /// alarm failed).
    pub summary: Option<crate::driver::AlarmSummary>,
}

/// What a run of alarms did.
#[derive(Clone, Debug, Default)]
pub struct DrainReport {
    /// Whether the source ended with no alarm armed.
    pub drained: bool,
    /// Alarms run.
    pub alarms: u32,
    /// Fires run.
    pub fires: u32,
    /// Target calls made.
    pub calls: u32,
    /// Most target calls any one alarm made.
    pub max_calls_per_alarm: u32,
    /// Fires that delivered no row.
    pub idle_fires: u32,
    /// Simulated time from the first alarm to the last one's end.
    pub elapsed_ms: u64,
}

#[allow(clippy::panic, reason = "the simulator's names are the test's own literals")]
pub(crate) fn name(s: &str) -> Name {
    Name::new(s).unwrap_or_else(|e| panic!("invalid name {s:?}: {e}"))
}

/// Collects an alarm's fires and audits after each, when asked to.
struct Observer {
    world: Rc<World>,
    targets: Rc<SimTargets>,
    fires: RefCell<Vec<FireOutcome>>,
}

impl FireObserver for Observer {
    #[allow(clippy::panic, reason = "the simulator reports a breached invariant by panicking with the seed")]
    fn fire_settled(&self, record: &FireRecord) {
        let calls = std::mem::take(&mut *self.targets.log.borrow_mut());
        self.fires.borrow_mut().push(outcome(record, calls));
        if self.world.audit_every_fire.get() {
            if let Err(breach) = audit::audit(&self.world) {
                panic!(
                    "audit failed after a fire of {} ({:?}): {breach}",
                    self.targets.source, record.commit
                );
            }
        }
    }
}

fn outcome(record: &FireRecord, calls: Vec<(Name, usize)>) -> FireOutcome {
    FireOutcome {
        report: record.report.clone(),
        wake: record.wake,
        commit: match record.commit {
            StoreCommit::Committed { .. } => Commit::Committed,
            StoreCommit::Conflict => Commit::Conflict,
        },
        scan: record.scan.clone(),
        checkpoint: Some(record.checkpoint.clone()),
        calls,
        traces: record.traces.clone(),
    }
}

fn crashed(calls: Vec<(Name, usize)>) -> FireOutcome {
    FireOutcome {
        report: FireReport::default(),
        wake: Wake::Now,
        commit: Commit::Crashed,
        scan: ScanState::new_cycle(0, None),
        checkpoint: None,
        calls,
        traces: Vec::new(),
    }
}

impl Sim {
    /// A new world whose every random choice derives from `seed`.
    pub fn new(seed: u64) -> Sim {
        Sim { world: Rc::new(World::new(seed)) }
    }

    /// The seed this world was made from.
    pub fn seed(&self) -> u64 {
        self.world.seed
    }

    /// The simulated clock, ms since the epoch.
    pub fn now_ms(&self) -> u64 {
        self.world.now()
    }

    /// Moves the clock forward.
    pub fn advance(&mut self, ms: u64) {
        self.world.clock.set(self.world.now() + ms);
    }

    /// Enqueues `rows` at `source` atomically, arming its alarm. Returns the
    /// assigned sequences.
    pub fn enqueue(&mut self, source: &str, rows: Vec<EnqueueRow>) -> Result<Vec<u64>, EnqueueError> {
        match self.enqueue_keyed(source, None, rows) {
            Ok(done) => Ok(done.seqs),
            Err(crate::core::EnqueueRefusal::Invalid(e)) => Err(e),
            Err(other) => panic!("an unkeyed enqueue was refused for its key: {other}"),
        }
    }

    /// Enqueues one row that puts `key = value` at `target`.
    pub fn put(
        &mut self,
        source: &str,
        target: &str,
        key: &str,
        value: serde_json::Value,
    ) -> Result<u64, EnqueueError> {
        let row = EnqueueRow::new(name(target), vec![(key.to_owned(), value)], vec![]);
        let seqs = self.enqueue(source, vec![row])?;
        Ok(seqs.first().copied().unwrap_or(0))
    }

    /// Runs one fire of `source` outside any alarm, with the calls one fire
    /// of `budget` allows. Panics on an invalid budget; see [`Sim::try_fire`].
    #[allow(clippy::panic, reason = "the simulator's convenience form; try_fire returns the error")]
    pub fn fire(&mut self, source: &str, budget: RelayBudget) -> FireOutcome {
        self.try_fire(source, budget).unwrap_or_else(|e| panic!("fire of {source}: {e}"))
    }

    /// Runs one fire of `source` outside any alarm; refuses an invalid
    /// budget with an error.
    pub fn try_fire(&mut self, source: &str, budget: RelayBudget) -> Result<FireOutcome, AlarmError> {
        let s = name(source);
        let src = self.world.source(&s);
        let targets = self.targets(&s, budget);
        let now = || self.world.now();
        let relay = &src.relay;
        let mut cpu = driver::Cpu::new(&budget, &driver::no_signal);
        let result = futures::executor::block_on(driver::fire(
            relay.outbox(),
            relay.name(),
            relay.id(),
            &targets.options,
            budget.calls_per_fire(),
            targets.as_ref(),
            &now,
            None,
            &mut cpu,
        ));
        let calls = std::mem::take(&mut *targets.log.borrow_mut());
        let fire = match result {
            Ok(record) => outcome(&record, calls),
            Err(AlarmError::Store(_)) => crashed(calls),
            Err(e @ AlarmError::Budget(_)) => return Err(e),
        };
        self.after_fire(&s, &fire);
        Ok(fire)
    }

    fn after_fire(&self, source: &Name, fire: &FireOutcome) {
        if self.world.audit_every_fire.get() {
            if let Err(breach) = audit::audit(&self.world) {
                #[allow(clippy::panic, reason = "the simulator reports a breached invariant by panicking")]
                {
                    panic!("audit failed after a fire of {source} ({:?}): {breach}", fire.commit);
                }
            }
        }
    }

    fn targets(&self, source: &Name, budget: RelayBudget) -> Rc<SimTargets> {
        let src = self.world.source(source);
        let settings = self.world.settings.borrow().get(source).copied().unwrap_or_default();
        Rc::new(SimTargets {
            world: self.world.clone(),
            source: source.clone(),
            src,
            options: source_config(budget, settings, 0, false).alarm,
            log: RefCell::default(),
            nested: false,
        })
    }

    /// Runs one alarm of `source` now (whether or not one is due), as the
    /// platform does: the stored alarm is consumed, the real alarm keeper
    /// runs the driver and arms what it decided; if it throws, the platform
    /// retries after [`ALARM_RETRY_MS`].
    #[allow(clippy::panic, reason = "the simulator's convenience form; try_run_alarm returns the error")]
    pub fn run_alarm(&mut self, source: &str, budget: RelayBudget) -> AlarmReport {
        self.try_run_alarm(source, budget).unwrap_or_else(|e| panic!("alarm of {source}: {e}"))
    }

    /// [`Sim::run_alarm`], refusing an invalid budget with an error.
    pub fn try_run_alarm(&mut self, source: &str, budget: RelayBudget) -> Result<AlarmReport, AlarmError> {
        let s = name(source);
        let src = self.world.source(&s);
        let settings = self.world.settings.borrow().get(&s).copied().unwrap_or_default();
        let coalesce = self.world.coalesce.borrow().get(&s).copied().unwrap_or(0);
        src.relay.set_config(source_config(budget, settings, coalesce, self.world.in_turn.get()))?;
        src.alarm.set(None);
        let targets = self.targets(&s, budget);
        let observer =
            Observer { world: self.world.clone(), targets: targets.clone(), fires: RefCell::default() };
        let now = || self.world.now();
        let relay = &src.relay;
        relay.alarm_retried(self.world.retries.borrow().get(&s).copied().unwrap_or(0));
        relay.set_near_cpu_limit(world::cpu_signal(&self.world, &s));
        let result = futures::executor::block_on(relay.alarm(targets.as_ref(), &now, &observer));
        let mut fires = observer.fires.take();
        self.world.cpu.end_invocation(result.as_ref().map_or(0, |summary| summary.work));
        let summary = match result {
            Ok(summary) => {
                self.world.retries.borrow_mut().remove(&s);
                Some(summary)
            }
            Err(failure) => {
                if let AlarmError::Budget(_) = failure.error {
                    return Err(failure.error);
                }
                // The platform counts the retries of a throwing handler.
                *self.world.retries.borrow_mut().entry(s.clone()).or_insert(0) += 1;
                fires.push(crashed(std::mem::take(&mut *targets.log.borrow_mut())));
                // The platform retries a throwing handler soon; the keeper's
                // own back-off stands in case the retries run out.
                let retry = self.now_ms() + ALARM_RETRY_MS;
                src.alarm.set(Some(src.alarm.get().map_or(retry, |a| a.min(retry))));
                None
            }
        };
        let totals = totals(&fires, summary.as_ref());
        Ok(AlarmReport { fires, totals, next_alarm_ms: src.alarm.get(), summary })
    }

    /// Runs `source`'s alarms as they fall due, moving the clock to each,
    /// until none is armed or `max_alarms` have run.
    pub fn run_until_idle(&mut self, source: &str, budget: RelayBudget, max_alarms: u32) -> DrainReport {
        let s = name(source);
        let mut report = DrainReport::default();
        let started = self.now_ms();
        while report.alarms < max_alarms {
            let Some(at) = self.alarm_at(source) else { break };
            self.world.clock.set(self.now_ms().max(at));
            let alarm = self.run_alarm(source, budget);
            count(&mut report, &alarm);
        }
        report.drained = self.world.source(&s).alarm.get().is_none();
        report.elapsed_ms = self.now_ms() - started;
        report
    }

    /// Runs every source's alarms in due order (ties broken by the seed)
    /// until none is armed or `max_alarms` have run in all.
    pub fn run_all_until_idle(&mut self, budget: RelayBudget, max_alarms: u32) -> DrainReport {
        let mut report = DrainReport::default();
        let started = self.now_ms();
        while report.alarms < max_alarms {
            let due: Vec<(u64, Name)> = self
                .world
                .sources
                .borrow()
                .iter()
                .filter_map(|(n, s)| s.alarm.get().map(|at| (at, n.clone())))
                .collect();
            let Some(first) = due.iter().map(|(at, _)| *at).min() else { break };
            let mut ready: Vec<Name> =
                due.into_iter().filter(|(at, _)| *at == first).map(|(_, n)| n).collect();
            self.world.rng.borrow_mut().shuffle(&mut ready);
            self.world.clock.set(self.now_ms().max(first));
            let Some(next) = ready.first() else { break };
            let alarm = self.run_alarm(next.as_str(), budget);
            count(&mut report, &alarm);
        }
        report.drained = self.world.sources.borrow().values().all(|s| s.alarm.get().is_none());
        report.elapsed_ms = self.now_ms() - started;
        report
    }

    /// Invocations a [`CpuFault::Limit`] killed in the run so far.
    pub fn limit_kills(&self) -> u32 {
        self.world.cpu.limit_kills.get()
    }

    /// Work units spent in the run so far (see [`crate::core::cpu`]).
    pub fn work(&self) -> u64 {
        self.world.cpu.total()
    }

    /// Checks the relay's invariants over the whole world: per-target order,
    /// nothing lost, nothing applied twice, no watermark past an undelivered
    /// older row; and each outbox's own invariants on its tables.
    pub fn audit(&self) -> Result<(), String> {
        audit::audit(&self.world)
    }

    /// Target calls made in all.
    pub fn total_calls(&self) -> u64 {
        self.world.total_calls.get()
    }

    /// Calls `target` has received, failed ones included.
    pub fn target_calls(&self, target: &str) -> u64 {
        self.world.targets.borrow().get(&name(target)).map_or(0, |t| t.calls)
    }

    /// When `source`'s alarm is due, if armed.
    pub fn alarm_at(&self, source: &str) -> Option<u64> {
        self.world.sources.borrow().get(&name(source)).and_then(|s| s.alarm.get())
    }
}

fn totals(fires: &[FireOutcome], summary: Option<&crate::driver::AlarmSummary>) -> AlarmTotals {
    let mut t = AlarmTotals::default();
    for f in fires {
        t.fires += 1;
        t.calls += f.report.calls;
        t.targets_called += f.report.targets_called;
        t.rows_applied += f.report.rows_applied;
        t.conflicts += u32::from(f.commit == Commit::Conflict);
        t.lag_exceeded |= f.report.lag_exceeded;
        if f.commit == Commit::Committed {
            t.rows_delivered += f.report.rows_delivered;
        }
    }
    if let Some(s) = summary {
        debug_assert_eq!(s.subrequests, t.calls);
    }
    t
}

fn count(report: &mut DrainReport, alarm: &AlarmReport) {
    report.alarms += 1;
    report.fires += alarm.totals.fires;
    report.calls += alarm.totals.calls;
    report.max_calls_per_alarm = report.max_calls_per_alarm.max(alarm.totals.calls);
    report.idle_fires += alarm.fires.iter().filter(|f| f.report.rows_delivered == 0).count() as u32;
}

/// Stored rows of a source, as read back from its outbox.
pub(crate) fn stored_rows(sql: &impl Sql, table: &str, filter: &str) -> Result<Vec<StoredRow>, StoreError> {
    let rows = sql.rows(
        &format!("SELECT seq, target, at_ms, body, due_ms FROM {table} {filter} ORDER BY seq"),
        vec![],
    )?;
    rows.iter()
        .map(|r| {
            Ok(StoredRow {
                seq: r.u64(0)?,
                target: r.text(1)?,
                at_ms: r.u64(2)?,
                due_ms: r.u64(4)?,
                body: r.text(3)?,
            })
        })
        .collect()
}
