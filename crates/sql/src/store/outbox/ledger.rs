//! The source's books: the one-row state and how to read it right.
//!
//! Writing the state row costs a SQLite row write, so the hot path avoids
//! it: an enqueue writes only its rows, and a checkpoint that only deletes
//! rows enqueued since the last state write writes no state either. The
//! state row is therefore *folded* lazily:
//!
//! - `os` in the row is the **folded** high-water mark F: every gauge in the
//!   row (`queued_*`, `parked_*`) counts exactly the rows with `seq <= F`.
//! - Rows with `seq > F` (the **tail**) are counted by reading them: a
//!   primary-key range scan over rows added since the last state write.
//! - The effective `os` is the largest of F and the largest sequence stored
//!   in the outbox or the parked list. Sequences never go back: a checkpoint
//!   that deletes the outbox's newest row without writing the state turns it
//!   into a **tombstone** (target `''`, which no valid name is) instead, so the largest sequence
//!   stays stored; the next enqueue reuses the tombstone's slot for its
//!   first row, so the slot costs one write per row, not two.
//! - Every operation that writes the state row first folds the tail into
//!   it (F becomes the effective `os`, the gauges absorb the tail), then
//!   applies its own changes.
//! - `enqueued_rows` is the effective `os` (sequences are allocated
//!   contiguously from 1); `delivered_rows` is `os - queued - parked -
//!   discarded_total`.
//! - Counters that are figures (fires, calls, rows written...) wait in
//!   memory ([`Pending`]) for the next state write; an instance evicted
//!   before it loses them, never data. What it can lose is bounded: an
//!   alarm writes counts older than
//!   [`UNWRITTEN_COUNTS_MAX_AGE_MS`](crate::core::UNWRITTEN_COUNTS_MAX_AGE_MS)
//!   (one counters-only row, [`Outbox::write_counts`]), and a status read
//!   writes what it is about to report, so a count once read never goes
//!   back.
//! - The rows written in the current UTC day are counted beside the total:
//!   each state write adds its rows to the stored day's count, or starts a
//!   new day's.
//!
//! Invariants (checked by `Outbox::audit`): the effective gauges equal
//! `COUNT`/`SUM` over the live rows; at most one tombstone exists and it is
//! the outbox's newest row; F is at most the effective `os`.

use super::{int, pending_set, Outbox, SourceState, Sql, SqlValue, StoreError};
use crate::store::Row;

/// The state row as stored.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Stored {
    /// The folded high-water mark F.
    pub(crate) os: u64,
    pub(crate) rs: Option<String>,
    pub(crate) queued_rows: u64,
    pub(crate) queued_bytes: u64,
    pub(crate) parked_rows: u64,
    pub(crate) parked_bytes: u64,
    pub(crate) discarded_total: u64,
    pub(crate) sql_rows_written: u64,
    pub(crate) alarms: u64,
    pub(crate) fires: u64,
    pub(crate) calls: u64,
    pub(crate) conflicts: u64,
    pub(crate) dedup_hits: u64,
    pub(crate) rejected_full: u64,
    pub(crate) lag_breaches: u64,
    pub(crate) last_prune_ms: u64,
    pub(crate) last_alarm: Option<String>,
    pub(crate) rows_written_day: u64,
    pub(crate) rows_written_today: u64,
    /// Whether this object ever stored a partition map (`map_stored`): an
    /// unrouted enqueue consults the fence only where one was stored.
    pub(crate) map_stored: bool,
}

const STORED_COLUMNS: &str = "os, rs, queued_rows, queued_bytes, parked_rows, parked_bytes, discarded_total, \
     sql_rows_written, alarms, fires, calls, conflicts, dedup_hits, rejected_full, lag_breaches, last_prune_ms, \
     last_alarm, rows_written_day, rows_written_today, map_stored";

/// Columns in [`STORED_COLUMNS`].
const STORED_COLUMN_COUNT: usize = 20;

/// The state row, then what the rows past its folded `os` add: the queued
/// and the parked (not discarded) rows, each as one `"<count> <bytes>"`
/// text so that one scan yields both, and the highest sequence of each
/// table. Scalar subqueries correlated with the state row read what the
/// four separate statements it replaces read, and no more.
static STORED_AND_TAIL_SQL: std::sync::LazyLock<String> =
    std::sync::LazyLock::new(|| stored_and_tail_sql(""));

/// [`STORED_AND_TAIL_SQL`] with `extra` columns (each preceded by a comma)
/// after the tail's four: an operation that needs a few more facts reads
/// them in the same statement.
pub(super) fn stored_and_tail_sql(extra: &str) -> String {
    format!(
        "SELECT {STORED_COLUMNS}, \
         (SELECT printf('%d %d', COALESCE(SUM(CASE WHEN first_seq IS NULL THEN 1 \
          ELSE json_array_length(body) END), 0), COALESCE(SUM(bytes), 0)) FROM relay_outbox \
          WHERE seq > s.os AND target != ''), \
         (SELECT printf('%d %d', COUNT(*), COALESCE(SUM(bytes), 0)) FROM relay_parked \
          WHERE seq > s.os AND discarded_at_ms IS NULL), \
         (SELECT MAX(seq) FROM relay_outbox), (SELECT MAX(seq) FROM relay_parked), \
         (SELECT COUNT(*) FROM relay_outbox WHERE seq = ? AND bytes = ? AND target != '' \
          AND first_seq IS NULL){extra} \
         FROM relay_state AS s WHERE s.id = 1"
    )
}

/// The column of the first extra column of [`stored_and_tail_sql`]. The
/// one before it says whether the delivered row this instance keeps (its
/// sequence and size, the first two parameters) is still in the outbox.
pub(super) const FIRST_EXTRA_COLUMN: usize = STORED_COLUMN_COUNT + 5;

/// A `"<count> <bytes>"` text of [`STORED_AND_TAIL_SQL`].
fn count_and_bytes(text: &str) -> Result<(u64, u64), StoreError> {
    let bad = || StoreError::Corrupt(format!("a tail count reads {text:?}"));
    let (count, bytes) = text.split_once(' ').ok_or_else(bad)?;
    Ok((count.parse().map_err(|_| bad())?, bytes.parse().map_err(|_| bad())?))
}

/// The [`Stored`] fields of a row that starts with [`STORED_COLUMNS`].
fn stored_from(r: &Row) -> Result<Stored, StoreError> {
    Ok(Stored {
        os: r.u64(0)?,
        rs: r.opt_text(1)?,
        queued_rows: r.u64(2)?,
        queued_bytes: r.u64(3)?,
        parked_rows: r.u64(4)?,
        parked_bytes: r.u64(5)?,
        discarded_total: r.u64(6)?,
        sql_rows_written: r.u64(7)?,
        alarms: r.u64(8)?,
        fires: r.u64(9)?,
        calls: r.u64(10)?,
        conflicts: r.u64(11)?,
        dedup_hits: r.u64(12)?,
        rejected_full: r.u64(13)?,
        lag_breaches: r.u64(14)?,
        last_prune_ms: r.u64(15)?,
        last_alarm: r.opt_text(16)?,
        rows_written_day: r.u64(17)?,
        rows_written_today: r.u64(18)?,
        map_stored: r.u64(19)? != 0,
    })
}

/// What the tail adds to the folded state, and the effective `os`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Tail {
    pub(crate) os: u64,
    pub(crate) queued_rows: u64,
    pub(crate) queued_bytes: u64,
    pub(crate) parked_rows: u64,
    pub(crate) parked_bytes: u64,
}

/// Counts gathered where nothing may be written (duplicates, refusals,
/// checkpoints that skip the state row) or outside SQL (alarm arms); added
/// to the next state write.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Pending {
    /// Rows written whose count is not yet in `sql_rows_written` (each
    /// `setAlarm` writes one; so does every row of a skipped-state write).
    pub writes: u64,
    /// Keyed enqueues answered as duplicates.
    pub dedup_hits: u64,
    /// Enqueues refused as full.
    pub rejected_full: u64,
    /// Fires run.
    pub fires: u64,
    /// Target calls made.
    pub calls: u64,
    /// Alarms that ended.
    pub alarms: u64,
    /// Checkpoints that lost their guard.
    pub conflicts: u64,
    /// Fires that saw a row older than the lag bound.
    pub lag_breaches: u64,
}

impl Pending {
    pub(crate) fn add(&mut self, p: Pending) {
        self.writes += p.writes;
        self.dedup_hits += p.dedup_hits;
        self.rejected_full += p.rejected_full;
        self.fires += p.fires;
        self.calls += p.calls;
        self.alarms += p.alarms;
        self.conflicts += p.conflicts;
        self.lag_breaches += p.lag_breaches;
    }

    /// The eleven [`pending_set!`] parameters, with `own` more rows
    /// written, counted in UTC day `day`.
    fn params(&self, own: u64, day: u64) -> Vec<SqlValue> {
        let writes = self.writes + own;
        [
            writes,
            self.dedup_hits,
            self.rejected_full,
            self.fires,
            self.calls,
            self.alarms,
            self.conflicts,
            self.lag_breaches,
            day,
            writes,
            day,
        ]
        .into_iter()
        .map(int)
        .collect()
    }
}

/// The statement that writes the pending counts alone: one row, and no
/// fold, so the gauges and the checkpoints that skip the state row are
/// left as they were.
const COUNTS_WRITE_SQL: &str = concat!("UPDATE relay_state SET ", pending_set!(), " WHERE id = 1");

/// One state write: what an operation changes beyond the fold.
#[derive(Clone, Debug, Default)]
pub(crate) struct StateWrite<'a> {
    /// The new `rs`, or `None` to keep it.
    pub(crate) rs: Option<&'a str>,
    /// Guard: the stored `rs` must still be this (`Some(None)`: absent).
    pub(crate) rs_expected: Option<Option<&'a str>>,
    /// Change to the queued gauges after the fold (rows, bytes).
    pub(crate) queued: (i64, i64),
    /// Change to the parked gauges after the fold (rows, bytes).
    pub(crate) parked: (i64, i64),
    /// Rows discarded by this operation.
    pub(crate) discarded: u64,
    /// A new `last_prune_ms`.
    pub(crate) last_prune_ms: Option<u64>,
    /// The alarm's figures, stored with the write.
    pub(crate) last_alarm: Option<&'a str>,
    /// Rows this operation's own statements wrote (the state row adds one).
    pub(crate) writes: u64,
}

/// The one statement that writes the state row.
const STATE_WRITE_SQL: &str = concat!(
    "UPDATE relay_state SET os = ?, rs = COALESCE(?, rs), queued_rows = queued_rows + ?, ",
    "queued_bytes = queued_bytes + ?, parked_rows = parked_rows + ?, parked_bytes = parked_bytes + ?, ",
    "discarded_total = discarded_total + ?, last_prune_ms = COALESCE(?, last_prune_ms), ",
    "last_alarm = COALESCE(?, last_alarm), ",
    pending_set!(),
    " WHERE id = 1 AND (? = 0 OR rs IS ?)"
);

/// A signed gauge change as a bound integer.
fn signed(v: i64) -> SqlValue {
    assert!(v.unsigned_abs() <= crate::core::SEQ_MAX, "gauge change {v} past SEQ_MAX");
    SqlValue::Int(v)
}

impl<S: Sql> Outbox<S> {
    /// The source's state: the state row with the tail folded in, the
    /// derived counts, and the counts not yet written.
    pub fn state(&self) -> Result<SourceState, StoreError> {
        Ok(self.state_and_map_stored()?.0)
    }

    /// [`state`](Outbox::state), and whether this object ever stored a
    /// partition map, from the same one statement.
    fn state_and_map_stored(&self) -> Result<(SourceState, bool), StoreError> {
        let (st, t) = self.stored_and_tail()?;
        Ok(self.state_of(st, t))
    }

    /// The state, and whether a partition map was ever stored, from the
    /// state row as stored and its tail.
    pub(super) fn state_of(&self, st: Stored, t: Tail) -> (SourceState, bool) {
        let map_stored = st.map_stored;
        let p = self.pending.get();
        let queued_rows = st.queued_rows + t.queued_rows;
        let parked_rows = st.parked_rows + t.parked_rows;
        let last_alarm = self.last_alarm.borrow().clone().or(st.last_alarm);
        let day = crate::core::utc_day(self.clock_ms.get()).max(st.rows_written_day);
        let stored_today = if st.rows_written_day == day { st.rows_written_today } else { 0 };
        let state = SourceState {
            os: t.os,
            rs: st.rs,
            queued_rows,
            queued_bytes: st.queued_bytes + t.queued_bytes,
            parked_rows,
            parked_bytes: st.parked_bytes + t.parked_bytes,
            enqueued_rows: t.os,
            delivered_rows: t.os.saturating_sub(queued_rows + parked_rows + st.discarded_total),
            discarded_total: st.discarded_total,
            sql_rows_written: st.sql_rows_written + p.writes,
            alarms: st.alarms + p.alarms,
            fires: st.fires + p.fires,
            calls: st.calls + p.calls,
            conflicts: st.conflicts + p.conflicts,
            dedup_hits: st.dedup_hits + p.dedup_hits,
            rejected_full: st.rejected_full + p.rejected_full,
            lag_breaches: st.lag_breaches + p.lag_breaches,
            last_prune_ms: st.last_prune_ms,
            last_alarm,
            rows_written_day: day,
            rows_written_today: stored_today + p.writes,
        };
        (state, map_stored)
    }

    /// The state row as stored.
    pub(crate) fn stored(&self) -> Result<Stored, StoreError> {
        let row =
            self.sql.first(&format!("SELECT {STORED_COLUMNS} FROM relay_state WHERE id = 1"), vec![])?;
        stored_from(&row.ok_or(StoreError::Corrupt("relay_state row is missing".into()))?)
    }

    /// The state row as stored and what the rows past its folded `os` add,
    /// read in one statement: every read of the state needs both, and each
    /// statement is a call into the runtime.
    pub(crate) fn stored_and_tail(&self) -> Result<(Stored, Tail), StoreError> {
        let (stored, tail, _) = self.stored_and_tail_with(&STORED_AND_TAIL_SQL, vec![])?;
        Ok((stored, tail))
    }

    /// [`stored_and_tail`](Outbox::stored_and_tail) by `query`, a statement
    /// of [`stored_and_tail_sql`], and the row itself for its extra columns.
    pub(super) fn stored_and_tail_with(
        &self,
        query: &str,
        params: Vec<SqlValue>,
    ) -> Result<(Stored, Tail, Row), StoreError> {
        let kept = self.memory.delivered.get();
        let mut all = vec![int(kept.map_or(0, |d| d.seq)), int(kept.map_or(0, |d| d.bytes))];
        all.extend(params);
        let row = self.sql.first(query, all)?;
        let r = row.ok_or(StoreError::Corrupt("relay_state row is missing".into()))?;
        let stored = stored_from(&r)?;
        self.memory.folded_os.set(Some(stored.os));
        let base = STORED_COLUMN_COUNT;
        let (mut queued_rows, mut queued_bytes) = count_and_bytes(&r.text(base)?)?;
        let (parked_rows, parked_bytes) = count_and_bytes(&r.text(base + 1)?)?;
        let newest = [r.opt_u64(base + 2)?, r.opt_u64(base + 3)?].into_iter().flatten().max().unwrap_or(0);
        // A delivered row kept for the next enqueue (`handover.rs`) is in
        // the tail: delivered, not queued. One that is gone or folded
        // (another instance's checkpoint took it) is forgotten.
        match kept {
            Some(d) if r.u64(base + 4)? == 1 && d.seq > stored.os => {
                queued_rows = queued_rows.saturating_sub(1);
                queued_bytes = queued_bytes.saturating_sub(d.bytes);
            }
            Some(_) => self.memory.delivered.set(None),
            None => {}
        }
        let tail = Tail { os: newest.max(stored.os), queued_rows, queued_bytes, parked_rows, parked_bytes };
        Ok((stored, tail, r))
    }

    /// Writes the state row: folds `tail`, applies `w` and every pending
    /// count. Returns whether the guard held (nothing was written if not).
    pub(crate) fn write_state(&self, tail: &Tail, w: &StateWrite<'_>) -> Result<bool, StoreError> {
        let (pending, since) = self.take_pending();
        let (guarded, expected) = match w.rs_expected {
            None => (0, SqlValue::Null),
            Some(e) => (1, e.into()),
        };
        let mut params = vec![
            int(tail.os),
            w.rs.into(),
            signed(i64::try_from(tail.queued_rows).unwrap_or(i64::MAX) + w.queued.0),
            signed(i64::try_from(tail.queued_bytes).unwrap_or(i64::MAX) + w.queued.1),
            signed(i64::try_from(tail.parked_rows).unwrap_or(i64::MAX) + w.parked.0),
            signed(i64::try_from(tail.parked_bytes).unwrap_or(i64::MAX) + w.parked.1),
            int(w.discarded),
            w.last_prune_ms.map(int).unwrap_or(SqlValue::Null),
            w.last_alarm.into(),
        ];
        params.extend(pending.params(w.writes + 1, self.today()));
        params.push(int(guarded));
        params.push(expected);
        match self.sql.run(STATE_WRITE_SQL, params) {
            Ok(1) => {
                self.memory.folded_os.set(Some(tail.os));
                Ok(true)
            }
            Ok(_) => {
                self.restore_pending(pending, since);
                Ok(false)
            }
            Err(e) => {
                self.restore_pending(pending, since);
                Err(e)
            }
        }
    }

    /// Writes the counts not yet written, alone (one row), when the oldest
    /// of them is at least `older_than_ms` old at `now_ms` (0: whenever
    /// there are any). Answers whether it wrote; on failure they stay
    /// unwritten.
    pub fn write_counts(&self, now_ms: u64, older_than_ms: u64) -> Result<bool, StoreError> {
        self.note_time(now_ms);
        let Some(since) = self.pending_since_ms.get() else { return Ok(false) };
        if now_ms.saturating_sub(since) < older_than_ms {
            return Ok(false);
        }
        let (pending, since) = self.take_pending();
        match self.sql.run(COUNTS_WRITE_SQL, pending.params(1, self.today())) {
            Ok(_) => Ok(true),
            Err(e) => {
                self.restore_pending(pending, since);
                Err(e)
            }
        }
    }

    /// The UTC day of the newest time this outbox was told.
    fn today(&self) -> u64 {
        crate::core::utc_day(self.clock_ms.get())
    }

    /// Takes the pending counts and when the oldest was counted, to write.
    fn take_pending(&self) -> (Pending, Option<u64>) {
        (self.pending.replace(Pending::default()), self.pending_since_ms.replace(None))
    }

    /// Puts back counts whose write failed, keeping the older of the times.
    fn restore_pending(&self, pending: Pending, since: Option<u64>) {
        let kept = self.pending_since_ms.get();
        self.add_pending(pending);
        let oldest = match (since, kept) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        self.pending_since_ms.set(oldest);
    }
}
