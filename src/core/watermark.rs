//! Source-side progress queries: `relay_watermark` and `delivered_through`
//! (seed 000), computed from the outbox head the shell reads.

use super::limits::SEQ_MAX;

/// The outbox head as a shell reads it: the first queued row, if any.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Head {
    /// Sequence of the first queued row.
    pub seq: u64,
    /// That row's commit-time clock reading, ms since the epoch.
    pub at_ms: u64,
}

/// A commit-time lower bound for the source's undelivered rows: every
/// undelivered row was committed at or after the returned time plus one.
///
/// Rows commit in sequence order, so the first row's `at_ms` bounds every
/// later row's commit time from below, even though `at_ms` need not grow
/// with `seq` (clocks step). The value can move backwards when rows are
/// delivered out of order across targets; a consumer keeps the running
/// maximum it has seen, which stays safe for the same reason. Saturates at
/// zero; an empty outbox reports `now_ms`.
pub fn relay_watermark(head: Option<Head>, now_ms: u64) -> u64 {
    match head {
        Some(h) => h.at_ms.saturating_sub(1),
        None => now_ms,
    }
}

/// Whether every row through `seq` has left the outbox. Sequences not yet
/// allocated (`seq > os`) have not left it. Target watermarks advance
/// before the source deletes, so `true` implies the targets hold the rows.
pub fn delivered_through(seq: u64, os: u64, head: Option<Head>) -> bool {
    assert!(os <= SEQ_MAX);
    if seq > os {
        return false;
    }
    head.is_none_or(|h| h.seq > seq)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn watermark_is_first_row_time_minus_one_or_now_when_empty() {
        assert_eq!(relay_watermark(None, 500), 500);
        assert_eq!(relay_watermark(Some(Head { seq: 3, at_ms: 100 }), 500), 99);
        assert_eq!(relay_watermark(Some(Head { seq: 3, at_ms: 0 }), 500), 0);
    }

    #[test]
    fn delivered_through_needs_every_row_up_to_seq_gone() {
        let head = Some(Head { seq: 5, at_ms: 0 });
        assert!(delivered_through(4, 9, head));
        assert!(!delivered_through(5, 9, head));
        assert!(delivered_through(9, 9, None));
        assert!(!delivered_through(10, 9, None));
        assert!(delivered_through(0, 0, None));
    }
}
