//! The per-fire budget: how much work one source may do in a fire and in an
//! alarm, its Worker presets, the range every field must keep, and the
//! smaller budget a retried alarm runs with.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::{
    DEFAULT_ROWS_PER_FIRE, DEFAULT_TARGETS_PER_FIRE, MAX_BATCH_ROWS, MAX_CALLS_PER_TARGET,
    MAX_FIRES_PER_ALARM, MAX_RETRY_HALVINGS, MAX_ROWS_PER_FIRE, MAX_TARGETS_PER_FIRE, MAX_WORK_PER_ALARM,
    RETRY_SHARE_DIVISOR, WINDOW_ROWS_PER_BUDGET_ROW, WORKER_FREE_RELAY_FIRES, WORKER_FREE_RELAY_TARGETS,
    WORKER_FREE_SUBREQUESTS, WORKER_FREE_WORK_PER_ALARM, WORKER_PAID_RELAY_FIRES, WORKER_PAID_RELAY_TARGETS,
    WORKER_PAID_SUBREQUESTS, WORKER_PAID_WORK_PER_ALARM, WORKER_RELAY_CALLS_PER_TARGET,
};

/// Work one source may do per fire and per alarm.
///
/// Invariant: every field is within its documented range (see
/// [`RelayBudget::validate`]); the engine asserts it on entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RelayBudget {
    /// Base rows per fire; a fire inspects at most four times this many.
    /// Range 1..=[`MAX_ROWS_PER_FIRE`].
    pub rows_per_fire: u32,
    /// Distinct targets a fire may apply rows to. Reaching it pauses the
    /// cursor before the next target without blocking it.
    /// Range 1..=[`MAX_TARGETS_PER_FIRE`].
    pub targets_per_fire: u32,
    /// Calls one target may receive in one fire (one batch each, in order).
    /// Range 1..=[`MAX_CALLS_PER_TARGET`].
    pub calls_per_target: u32,
    /// Fires one alarm runs at most. Range 1..=[`MAX_FIRES_PER_ALARM`].
    pub fires_per_alarm: u32,
    /// Hard cap on target calls in one alarm invocation, whatever the other
    /// fields allow. Range 1..=[`WORKER_PAID_SUBREQUESTS`].
    pub subrequests_per_alarm: u32,
    /// Rows per target call. Range 1..=[`MAX_BATCH_ROWS`].
    pub batch_rows: u32,
    /// Work units (see [`crate::cpu`]) one alarm may spend before it
    /// settles what is done and re-arms, so an invocation stops before the
    /// platform's CPU limit kills it. Range 1..=[`MAX_WORK_PER_ALARM`];
    /// absent in budgets stored before it existed, which take the Paid
    /// figure (the one [`RelayBudget::default`] has).
    #[serde(default = "default_work_per_alarm")]
    pub work_per_alarm: u32,
}

fn default_work_per_alarm() -> u32 {
    WORKER_PAID_WORK_PER_ALARM
}

/// A budget field outside its range.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BudgetError {
    /// The offending field's name.
    pub field: &'static str,
    /// The value given.
    pub value: u32,
    /// The largest value allowed (the smallest is always 1).
    pub max: u32,
}

impl fmt::Display for BudgetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} must be within 1..={}, got {}", self.field, self.max, self.value)
    }
}

impl std::error::Error for BudgetError {}

impl RelayBudget {
    /// Workers Free: 8 targets x 2 fires x 2 calls = 32 calls, under 50.
    pub const FREE: RelayBudget = RelayBudget {
        rows_per_fire: DEFAULT_ROWS_PER_FIRE,
        targets_per_fire: WORKER_FREE_RELAY_TARGETS,
        calls_per_target: WORKER_RELAY_CALLS_PER_TARGET,
        fires_per_alarm: WORKER_FREE_RELAY_FIRES,
        subrequests_per_alarm: WORKER_FREE_SUBREQUESTS,
        batch_rows: MAX_BATCH_ROWS,
        work_per_alarm: WORKER_FREE_WORK_PER_ALARM,
    };

    /// Workers Paid: 32 targets x 8 fires x 2 calls = 512 calls per alarm.
    pub const PAID: RelayBudget = RelayBudget {
        rows_per_fire: DEFAULT_ROWS_PER_FIRE,
        targets_per_fire: WORKER_PAID_RELAY_TARGETS,
        calls_per_target: WORKER_RELAY_CALLS_PER_TARGET,
        fires_per_alarm: WORKER_PAID_RELAY_FIRES,
        subrequests_per_alarm: WORKER_PAID_SUBREQUESTS,
        batch_rows: MAX_BATCH_ROWS,
        work_per_alarm: WORKER_PAID_WORK_PER_ALARM,
    };

    /// Checks every field against its range.
    pub fn validate(&self) -> Result<(), BudgetError> {
        let fields = [
            ("rows_per_fire", self.rows_per_fire, MAX_ROWS_PER_FIRE),
            ("targets_per_fire", self.targets_per_fire, MAX_TARGETS_PER_FIRE),
            ("calls_per_target", self.calls_per_target, MAX_CALLS_PER_TARGET),
            ("fires_per_alarm", self.fires_per_alarm, MAX_FIRES_PER_ALARM),
            ("subrequests_per_alarm", self.subrequests_per_alarm, WORKER_PAID_SUBREQUESTS),
            ("batch_rows", self.batch_rows, MAX_BATCH_ROWS),
            ("work_per_alarm", self.work_per_alarm, MAX_WORK_PER_ALARM),
        ];
        for (field, value, max) in fields {
            if value == 0 || value > max {
                return Err(BudgetError { field, value, max });
            }
        }
        Ok(())
    }

    /// The smaller budget of an alarm that is the platform's `retry`th retry
    /// (0: not a retry): rows and work halved once per retry, at most
    /// [`MAX_RETRY_HALVINGS`] times, never below one, so a fire that the CPU
    /// limit killed fits next time and a source always makes progress.
    /// Targets per fire stay: a scan cycle reckons its retries of failing
    /// targets from them over all its fires, and a retry may fall mid-cycle;
    /// the halved work budget bounds the calls instead.
    pub fn for_retry(&self, retry: u32) -> RelayBudget {
        let halvings = retry.min(MAX_RETRY_HALVINGS);
        let halve = |v: u32| (v >> halvings).max(1);
        RelayBudget {
            rows_per_fire: halve(self.rows_per_fire),
            work_per_alarm: halve(self.work_per_alarm),
            ..*self
        }
    }

    /// Rows a fire inspects at most: four times the base budget.
    pub fn window_rows(&self) -> u32 {
        self.rows_per_fire.saturating_mul(WINDOW_ROWS_PER_BUDGET_ROW)
    }

    /// Target calls one fire may make, before the alarm-wide cap.
    pub fn calls_per_fire(&self) -> u32 {
        self.targets_per_fire.saturating_mul(self.calls_per_target)
    }

    /// Target calls one alarm may make: the smaller of what its fires allow
    /// and the subrequest cap.
    pub fn calls_per_alarm(&self) -> u32 {
        self.calls_per_fire().saturating_mul(self.fires_per_alarm).min(self.subrequests_per_alarm)
    }

    /// Retries of failing targets that may fail in one scan cycle (and
    /// retries one fire may make): a fire's target slots over
    /// [`RETRY_SHARE_DIVISOR`], at least one. A retry that answers spends
    /// none, so targets that come back are all retried in the cycle; once
    /// this many failed, the rest wait for a later cycle, so however many
    /// targets fail, most of the budget reaches the targets that answer.
    pub fn retries_per_cycle(&self) -> u32 {
        (self.targets_per_fire / RETRY_SHARE_DIVISOR).max(1)
    }
}

impl Default for RelayBudget {
    /// Defaults outside a Worker: 256 rows, 16 targets, 2 calls each.
    fn default() -> Self {
        RelayBudget {
            rows_per_fire: DEFAULT_ROWS_PER_FIRE,
            targets_per_fire: DEFAULT_TARGETS_PER_FIRE,
            calls_per_target: WORKER_RELAY_CALLS_PER_TARGET,
            fires_per_alarm: WORKER_PAID_RELAY_FIRES,
            subrequests_per_alarm: WORKER_PAID_SUBREQUESTS,
            batch_rows: MAX_BATCH_ROWS,
            work_per_alarm: WORKER_PAID_WORK_PER_ALARM,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_are_valid_and_free_stays_within_fifty_calls() {
        RelayBudget::FREE.validate().unwrap();
        RelayBudget::PAID.validate().unwrap();
        RelayBudget::default().validate().unwrap();
        assert_eq!(RelayBudget::FREE.calls_per_alarm(), 32);
        assert!(RelayBudget::FREE.calls_per_alarm() <= WORKER_FREE_SUBREQUESTS);
        assert_eq!(RelayBudget::PAID.calls_per_alarm(), 512);
    }

    #[test]
    fn budget_fields_are_checked_at_and_past_their_edges() {
        let mut b = RelayBudget::PAID;
        b.targets_per_fire = MAX_TARGETS_PER_FIRE;
        assert!(b.validate().is_ok());
        b.targets_per_fire = MAX_TARGETS_PER_FIRE + 1;
        assert_eq!(b.validate().unwrap_err().field, "targets_per_fire");
        b.targets_per_fire = 0;
        assert_eq!(b.validate().unwrap_err().field, "targets_per_fire");
        let mut b = RelayBudget::PAID;
        b.batch_rows = MAX_BATCH_ROWS + 1;
        assert_eq!(b.validate().unwrap_err().field, "batch_rows");
        b.batch_rows = MAX_BATCH_ROWS;
        b.rows_per_fire = MAX_ROWS_PER_FIRE + 1;
        assert_eq!(b.validate().unwrap_err().field, "rows_per_fire");
        b.rows_per_fire = MAX_ROWS_PER_FIRE;
        b.calls_per_target = MAX_CALLS_PER_TARGET + 1;
        assert_eq!(b.validate().unwrap_err().field, "calls_per_target");
        b.calls_per_target = 1;
        b.fires_per_alarm = MAX_FIRES_PER_ALARM + 1;
        assert_eq!(b.validate().unwrap_err().field, "fires_per_alarm");
        b.fires_per_alarm = 1;
        b.subrequests_per_alarm = WORKER_PAID_SUBREQUESTS + 1;
        assert_eq!(b.validate().unwrap_err().field, "subrequests_per_alarm");
        b.subrequests_per_alarm = 1;
        assert!(b.validate().is_ok());
        b.work_per_alarm = MAX_WORK_PER_ALARM;
        assert!(b.validate().is_ok(), "work at its edge");
        b.work_per_alarm = MAX_WORK_PER_ALARM + 1;
        assert_eq!(b.validate().unwrap_err().field, "work_per_alarm");
        b.work_per_alarm = 0;
        assert_eq!(b.validate().unwrap_err().field, "work_per_alarm");
    }

    #[test]
    fn a_retry_halves_rows_and_work_at_most_six_times_and_never_to_zero() {
        let free = RelayBudget::FREE;
        assert_eq!(free.for_retry(0), free, "not a retry");
        let once = free.for_retry(1);
        assert_eq!(
            (once.rows_per_fire, once.targets_per_fire, once.work_per_alarm),
            (free.rows_per_fire / 2, free.targets_per_fire, free.work_per_alarm / 2)
        );
        let last = free.for_retry(MAX_RETRY_HALVINGS);
        assert_eq!(last.rows_per_fire, free.rows_per_fire >> MAX_RETRY_HALVINGS, "at the edge");
        assert_eq!(free.for_retry(MAX_RETRY_HALVINGS + 1), last, "past it: no smaller");
        let tiny = RelayBudget { rows_per_fire: 1, work_per_alarm: 1, ..free };
        assert_eq!(tiny.for_retry(u32::MAX).rows_per_fire, 1);
        assert_eq!(tiny.for_retry(u32::MAX).work_per_alarm, 1);
        for n in 0..=MAX_RETRY_HALVINGS + 1 {
            free.for_retry(n).validate().unwrap();
        }
    }

    #[test]
    fn a_cycle_retries_half_a_fires_targets_and_at_least_one() {
        assert_eq!(RelayBudget::FREE.retries_per_cycle(), 4);
        assert_eq!(RelayBudget::PAID.retries_per_cycle(), 16);
        let one = RelayBudget { targets_per_fire: 1, ..RelayBudget::FREE };
        assert_eq!(one.retries_per_cycle(), 1, "at the edge: never zero");
        let three = RelayBudget { targets_per_fire: 3, ..RelayBudget::FREE };
        assert_eq!(three.retries_per_cycle(), 1);
    }
}
