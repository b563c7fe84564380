//! Enqueue: read what admission needs, let the core decide, write the plan.

use std::convert::Infallible;
use std::fmt;

use serde::Serialize;

use super::{int, pending_set, Outbox, Pending, Sql, SqlValue, StoreError};
use crate::core::{
    admit, Admission, AdmissionInput, AppendPlan, DedupRecord, EnqueueError, EnqueueRefusal, EnqueueRow,
    StoredRow,
};

/// Rows per multi-row INSERT: five bound parameters each, under SQLite's
/// 100-parameter limit per statement.
const INSERT_ROWS_PER_STATEMENT: usize = 20;

/// What an enqueue did.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Enqueued {
    /// The sequences (the original ones for a duplicate).
    pub seqs: Vec<u64>,
    /// `os` afterwards.
    pub os: u64,
    /// Whether this repeated an earlier keyed enqueue and wrote nothing.
    pub duplicate: bool,
    /// Rows waiting afterwards (queued plus parked).
    pub queued_rows: u64,
}

/// Why an enqueue wrote nothing. `E` is the error of the caller's own
/// writes in [`Relay::enqueue_with`](crate::Relay::enqueue_with).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EnqueueFailure<E = Infallible> {
    /// The request was refused (limits, key, conflict, full): a 4xx.
    Refused(EnqueueRefusal),
    /// Storage failed: a 5xx.
    Store(StoreError),
    /// The caller's own writes in the same transaction failed; everything
    /// rolled back.
    Aborted(E),
}

impl<E: fmt::Display> fmt::Display for EnqueueFailure<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EnqueueFailure::Refused(e) => e.fmt(f),
            EnqueueFailure::Store(e) => e.fmt(f),
            EnqueueFailure::Aborted(e) => write!(f, "aborted: {e}"),
        }
    }
}

impl<E: fmt::Debug + fmt::Display> std::error::Error for EnqueueFailure<E> {}

impl<E> From<StoreError> for EnqueueFailure<E> {
    fn from(e: StoreError) -> Self {
        EnqueueFailure::Store(e)
    }
}

impl<E> From<EnqueueRefusal> for EnqueueFailure<E> {
    fn from(e: EnqueueRefusal) -> Self {
        EnqueueFailure::Refused(e)
    }
}

impl<S: Sql> Outbox<S> {
    /// Admits `rows` (with an optional idempotency key) and writes them and
    /// the new `os`. A repeat of a keyed enqueue within the horizon answers
    /// its original sequences and writes nothing.
    ///
    /// Synchronous and not a transaction of its own: run it inside the
    /// caller's [`Sql::transaction`] together with the caller's own writes,
    /// so they commit together (`Relay::enqueue` and `Relay::enqueue_with`
    /// do). On error nothing was written.
    pub fn enqueue(
        &self,
        now_ms: u64,
        key: Option<&str>,
        rows: &[EnqueueRow],
    ) -> Result<Enqueued, EnqueueFailure> {
        let state = self.state()?;
        let record = match key {
            Some(k) => self.dedup_record(k)?,
            None => None,
        };
        let parked = self.parked_set()?;
        let input = AdmissionInput {
            os: state.os,
            now_ms,
            key,
            record: record.as_ref(),
            dedup_horizon_ms: self.settings().dedup_horizon_ms,
            capacity: self.capacity(&state),
            parked: &parked,
        };
        let waiting = state.queued_rows + state.parked_rows;
        match admit(&input, rows) {
            Err(refusal) => {
                if matches!(refusal, EnqueueRefusal::Invalid(EnqueueError::OutboxFull { .. })) {
                    self.add_pending(Pending { rejected_full: 1, ..Pending::default() });
                }
                Err(EnqueueFailure::Refused(refusal))
            }
            Ok(Admission::Duplicate { seqs }) => {
                self.add_pending(Pending { dedup_hits: 1, ..Pending::default() });
                Ok(Enqueued { seqs, os: state.os, duplicate: true, queued_rows: waiting })
            }
            Ok(Admission::Append(plan)) => {
                self.write_append(&plan, state.os)?;
                let n = plan.plan.rows.len() as u64;
                Ok(Enqueued {
                    seqs: plan.plan.seqs(),
                    os: plan.plan.os,
                    duplicate: false,
                    queued_rows: waiting + n,
                })
            }
        }
    }

    /// Writes an admitted enqueue: the rows, the dedup record, and the state
    /// row guarded on the `os` it was planned from.
    fn write_append(&self, plan: &AppendPlan, os_read: u64) -> Result<(), StoreError> {
        let mut written = 0u64;
        for (table, list) in [("relay_outbox", &plan.queued), ("relay_parked", &plan.parked)] {
            for chunk in list.chunks(INSERT_ROWS_PER_STATEMENT) {
                written += u64::from(self.insert(table, chunk)?);
            }
        }
        if let Some(record) = &plan.record {
            written += u64::from(self.put_dedup(record)?);
        }
        let (nq, np) = (plan.queued.len() as u64, plan.parked.len() as u64);
        let (pending, taken) = self.take_pending(written + 1);
        let mut params = vec![
            int(plan.plan.os),
            int(nq),
            int(AppendPlan::bytes(&plan.queued)),
            int(np),
            int(AppendPlan::bytes(&plan.parked)),
            int(nq + np),
        ];
        params.extend(pending);
        params.push(int(os_read));
        let updated = self.sql.run(
            concat!(
                "UPDATE relay_state SET os = ?, queued_rows = queued_rows + ?, queued_bytes = queued_bytes + ?, ",
                "parked_rows = parked_rows + ?, parked_bytes = parked_bytes + ?, enqueued_rows = enqueued_rows + ?, ",
                pending_set!(),
                " WHERE id = 1 AND os = ?"
            ),
            params,
        );
        match updated {
            Ok(1) => Ok(()),
            other => {
                self.add_pending(taken);
                other?;
                Err(StoreError::Guard("os changed during enqueue"))
            }
        }
    }

    fn insert(&self, table: &str, rows: &[StoredRow]) -> Result<u32, StoreError> {
        let placeholders = vec!["(?, ?, ?, ?, ?)"; rows.len()].join(", ");
        let mut params: Vec<SqlValue> = Vec::with_capacity(rows.len() * 5);
        for r in rows {
            params.push(int(r.seq));
            params.push(r.target.as_str().into());
            params.push(int(r.at_ms));
            params.push(int(r.body.len() as u64));
            params.push(r.body.as_str().into());
        }
        self.sql.run(
            &format!("INSERT INTO {table} (seq, target, at_ms, bytes, body) VALUES {placeholders}"),
            params,
        )
    }

    fn dedup_record(&self, key: &str) -> Result<Option<DedupRecord>, StoreError> {
        let row = self.sql.first(
            "SELECT key, digest, first_seq, rows, at_ms FROM relay_dedup WHERE key = ?",
            vec![key.into()],
        )?;
        row.map(|r| {
            Ok(DedupRecord {
                key: r.text(0)?,
                digest: r.text(1)?,
                first_seq: r.u64(2)?,
                rows: r.u32(3)?,
                at_ms: r.u64(4)?,
            })
        })
        .transpose()
    }

    fn put_dedup(&self, r: &DedupRecord) -> Result<u32, StoreError> {
        self.sql.run(
            "INSERT INTO relay_dedup (key, digest, first_seq, rows, at_ms) VALUES (?, ?, ?, ?, ?) \
             ON CONFLICT(key) DO UPDATE SET digest = excluded.digest, first_seq = excluded.first_seq, \
             rows = excluded.rows, at_ms = excluded.at_ms",
            vec![
                r.key.as_str().into(),
                r.digest.as_str().into(),
                int(r.first_seq),
                int(u64::from(r.rows)),
                int(r.at_ms),
            ],
        )
    }
}
