//! When a source wakes: the rules that keep its alarm right, and the
//! housekeeping an alarm does besides delivering (pruning expired dedup
//! records and discarded rows). Pure; the shells keep what they know of the
//! stored alarm in an [`AlarmKnown`] and apply these decisions.
//!
//! - Arming keeps an earlier alarm and brings a later one forward
//!   ([`arm`]); it writes nothing when the alarm is already early enough.
//! - After an alarm, the next one is due when the last fire asked, or when
//!   an idle source must prune ([`next_alarm_at`]).
//! - A source with owed rows and no alarm lost it (the platform drops an
//!   alarm whose handler threw too often): a status read or an enqueue
//!   re-arms it ([`needs_rearm`]).
//! - While an in-turn delivery runs, the alarm is kept within a lease of
//!   now that grows with how long the delivery has awaited, as a failing
//!   target's back-off does ([`in_turn_lease_ms`]), so a delivery the
//!   platform cuts off leaves its rows due by their back-off.
//! - The object has one alarm, shared by the relay and its host: it is
//!   armed at the earlier of the relay's time and the host's own
//!   ([`shared_alarm`]), and a stored alarm later than that was moved by
//!   someone else ([`alarm_moved`]).

use crate::limits::{
    IN_TURN_ALARM_GRACE_MS, PRUNE_BATCH_ROWS, PRUNE_INTERVAL_MS, PRUNE_STEPS_PER_ALARM, RELAY_LAG_BOUND_MS,
    TARGET_RETRY_BACKOFF_MAX_MS,
};
use crate::settle::Wake;

/// What a shell knows of its stored alarm. The platform clears an alarm
/// when it fires and only the relay sets one, so once loaded this is exact.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AlarmKnown {
    /// Not loaded yet (a new instance, or after a failed write).
    Unknown,
    /// No alarm is set.
    None,
    /// An alarm is set for this time, ms since the epoch.
    At(u64),
}

/// The alarm write needed so that an alarm is due no later than `due_ms`:
/// `None` when the known alarm is already that early. With
/// [`AlarmKnown::Unknown`] the shell must load first.
pub fn arm(known: AlarmKnown, due_ms: u64) -> Option<u64> {
    match known {
        AlarmKnown::At(t) if t <= due_ms => None,
        _ => Some(due_ms),
    }
}

/// When the object's one alarm must be due, given the relay's wanted time
/// (`relay_ms`) and its host's own (`host_ms`, set through the relay): the
/// earlier of the two, so neither waits for the other; `None` when neither
/// wants one.
pub fn shared_alarm(relay_ms: Option<u64>, host_ms: Option<u64>) -> Option<u64> {
    match (relay_ms, host_ms) {
        (Some(r), Some(h)) => Some(r.min(h)),
        (r, h) => r.or(h),
    }
}

/// Whether the stored alarm (`stored_ms`) is later than the relay and its
/// host need (`needed_ms`) at `now_ms`: missing, or due after the later of
/// the needed time and now (an alarm already due fires at once either way).
pub fn alarm_moved(needed_ms: Option<u64>, stored_ms: Option<u64>, now_ms: u64) -> bool {
    match (needed_ms, stored_ms) {
        (None, _) => false,
        (Some(_), None) => true,
        (Some(need), Some(stored)) => stored > need.max(now_ms),
    }
}

/// Whether a source with `owed_rows` rows (queued or parked and due for
/// redrive) and the stored alarm `stored_alarm_ms` lost its alarm.
pub fn needs_rearm(queued_rows: u64, stored_alarm_ms: Option<u64>) -> bool {
    queued_rows > 0 && stored_alarm_ms.is_none()
}

/// When the next alarm is due after one that ended at `now_ms`: as the last
/// fire's `wake` asks given the current `os`, else when an idle source must
/// wake to prune (`prune_due_ms`), else never.
pub fn next_alarm_at(wake: Wake, os_now: u64, now_ms: u64, prune_due_ms: Option<u64>) -> Option<u64> {
    match wake.delay_ms(os_now) {
        Some(delay) => Some(now_ms.saturating_add(delay)),
        None => prune_due_ms.map(|at| at.max(now_ms)),
    }
}

/// When an enqueue at `now_ms` wants the alarm. With coalescing on
/// (`coalesce_ms > 0`) and rows arriving (the last delivery was less than
/// `coalesce_ms` ago), rows wait until then to share calls; a source that
/// was idle delivers a lone row at once.
pub fn enqueue_due(now_ms: u64, last_delivery_ms: Option<u64>, coalesce_ms: u64) -> u64 {
    match last_delivery_ms {
        Some(last) if coalesce_ms > 0 && now_ms < last.saturating_add(coalesce_ms) => last + coalesce_ms,
        _ => now_ms,
    }
}

/// The delay before the next alarm, given what the alarm decided
/// (`next_in_ms`) and the rows still queued: with coalescing on, a source
/// with rows left that are fewer than one fire's worth (rows that arrived
/// during the alarm, not a backlog) waits `coalesce_ms` so more can join
/// them. A backlog, a back-off or an idle source is left as decided.
pub fn coalesced(
    next_in_ms: Option<u64>,
    queued_rows: u64,
    rows_per_fire: u32,
    coalesce_ms: u64,
) -> Option<u64> {
    match next_in_ms {
        Some(0) if coalesce_ms > 0 && queued_rows < u64::from(rows_per_fire) => Some(coalesce_ms),
        other => other,
    }
}

/// How far ahead of now the alarm must stand while an in-turn delivery
/// that last heard anything (its run's start, or a call's answer or
/// failure) `waited_ms` ago runs: the platform may end its invocation at
/// any moment, taking the delivery and this instance's memory with it, and
/// the alarm is then all that brings its rows back. The wait itself is the
/// back-off: [`IN_TURN_ALARM_GRACE_MS`] at the start, growing
/// as long as the delivery awaits, as a failing target's back-off doubles
/// with its failures, up to [`TARGET_RETRY_BACKOFF_MAX_MS`]. A delivery
/// that awaits a slow call is so checked on about as often as a failing
/// target is retried, not every second of the call.
pub fn in_turn_lease_ms(waited_ms: u64) -> u64 {
    waited_ms.clamp(IN_TURN_ALARM_GRACE_MS, TARGET_RETRY_BACKOFF_MAX_MS)
}

/// Whether a row committed at `at_ms` is past the lag bound at `now_ms`.
pub fn lagging(at_ms: u64, now_ms: u64) -> bool {
    now_ms.saturating_sub(at_ms) > RELAY_LAG_BOUND_MS
}

/// One alarm's pruning: records at or before these times have expired.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PrunePlan {
    /// Dedup records accepted at or before this are forgotten.
    pub dedup_before_ms: u64,
    /// Discarded rows discarded at or before this are deleted.
    pub discard_before_ms: u64,
    /// Rows one step deletes at most, per kind.
    pub batch_rows: u32,
    /// Steps one alarm runs at most.
    pub steps_max: u32,
}

impl PrunePlan {
    /// The plan for an alarm at `now_ms` under the two horizons.
    pub fn at(now_ms: u64, dedup_horizon_ms: u64, discard_horizon_ms: u64) -> PrunePlan {
        PrunePlan {
            dedup_before_ms: now_ms.saturating_sub(dedup_horizon_ms),
            discard_before_ms: now_ms.saturating_sub(discard_horizon_ms),
            batch_rows: PRUNE_BATCH_ROWS,
            steps_max: PRUNE_STEPS_PER_ALARM,
        }
    }

    /// Whether another step may follow one that deleted `dedup` records and
    /// `discarded` rows: only while a batch came back full.
    pub fn another_step(&self, step: u32, dedup: u32, discarded: u32) -> bool {
        step + 1 < self.steps_max && (dedup >= self.batch_rows || discarded >= self.batch_rows)
    }
}

/// Whether an alarm that pruned `pruned` rows records the prune time. Only
/// a prune that deleted something does: an idle source's next prune wake
/// is then spaced from the last real prune, and a prune that found nothing
/// costs no write.
pub fn records_prune(pruned: u64) -> bool {
    pruned > 0
}

/// When an idle source should wake to prune, given the earliest time a
/// record or discarded row expires: at that time, but never sooner than
/// [`PRUNE_INTERVAL_MS`] after the last prune, so records expiring at many
/// different times cost one alarm per interval, not one each.
pub fn idle_prune_at(first_expiry_ms: Option<u64>, last_prune_ms: u64) -> Option<u64> {
    first_expiry_ms.map(|due| due.max(last_prune_ms.saturating_add(PRUNE_INTERVAL_MS)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shared_alarm_is_the_earlier_of_the_relays_and_the_hosts() {
        assert_eq!(shared_alarm(None, None), None);
        assert_eq!(shared_alarm(Some(5), None), Some(5));
        assert_eq!(shared_alarm(None, Some(7)), Some(7));
        assert_eq!(shared_alarm(Some(5), Some(7)), Some(5));
        assert_eq!(shared_alarm(Some(9), Some(7)), Some(7));
        assert_eq!(shared_alarm(Some(7), Some(7)), Some(7));
    }

    #[test]
    fn an_alarm_is_moved_when_missing_or_later_than_needed() {
        assert!(!alarm_moved(None, None, 10), "nothing needed");
        assert!(!alarm_moved(None, Some(99), 10), "an alarm nobody needs is not ours to judge");
        assert!(alarm_moved(Some(20), None, 10), "missing");
        assert!(!alarm_moved(Some(20), Some(20), 10), "at the edge: exactly when needed");
        assert!(alarm_moved(Some(20), Some(21), 10), "one ms past the edge");
        assert!(!alarm_moved(Some(20), Some(5), 10), "earlier is fine");
        assert!(!alarm_moved(Some(5), Some(10), 10), "a past need: an alarm due now serves it");
        assert!(alarm_moved(Some(5), Some(11), 10));
    }

    #[test]
    fn arming_keeps_an_earlier_alarm_and_brings_a_later_one_forward() {
        assert_eq!(arm(AlarmKnown::At(100), 150), None, "already early enough: no write");
        assert_eq!(arm(AlarmKnown::At(100), 100), None);
        assert_eq!(arm(AlarmKnown::At(16_000), 50), Some(50), "a back-off is brought forward");
        assert_eq!(arm(AlarmKnown::None, 50), Some(50));
        assert_eq!(arm(AlarmKnown::Unknown, 50), Some(50));
    }

    #[test]
    fn the_next_alarm_follows_the_wake_then_the_prune() {
        assert_eq!(next_alarm_at(Wake::Now, 3, 1_000, Some(9_000)), Some(1_000));
        assert_eq!(next_alarm_at(Wake::After { delay_ms: 500 }, 3, 1_000, None), Some(1_500));
        assert_eq!(next_alarm_at(Wake::Idle { os_read: 3 }, 3, 1_000, None), None);
        assert_eq!(next_alarm_at(Wake::Idle { os_read: 3 }, 4, 1_000, None), Some(1_000), "a row arrived");
        assert_eq!(next_alarm_at(Wake::Idle { os_read: 3 }, 3, 1_000, Some(9_000)), Some(9_000));
        assert_eq!(next_alarm_at(Wake::Idle { os_read: 3 }, 3, 1_000, Some(10)), Some(1_000), "overdue: now");
    }

    #[test]
    fn idle_pruning_waits_for_expiry_and_the_interval() {
        assert_eq!(idle_prune_at(None, 0), None);
        assert_eq!(idle_prune_at(Some(11_000), 0), Some(PRUNE_INTERVAL_MS.max(11_000)));
        let late = 10 * PRUNE_INTERVAL_MS;
        assert_eq!(idle_prune_at(Some(late), 0), Some(late));
        assert_eq!(idle_prune_at(Some(0), late), Some(late + PRUNE_INTERVAL_MS));
    }

    #[test]
    fn pruning_steps_on_only_while_batches_come_back_full() {
        let p = PrunePlan::at(100_000, 60_000, 10_000);
        assert_eq!((p.dedup_before_ms, p.discard_before_ms), (40_000, 90_000));
        assert!(p.another_step(0, p.batch_rows, 0));
        assert!(!p.another_step(0, p.batch_rows - 1, p.batch_rows - 1));
        assert!(!p.another_step(p.steps_max - 1, p.batch_rows, p.batch_rows), "bounded per alarm");
        assert!(records_prune(1));
        assert!(!records_prune(0), "a prune that found nothing writes nothing");
    }

    #[test]
    fn a_source_with_rows_and_no_alarm_lost_it() {
        assert!(needs_rearm(1, None));
        assert!(!needs_rearm(1, Some(5)));
        assert!(!needs_rearm(0, None));
    }

    #[test]
    fn coalescing_waits_only_while_rows_arrive() {
        assert_eq!(enqueue_due(1_000, None, 50), 1_000, "an idle source: at once");
        assert_eq!(enqueue_due(1_000, Some(900), 50), 1_000, "the last delivery is older than the wait");
        assert_eq!(enqueue_due(1_000, Some(980), 50), 1_030, "rows are arriving: join the next batch");
        assert_eq!(enqueue_due(1_000, Some(980), 0), 1_000, "off by default");
        assert_eq!(coalesced(Some(0), 3, 256, 50), Some(50), "stragglers wait for company");
        assert_eq!(coalesced(Some(0), 300, 256, 50), Some(0), "a backlog drains at once");
        assert_eq!(coalesced(Some(2_000), 3, 256, 50), Some(2_000), "a back-off stands");
        assert_eq!(coalesced(None, 0, 256, 50), None);
        assert_eq!(coalesced(Some(0), 3, 256, 0), Some(0));
    }

    #[test]
    fn an_in_turn_lease_grows_with_the_wait_from_the_grace_to_the_longest() {
        assert_eq!(in_turn_lease_ms(0), IN_TURN_ALARM_GRACE_MS, "a delivery that just heard: the grace");
        assert_eq!(in_turn_lease_ms(IN_TURN_ALARM_GRACE_MS), IN_TURN_ALARM_GRACE_MS);
        assert_eq!(in_turn_lease_ms(IN_TURN_ALARM_GRACE_MS + 1), IN_TURN_ALARM_GRACE_MS + 1, "as the wait");
        assert_eq!(in_turn_lease_ms(TARGET_RETRY_BACKOFF_MAX_MS), TARGET_RETRY_BACKOFF_MAX_MS);
        assert_eq!(in_turn_lease_ms(u64::MAX), TARGET_RETRY_BACKOFF_MAX_MS, "never past the longest");
        // A call that never answers is checked on at 5, 10, 20, 30, 40, 50 s:
        // doubling, then every 10 s.
        let mut at = 0;
        let comings: Vec<u64> = (0..6)
            .map(|_| {
                at += in_turn_lease_ms(at);
                at / 1_000
            })
            .collect();
        assert_eq!(comings, vec![5, 10, 20, 30, 40, 50]);
    }

    #[test]
    fn lag_is_strictly_past_the_bound() {
        assert!(!lagging(0, RELAY_LAG_BOUND_MS));
        assert!(lagging(0, RELAY_LAG_BOUND_MS + 1));
        assert!(!lagging(10, 0), "a clock step back is not lag");
    }
}
