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
//! - it is in the cycle's class: its name hashes to the cycle's `rotation`
//!   modulo its `spread` (1 while retries go round; doubled after a cycle
//!   that ran out of them, halved after a whole rotation of cycles that did
//!   not), so when more are due than a cycle may retry, each still gets its
//!   turn;
//! - and the cycle has retries left ([`RelayBudget::retries_per_cycle`]), so
//!   most calls go to targets that answer.
//!
//! Every input is fixed for the cycle (its clock, `rotation` and `spread`,
//! the records of targets it has not called) or only grows (its retries),
//! so a target passed over once is passed over for the rest of the cycle,
//! and its later rows can never overtake the ones passed.

use std::collections::BTreeMap;

use crate::limits::{target_retry_backoff_ms, RelayBudget};
use crate::name::Name;
use crate::partition::fnv;
use crate::scan::ScanState;

/// What a source knows about a target whose delivery failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Failing {
    /// Consecutive cycles in which its delivery failed. Invariant: `>= 1`.
    pub cycles: u32,
    /// When its delivery last failed, ms since the epoch.
    pub last_failure_ms: u64,
}

impl Failing {
    /// When it may be called again: its last failure plus the back-off its
    /// run of failed cycles has earned.
    pub fn retry_at_ms(&self) -> u64 {
        self.last_failure_ms.saturating_add(target_retry_backoff_ms(self.cycles))
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
        Some(f) if f.retry_at_ms() > scan.clock_ms || !in_class(scan, target) => Standing::Passed,
        Some(_) => Standing::Retry,
    }
}

/// Whether `target` is in the class of failing targets `scan` retries.
fn in_class(scan: &ScanState, target: &Name) -> bool {
    let spread = u64::from(scan.spread.max(1));
    fnv(target.as_str().as_bytes()) % spread == u64::from(scan.rotation) % spread
}

/// A fire's count of the cycle's retries, applied in first-sequence order.
#[derive(Clone, Debug)]
pub(crate) struct Retries {
    /// Retries the cycle may still make.
    left: u32,
    /// Retries this fire made.
    pub(crate) made: u32,
    /// Whether this fire passed over a due target for want of retries.
    pub(crate) capped: bool,
}

impl Retries {
    pub(crate) fn new(scan: &ScanState, budget: &RelayBudget) -> Retries {
        Retries { left: budget.retries_per_cycle().saturating_sub(scan.retries), made: 0, capped: false }
    }

    /// Whether a due target is retried now (counting it), or passed over
    /// for want of retries.
    pub(crate) fn take(&mut self) -> bool {
        if self.left == 0 {
            self.capped = true;
            return false;
        }
        self.left -= 1;
        self.made += 1;
        true
    }
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
            (n("fresh"), Failing { cycles: 1, last_failure_ms: 9_500 }),
            (n("due"), Failing { cycles: 1, last_failure_ms: 9_000 }),
            (n("long"), Failing { cycles: 3, last_failure_ms: 7_000 }),
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
    fn a_spread_cycle_retries_one_class_and_every_class_comes_round() {
        let due = Failing { cycles: 1, last_failure_ms: 0 };
        let names: Vec<Name> = (0..64).map(|i| n(&format!("f{i}"))).collect();
        let failing: BTreeMap<Name, Failing> = names.iter().map(|t| (t.clone(), due)).collect();
        let mut scan = ScanState::new_cycle(10, None);
        scan.clock_ms = 10_000;
        scan.spread = 4;
        let mut retried = std::collections::BTreeSet::new();
        for rotation in 0..4 {
            scan.rotation = rotation;
            let class: Vec<&Name> =
                names.iter().filter(|t| standing(&scan, &failing, t) == Standing::Retry).collect();
            assert!((8..=24).contains(&class.len()), "about a quarter: {}", class.len());
            retried.extend(class);
        }
        assert_eq!(retried.len(), names.len(), "four cycles reach every target");
    }

    #[test]
    fn a_cycle_retries_at_most_its_share_then_spreads_the_next_thinner() {
        let mut scan = ScanState::new_cycle(100, None);
        scan.retries = 3;
        let mut r = Retries::new(&scan, &RelayBudget::FREE);
        assert!(r.take(), "the fourth retry of the cycle");
        assert!(!r.take(), "past the share");
        assert_eq!((r.made, r.capped), (1, true));
        scan.capped = true;
        scan.cursor = scan.cycle_end;
        let next = ScanState::new_cycle(120, Some(&scan));
        assert_eq!((next.retries, next.spread, next.rotation), (0, 2, 1));
        let calm = ScanState::new_cycle(130, Some(&next));
        assert_eq!((calm.spread, calm.calm), (2, 1), "one calm cycle is not a whole rotation");
        let calmer = ScanState::new_cycle(130, Some(&calm));
        assert_eq!((calmer.spread, calmer.calm, calmer.rotation), (1, 0, 3), "two at spread 2 halve it");
        let mut wide = next.clone();
        wide.spread = crate::MAX_RETRY_SPREAD;
        wide.capped = true;
        assert_eq!(ScanState::new_cycle(140, Some(&wide)).spread, crate::MAX_RETRY_SPREAD, "at its limit");
    }
}
