//! Admitting an enqueue: the whole decision a shell applies, made once here.
//!
//! Given what the shell read (`os`, occupancy, the parked targets, the
//! dedup record stored under the request's key), [`admit`] decides in this
//! order, and nothing is written unless it returns [`Admission::Append`]:
//!
//! 1. [`check`] the request whole: validate and encode the rows (every row
//!    limit, every value, the per-request limits, each delay against the
//!    clock), then validate the idempotency key and digest the rows;
//! 2. compare the digest with the record stored under the key: the same
//!    content answers the original sequences ([`Admission::Duplicate`],
//!    even when the outbox is full), other content under a live key is a
//!    conflict;
//! 3. check the backpressure bounds and sequence space, then assign
//!    sequences;
//! 4. split the rows: those for a parked target go to the parked list,
//!    behind its older rows, so nothing newer overtakes them.
//!
//! Step 1 needs nothing stored, so a partition router runs the same
//! [`check`] on the whole request before it routes any row: a request a
//! plain source refuses is refused whole at a partitioned one, with the
//! same code and the same row index.

#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]
#![deny(clippy::unreachable, clippy::todo, clippy::unimplemented)]

use std::collections::{BTreeMap, BTreeSet};

use crate::dedup::{content_digest, decide, validate_key, Dedup, DedupRecord};
use crate::delay::hold;
use crate::enqueue::{
    encode_rows, plan_encoded, Capacity, EncodedRows, EnqueueError, EnqueuePlan, EnqueueRefusal, EnqueueRow,
};
use crate::row::RowError;
use crate::row::StoredRow;

/// What a shell read before an enqueue.
#[derive(Clone, Copy, Debug)]
pub struct AdmissionInput<'a> {
    /// The source's last allocated sequence.
    pub os: u64,
    /// Commit-time clock reading, ms since the epoch.
    pub now_ms: u64,
    /// The request's idempotency key, if any.
    pub key: Option<&'a str>,
    /// The dedup record stored under `key`, if any.
    pub record: Option<&'a DedupRecord>,
    /// How long keys are remembered, ms.
    pub dedup_horizon_ms: u64,
    /// Occupancy and backpressure bounds.
    pub capacity: Capacity,
    /// Names of the targets that are parked now.
    pub parked: &'a BTreeSet<String>,
    /// Targets whose queued or parked rows are held by a delay: the latest
    /// due time among them, ms (entries not past `now_ms` are ignored).
    pub held: &'a BTreeMap<String, u64>,
}

/// What to do with an enqueue.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Admission {
    /// The same key and content were accepted before: answer with these
    /// sequences and write nothing.
    Duplicate {
        /// The original sequences.
        seqs: Vec<u64>,
        /// When the original enqueue committed, ms since the epoch.
        at_ms: u64,
        /// The original rows' due times, as the original enqueue answered
        /// them (empty when none waited).
        due_ms: Vec<u64>,
    },
    /// Write these rows and the new `os`.
    Append(AppendPlan),
}

/// Rows to write, split by where they go.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AppendPlan {
    /// Every row with its sequence, and the new `os`.
    pub plan: EnqueuePlan,
    /// The rows for targets that are not parked: into the outbox.
    pub queued: Vec<StoredRow>,
    /// The rows for parked targets: into the parked list.
    pub parked: Vec<StoredRow>,
    /// The dedup record to store (keyed enqueues only).
    pub record: Option<DedupRecord>,
    /// Targets whose hold this enqueue starts or extends, with the new
    /// latest due time, ms: written with the rows.
    pub holds: Vec<(String, u64)>,
}

impl AppendPlan {
    /// Body bytes of `rows`.
    pub fn bytes(rows: &[StoredRow]) -> u64 {
        rows.iter().map(|r| r.body.len() as u64).sum()
    }
}

/// A request that passed every check that needs nothing stored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Checked {
    /// The rows, validated and encoded, in request order.
    pub encoded: EncodedRows,
    /// The digest of their content, when the request carries a key (see
    /// [`content_digest`]).
    pub digest: Option<String>,
}

/// Checks a request whole, before anything is read or written: the rows
/// (every limit, every value, the request's size), each delay against
/// `now_ms`, and the idempotency key. The first refusal names its row by
/// its index in `rows`.
pub fn check(rows: &[EnqueueRow], key: Option<&str>, now_ms: u64) -> Result<Checked, EnqueueRefusal> {
    let encoded = encode_rows(rows)?;
    for (index, (_, _, delay)) in (0u32..).zip(&encoded.rows) {
        if let Some(d) = delay {
            d.due_ms(now_ms).map_err(|e| EnqueueError::Row { index, error: RowError::Delay(e) })?;
        }
    }
    let digest = match key {
        Some(k) => {
            validate_key(k).map_err(EnqueueRefusal::Key)?;
            Some(content_digest(&encoded))
        }
        None => None,
    };
    Ok(Checked { encoded, digest })
}

/// Decides an enqueue; see the module doc for the order of the checks.
pub fn admit(input: &AdmissionInput<'_>, rows: &[EnqueueRow]) -> Result<Admission, EnqueueRefusal> {
    let Checked { encoded, digest } = check(rows, input.key, input.now_ms)?;
    if let (Some(key), Some(d)) = (input.key, digest.as_deref()) {
        match decide(input.record, d, input.now_ms, input.dedup_horizon_ms) {
            Dedup::Duplicate(seqs) => {
                let at_ms = input.record.map_or(input.now_ms, |r| r.at_ms);
                let due_ms = input.record.map(|r| r.due_ms.clone()).unwrap_or_default();
                return Ok(Admission::Duplicate { seqs, at_ms, due_ms });
            }
            Dedup::Conflict => return Err(EnqueueRefusal::Conflict { key: key.to_owned() }),
            Dedup::Fresh => {}
        }
    }
    let mut plan = plan_encoded(input.os, input.now_ms, &encoded, &input.capacity)?;
    let holds = hold_rows(&mut plan.rows, input.held, input.now_ms);
    let (parked, queued): (Vec<StoredRow>, Vec<StoredRow>) =
        plan.rows.iter().cloned().partition(|r| input.parked.contains(&r.target));
    let record = match (input.key, digest, plan.rows.first()) {
        (Some(key), Some(digest), Some(first)) => Some(DedupRecord {
            key: key.to_owned(),
            digest,
            first_seq: first.seq,
            rows: u32::try_from(plan.rows.len()).unwrap_or(u32::MAX),
            at_ms: input.now_ms,
            due_ms: due_list(&plan.rows, input.now_ms),
        }),
        _ => None,
    };
    Ok(Admission::Append(AppendPlan { plan, queued, parked, record, holds }))
}

/// The rows' due times as an enqueue answers them: one per row when any
/// row waits past `now_ms` (0 for a row due at once, even one whose
/// inherited hold has just passed), else none. A row's answer depends only
/// on its own target, so a router can merge the answers of partitions.
pub fn due_list(rows: &[StoredRow], now_ms: u64) -> Vec<u64> {
    if rows.iter().any(|r| r.due_ms > now_ms) {
        rows.iter().map(|r| if r.due_ms > now_ms { r.due_ms } else { 0 }).collect()
    } else {
        Vec::new()
    }
}

/// Gives each row its effective due time (see [`crate::delay`]): no earlier
/// than the rows held before it for its target. Returns the holds that
/// changed.
fn hold_rows(rows: &mut [StoredRow], held: &BTreeMap<String, u64>, now_ms: u64) -> Vec<(String, u64)> {
    let mut holds = held.clone();
    for row in rows.iter_mut() {
        row.due_ms = hold(&mut holds, &row.target, row.due_ms, now_ms);
    }
    holds.into_iter().filter(|(t, due)| held.get(t) != Some(due)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::enqueue::EnqueueError;
    use crate::name::Name;
    use serde_json::json;

    fn row(target: &str, v: i64) -> EnqueueRow {
        EnqueueRow::new(Name::new(target).unwrap(), vec![("k".into(), json!(v))], vec![])
    }

    fn input<'a>(
        key: Option<&'a str>,
        record: Option<&'a DedupRecord>,
        parked: &'a BTreeSet<String>,
    ) -> AdmissionInput<'a> {
        AdmissionInput {
            os: 10,
            now_ms: 5_000,
            key,
            record,
            dedup_horizon_ms: 60_000,
            capacity: Capacity::with_defaults(0, 0),
            parked,
            held: &NOT_HELD,
        }
    }

    static NOT_HELD: BTreeMap<String, u64> = BTreeMap::new();

    #[test]
    fn a_delayed_row_holds_its_targets_later_rows_and_reports_the_hold() {
        use crate::delay::Delay;
        let none = BTreeSet::new();
        let held: BTreeMap<String, u64> = [("slow".to_owned(), 9_000), ("past".to_owned(), 10)].into();
        let inp = AdmissionInput { held: &held, ..input(None, None, &none) };
        let rows = [
            row("slow", 1),
            row("fast", 2).delayed(Delay::For(1_000)),
            row("fast", 3),
            row("other", 4),
            row("past", 5),
            row("slow", 6).delayed(Delay::NotBefore(12_000)),
        ];
        let p = append(admit(&inp, &rows).unwrap());
        let due: Vec<u64> = p.plan.rows.iter().map(|r| r.due_ms).collect();
        assert_eq!(
            due,
            vec![9_000, 6_000, 6_000, 0, 10, 12_000],
            "past's passed hold is inherited: due at once"
        );
        assert_eq!(p.holds, vec![("fast".to_owned(), 6_000), ("slow".to_owned(), 12_000)]);
        let refused = admit(&inp, &[row("t", 1).delayed(Delay::For(crate::MAX_DELAY_MS + 1))]).unwrap_err();
        assert_eq!(refused.code(), "delay_too_long");
    }

    fn append(a: Admission) -> AppendPlan {
        match a {
            Admission::Append(p) => p,
            other => panic!("expected an append, got {other:?}"),
        }
    }

    #[test]
    fn rows_for_a_parked_target_go_behind_its_parked_rows() {
        let parked: BTreeSet<String> = ["down".to_owned()].into();
        let p = append(
            admit(&input(None, None, &parked), &[row("up", 1), row("down", 2), row("up", 3)]).unwrap(),
        );
        assert_eq!(p.plan.seqs(), vec![11, 12, 13]);
        assert_eq!(p.queued.iter().map(|r| r.seq).collect::<Vec<_>>(), vec![11, 13]);
        assert_eq!(p.parked.iter().map(|r| r.seq).collect::<Vec<_>>(), vec![12]);
        assert_eq!(p.record, None);
    }

    #[test]
    fn a_keyed_enqueue_records_its_key_and_a_repeat_is_a_duplicate_even_when_full() {
        let none = BTreeSet::new();
        let rows = [row("t", 1), row("t", 2)];
        let first = append(admit(&input(Some("k"), None, &none), &rows).unwrap());
        let record = first.record.clone().unwrap();
        assert_eq!((record.first_seq, record.rows, record.at_ms), (11, 2, 5_000));
        let mut full = input(Some("k"), Some(&record), &none);
        full.capacity = Capacity { rows: 10, bytes: 0, max_rows: 10, max_bytes: 1 << 20 };
        assert_eq!(
            admit(&full, &rows).unwrap(),
            Admission::Duplicate { seqs: vec![11, 12], at_ms: 5_000, due_ms: vec![] }
        );
        assert_eq!(
            admit(&full, &[row("t", 9)]).unwrap_err(),
            EnqueueRefusal::Conflict { key: "k".into() },
            "other content under a live key"
        );
        full.key = None;
        assert!(matches!(
            admit(&full, &rows).unwrap_err(),
            EnqueueRefusal::Invalid(EnqueueError::OutboxFull { .. })
        ));
    }

    #[test]
    fn invalid_rows_are_refused_before_the_key_is_looked_at() {
        let none = BTreeSet::new();
        let bad = EnqueueRow::new(Name::new("t").unwrap(), vec![], vec![]);
        let e = admit(&input(Some(""), None, &none), &[bad]).unwrap_err();
        assert_eq!(e.code(), "row_without_effects");
        let e = admit(&input(Some(""), None, &none), &[row("t", 1)]).unwrap_err();
        assert_eq!(e.code(), "invalid_idempotency_key");
    }
}
