//! What an alarm reports: its summary (the per-alarm log line and the
//! status figures), built from the run's totals, the traces its rows
//! carried and the outbox's gauges when it ends, and that end itself:
//! prune, read the gauges, decide the next wake-up.

use serde::Serialize;

use crate::core::schedule::next_alarm_at;
use crate::core::{AlarmRun, AlarmTotals, Name, Wake, MAX_TRACES_PER_LOG};
use crate::store::outbox::{Commit, Outbox};
use crate::store::Sql;

use super::{AlarmError, AlarmOptions, FireRecord};

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

/// The distinct `traceparent`s an alarm delivered, at most
/// [`MAX_TRACES_PER_LOG`] listed, and how many rows carried one.
#[derive(Default)]
pub(super) struct Traces {
    /// The distinct ones, in the order first delivered.
    /// Invariant: at most [`MAX_TRACES_PER_LOG`].
    pub(super) listed: Vec<String>,
    /// Rows delivered that carried one.
    pub(super) rows: u32,
}

impl Traces {
    /// Counts the rows of `traces`, listing each new one while there is room.
    pub(super) fn add(&mut self, traces: &[String]) {
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
pub(super) fn quiet_end(record: &FireRecord, first_in_turn: bool) -> Option<u64> {
    let (rows, parked_rows) = record.handed.filter(|_| first_in_turn)?;
    let all = u64::from(record.report.rows_delivered) == rows;
    (all && matches!(record.commit, Commit::Committed { .. })).then_some(parked_rows)
}

/// The end of an in-turn delivery that left the outbox empty, read from
/// memory: the enqueue that started it armed the safety-net alarm, which
/// prunes and arms what comes next within
/// [`IN_TURN_ALARM_GRACE_MS`](crate::core::IN_TURN_ALARM_GRACE_MS).
pub(super) fn quiet_finish(
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
pub(super) fn finish<S: Sql>(
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

/// The summary of `run` from `started` to `ended`, from its totals alone:
/// the outbox's gauges are [`finish`]'s to add.
pub(super) fn summarise(
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
