//! The guarded write that ends a fire: delete the delivered rows, park the
//! targets the fire parked (moving all their queued rows), count failed
//! cycles, and store the new `rs` with the fire's figures, in one
//! transaction that commits only if `rs` is still what the fire read and
//! every deleted range still holds the rows it saw.
//!
//! The common case writes less: a fire that found the cycle complete, left
//! it complete with nothing blocked, changed no target's record and only
//! deleted rows past the folded `os` needs no state write at all (see
//! `ledger.rs`): the stored completed marker is as good as a new one, and
//! the gauges never counted those rows. If it deletes the outbox's newest
//! row, that row becomes the tombstone that keeps `os`.

use serde::Serialize;

use super::ledger::StateWrite;
use super::{int, Outbox, Pending, Sql, SqlValue, StoreError};
use crate::core::{Checkpoint, FireReport, Name, ScanState, TargetChanges};

/// The checkpoint's first statement: the guard's read of `rs` and `os`.
/// Public so a fault-injecting store wrapper (`testing::FaultySql`) can
/// recognise a checkpoint.
pub const CHECKPOINT_GUARD_SQL: &str = "SELECT rs, os FROM relay_state WHERE id = 1 /* checkpoint */";

/// How a checkpoint ended.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub enum Commit {
    /// It committed; carries the targets it parked with their row counts.
    Committed {
        /// Each target parked, with the queued rows moved and the reason.
        parked: Vec<(Name, u64, String)>,
    },
    /// A guard failed (a concurrent checkpoint or operator action): nothing
    /// was written but the fire's counts. Its deliveries stand at the targets
    /// (their watermarks); the next fire only cleans up.
    Conflict,
}

/// Rows moved to the parked list by one checkpoint.
#[derive(Clone, Debug, Default)]
struct Moved {
    rows: u64,
    bytes: u64,
    writes: u64,
    parked: Vec<(Name, u64, String)>,
}

/// A guard failure inside the checkpoint's transaction.
const CONFLICT: StoreError = StoreError::Guard("rs changed since the fire read it");

/// What a delivery's last fire stores with its checkpoint: the delivery's
/// figures, and whether it was the platform's alarm (counted in `alarms`)
/// or an in-turn delivery (not counted: it ran in an enqueue's invocation).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LastRun {
    /// The delivery's figures, as JSON.
    pub figures: String,
    /// Whether it was the platform's alarm.
    pub alarm: bool,
}

impl<S: Sql> Outbox<S> {
    /// Applies a settled fire's checkpoint and target changes atomically if
    /// its guards hold. `last_run` (on a delivery's last fire) is stored
    /// with it at no extra row write.
    pub fn checkpoint(
        &self,
        cp: &Checkpoint,
        report: &FireReport,
        now_ms: u64,
        last_run: Option<&LastRun>,
    ) -> Result<Commit, StoreError> {
        let last_alarm = last_run.map(|r| r.figures.as_str());
        self.note_time(now_ms);
        self.add_pending(Pending {
            fires: 1,
            calls: u64::from(report.calls),
            alarms: u64::from(last_run.is_some_and(|r| r.alarm)),
            lag_breaches: u64::from(report.lag_exceeded),
            ..Pending::default()
        });
        let changes = report.target_changes();
        if self.keeps_delivered(cp, &changes) {
            if last_alarm.is_some() {
                *self.last_alarm.borrow_mut() = last_alarm.map(str::to_owned);
            }
            return Ok(Commit::Committed { parked: Vec::new() });
        }
        self.flush_delivered()?;
        let result = self.sql.transaction(|| {
            let row = self.sql.first(CHECKPOINT_GUARD_SQL, vec![])?.ok_or(CONFLICT)?;
            let (stored_rs, folded_os) = (row.opt_text(0)?, row.u64(1)?);
            if stored_rs != cp.rs_expected {
                return Err(CONFLICT);
            }
            if skips_state(cp, &changes, folded_os) {
                self.delete_tail(cp)?;
                return Ok(Vec::new());
            }
            self.full_checkpoint(cp, &changes, now_ms, last_alarm)
        });
        match result {
            Ok(parked) => {
                if last_alarm.is_some() {
                    *self.last_alarm.borrow_mut() = last_alarm.map(str::to_owned);
                }
                Ok(Commit::Committed { parked })
            }
            Err(StoreError::Guard(_)) => {
                self.add_pending(Pending { conflicts: 1, ..Pending::default() });
                Ok(Commit::Conflict)
            }
            Err(e) => Err(e),
        }
    }

    /// Whether the checkpoint `cp` only removes one delivered row past the
    /// folded `os` and writes no state, and so is kept in memory instead
    /// (see `handover.rs`): no statement at all. Judged on the `rs` the fire
    /// read: a concurrent change of it costs nothing here, since nothing
    /// is written, and the row's removal is guarded when it is made.
    fn keeps_delivered(&self, cp: &Checkpoint, changes: &TargetChanges) -> bool {
        let Some(folded_os) = self.memory.folded_os.get() else { return false };
        let [range] = cp.deletes.as_slice() else { return false };
        let lone = range.rows == 1 && range.first == range.last;
        lone && skips_state(cp, changes, folded_os) && self.keep_delivered(range.first, range.bytes)
    }

    /// The checkpoint with its state write: fold the tail, delete, park,
    /// count failures, store `rs`.
    fn full_checkpoint(
        &self,
        cp: &Checkpoint,
        changes: &TargetChanges,
        now_ms: u64,
        last_alarm: Option<&str>,
    ) -> Result<Vec<(Name, u64, String)>, StoreError> {
        let (_, tail) = self.stored_and_tail()?;
        let (deleted, deleted_bytes, deleted_written) = self.delete_delivered(cp)?;
        let moved = self.park_targets(changes, now_ms)?;
        let counted = self.count_failures(changes, now_ms)?;
        let signed = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
        let write = StateWrite {
            rs: Some(&cp.rs_new),
            rs_expected: Some(cp.rs_expected.as_deref()),
            queued: (-signed(u64::from(deleted) + moved.rows), -signed(deleted_bytes + moved.bytes)),
            parked: (signed(moved.rows), signed(moved.bytes)),
            last_alarm,
            writes: deleted_written + moved.writes + counted,
            ..StateWrite::default()
        };
        if !self.write_state(&tail, &write)? {
            return Err(CONFLICT);
        }
        Ok(moved.parked)
    }

    /// Deletes the plain queued rows (not packs, not the tombstone) with
    /// sequences in `first..=last`; answers how many.
    fn delete_plain(&self, first: u64, last: u64) -> Result<u32, StoreError> {
        self.sql.run(
            "DELETE FROM relay_outbox WHERE seq >= ? AND seq <= ? AND target != '' AND first_seq IS NULL",
            vec![int(first), int(last)],
        )
    }

    /// Deletes delivered rows that the state row never counted, keeping the
    /// newest as a tombstone when the newest is among them.
    fn delete_tail(&self, cp: &Checkpoint) -> Result<(), StoreError> {
        let newest =
            self.sql.first("SELECT seq, first_seq FROM relay_outbox ORDER BY seq DESC LIMIT 1", vec![])?;
        let (newest, packed) = match newest {
            Some(r) => (Some(r.u64(0)?), r.opt_u64(1)?.is_some()),
            None => (None, false),
        };
        let plain_newest = newest.filter(|_| !packed);
        let mut plain = Vec::with_capacity(cp.deletes.len());
        for range in &cp.deletes {
            let keep = plain_newest.filter(|n| (range.first..=range.last).contains(n));
            let last = keep.map_or(range.last, |n| n - 1);
            let n = self.delete_plain(range.first, last)?;
            let tombstoned = match keep {
                Some(seq) => self.sql.run(
                    "UPDATE relay_outbox SET target = '', bytes = 0, body = '' \
                     WHERE seq = ? AND target != '' AND first_seq IS NULL",
                    vec![int(seq)],
                )?,
                None => 0,
            };
            plain.push(n + tombstoned);
        }
        let written = self.settle_packed(cp, &plain, newest, true)?;
        self.add_pending(Pending { writes: written, ..Pending::default() });
        Ok(())
    }

    /// Deletes the delivered ranges, each guarded by its row count. Answers
    /// the rows and bytes delivered and the SQLite rows written.
    fn delete_delivered(&self, cp: &Checkpoint) -> Result<(u32, u64, u64), StoreError> {
        let (mut plain, mut bytes) = (Vec::with_capacity(cp.deletes.len()), 0u64);
        for range in &cp.deletes {
            plain.push(self.delete_plain(range.first, range.last)?);
            bytes += range.bytes;
        }
        let written = self.settle_packed(cp, &plain, None, false)?;
        let rows: u32 = cp.deletes.iter().map(|r| r.rows).sum();
        Ok((rows, bytes, written))
    }

    /// Removes from packs the delivered rows the plain deletes (`plain`, per
    /// range) did not find, and checks every range's guard: each holds
    /// exactly the rows the fire saw. Reads packs only where a range came
    /// up short. Answers the rows written in packs.
    fn settle_packed(
        &self,
        cp: &Checkpoint,
        plain: &[u32],
        newest: Option<u64>,
        tombstone_newest: bool,
    ) -> Result<u64, StoreError> {
        let short = cp.deletes.iter().zip(plain).any(|(r, n)| *n < r.rows);
        let (packed, written) = if short {
            self.remove_from_packs(&cp.deletes, newest, tombstone_newest)?
        } else {
            (Vec::new(), 0)
        };
        for (i, range) in cp.deletes.iter().enumerate() {
            let found = plain[i] + packed.get(i).copied().unwrap_or(0);
            if found != range.rows {
                return Err(StoreError::Guard("a delivered row changed"));
            }
        }
        let plain_written: u64 = plain.iter().map(|n| u64::from(*n)).sum();
        Ok(plain_written + written)
    }

    /// Moves every queued row of each target being parked to `relay_parked`
    /// and marks the target parked with its reason.
    fn park_targets(&self, changes: &TargetChanges, now_ms: u64) -> Result<Moved, StoreError> {
        let mut moved = Moved::default();
        for (target, reason) in &changes.parked {
            let t: SqlValue = target.as_str().into();
            moved.writes += self.unpack_target(target.as_str())?;
            let (rows, bytes) = self.count(
                "SELECT COUNT(*), COALESCE(SUM(bytes), 0) FROM relay_outbox WHERE target = ?",
                vec![t.clone()],
            )?;
            moved.writes += u64::from(self.sql.run(
                "INSERT INTO relay_parked (seq, target, at_ms, bytes, body, due_ms) \
                 SELECT seq, target, at_ms, bytes, body, due_ms FROM relay_outbox WHERE target = ?",
                vec![t.clone()],
            )?);
            let n = self.sql.run("DELETE FROM relay_outbox WHERE target = ?", vec![t.clone()])?;
            if u64::from(n) != rows {
                return Err(StoreError::Guard("a parked target's rows changed while they moved"));
            }
            moved.writes += u64::from(n);
            moved.writes += u64::from(self.sql.run(
                "INSERT INTO relay_targets (target, failed_cycles, parked, reason, first_failure_ms, \
                 last_failure_ms, last_error) VALUES (?, 0, 1, ?, ?, ?, ?) ON CONFLICT(target) DO UPDATE SET \
                 failed_cycles = 0, parked = 1, reason = excluded.reason, \
                 first_failure_ms = COALESCE(first_failure_ms, excluded.first_failure_ms), \
                 last_failure_ms = excluded.last_failure_ms, last_error = excluded.last_error",
                vec![t, reason.as_str().into(), int(now_ms), int(now_ms), reason.as_str().into()],
            )?);
            moved.rows += rows;
            moved.bytes += bytes;
            moved.parked.push((target.clone(), rows, reason.clone()));
        }
        Ok(moved)
    }

    /// Counts a failed cycle for each failed target (the first of a new
    /// run for one that took a batch before failing); forgets the record of
    /// each that took a batch again.
    fn count_failures(&self, changes: &TargetChanges, now_ms: u64) -> Result<u64, StoreError> {
        let mut written = 0u64;
        for (target, error) in &changes.failed {
            let pause = changes.throttled.iter().find(|(t, _)| t == target).map_or(0, |(_, ms)| *ms);
            let restart = changes.restarted.contains(target);
            written += u64::from(self.sql.run(
                "INSERT INTO relay_targets (target, failed_cycles, parked, first_failure_ms, last_failure_ms, \
                 last_error, retry_after_ms) VALUES (?, 1, 0, ?, ?, ?, ?) ON CONFLICT(target) DO UPDATE SET \
                 failed_cycles = CASE WHEN ? THEN 1 ELSE failed_cycles + 1 END, \
                 first_failure_ms = CASE WHEN ? THEN excluded.first_failure_ms ELSE first_failure_ms END, \
                 last_failure_ms = excluded.last_failure_ms, \
                 last_error = excluded.last_error, retry_after_ms = excluded.retry_after_ms",
                vec![
                    target.as_str().into(),
                    int(now_ms),
                    int(now_ms),
                    error.as_str().into(),
                    int(pause),
                    int(u64::from(restart)),
                    int(u64::from(restart)),
                ],
            )?);
        }
        for target in &changes.recovered {
            written += u64::from(self.sql.run(
                "DELETE FROM relay_targets WHERE target = ? AND parked = 0",
                vec![target.as_str().into()],
            )?);
        }
        Ok(written)
    }
}

/// Whether a checkpoint can leave the state row alone: the stored `rs` and
/// the new one are both completed markers with nothing blocked and no idle
/// streak, or the stored one is absent (either way the next fire starts a
/// new cycle from the head, exactly as after the new marker), no target's
/// record changes, and every row it deletes is past the folded `os` (so no
/// gauge counted it).
fn skips_state(cp: &Checkpoint, changes: &TargetChanges, folded_os: u64) -> bool {
    let marker = |text: &str| {
        ScanState::decode(text).is_ok_and(|s| s.is_complete() && s.blocked.is_empty() && s.idle_fires == 0)
    };
    let plain_marker = |text: Option<&str>| text.is_none_or(marker);
    let no_changes = changes.failed.is_empty() && changes.parked.is_empty() && changes.recovered.is_empty();
    let all_tail = cp.deletes.iter().all(|r| r.first > folded_os);
    no_changes && all_tail && plain_marker(cp.rs_expected.as_deref()) && plain_marker(Some(&cp.rs_new))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::DeleteRange;

    fn marker(os: u64, idle: u32, blocked: &[&str]) -> String {
        let mut s = ScanState::new_cycle(os, None);
        s.cursor = os;
        s.idle_fires = idle;
        s.blocked = blocked.iter().map(|b| Name::new(*b).unwrap()).collect();
        s.encode()
    }

    fn cp(expected: Option<String>, new: String, first: u64) -> Checkpoint {
        Checkpoint {
            rs_expected: expected,
            rs_new: new,
            deletes: vec![DeleteRange { first, last: first, rows: 1, bytes: 9 }],
        }
    }

    #[test]
    fn only_a_plain_drain_of_tail_rows_skips_the_state_write() {
        let none = TargetChanges::default();
        assert!(skips_state(&cp(Some(marker(5, 0, &[])), marker(6, 0, &[]), 6), &none, 5));
        assert!(!skips_state(&cp(Some(marker(5, 0, &[])), marker(6, 0, &[]), 5), &none, 5), "a folded row");
        assert!(skips_state(&cp(None, marker(6, 0, &[]), 6), &none, 5), "no stored rs: as good as a marker");
        assert!(
            !skips_state(&cp(Some("{corrupt".into()), marker(6, 0, &[]), 6), &none, 5),
            "a corrupt rs is replaced"
        );
        assert!(
            !skips_state(&cp(Some(marker(5, 2, &[])), marker(6, 0, &[]), 6), &none, 5),
            "an idle streak to reset"
        );
        let mut active = ScanState::new_cycle(9, None);
        active.cursor = 6;
        assert!(!skips_state(&cp(Some(marker(5, 0, &[])), active.encode(), 6), &none, 5), "an active cycle");
        let failed =
            TargetChanges { failed: vec![(Name::new("t").unwrap(), "x".into())], ..TargetChanges::default() };
        assert!(
            !skips_state(&cp(Some(marker(5, 0, &[])), marker(6, 0, &[]), 6), &failed, 5),
            "a target record"
        );
    }
}
