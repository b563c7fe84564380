//! Source-side progress queries: `relay_watermark` and `delivered_through`,
//! computed from the oldest row the relay still owes a target.
//!
//! A row is owed while it is queued in the outbox or parked (its target
//! failed for good, or an operator has not yet redriven it): neither has
//! reached its target. A row an operator *discarded* is not owed any more:
//! the operator decided it will never be delivered, so it stops holding the
//! watermark back and counts as settled for `delivered_through`. Without
//! that rule one discarded row would freeze every consumer of the watermark
//! forever; status reports discarded rows so the decision stays visible.

use crate::limits::SEQ_MAX;

/// The oldest row of a list (the outbox, or the parked rows) as a shell
/// reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Head {
    /// Sequence of the list's first row.
    pub seq: u64,
    /// That row's commit-time clock reading, ms since the epoch.
    pub at_ms: u64,
    /// Not to be delivered before this time (0: due at once).
    pub due_ms: u64,
}

/// The oldest row still owed to a target: the lower-sequence head of the
/// outbox and of the parked (not discarded) rows.
pub fn owed_head(queued: Option<Head>, parked: Option<Head>) -> Option<Head> {
    match (queued, parked) {
        (Some(q), Some(p)) => Some(if p.seq < q.seq { p } else { q }),
        (q, p) => q.or(p),
    }
}

/// A commit-time lower bound for the source's undelivered rows: every row
/// still owed (queued or parked) was committed at or after the returned
/// time plus one.
///
/// Rows commit in sequence order, so the oldest owed row's `at_ms` bounds
/// every later row's commit time from below. Parking does not move the
/// bound forward (a parked row was not delivered) and a redrive does not
/// move it back (the row was owed all along). The value can still move
/// backwards across clock steps; a consumer keeps the running maximum it
/// has seen. Saturates at zero; with nothing owed it is `now_ms`.
pub fn relay_watermark(owed: Option<Head>, now_ms: u64) -> u64 {
    match owed {
        Some(h) => h.at_ms.saturating_sub(1),
        None => now_ms,
    }
}

/// Whether every row through `seq` has been applied at its target (or
/// discarded by an operator). Sequences not yet allocated (`seq > os`) have
/// not. Target watermarks advance before the source deletes, so `true`
/// implies the targets hold the rows.
pub fn delivered_through(seq: u64, os: u64, owed: Option<Head>) -> bool {
    assert!(os <= SEQ_MAX, "stored os {os} past SEQ_MAX");
    if seq > os {
        return false;
    }
    owed.is_none_or(|h| h.seq > seq)
}

#[cfg(test)]
mod tests {
    use super::*;

    const Q: Head = Head { seq: 5, at_ms: 100, due_ms: 0 };
    const P: Head = Head { seq: 3, at_ms: 90, due_ms: 0 };

    #[test]
    fn watermark_is_the_oldest_owed_row_time_minus_one_or_now_when_none() {
        assert_eq!(relay_watermark(None, 500), 500);
        assert_eq!(relay_watermark(Some(Q), 500), 99);
        assert_eq!(relay_watermark(Some(Head { seq: 3, at_ms: 0, due_ms: 0 }), 500), 0);
    }

    #[test]
    fn a_parked_row_holds_the_watermark_and_delivered_through_back() {
        let owed = owed_head(Some(Q), Some(P));
        assert_eq!(owed, Some(P));
        assert_eq!(relay_watermark(owed, 500), 89, "not now: the parked row was never delivered");
        assert!(!delivered_through(3, 9, owed));
        assert!(delivered_through(2, 9, owed));
        assert_eq!(owed_head(None, Some(P)), Some(P), "only parked rows left");
        assert_eq!(owed_head(Some(Q), None), Some(Q));
    }

    #[test]
    fn delivered_through_needs_every_owed_row_up_to_seq_gone() {
        let owed = Some(Q);
        assert!(delivered_through(4, 9, owed));
        assert!(!delivered_through(5, 9, owed));
        assert!(delivered_through(9, 9, None));
        assert!(!delivered_through(10, 9, None));
        assert!(delivered_through(0, 0, None));
    }
}
