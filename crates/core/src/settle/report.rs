//! What a settled fire reports: its counts, the targets that failed,
//! parked, recovered or made progress before failing, and the changes to
//! the per-target failure records the checkpoint writes from them.

use crate::fire::{Failure, Fire, GroupState};
use crate::limits::RELAY_LAG_BOUND_MS;
use crate::name::Name;

/// What a fire did, for logs, status and tests.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FireReport {
    /// Target calls made.
    pub calls: u32,
    /// Distinct targets called.
    pub targets_called: u32,
    /// Rows the targets applied for the first time.
    pub rows_applied: u32,
    /// Rows deleted from the outbox as delivered (applied now or earlier).
    pub rows_delivered: u32,
    /// Rows inspected.
    pub window_rows: u32,
    /// Targets whose calls failed, with the reason, in first-sequence order
    /// (parked ones included). Each failed a cycle: its counter goes up.
    pub failed: Vec<(Name, Failure)>,
    /// Targets to park now, with the reason: every queued row of theirs
    /// moves to the parked list in this checkpoint.
    pub parked: Vec<(Name, String)>,
    /// Targets that took a batch while they had a failed-cycle count:
    /// their count resets.
    pub recovered: Vec<Name>,
    /// Of `failed`, those that took a batch in this fire before a later
    /// call failed: the cycle made progress, so it did not fail. Their run
    /// of failed cycles starts again at this one (which never parks them),
    /// and so does their back-off.
    pub restarted: Vec<Name>,
    /// Failed targets that asked not to be called for a while, with the
    /// pause, ms (see [`CallOutcome::Throttled`](crate::fire::CallOutcome)).
    pub throttled: Vec<(Name, u64)>,
    /// Window rows that leave with the parked targets.
    pub rows_parked: u32,
    /// Whether the fire started a new cycle.
    pub new_cycle: bool,
    /// Whether the cycle is complete after this fire.
    pub cycle_complete: bool,
    /// Failing targets this fire called again.
    pub retries: u32,
    /// The first corrupt row, which stopped the fire, and why.
    pub corrupt: Option<(u64, String)>,
    /// Whether the stored `rs` was corrupt and replaced.
    pub corrupt_rs: bool,
    /// Whether an inspected row is older than [`RELAY_LAG_BOUND_MS`].
    pub lag_exceeded: bool,
}

/// What a settled fire changes in the source's per-target failure records;
/// the shell applies it in the fire's checkpoint transaction.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TargetChanges {
    /// Targets whose delivery failed (and that are not being parked): one
    /// more consecutive failed cycle each, with the latest error.
    pub failed: Vec<(Name, String)>,
    /// Targets to park now, with the reason. All their queued rows move to
    /// the parked list in the same transaction.
    pub parked: Vec<(Name, String)>,
    /// Targets that took a batch while they had failed cycles: their
    /// record is forgotten.
    pub recovered: Vec<Name>,
    /// Of `failed`, those that took a batch in the fire before failing:
    /// their count of consecutive failed cycles starts again at 1.
    pub restarted: Vec<Name>,
    /// Of `failed`, those that asked not to be called for a while, with
    /// the pause, ms; a failed target not listed asked for none.
    pub throttled: Vec<(Name, u64)>,
}

impl FireReport {
    /// The changes to the per-target failure records this fire decided.
    pub fn target_changes(&self) -> TargetChanges {
        let parked = |t: &Name| self.parked.iter().any(|(p, _)| p == t);
        TargetChanges {
            failed: self
                .failed
                .iter()
                .filter(|(t, _)| !parked(t))
                .map(|(t, f)| (t.clone(), f.message().to_owned()))
                .collect(),
            parked: self.parked.clone(),
            recovered: self.recovered.clone(),
            restarted: self.restarted.iter().filter(|t| !parked(t)).cloned().collect(),
            throttled: self.throttled.iter().filter(|(t, _)| !parked(t)).cloned().collect(),
        }
    }
}

impl Fire {
    pub(super) fn report(&self, rows_delivered: u32, complete: bool) -> FireReport {
        let now = self.begun.start.now_ms;
        let failed = self
            .groups
            .iter()
            .filter_map(|g| match &g.state {
                GroupState::Failed(f) => Some((g.target.clone(), f.clone())),
                GroupState::Parked(r) => Some((g.target.clone(), Failure::Permanent(r.clone()))),
                _ => None,
            })
            .collect();
        let parked = self
            .groups
            .iter()
            .filter_map(|g| match &g.state {
                GroupState::Parked(r) => Some((g.target.clone(), r.clone())),
                _ => None,
            })
            .collect();
        let failing = &self.begun.start.failing;
        let recovered = self
            .groups
            .iter()
            .filter(|g| g.applied_once && g.state == GroupState::Active && failing.contains_key(&g.target))
            .map(|g| g.target.clone())
            .collect();
        FireReport {
            calls: self.calls_made,
            targets_called: self.groups.iter().filter(|g| g.calls > 0).count() as u32,
            rows_applied: self.rows_applied,
            rows_delivered,
            window_rows: self.rows.len() as u32,
            failed,
            parked,
            recovered,
            restarted: self
                .groups
                .iter()
                .filter(|g| g.applied_once && matches!(g.state, GroupState::Failed(_)))
                .map(|g| g.target.clone())
                .collect(),
            throttled: self
                .groups
                .iter()
                .filter(|g| g.retry_after_ms > 0 && matches!(g.state, GroupState::Failed(_)))
                .map(|g| (g.target.clone(), g.retry_after_ms))
                .collect(),
            rows_parked: 0,
            new_cycle: self.begun.new_cycle,
            cycle_complete: complete,
            retries: self.retries.made,
            corrupt: self.corrupt.as_ref().map(|(s, e)| (*s, e.to_string())),
            corrupt_rs: self.begun.corrupt_rs.is_some(),
            // A held row is not late before it is due.
            lag_exceeded: self
                .rows
                .iter()
                .any(|r| now.saturating_sub(r.at_ms.max(r.due_ms)) > RELAY_LAG_BOUND_MS),
        }
    }
}
