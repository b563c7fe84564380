//! Delayed rows: a row may ask not to be delivered before a time, given as
//! an absolute `not_before_ms` or a relative `delay_ms`, at most
//! [`MAX_DELAY_MS`] ahead.
//!
//! Order is per target, so a delayed row holds back the later rows of its
//! target and no others. The relay keeps that cheap by storing each row's
//! *effective* due time, `due_ms`: the later of its own and that of the
//! newest row still held for the same target (see [`hold`]). Invariant:
//! among the rows of one target, `due_ms` never decreases with the sequence.
//! A fire judges due-ness against its cycle's clock (`ScanState::clock_ms`),
//! fixed when the cycle starts, so within a cycle the not-due rows of a
//! target are a suffix of its rows and the rows the cursor passes over
//! cannot be overtaken.

#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

use crate::codes::ErrorCode;
use std::collections::BTreeMap;
use std::fmt;

use crate::limits::{HOLD_GRACE_MS, MAX_DELAY_MS};

/// When a row asks to be delivered, as the caller wrote it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Delay {
    /// Not before this time, ms since the epoch.
    NotBefore(u64),
    /// Not before this long after the enqueue commits, ms.
    For(u64),
}

/// Why a row's delay is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DelayError {
    /// Both `not_before_ms` and `delay_ms` were given.
    Both,
    /// The row would wait longer than [`MAX_DELAY_MS`]; carries how long, ms.
    TooLong(u64),
}

impl DelayError {
    /// Stable machine-readable code.
    pub fn code(&self) -> ErrorCode {
        match self {
            DelayError::Both => ErrorCode::ConflictingDelay,
            DelayError::TooLong(_) => ErrorCode::DelayTooLong,
        }
    }
}

impl fmt::Display for DelayError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DelayError::Both => write!(f, "give not_before_ms or delay_ms, not both"),
            DelayError::TooLong(ms) => {
                write!(f, "the row would wait {ms} ms; a row may wait at most {MAX_DELAY_MS} (MAX_DELAY_MS)")
            }
        }
    }
}

impl Delay {
    /// The delay a row's two optional fields give, if any. A relative delay
    /// is checked here; an absolute one needs the clock ([`Delay::due_ms`]).
    pub fn from_fields(
        not_before_ms: Option<u64>,
        delay_ms: Option<u64>,
    ) -> Result<Option<Delay>, DelayError> {
        match (not_before_ms, delay_ms) {
            (Some(_), Some(_)) => Err(DelayError::Both),
            (Some(at), None) => Ok(Some(Delay::NotBefore(at))),
            (None, Some(ms)) if ms > MAX_DELAY_MS => Err(DelayError::TooLong(ms)),
            (None, Some(ms)) => Ok(Some(Delay::For(ms))),
            (None, None) => Ok(None),
        }
    }

    /// The row's own due time for an enqueue committing at `now_ms`: 0 when
    /// it is due at once (no wait, or a time already past).
    pub fn due_ms(&self, now_ms: u64) -> Result<u64, DelayError> {
        let at = match *self {
            Delay::NotBefore(at) => at,
            Delay::For(ms) => now_ms.saturating_add(ms),
        };
        let wait = at.saturating_sub(now_ms);
        if wait > MAX_DELAY_MS {
            return Err(DelayError::TooLong(wait));
        }
        Ok(if wait == 0 { 0 } else { at })
    }

    /// The part of the dedup digest that stands for this delay, as written
    /// (so a retry of the same request is the same content).
    pub fn digest_text(&self) -> String {
        match *self {
            Delay::NotBefore(at) => format!("not_before_ms:{at}"),
            Delay::For(ms) => format!("delay_ms:{ms}"),
        }
    }
}

/// Whether a hold recorded for `due_ms` still counts at `now_ms`: until
/// [`HOLD_GRACE_MS`] after its time.
pub fn hold_live(due_ms: u64, now_ms: u64) -> bool {
    due_ms.saturating_add(HOLD_GRACE_MS) > now_ms
}

/// The effective due time of a row for `target` whose own due time is
/// `own_ms` (0: none), given `held`: per target, the latest due time of its
/// delayed rows. Updates `held` when the row waits longer, so the next row
/// for the target waits for it. 0 for a row with nothing to wait for.
///
/// A hold is inherited until [`HOLD_GRACE_MS`] after its time, even once it
/// has passed (the row is then due at once anyway): due times stay
/// non-decreasing within a target even when a cycle's clock lags the
/// enqueue's (a clock step, a cycle begun elsewhere), so a row enqueued
/// just after an older row fell due cannot pass it.
pub fn hold(held: &mut BTreeMap<String, u64>, target: &str, own_ms: u64, now_ms: u64) -> u64 {
    let before = held.get(target).copied().filter(|&t| hold_live(t, now_ms)).unwrap_or(0);
    let due = own_ms.max(before);
    if due > before && due > now_ms {
        held.insert(target.to_owned(), due);
    }
    due
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_delay_is_one_of_the_two_fields_and_at_most_the_limit() {
        assert_eq!(Delay::from_fields(None, None), Ok(None));
        assert_eq!(Delay::from_fields(Some(5), Some(5)), Err(DelayError::Both));
        assert_eq!(Delay::from_fields(None, Some(MAX_DELAY_MS)), Ok(Some(Delay::For(MAX_DELAY_MS))));
        assert_eq!(
            Delay::from_fields(None, Some(MAX_DELAY_MS + 1)),
            Err(DelayError::TooLong(MAX_DELAY_MS + 1))
        );
        let now = 1_000_000;
        assert_eq!(Delay::NotBefore(now + MAX_DELAY_MS).due_ms(now), Ok(now + MAX_DELAY_MS));
        assert_eq!(
            Delay::NotBefore(now + MAX_DELAY_MS + 1).due_ms(now),
            Err(DelayError::TooLong(MAX_DELAY_MS + 1))
        );
        assert_eq!(Delay::NotBefore(now - 1).due_ms(now), Ok(0), "a time already past is due at once");
        assert_eq!(Delay::NotBefore(now).due_ms(now), Ok(0));
        assert_eq!(Delay::For(0).due_ms(now), Ok(0));
        assert_eq!(Delay::For(1).due_ms(now), Ok(now + 1));
        assert_eq!(
            Delay::NotBefore(u64::MAX).due_ms(now).map_err(|e| e.code()),
            Err(ErrorCode::DelayTooLong)
        );
    }

    #[test]
    fn a_held_row_holds_the_later_rows_of_its_target_only() {
        let mut held = BTreeMap::new();
        let now = 100;
        assert_eq!(hold(&mut held, "a", 0, now), 0);
        assert!(held.is_empty(), "an undelayed row writes nothing");
        assert_eq!(hold(&mut held, "a", 500, now), 500);
        assert_eq!(hold(&mut held, "a", 0, now), 500, "a later row waits for it");
        assert_eq!(hold(&mut held, "a", 300, now), 500);
        assert_eq!(hold(&mut held, "b", 0, now), 0, "other targets are not held");
        assert_eq!(hold(&mut held, "a", 900, now), 900);
        assert_eq!(held.get("a"), Some(&900));
        assert_eq!(hold(&mut held, "a", 0, 901), 900, "past, but inherited: due at once, never before a:900");
        assert_eq!(hold(&mut held, "a", 0, 900 + HOLD_GRACE_MS), 0, "past the grace: forgotten");
        assert_eq!(held.get("a"), Some(&900), "a row due at once records nothing");
    }
}
