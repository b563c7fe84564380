//! The persisted relay scan cycle, `rs`, and its encoding.
//!
//! A cycle covers the outbox up to `cycle_end`, the `os` snapshot taken when
//! it started. Rows appended later wait for the next cycle. While a cycle is
//! active (`cursor < cycle_end`), every undelivered row with `seq <= cursor`
//! belongs to a target that is failing (passed over this cycle, see
//! [`crate::fire::retry`]), or listed in `blocked` (by an older version), or
//! is held by a delay (`due_ms > clock_ms`; then every later row of its
//! target is too, see [`crate::delay`]). A completed marker (`cursor ==
//! cycle_end`) makes the next fire start a new cycle from the head.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::limits::{MAX_BLOCKED_TARGETS, SEQ_MAX};
use crate::name::Name;

/// Version tag of the persisted encoding.
const RS_VERSION: u32 = 1;

/// One source's scan cycle.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScanState {
    /// Encoding version; always `RS_VERSION` (the one this build writes).
    pub v: u32,
    /// Incremented by every checkpoint, so a guard on the encoded value sees
    /// any checkpoint that happened since it was read, even one that left
    /// the cursor where it was. Invariant: `generation <= SEQ_MAX`.
    pub generation: u64,
    /// The `os` snapshot taken when this cycle started.
    /// Invariant: `cycle_end <= SEQ_MAX`.
    pub cycle_end: u64,
    /// Last inspected sequence. Invariant: `cursor <= cycle_end`.
    pub cursor: u64,
    /// Targets whose delivery failed this cycle, as an older version kept
    /// them: honoured until the cycle ends, never added to (a failing
    /// target's record now says it is passed over, with no bound on how
    /// many). Invariant: strictly ascending, at most [`MAX_BLOCKED_TARGETS`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub blocked: Vec<Name>,
    /// Consecutive fires, across cycles, that delivered nothing; sets the
    /// back-off. Reset by any fire that delivers or advances the cursor.
    pub idle_fires: u32,
    /// The cycle's clock, ms since the epoch: the fire's `now_ms` when the
    /// cycle started. A row is due in this cycle when its `due_ms` is at
    /// most this; fixed for the cycle, so a row held at one fire is held at
    /// every later fire of the cycle and cannot be overtaken.
    #[serde(default)]
    pub clock_ms: u64,
    /// The earliest `due_ms` of the rows the cursor passed over this cycle
    /// because they were held: when the source must wake for them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_due_ms: Option<u64>,
    /// Whether this cycle passed over a row of a failing target: rows are
    /// still owed, so the source must wake again however the cycle ends.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub passed_failing: bool,
    /// The earliest time one of the failing targets this cycle passed over
    /// may be called again: a source with nothing else to do wakes for it
    /// rather than sleeping out its idle back-off, so a target that comes
    /// back is reached within its own back-off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_retry_ms: Option<u64>,
    /// Failing targets called again this cycle that did not answer (a retry
    /// that answers costs nothing: its target is healthy again).
    /// Invariant: at most the budget's
    /// [`retries_per_cycle`](crate::RelayBudget::retries_per_cycle), so most
    /// of a fire's calls stay with targets that answer.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub retries: u32,
    /// Failing targets called again this cycle that answered: evidence that
    /// targets are coming back, so a cycle that also left some waiting
    /// comes round within a target's longest back-off rather than backing
    /// off as an idle source, and the next retries every due target (see
    /// [`crate::fire::retry`]).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub recovered: u32,
    /// This cycle retries only failing targets whose retry time is at most
    /// this: a share's worth of those that waited longest, when the cycle
    /// before left due targets waiting and none of its retries answered
    /// (see [`crate::fire::retry`]). `None`: every due one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_through_ms: Option<u64>,
    /// Set when this cycle left due failing targets waiting (for want of
    /// retries, or behind older ones): the next cycle's `retry_through_ms`,
    /// through a share's worth of them, those that waited longest, so they
    /// go first. Reckoned over the whole cycle from `waiting_ms`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting_retry_ms: Option<u64>,
    /// The earliest retry times of the due failing targets this cycle left
    /// waiting so far, across its fires: a fire sees only its own window,
    /// and a bound reckoned per fire let the targets early in the outbox
    /// take every turn while one further on, waiting longest, never got
    /// one. Invariant: ascending; at most
    /// [`MAX_WAITING_RETRY_TIMES`] entries.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub waiting_ms: Vec<u64>,
}

/// Most retry times `rs` keeps of the targets a cycle left waiting: one
/// more than the largest share of retries a cycle can have, which is all
/// the reckoning of the next cycle's bound reads.
pub const MAX_WAITING_RETRY_TIMES: usize = 513;

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// Why a persisted `rs` value was rejected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CorruptScan(pub String);

impl fmt::Display for CorruptScan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "corrupt rs: {}", self.0)
    }
}

impl ScanState {
    /// A new cycle from the head, ending at `os`. Carries the generation and
    /// idle streak over from `previous` so guards and back-off keep working,
    /// and, unless one of its retries answered, the bound on the retry times
    /// of the targets it left waiting, so they are retried first.
    pub fn new_cycle(os: u64, previous: Option<&ScanState>) -> ScanState {
        assert!(os <= SEQ_MAX, "os {os} past SEQ_MAX");
        ScanState {
            v: RS_VERSION,
            generation: previous.map_or(0, |p| p.generation),
            cycle_end: os,
            cursor: 0,
            blocked: Vec::new(),
            idle_fires: previous.map_or(0, |p| p.idle_fires),
            clock_ms: 0,
            next_due_ms: None,
            passed_failing: false,
            next_retry_ms: None,
            retries: 0,
            recovered: 0,
            retry_through_ms: previous.filter(|p| p.recovered == 0).and_then(|p| p.waiting_retry_ms),
            waiting_retry_ms: None,
            waiting_ms: Vec::new(),
        }
    }

    /// A completed marker replacing `stored` (whatever its state): the next
    /// fire starts a new cycle from the head. Operator actions that put rows
    /// back into the outbox (redrive) write this, so rows below an active
    /// cursor never escape the `blocked` invariant, and the new generation
    /// makes any fire in flight lose its checkpoint guard.
    pub fn restart_marker(stored: Option<&str>, os: u64) -> ScanState {
        let previous = stored.and_then(|t| ScanState::decode(t).ok());
        let mut marker = ScanState::new_cycle(os, previous.as_ref());
        marker.cursor = os;
        marker.generation = previous.map_or(0, |p| p.generation) + 1;
        marker
    }

    /// Whether this is a completed (or terminal) marker.
    pub fn is_complete(&self) -> bool {
        self.cursor == self.cycle_end
    }

    /// Whether a row that is not to be delivered before `due_ms` is due in
    /// this cycle.
    pub fn is_due(&self, due_ms: u64) -> bool {
        due_ms <= self.clock_ms
    }

    /// Whether `target` is blocked this cycle.
    pub fn is_blocked(&self, target: &Name) -> bool {
        self.blocked.binary_search(target).is_ok()
    }

    /// Checks every invariant written on the fields.
    pub fn check(&self) -> Result<(), CorruptScan> {
        let fail = |m: String| Err(CorruptScan(m));
        if self.v != RS_VERSION {
            return fail(format!("version {} is not {RS_VERSION}", self.v));
        }
        if self.generation > SEQ_MAX || self.cycle_end > SEQ_MAX {
            return fail("generation or cycle_end past SEQ_MAX".into());
        }
        if self.cursor > self.cycle_end {
            return fail(format!("cursor {} is past cycle_end {}", self.cursor, self.cycle_end));
        }
        if self.blocked.len() > MAX_BLOCKED_TARGETS {
            return fail(format!("{} blocked targets", self.blocked.len()));
        }
        if self.blocked.windows(2).any(|w| w[0] >= w[1]) {
            return fail("blocked is not strictly ascending".into());
        }
        if self.waiting_ms.len() > MAX_WAITING_RETRY_TIMES {
            return fail(format!("{} waiting retry times", self.waiting_ms.len()));
        }
        if self.waiting_ms.windows(2).any(|w| w[0] > w[1]) {
            return fail("waiting_ms is not ascending".into());
        }
        Ok(())
    }

    /// Encodes for storage. Panics if an invariant does not hold: the engine
    /// never builds such a value.
    pub fn encode(&self) -> String {
        if let Err(e) = self.check() {
            panic!("refusing to persist an invalid rs: {e}");
        }
        serde_json::to_string(self).expect("rs always serialises")
    }

    /// Decodes a stored value, checking every invariant.
    pub fn decode(text: &str) -> Result<ScanState, CorruptScan> {
        let state: ScanState = serde_json::from_str(text).map_err(|e| CorruptScan(e.to_string()))?;
        state.check()?;
        Ok(state)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<Name> {
        list.iter().map(|n| Name::new(*n).unwrap()).collect()
    }

    #[test]
    fn rs_round_trips() {
        let mut s = ScanState::new_cycle(9, None);
        s.cursor = 4;
        s.blocked = names(&["a", "b"]);
        assert_eq!(ScanState::decode(&s.encode()).unwrap(), s);
    }

    #[test]
    fn rs_with_broken_invariants_is_corrupt() {
        let mut s = ScanState::new_cycle(3, None);
        s.cursor = 4;
        let text = serde_json::to_string(&s).unwrap();
        assert!(ScanState::decode(&text).is_err());
        let mut s = ScanState::new_cycle(3, None);
        s.blocked = names(&["b", "a"]);
        assert!(ScanState::decode(&serde_json::to_string(&s).unwrap()).is_err());
        s.blocked = names(&["a", "a"]);
        assert!(ScanState::decode(&serde_json::to_string(&s).unwrap()).is_err());
        assert!(ScanState::decode("not json").is_err());
        assert!(ScanState::decode(r#"{"v":2}"#).is_err());
    }

    #[test]
    fn rs_blocked_set_is_checked_at_and_past_its_limit() {
        let mut s = ScanState::new_cycle(3, None);
        s.blocked = (0..MAX_BLOCKED_TARGETS).map(|i| Name::new(format!("t{i:03}")).unwrap()).collect();
        assert!(ScanState::decode(&s.encode()).is_ok());
        s.blocked.push(Name::new("z").unwrap());
        assert!(ScanState::decode(&serde_json::to_string(&s).unwrap()).is_err());
    }

    #[test]
    fn rs_waiting_times_are_checked_at_and_past_their_limit() {
        let mut s = ScanState::new_cycle(3, None);
        s.waiting_ms = (0..MAX_WAITING_RETRY_TIMES as u64).collect();
        assert!(ScanState::decode(&s.encode()).is_ok());
        s.waiting_ms.push(MAX_WAITING_RETRY_TIMES as u64);
        assert!(ScanState::decode(&serde_json::to_string(&s).unwrap()).is_err());
        s.waiting_ms = vec![5, 4];
        assert!(ScanState::decode(&serde_json::to_string(&s).unwrap()).is_err(), "not ascending");
        let largest_share = crate::limits::MAX_TARGETS_PER_FIRE / crate::limits::RETRY_SHARE_DIVISOR;
        assert_eq!(MAX_WAITING_RETRY_TIMES, largest_share as usize + 1, "one more than the largest share");
        let old = r#"{"v":1,"generation":1,"cycle_end":3,"cursor":0,"blocked":[],"idle_fires":0,"clock_ms":0,"waiting_retry_ms":9}"#;
        assert_eq!(ScanState::decode(old).unwrap().waiting_ms, Vec::<u64>::new(), "an older build's rs");
    }

    #[test]
    #[should_panic(expected = "refusing to persist")]
    fn encoding_an_invalid_rs_is_a_bug() {
        let mut s = ScanState::new_cycle(1, None);
        s.cursor = 2;
        let _ = s.encode();
    }
}
