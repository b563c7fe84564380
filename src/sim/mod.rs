//! A deterministic simulator that drives the real relay engine over memory
//! (cargo feature `sim`). It plays the part of the Workers shell, step for
//! step: read `os`, `rs` and the window; make the target calls; write the
//! guarded checkpoint; arm the alarm. Faults are injected between those
//! steps, the clock is manual, and every choice comes from one seed, so a
//! schedule replays exactly.
//!
//! ```
//! use durable_relay::core::RelayBudget;
//! use durable_relay::sim::Sim;
//!
//! let mut sim = Sim::new(7);
//! for i in 0..3 {
//!     sim.put("orders", &format!("customer-{i}"), "last-order", serde_json::json!(i)).unwrap();
//! }
//! let drain = sim.run_until_idle("orders", RelayBudget::FREE, 10);
//! assert!(drain.drained);
//! assert_eq!(sim.applied("customer-2", "orders"), vec![3]);
//! sim.audit().unwrap();
//! ```

mod audit;
mod ops;
mod rng;
mod source;
mod target;

use std::collections::BTreeMap;

pub use ops::{Enqueued, SourcePolicy, TargetRecord};
pub use rng::SimRng;
pub use source::{Commit, FireOutcome};
pub use target::TargetFault;

use crate::core::{
    AlarmTotals, EnqueueError, EnqueueRow, Name, RelayBudget, RelayHook, ScanState, StoredRow,
};
use source::SimSource;
use target::SimTarget;

/// Delay before the platform retries an alarm whose handler threw.
pub const ALARM_RETRY_MS: u64 = 2_000;

/// The simulated world: sources, targets, a clock and a seeded generator.
pub struct Sim {
    seed: u64,
    pub(crate) rng: SimRng,
    now_ms: u64,
    pub(crate) sources: BTreeMap<Name, SimSource>,
    pub(crate) targets: BTreeMap<Name, SimTarget>,
    /// Every accepted sequence per (source, target), ascending: the audit's
    /// record of what must arrive.
    pub(crate) enqueued: BTreeMap<(Name, Name), Vec<u64>>,
    /// Whether every fire ends with [`Sim::audit`], panicking on a breach.
    pub(crate) audit_every_fire: bool,
    /// Rows an operator discarded, per source: the audit excuses them.
    pub(crate) discarded_seqs: std::collections::BTreeSet<(Name, u64)>,
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

pub(crate) fn name(s: &str) -> Name {
    Name::new(s).unwrap_or_else(|e| panic!("invalid name {s:?}: {e}"))
}

impl Sim {
    /// A new world whose every random choice derives from `seed`.
    pub fn new(seed: u64) -> Sim {
        Sim {
            seed,
            rng: SimRng::new(seed),
            now_ms: 1_700_000_000_000,
            sources: BTreeMap::new(),
            targets: BTreeMap::new(),
            enqueued: BTreeMap::new(),
            audit_every_fire: false,
            discarded_seqs: Default::default(),
        }
    }

    /// The seed this world was made from.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// The simulated clock, ms since the epoch.
    pub fn now_ms(&self) -> u64 {
        self.now_ms
    }

    /// Moves the clock forward.
    pub fn advance(&mut self, ms: u64) {
        self.now_ms += ms;
    }

    pub(crate) fn source_mut(&mut self, s: &Name) -> &mut SimSource {
        self.sources.entry(s.clone()).or_default()
    }

    pub(crate) fn target_mut(&mut self, t: &Name) -> &mut SimTarget {
        self.targets.entry(t.clone()).or_insert_with(SimTarget::new)
    }

    /// Enqueues `rows` at `source` atomically, arming its alarm if none is
    /// set. Returns the assigned sequences.
    pub fn enqueue(&mut self, source: &str, rows: Vec<EnqueueRow>) -> Result<Vec<u64>, EnqueueError> {
        match self.enqueue_keyed(source, None, rows) {
            Ok(done) => Ok(done.seqs),
            Err(crate::core::EnqueueRefusal::Invalid(e)) => Err(e),
            Err(other) => unreachable!("an unkeyed enqueue refused for its key: {other}"),
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
        Ok(self.enqueue(source, vec![row])?[0])
    }

    /// Runs one fire of `source` outside any alarm, with the calls one fire
    /// of `budget` allows.
    pub fn fire(&mut self, source: &str, budget: RelayBudget) -> FireOutcome {
        self.fire_once(&name(source), budget, budget.calls_per_fire(), 0)
    }

    /// Runs one alarm of `source` now (whether or not one is due): fires
    /// until the budget is spent or a fire asks to wait, then arms the next
    /// alarm as the last fire decided.
    pub fn run_alarm(&mut self, source: &str, budget: RelayBudget) -> AlarmReport {
        source::run_alarm(self, &name(source), budget)
    }

    /// Runs `source`'s alarms as they fall due, moving the clock to each,
    /// until none is armed or `max_alarms` have run.
    pub fn run_until_idle(&mut self, source: &str, budget: RelayBudget, max_alarms: u32) -> DrainReport {
        let s = name(source);
        let mut report = DrainReport::default();
        let started = self.now_ms;
        while report.alarms < max_alarms {
            let Some(at) = self.sources.get(&s).and_then(|x| x.alarm_at) else {
                break;
            };
            self.now_ms = self.now_ms.max(at);
            let alarm = self.run_alarm(source, budget);
            report.alarms += 1;
            report.fires += alarm.totals.fires;
            report.calls += alarm.totals.calls;
            report.max_calls_per_alarm = report.max_calls_per_alarm.max(alarm.totals.calls);
            report.idle_fires += alarm.fires.iter().filter(|f| f.report.rows_delivered == 0).count() as u32;
        }
        report.drained = self.sources.get(&s).is_none_or(|x| x.alarm_at.is_none());
        report.elapsed_ms = self.now_ms - started;
        report
    }

    /// Runs every source's alarms in due order (ties broken by the seed)
    /// until none is armed or `max_alarms` have run in all.
    pub fn run_all_until_idle(&mut self, budget: RelayBudget, max_alarms: u32) -> DrainReport {
        let mut report = DrainReport::default();
        let started = self.now_ms;
        while report.alarms < max_alarms {
            let due: Vec<(u64, Name)> =
                self.sources.iter().filter_map(|(n, s)| s.alarm_at.map(|at| (at, n.clone()))).collect();
            let Some(first) = due.iter().map(|(at, _)| *at).min() else {
                break;
            };
            let mut ready: Vec<Name> =
                due.into_iter().filter(|(at, _)| *at == first).map(|(_, n)| n).collect();
            self.rng.shuffle(&mut ready);
            self.now_ms = self.now_ms.max(first);
            let alarm = self.run_alarm(ready[0].as_str(), budget);
            report.alarms += 1;
            report.fires += alarm.totals.fires;
            report.calls += alarm.totals.calls;
            report.max_calls_per_alarm = report.max_calls_per_alarm.max(alarm.totals.calls);
        }
        report.drained = self.sources.values().all(|s| s.alarm_at.is_none());
        report.elapsed_ms = self.now_ms - started;
        report
    }

    // ---- fault injection ------------------------------------------------

    /// Makes `target` refuse every call (a transient error) until healed.
    pub fn fail_target(&mut self, target: &str) {
        self.target_mut(&name(target)).fault = TargetFault::Reject;
    }

    /// Makes `target` refuse every call as a permanent error until healed.
    pub fn fail_target_permanently(&mut self, target: &str) {
        self.target_mut(&name(target)).fault = TargetFault::RejectPermanently;
    }

    /// Makes `target` healthy again.
    pub fn heal_target(&mut self, target: &str) {
        self.target_mut(&name(target)).fault = TargetFault::Healthy;
    }

    /// Makes `target` apply its next `n` calls and then lose the replies.
    pub fn lose_replies(&mut self, target: &str, n: u32) {
        self.target_mut(&name(target)).lose_replies = n;
    }

    /// Installs a hook at `target` that adds effects to each apply.
    pub fn set_hook(&mut self, target: &str, hook: Box<dyn RelayHook>) {
        self.target_mut(&name(target)).hook = Some(hook);
    }

    /// Makes `source`'s next checkpoint fail after its target calls, as a
    /// crash between the target apply and the source cleanup would. The
    /// alarm then throws and the platform retries it.
    pub fn crash_next_checkpoint(&mut self, source: &str) {
        self.source_mut(&name(source)).faults.crash_checkpoint = true;
    }

    /// Makes another writer change `rs` just before `source`'s next
    /// checkpoint, so its guard fails.
    pub fn conflict_next_checkpoint(&mut self, source: &str) {
        self.source_mut(&name(source)).faults.conflict_checkpoint = true;
    }

    /// Has a concurrent writer enqueue `rows` at `source` after its next
    /// fire has read the window.
    pub fn append_during_next_fire(&mut self, source: &str, rows: Vec<EnqueueRow>) {
        self.source_mut(&name(source)).faults.append_mid_fire.push(rows);
    }

    /// Starts a second fire on `source` while its next fire is in flight;
    /// the second one runs to completion at a seeded point in the first.
    pub fn overlap_next_fire(&mut self, source: &str) {
        self.source_mut(&name(source)).faults.overlap = true;
    }

    /// Replaces the stored body of row `seq` (to simulate corruption).
    pub fn corrupt_row(&mut self, source: &str, seq: u64, body: &str) {
        let src = self.source_mut(&name(source));
        let row = src.outbox.get_mut(&seq).expect("corrupt_row of a row not queued");
        row.body = body.to_owned();
    }

    /// Replaces the stored `rs` text.
    pub fn corrupt_rs(&mut self, source: &str, text: &str) {
        self.source_mut(&name(source)).rs = Some(text.to_owned());
    }

    // ---- inspection -----------------------------------------------------

    /// Sequences queued at `source`, ascending.
    pub fn queued(&self, source: &str) -> Vec<u64> {
        self.sources.get(&name(source)).map_or_else(Vec::new, |s| s.outbox.keys().copied().collect())
    }

    /// Rows queued at `source`, as stored.
    pub fn queued_rows(&self, source: &str) -> Vec<StoredRow> {
        self.sources.get(&name(source)).map_or_else(Vec::new, |s| s.outbox.values().cloned().collect())
    }

    /// `source`'s last allocated sequence.
    pub fn os(&self, source: &str) -> u64 {
        self.sources.get(&name(source)).map_or(0, |s| s.os)
    }

    /// `source`'s scan state, if stored and valid.
    pub fn rs(&self, source: &str) -> Option<ScanState> {
        let text = self.sources.get(&name(source))?.rs.as_deref()?;
        ScanState::decode(text).ok()
    }

    /// When `source`'s alarm is due, if armed.
    pub fn alarm_at(&self, source: &str) -> Option<u64> {
        self.sources.get(&name(source)).and_then(|s| s.alarm_at)
    }

    /// `target`'s watermark for `source` (0 if none).
    pub fn watermark(&self, target: &str, source: &str) -> u64 {
        self.targets.get(&name(target)).and_then(|t| t.watermarks.get(&name(source)).copied()).unwrap_or(0)
    }

    /// Sequences from `source` that `target` applied, in application order.
    pub fn applied(&self, target: &str, source: &str) -> Vec<u64> {
        self.targets
            .get(&name(target))
            .and_then(|t| t.applied.get(&name(source)).cloned())
            .unwrap_or_default()
    }

    /// The JSON text of `key` at `target`.
    pub fn value(&self, target: &str, key: &str) -> Option<String> {
        self.targets.get(&name(target)).and_then(|t| t.kv.get(key).cloned())
    }

    /// Calls `target` has received, including failed ones.
    pub fn target_calls(&self, target: &str) -> u64 {
        self.targets.get(&name(target)).map_or(0, |t| t.calls)
    }

    /// Makes every fire end with [`Sim::audit`], panicking (with the seed)
    /// on the first breach, so a property test sees the fire that broke it.
    pub fn audit_every_fire(&mut self, on: bool) {
        self.audit_every_fire = on;
    }

    /// Checks the relay's invariants over the whole world; see `audit.rs`.
    pub fn audit(&self) -> Result<(), String> {
        audit::audit(self)
    }
}
