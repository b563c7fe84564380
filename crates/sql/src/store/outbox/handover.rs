//! What a lone row's round trip does not read or write again.
//!
//! Two things this instance knows in memory, each to save a statement per
//! row that the platform bills as a call and a row written:
//!
//! - **The handover.** An enqueue that finds nothing else queued knows the
//!   whole window the delivery it starts will read: its own rows, the
//!   source's `os` and `rs`, and its targets' failure records. Once the
//!   enqueue has committed ([`Outbox::commit_handover`]), the next fire takes
//!   them from memory instead of reading them back. Anything else that
//!   touches the outbox first drops it, so a fire never starts from a stale
//!   one; an enqueue that rolled back never commits one.
//! - **The delivered row.** A fire whose checkpoint would only remove one
//!   delivered row past the folded `os` (the common end of a lone row's
//!   delivery, which writes no state) keeps that row, and remembers it as
//!   delivered. The next enqueue writes its first row over that slot: one
//!   row written for the row that leaves and the row that comes, where a
//!   tombstone or a delete cost one each. Every other operation that reads
//!   or writes the outbox's rows first removes it as the checkpoint would
//!   have ([`Outbox::flush_delivered`]), and [`Outbox::state`] counts it as
//!   delivered, so every reader sees exactly what an immediate checkpoint
//!   would have left.
//!
//! Memory is lost with the instance: a row remembered as delivered is then
//! a queued row again, sent once more and skipped by the target's
//! watermark (as after a crash between a call and its checkpoint), and a
//! lost handover is only a read to make. Neither can lose or repeat an
//! effect. The platform's safety-net alarm, armed by the enqueue, runs
//! within `IN_TURN_ALARM_GRACE_MS` (5 s) of any in-turn delivery and
//! removes the row if no enqueue took its slot.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;

use super::{int, Outbox, Pending, Sql, StoreError};
use crate::core::{Failing, Name, StoredRow};

/// What an enqueue wrote and read, handed to the fire it starts.
#[derive(Clone, Debug, Default)]
pub(crate) struct Handover {
    /// The source's `os` after the enqueue.
    pub(crate) os: u64,
    /// The stored `rs` text, as the enqueue read it.
    pub(crate) rs_text: Option<String>,
    /// Every row the outbox holds (the enqueue's own), ascending.
    pub(crate) rows: Vec<StoredRow>,
    /// The failure records of the rows' targets that are failing.
    pub(crate) failing: BTreeMap<Name, Failing>,
    /// Rows parked at the source (not the outbox's), for the summary.
    pub(crate) parked_rows: u64,
    /// Whether the enqueue committed; only then may a fire use it.
    pub(crate) committed: bool,
    /// The enqueue count when it was made (see [`Memory::enqueues`]).
    pub(crate) enqueue: u64,
    /// Whether the enqueue wrote its rows as a pack.
    pub(crate) packed: bool,
}

/// A delivered row still in the outbox: its sequence and body size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Delivered {
    /// Its sequence. Invariant: past the folded `os` when it was noted.
    pub(crate) seq: u64,
    /// Its body bytes (what the gauges counted).
    pub(crate) bytes: u64,
}

/// The outbox's memory of the two above.
#[derive(Debug, Default)]
pub(crate) struct Memory {
    /// The latest enqueue's handover, if it may be one.
    pub(crate) handover: RefCell<Option<Handover>>,
    /// A fire took the handover and has not read its window yet.
    pub(crate) handed: RefCell<Option<Handover>>,
    /// The delivered row kept in the outbox, if any.
    pub(crate) delivered: Cell<Option<Delivered>>,
    /// The folded `os` as this instance last read or wrote it.
    pub(crate) folded_os: Cell<Option<u64>>,
    /// Enqueues this instance ran: a handover's fire ran beside no other
    /// enqueue when the count is unchanged.
    pub(crate) enqueues: Cell<u64>,
    /// Whether the last window read held a packed row: its checkpoint then
    /// keeps no delivered row, which must be a plain one.
    pub(crate) packed_window: Cell<bool>,
    /// Whether this instance raised the schema version packs require.
    pub(crate) packs_required: Cell<bool>,
}

impl<S: Sql> Outbox<S> {
    /// Marks the latest enqueue's handover as committed: call it once the
    /// enqueue's transaction has committed, never from inside a caller's.
    pub fn commit_handover(&self) {
        if let Some(h) = self.memory.handover.borrow_mut().as_mut() {
            h.committed = true;
        }
    }

    /// Forgets what this instance remembers of the outbox (the handover,
    /// the delivered row kept): call it after writing the relay's tables
    /// behind its back. A kept row is then a queued row again, sent once
    /// more and skipped by its target's watermark.
    pub fn forget_memory(&self) {
        self.memory.handover.borrow_mut().take();
        self.memory.delivered.take();
    }

    /// Counts an alarm that ran no fire (it only re-armed).
    pub fn note_alarm(&self) {
        self.add_pending(Pending { alarms: 1, ..Pending::default() });
    }

    /// Whether a delivered row is kept in the outbox for the next enqueue.
    pub fn keeps_delivered_row(&self) -> bool {
        self.memory.delivered.get().is_some()
    }

    /// Forgets the latest enqueue's handover: the enqueue ran inside a
    /// caller's transaction, which may yet roll back.
    pub fn forget_handover(&self) {
        self.memory.handover.borrow_mut().take();
    }

    /// The committed handover of the latest enqueue, taken for a fire that
    /// begins now; `None` (and nothing kept) otherwise.
    pub(crate) fn take_handover(&self) -> Option<Handover> {
        let h = self.memory.handover.borrow_mut().take()?;
        let usable = h.committed && self.memory.delivered.get().is_none();
        usable.then_some(h)
    }

    /// Whether the enqueue count is still what `h` saw.
    pub(crate) fn no_enqueue_since(&self, h: &Handover) -> bool {
        self.memory.enqueues.get() == h.enqueue
    }

    /// Removes the delivered row kept in the outbox as the checkpoint would
    /// have (a tombstone when it is the newest row, else deleted), and
    /// drops the handover: every operation that reads or writes the
    /// outbox's rows, other than an enqueue and a handed fire, calls this
    /// first. Guarded: a row that is gone, changed or folded meanwhile is
    /// left alone (a queued row again, at worst sent once more).
    pub fn flush_delivered(&self) -> Result<(), StoreError> {
        self.memory.handover.borrow_mut().take();
        let Some(d) = self.memory.delivered.take() else { return Ok(()) };
        let (seq, bytes) = (int(d.seq), int(d.bytes));
        let written = self.sql.transaction(|| {
            let n = self.sql.run(
                "UPDATE relay_outbox SET target = '', bytes = 0, body = '' WHERE seq = ? AND bytes = ? \
                 AND target != '' AND first_seq IS NULL AND seq = (SELECT MAX(seq) FROM relay_outbox) \
                 AND seq > (SELECT os FROM relay_state WHERE id = 1)",
                vec![seq.clone(), bytes.clone()],
            )?;
            if n > 0 {
                return Ok(n);
            }
            self.sql.run(
                "DELETE FROM relay_outbox WHERE seq = ? AND bytes = ? AND target != '' AND first_seq IS NULL \
                 AND seq > (SELECT os FROM relay_state WHERE id = 1)",
                vec![seq.clone(), bytes.clone()],
            )
        });
        match written {
            Ok(n) => {
                self.add_pending(Pending { writes: u64::from(n), ..Pending::default() });
                Ok(())
            }
            Err(e) => {
                self.memory.delivered.set(Some(d));
                Err(e)
            }
        }
    }

    /// Writes `row` over the delivered row's slot, when one is kept:
    /// answers the rows written (1), or 0 when there is none or its guard
    /// failed (then it is forgotten, a queued row again).
    pub(crate) fn reuse_delivered(&self, row: &StoredRow) -> Result<u32, StoreError> {
        let Some(d) = self.memory.delivered.take() else { return Ok(0) };
        self.sql.run(
            "UPDATE relay_outbox SET seq = ?, target = ?, at_ms = ?, bytes = ?, body = ?, due_ms = ? \
             WHERE seq = ? AND bytes = ? AND target != '' AND first_seq IS NULL \
             AND seq > (SELECT os FROM relay_state WHERE id = 1)",
            super::rows::row_values(row).into_iter().chain([int(d.seq), int(d.bytes)]).collect(),
        )
    }

    /// Keeps the delivered row `seq` (of `bytes`) in the outbox instead of
    /// removing it now, when it is past the folded `os` as last seen and no
    /// other is kept: answers whether it did.
    pub(crate) fn keep_delivered(&self, seq: u64, bytes: u64) -> bool {
        let past_folded = self.memory.folded_os.get().is_some_and(|f| seq > f);
        if !past_folded || self.memory.delivered.get().is_some() || self.memory.packed_window.get() {
            return false;
        }
        self.memory.delivered.set(Some(Delivered { seq, bytes }));
        true
    }
}
