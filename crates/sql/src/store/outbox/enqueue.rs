//! Enqueue: read what admission needs (one statement, see `view.rs`), let
//! the core decide, write the plan.

use std::convert::Infallible;
use std::fmt;

use super::handover::Handover;
use super::rows::{row_values, INSERT_ROWS_PER_STATEMENT};
use super::view::EnqueueView;
use super::{int, Enqueued, Outbox, Pending, Sql, SqlValue, StoreError};
use crate::core::{
    admit, due_list, Admission, AdmissionInput, AppendPlan, DedupRecord, EnqueueError, EnqueueRefusal,
    EnqueueRow, Name, Part, StoredRow,
};

/// Where an object stands in its logical source, for the checks that need
/// its name.
#[derive(Clone, Copy, Debug)]
pub struct Seat<'a> {
    /// The source object's name (`logical:index`, or the logical name).
    pub name: &'a Name,
    /// Which part of its logical source it is.
    pub part: Part,
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

impl EnqueueFailure {
    /// The same failure where the caller's own writes could fail with `E`:
    /// the outbox's own enqueue never aborts.
    pub fn widen<E>(self) -> EnqueueFailure<E> {
        match self {
            EnqueueFailure::Refused(e) => EnqueueFailure::Refused(e),
            EnqueueFailure::Store(e) => EnqueueFailure::Store(e),
            EnqueueFailure::Aborted(never) => match never {},
        }
    }
}

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

/// What an enqueue's rows passed before [`Outbox::enqueue`] admits them.
#[derive(Clone, Copy, Debug)]
pub enum Entry<'a> {
    /// An unrouted enqueue at this seat. Where this object ever stored a
    /// partition map it is checked against the map (see
    /// [`check_unrouted`](crate::core::check_unrouted)); where it never did,
    /// the state row says so and nothing more is read.
    Unrouted(Seat<'a>),
    /// Rows whose fence the routing steps already checked: a routed
    /// request's (see [`enqueue_fenced`](Outbox::enqueue_fenced)), or the
    /// rows not yet taken of an unrouted retry of a key this object took
    /// routed.
    Fenced(FenceChecked),
}

/// Proof that the routing steps checked an enqueue's fence: only they make
/// one, so no other caller can skip the check of an unrouted enqueue.
#[derive(Clone, Copy, Debug)]
pub struct FenceChecked(());

impl FenceChecked {
    /// Made by the routing steps once the fence held.
    pub(super) fn new() -> FenceChecked {
        FenceChecked(())
    }
}

impl<S: Sql> Outbox<S> {
    /// Admits `rows` (with an optional idempotency key) and writes them and
    /// the new `os`. A repeat of a keyed enqueue within the horizon answers
    /// its original sequences and writes nothing. An unrouted enqueue
    /// ([`Entry::Unrouted`]) at an object that never stored a partition map
    /// reads only the state row, the dedup record and its targets' records;
    /// at one that did, it is refused where the map allows none, and a
    /// keyed one is answered from a routed record of its key first.
    ///
    /// Synchronous and not a transaction of its own: run it inside the
    /// caller's [`Sql::transaction`] together with the caller's own writes,
    /// so they commit together (`Relay::enqueue` and `Relay::enqueue_with`
    /// do). On error nothing was written.
    pub fn enqueue(
        &self,
        entry: Entry<'_>,
        now_ms: u64,
        key: Option<&str>,
        rows: &[EnqueueRow],
    ) -> Result<Enqueued, EnqueueFailure> {
        self.check_endpoints(rows)?;
        self.note_time(now_ms);
        self.memory.enqueues.set(self.memory.enqueues.get() + 1);
        self.memory.handover.borrow_mut().take();
        let mut view = self.enqueue_view(rows, key, now_ms)?;
        let state = &view.state;
        if let (Entry::Unrouted(seat), true) = (entry, view.map_stored) {
            if let Some(done) = self.unrouted_at_mapped(seat, now_ms, key, rows)? {
                return Ok(done);
            }
            // The routing steps may have written: read the slot afresh.
            view.tombstone = self.tombstone()?;
        }
        let input = AdmissionInput {
            os: state.os,
            now_ms,
            key,
            record: view.record.as_ref(),
            dedup_horizon_ms: self.settings().dedup_horizon_ms,
            capacity: self.capacity(state),
            parked: &view.parked,
            held: &view.held,
        };
        match admit(&input, rows) {
            Err(refusal) => {
                if matches!(refusal, EnqueueRefusal::Invalid(EnqueueError::OutboxFull { .. })) {
                    self.add_pending(Pending { rejected_full: 1, ..Pending::default() });
                }
                Err(EnqueueFailure::Refused(refusal))
            }
            Ok(Admission::Duplicate { seqs, at_ms, due_ms }) => {
                self.add_pending(Pending { dedup_hits: 1, ..Pending::default() });
                Ok(Enqueued {
                    seqs,
                    last_seq: state.os,
                    duplicate: true,
                    queued_rows: state.queued_rows,
                    parked_rows: state.parked_rows,
                    at_ms,
                    due_ms,
                })
            }
            Ok(Admission::Append(plan)) => {
                self.write_append(&plan, view.tombstone)?;
                self.offer_handover(&view, &plan, now_ms);
                Ok(Enqueued {
                    due_ms: due_list(&plan.plan.rows, now_ms),
                    seqs: plan.plan.seqs(),
                    last_seq: plan.plan.os,
                    duplicate: false,
                    queued_rows: state.queued_rows + plan.queued.len() as u64,
                    parked_rows: state.parked_rows + plan.parked.len() as u64,
                    at_ms: now_ms,
                })
            }
        }
    }

    /// Writes an admitted enqueue: the rows and the dedup record, and no
    /// state row (the ledger folds them later). The first row bound for the
    /// outbox takes a tombstone's slot, if there is one, so it costs one
    /// write. Two writers allocating the same sequence collide on the
    /// primary key, and the transaction rolls back.
    fn write_append(&self, plan: &AppendPlan, tombstone: Option<u64>) -> Result<(), StoreError> {
        let mut written = 0u64;
        let mut queued: &[StoredRow] = &plan.queued;
        if self.packs(queued) {
            written += u64::from(self.write_pack(queued, tombstone)?);
            queued = &[];
        } else if let (Some(first), Some(slot)) = (queued.first(), tombstone) {
            written += u64::from(self.reuse_slot(slot, first)?);
            queued = queued.get(1..).unwrap_or_default();
        } else if let Some(first) = queued.first() {
            let reused = self.reuse_delivered(first)?;
            if reused > 0 {
                written += u64::from(reused);
                queued = queued.get(1..).unwrap_or_default();
            }
        }
        for (table, list) in [("relay_outbox", queued), ("relay_parked", plan.parked.as_slice())] {
            for chunk in list.chunks(INSERT_ROWS_PER_STATEMENT) {
                written += u64::from(self.insert_rows(table, chunk)?);
            }
        }
        if let Some(record) = &plan.record {
            written += u64::from(self.put_dedup(record)?);
        }
        for (target, due_ms) in &plan.holds {
            written += u64::from(self.sql.run(
                "INSERT INTO relay_holds (target, due_ms) VALUES (?, ?) \
                 ON CONFLICT(target) DO UPDATE SET due_ms = excluded.due_ms",
                vec![target.as_str().into(), int(*due_ms)],
            )?);
        }
        self.add_pending(Pending { writes: written, ..Pending::default() });
        Ok(())
    }

    /// Offers the fire this enqueue starts what it wrote, when its rows are
    /// all the outbox holds and all due now (see `handover.rs`); it counts
    /// only once the enqueue commits.
    fn offer_handover(&self, view: &EnqueueView, plan: &AppendPlan, now_ms: u64) {
        let alone = view.state.queued_rows == 0 && plan.parked.is_empty() && !plan.queued.is_empty();
        if !alone || plan.queued.iter().any(|r| r.due_ms > now_ms) {
            return;
        }
        let failing = view.failing.iter().filter(|(t, _)| plan.queued.iter().any(|r| r.target == t.as_str()));
        *self.memory.handover.borrow_mut() = Some(Handover {
            os: plan.plan.os,
            rs_text: view.state.rs.clone(),
            rows: plan.queued.clone(),
            failing: failing.map(|(t, f)| (t.clone(), *f)).collect(),
            parked_rows: view.state.parked_rows,
            committed: false,
            enqueue: self.memory.enqueues.get(),
            packed: self.packs(&plan.queued),
        });
    }

    /// The sequence of the outbox's tombstone, if it has one. A tombstone is
    /// always the newest row (see `ledger.rs`), so this reads one row.
    pub(crate) fn tombstone(&self) -> Result<Option<u64>, StoreError> {
        let row = self.sql.first("SELECT seq, target FROM relay_outbox ORDER BY seq DESC LIMIT 1", vec![])?;
        match row {
            Some(r) if r.text(1)?.is_empty() => Ok(Some(r.u64(0)?)),
            _ => Ok(None),
        }
    }

    /// Turns the tombstone at `slot` into `row`.
    fn reuse_slot(&self, slot: u64, row: &StoredRow) -> Result<u32, StoreError> {
        let n = self.sql.run(
            "UPDATE relay_outbox SET seq = ?, target = ?, at_ms = ?, bytes = ?, body = ?, due_ms = ? \
             WHERE seq = ? AND target = ''",
            row_values(row).into_iter().chain([int(slot)]).collect(),
        )?;
        if n != 1 {
            return Err(StoreError::Guard("the tombstone changed during enqueue"));
        }
        Ok(n)
    }

    /// Whether an enqueue writes its queued `rows` as one pack (see
    /// `pack.rs`): where the source packs rows and there are enough.
    fn packs(&self, rows: &[StoredRow]) -> bool {
        self.pack_rows.get() && rows.len() >= super::pack::PACK_ROWS_MIN as usize
    }

    /// Refuses rows addressed to an endpoint that is not configured, before
    /// anything is read or written: they could never be delivered.
    pub(crate) fn check_endpoints(&self, rows: &[EnqueueRow]) -> Result<(), EnqueueFailure> {
        match crate::core::unknown_endpoint(rows, &self.endpoints.borrow()) {
            Some(refusal) => Err(EnqueueFailure::Refused(refusal)),
            None => Ok(()),
        }
    }

    pub(super) fn dedup_record(&self, key: &str) -> Result<Option<DedupRecord>, StoreError> {
        let row = self.sql.first(
            "SELECT key, digest, first_seq, rows, at_ms, due_ms FROM relay_dedup WHERE key = ?",
            vec![key.into()],
        )?;
        row.map(|r| {
            let due_ms = match r.opt_text(5)? {
                Some(text) => serde_json::from_str(&text)
                    .map_err(|e| StoreError::Corrupt(format!("a dedup record's due times: {e}")))?,
                None => Vec::new(),
            };
            Ok(DedupRecord {
                key: r.text(0)?,
                digest: r.text(1)?,
                first_seq: r.u64(2)?,
                rows: r.u32(3)?,
                at_ms: r.u64(4)?,
                due_ms,
            })
        })
        .transpose()
    }

    fn put_dedup(&self, r: &DedupRecord) -> Result<u32, StoreError> {
        // Only a delayed enqueue stores its due times: the common record stays as small as it was.
        let due: SqlValue = match r.due_ms.as_slice() {
            [] => SqlValue::Null,
            list => serde_json::to_string(list).map_err(|e| StoreError::Corrupt(e.to_string()))?.into(),
        };
        self.sql.run(
            "INSERT INTO relay_dedup (key, digest, first_seq, rows, at_ms, due_ms) VALUES (?, ?, ?, ?, ?, ?) \
             ON CONFLICT(key) DO UPDATE SET digest = excluded.digest, first_seq = excluded.first_seq, \
             rows = excluded.rows, at_ms = excluded.at_ms, due_ms = excluded.due_ms",
            vec![
                r.key.as_str().into(),
                r.digest.as_str().into(),
                int(r.first_seq),
                int(u64::from(r.rows)),
                int(r.at_ms),
                due,
            ],
        )
    }
}
