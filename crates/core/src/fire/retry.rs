//! Failing targets in a scan cycle: which are passed over without a call
//! and which are called again.
//!
//! A target whose delivery failed has a record at its source ([`Failing`]).
//! A cycle passes over every row of a failing target (as it passes over a
//! held row) unless it retries it, so any number of failing targets can sit
//! ahead of a healthy one without holding it back. A cycle retries a
//! failing target only when
//!
//! - its back-off has passed by the cycle's clock ([`Failing::retry_at_ms`]:
//!   1 s after the first failed cycle, doubling per consecutive one, at most
//!   [`TARGET_RETRY_BACKOFF_MAX_MS`](crate::TARGET_RETRY_BACKOFF_MAX_MS)),
//!   so a failing target is not hammered and one that comes back is
//!   reached within seconds;
//! - it is among those that waited longest when the cycle before left due
//!   targets waiting (for want of retries, or behind older ones): its retry
//!   time is at most `retry_through_ms`, which takes a share's worth of
//!   them (see `Retries::turn_through_ms`), so the targets retried last wait
//!   for the others and each gets its turn, in rounds of about
//!   `ceil(failing / share)` cycles;
//! - and the cycle has retries left ([`RelayBudget::retries_per_cycle`]),
//!   so most calls go to targets that answer. Only a retry that fails
//!   spends one: a target that answers is healthy again, so once targets
//!   come back, the cycle retries them all, and the cycle after one in
//!   which a retry answered retries every due target.
//!
//! How often the source comes round is [`crate::settle`]'s: a cycle that
//! left targets waiting while every retry failed backs off as an idle
//! source does (up to a minute), so a long outage costs about an alarm a
//! minute; one in which a retry answered comes round within a target's
//! longest back-off.
//!
//! A fire cannot know how its retries end before they do, so it calls at
//! most the retries left when it began. A due target it meets after those
//! is deferred when one of its own retries may yet answer (the cursor
//! stops before its first row and the next fire decides), and passed over
//! for the rest of the cycle when none can.
//!
//! Every input is fixed for the cycle (its clock, `retry_through_ms`, the
//! records of targets it has not called) or only grows (its failed
//! retries), so a target passed over once is passed over for the rest of
//! the cycle, and its later rows can never overtake the ones passed.

use std::collections::BTreeMap;

use crate::limits::{target_retry_backoff_ms, RelayBudget};
use crate::name::Name;
use crate::scan::ScanState;

/// What a source knows about a target whose delivery failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Failing {
    /// Consecutive cycles in which its delivery failed. Invariant: `>= 1`.
    pub cycles: u32,
    /// When its delivery last failed, ms since the epoch.
    pub last_failure_ms: u64,
    /// How long it asked not to be called after that failure, ms (0: it
    /// did not ask).
    pub retry_after_ms: u64,
}

impl Failing {
    /// When it may be called again: its last failure plus the back-off its
    /// run of failed cycles has earned, or the pause it asked for if that
    /// is longer.
    pub fn retry_at_ms(&self) -> u64 {
        self.last_failure_ms.saturating_add(target_retry_backoff_ms(self.cycles).max(self.retry_after_ms))
    }
}

/// How a fire treats a target when it first meets it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Standing {
    /// Not failing: called in turn.
    Healthy,
    /// Failing and due for a retry: called in turn while the cycle has
    /// retries left (see [`Retries::take`]).
    Retry,
    /// Passed over this cycle, with its rows.
    Passed,
}

/// The standing of `target` in the cycle `scan`, before the cycle's retry
/// limit is applied.
pub(crate) fn standing(scan: &ScanState, failing: &BTreeMap<Name, Failing>, target: &Name) -> Standing {
    if scan.is_blocked(target) {
        return Standing::Passed;
    }
    match failing.get(target) {
        None => Standing::Healthy,
        Some(f) if !retried_in(scan, f.retry_at_ms()) => Standing::Passed,
        Some(_) => Standing::Retry,
    }
}

/// Whether a failing target that may be called again at `retry_at_ms` is
/// retried in the cycle `scan`: due by the cycle's clock, and among those
/// that waited longest when the cycle before left some waiting.
fn retried_in(scan: &ScanState, retry_at_ms: u64) -> bool {
    retry_at_ms <= scan.clock_ms && scan.retry_through_ms.is_none_or(|t| retry_at_ms <= t)
}

/// What a fire does with a failing target due for a retry (see
/// [`Retries::take`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Turn {
    /// Called now, spending one of the cycle's retries.
    Call,
    /// Left for the next fire of the cycle: this fire's retries are out,
    /// but one of them may answer and give its retry back.
    Defer,
    /// Passed over for the rest of the cycle: no retry is left, and none of
    /// this fire's can come back.
    Pass,
}

/// Whether a failing target with record `f` is due by the cycle's clock
/// but passed over in `scan` because more overdue ones go first: it waits
/// for its turn like one passed over for want of retries.
pub(crate) fn waits_its_turn(scan: &ScanState, f: &Failing) -> bool {
    let at = f.retry_at_ms();
    at <= scan.clock_ms && scan.retry_through_ms.is_some_and(|t| at > t)
}

/// A fire's count of the cycle's retries, applied in first-sequence order.
#[derive(Clone, Debug)]
pub(crate) struct Retries {
    /// The cycle's share ([`RelayBudget::retries_per_cycle`]).
    share: u32,
    /// Retries this fire may still make: those the cycle had left when the
    /// fire began (failed retries of earlier fires spent theirs).
    left: u32,
    /// Retries this fire made.
    pub(crate) made: u32,
    /// The retry times of the due targets this fire left waiting for their
    /// turn.
    passed: Vec<u64>,
}

impl Retries {
    pub(crate) fn new(scan: &ScanState, budget: &RelayBudget) -> Retries {
        let share = budget.retries_per_cycle();
        Retries { share, left: share.saturating_sub(scan.retries), made: 0, passed: Vec::new() }
    }

    /// The turn of a due target whose retry time is `retry_at_ms`, counting
    /// a call against the fire's retries.
    pub(crate) fn take(&mut self, retry_at_ms: u64) -> Turn {
        if self.left > 0 {
            self.left -= 1;
            self.made += 1;
            return Turn::Call;
        }
        if self.made > 0 {
            return Turn::Defer;
        }
        self.pass(retry_at_ms);
        Turn::Pass
    }

    /// Notes a due target left waiting for its turn.
    pub(crate) fn pass(&mut self, retry_at_ms: u64) {
        self.passed.push(retry_at_ms);
    }

    /// The retry time through which the next cycle should retry, by what
    /// this fire left waiting: the latest that takes at most the cycle's
    /// share of them, the longest waiting first and a run of equal retry
    /// times whole; the earliest when that run alone is more than a share
    /// (it takes the next cycles, in turn). So a cycle's retries go to the
    /// targets that waited longest, filling its share where it can, and a
    /// target that waited longer is never left behind one that waited
    /// less. `None` when none waited. (A fire's own; the cycle's is
    /// reckoned over every fire's, see [`Retries::cycle_waiting`].)
    #[cfg(test)]
    pub(crate) fn turn_through_ms(&self) -> Option<u64> {
        let mut times = self.passed.clone();
        times.sort_unstable();
        turn_through(&times, self.share)
    }

    /// The cycle's waiting retry times once this fire's are added to
    /// `kept` (the earlier fires'): ascending, the earliest `share + 1`,
    /// all the next cycle's bound reads. Invariant: `kept` is ascending.
    pub(crate) fn cycle_waiting(&self, kept: &[u64]) -> Vec<u64> {
        let mut times: Vec<u64> = kept.iter().chain(&self.passed).copied().collect();
        times.sort_unstable();
        times.truncate(self.share as usize + 1);
        times
    }
}

/// The bound [`Retries::turn_through_ms`] describes, over ascending
/// retry times of the targets left waiting.
pub(crate) fn turn_through(times: &[u64], share: u32) -> Option<u64> {
    let share = share as usize;
    let Some(&first_left_out) = times.get(share) else { return times.last().copied() };
    let fits = times[..share].iter().rev().find(|&&t| t < first_left_out);
    Some(*fits.unwrap_or(&times[0]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(s: &str) -> Name {
        Name::new(s).unwrap()
    }

    #[test]
    fn a_failing_target_waits_out_its_back_off_by_the_cycles_clock() {
        let mut scan = ScanState::new_cycle(10, None);
        scan.clock_ms = 10_000;
        let failing: BTreeMap<Name, Failing> = [
            (n("fresh"), Failing { cycles: 1, last_failure_ms: 9_500, retry_after_ms: 0 }),
            (n("due"), Failing { cycles: 1, last_failure_ms: 9_000, retry_after_ms: 0 }),
            (n("long"), Failing { cycles: 3, last_failure_ms: 7_000, retry_after_ms: 0 }),
        ]
        .into();
        assert_eq!(standing(&scan, &failing, &n("ok")), Standing::Healthy);
        assert_eq!(standing(&scan, &failing, &n("fresh")), Standing::Passed, "1 s not yet passed");
        assert_eq!(standing(&scan, &failing, &n("due")), Standing::Retry, "exactly 1 s later");
        assert_eq!(standing(&scan, &failing, &n("long")), Standing::Passed, "4 s after 3 cycles");
        scan.blocked = vec![n("ok")];
        assert_eq!(standing(&scan, &failing, &n("ok")), Standing::Passed, "an older version's list");
    }

    #[test]
    fn after_a_cycle_that_ran_out_of_retries_the_most_overdue_go_first() {
        let mut scan = ScanState::new_cycle(10, None);
        scan.clock_ms = 10_000;
        let failing: BTreeMap<Name, Failing> = [
            (n("old"), Failing { cycles: 1, last_failure_ms: 2_000, retry_after_ms: 0 }),
            (n("tied"), Failing { cycles: 2, last_failure_ms: 1_000, retry_after_ms: 0 }),
            (n("recent"), Failing { cycles: 1, last_failure_ms: 8_000, retry_after_ms: 0 }),
        ]
        .into();
        let retried = |scan: &ScanState| -> Vec<&str> {
            ["old", "tied", "recent"]
                .into_iter()
                .filter(|t| standing(scan, &failing, &n(t)) == Standing::Retry)
                .collect()
        };
        assert_eq!(retried(&scan), vec!["old", "tied", "recent"], "every due one");
        scan.retry_through_ms = Some(3_000);
        assert_eq!(retried(&scan), vec!["old", "tied"], "at most the earliest left waiting");
        scan.retry_through_ms = Some(2_999);
        assert_eq!(retried(&scan), Vec::<&str>::new(), "one ms short");
        scan.cursor = scan.cycle_end;
        scan.waiting_retry_ms = None;
        assert_eq!(
            ScanState::new_cycle(10, Some(&scan)).retry_through_ms,
            None,
            "none waited: all due again"
        );
    }

    #[test]
    fn a_fire_calls_the_retries_left_then_defers_while_one_may_answer_else_passes() {
        let mut scan = ScanState::new_cycle(100, None);
        scan.retries = 3;
        let mut r = Retries::new(&scan, &RelayBudget::FREE);
        assert_eq!(r.take(50), Turn::Call, "the fourth retry of the cycle");
        assert_eq!(r.take(40), Turn::Defer, "past the share, while the fourth may answer");
        assert_eq!((r.made, r.turn_through_ms()), (1, None));
        scan.retries = 4;
        let mut r = Retries::new(&scan, &RelayBudget::FREE);
        assert_eq!(r.take(50), Turn::Pass, "spent by failed retries: passed over");
        assert_eq!(r.take(40), Turn::Pass);
        assert_eq!((r.made, r.turn_through_ms()), (0, Some(50)), "fewer than a share waited: all of them");
        scan.waiting_retry_ms = r.turn_through_ms();
        scan.cursor = scan.cycle_end;
        let next = ScanState::new_cycle(120, Some(&scan));
        assert_eq!((next.retries, next.retry_through_ms, next.waiting_retry_ms), (0, Some(50), None));
        scan.recovered = 1;
        let next = ScanState::new_cycle(120, Some(&scan));
        assert_eq!(next.retry_through_ms, None, "a retry answered: every due target again");
    }

    #[test]
    fn the_next_cycles_bound_is_reckoned_over_every_fire_of_the_cycle() {
        // Free: a share of 4. The first fire leaves four targets early in
        // the outbox waiting; a later one the target that waited longest,
        // beside three that waited less.
        let scan = ScanState::new_cycle(100, None);
        let mut first = Retries::new(&scan, &RelayBudget::FREE);
        [300, 300, 300, 300].iter().for_each(|&t| first.pass(t));
        let mut later = Retries::new(&scan, &RelayBudget::FREE);
        [400, 10, 400, 400].iter().for_each(|&t| later.pass(t));
        // Each fire's own bound, the earliest kept, lets five in: the four
        // early in the outbox take every turn, cycle after cycle.
        assert_eq!((first.turn_through_ms(), later.turn_through_ms()), (Some(300), Some(400)));
        let cycle = later.cycle_waiting(&first.cycle_waiting(&[]));
        assert_eq!(cycle, vec![10, 300, 300, 300, 300], "the earliest share + 1, ascending");
        assert_eq!(turn_through(&cycle, 4), Some(10), "only the one that waited longest goes next");
        let mut r = Retries::new(&scan, &RelayBudget::FREE);
        (0..20).rev().for_each(|t| r.pass(t));
        assert_eq!(r.cycle_waiting(&[]), vec![0, 1, 2, 3, 4], "bounded by the share");
    }

    /// The next cycle's bound for a fire on Free (a share of 4) that left
    /// targets with these retry times waiting.
    fn through(times: &[u64]) -> Option<u64> {
        let mut r = Retries::new(&ScanState::new_cycle(1, None), &RelayBudget::FREE);
        times.iter().for_each(|&t| r.pass(t));
        r.turn_through_ms()
    }

    #[test]
    fn the_next_cycle_takes_a_share_of_the_longest_waiting_and_never_splits_equal_times() {
        assert_eq!(through(&[]), None);
        assert_eq!(through(&[9, 3, 7, 5, 8, 4]), Some(7), "the four earliest");
        assert_eq!(through(&[9, 3, 5, 5, 5, 4]), Some(4), "5 three times would make five: 3 and 4 go");
        assert_eq!(through(&[5, 5, 5, 5, 5, 9]), Some(5), "a run of more than a share goes first, in turns");
        assert_eq!(through(&[5, 5, 5, 5, 9]), Some(5), "exactly a share");
        assert_eq!(through(&[9, 2]), Some(9), "fewer than a share: all");
    }
}
