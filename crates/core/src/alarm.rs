//! One alarm's worth of fires: how many fires and target calls remain, and
//! when the alarm should stop. Pure bookkeeping the shells share.

use crate::limits::{BudgetError, RelayBudget};
use crate::settle::{FireReport, Wake};

/// Counts an alarm's fires and calls against its budget.
///
/// Invariant: `calls_used <= budget.calls_per_alarm()` and
/// `fires <= budget.fires_per_alarm`.
#[derive(Clone, Debug)]
pub struct AlarmRun {
    budget: RelayBudget,
    /// Fires run so far.
    fires: u32,
    /// Target calls made so far (each is one subrequest).
    calls_used: u32,
    /// The last fire's wake-up; `None` before the first fire.
    wake: Option<Wake>,
    /// Sum of the fires' reports.
    totals: AlarmTotals,
    /// Whether the invocation's CPU gauge stopped the alarm (see
    /// [`crate::cpu`]): no fire follows.
    cut: bool,
}

/// What an alarm did, summed over its fires.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AlarmTotals {
    /// Fires run.
    pub fires: u32,
    /// Target calls made (subrequests).
    pub calls: u32,
    /// Distinct-per-fire targets called, summed over fires.
    pub targets_called: u32,
    /// Rows applied for the first time.
    pub rows_applied: u32,
    /// Rows deleted as delivered.
    pub rows_delivered: u32,
    /// Fires whose checkpoint lost its guard and was discarded.
    pub conflicts: u32,
    /// Whether any fire saw a row older than the lag bound.
    pub lag_exceeded: bool,
}

impl AlarmRun {
    /// Starts an alarm under `budget`, refusing one outside its ranges.
    pub fn new(budget: RelayBudget) -> Result<AlarmRun, BudgetError> {
        budget.validate()?;
        Ok(AlarmRun {
            budget,
            fires: 0,
            calls_used: 0,
            wake: None,
            totals: AlarmTotals::default(),
            cut: false,
        })
    }

    /// Target calls the next fire may make, or `None` when the alarm is done.
    pub fn next_fire(&self) -> Option<u32> {
        let calls_left = self.budget.calls_per_alarm() - self.calls_used;
        let go_on = match self.wake {
            None => true,
            Some(Wake::Now) => true,
            Some(_) => false,
        };
        (go_on && !self.cut && self.fires < self.budget.fires_per_alarm && calls_left > 0)
            .then_some(calls_left)
    }

    /// Stops the alarm after the fire under way: the invocation's CPU gauge
    /// said stop. Not an error: the last fire settles as usual and the
    /// alarm re-arms by its wake-up.
    pub fn cut(&mut self) {
        self.cut = true;
    }

    /// Whether the CPU gauge stopped the alarm.
    pub fn was_cut(&self) -> bool {
        self.cut
    }

    /// Records a fire whose checkpoint committed.
    pub fn committed(&mut self, report: &FireReport, wake: Wake) {
        self.count(report);
        self.totals.rows_delivered = self.totals.rows_delivered.saturating_add(report.rows_delivered);
        self.wake = Some(wake);
    }

    /// Records a fire whose checkpoint lost its guard: its deliveries stand
    /// at the targets (their watermarks) but nothing left the outbox. The
    /// next fire re-reads and only cleans up.
    pub fn conflicted(&mut self, report: &FireReport) {
        self.count(report);
        self.totals.conflicts += 1;
        self.wake = Some(Wake::Now);
    }

    fn count(&mut self, report: &FireReport) {
        self.fires += 1;
        self.calls_used += report.calls;
        assert!(self.calls_used <= self.budget.calls_per_alarm(), "alarm overspent its calls");
        self.totals.fires += 1;
        self.totals.calls += report.calls;
        self.totals.targets_called += report.targets_called;
        // Targets report their applied counts: a wrong answer must not overflow.
        self.totals.rows_applied = self.totals.rows_applied.saturating_add(report.rows_applied);
        self.totals.lag_exceeded |= report.lag_exceeded;
    }

    /// The wake-up to arm when the alarm ends: the last fire's.
    pub fn final_wake(&self) -> Wake {
        self.wake.unwrap_or(Wake::Now)
    }

    /// Totals so far.
    pub fn totals(&self) -> &AlarmTotals {
        &self.totals
    }
}
