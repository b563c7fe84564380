//! The guarded write that ends a fire: delete the delivered rows, park the
//! targets the fire parked (moving all their queued rows), count failed
//! cycles, and store the new `rs` with the fire's figures, in one
//! transaction that commits only if `rs` is still what the fire read and
//! every deleted range still holds the rows it saw.

use serde::Serialize;

use super::{int, pending_set, Outbox, Sql, SqlValue, StoreError};
use crate::core::{Checkpoint, FireReport, Name, TargetChanges};

/// The checkpoint's guarded state update. Public so a fault-injecting
/// store wrapper (`testing::FaultySql`) can recognise the checkpoint.
pub const CHECKPOINT_SQL: &str = concat!(
    "UPDATE relay_state SET rs = ?, queued_rows = queued_rows - ?, queued_bytes = queued_bytes - ?, ",
    "parked_rows = parked_rows + ?, parked_bytes = parked_bytes + ?, delivered_rows = delivered_rows + ?, ",
    "fires = fires + 1, calls = calls + ?, alarms = alarms + ?, lag_breaches = lag_breaches + ?, ",
    "last_alarm = COALESCE(?, last_alarm), ",
    pending_set!(),
    " WHERE id = 1 AND rs IS ?"
);

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

impl<S: Sql> Outbox<S> {
    /// Applies a settled fire's checkpoint and target changes atomically if
    /// its guards hold. `last_alarm` (the alarm's JSON figures, on the
    /// alarm's last fire) is stored with it at no extra row write.
    pub fn checkpoint(
        &self,
        cp: &Checkpoint,
        report: &FireReport,
        now_ms: u64,
        last_alarm: Option<&str>,
    ) -> Result<Commit, StoreError> {
        let changes = report.target_changes();
        let mut carried = None;
        let result = self.sql.transaction(|| {
            let (deleted, deleted_bytes) = self.delete_delivered(cp)?;
            let moved = self.park_targets(&changes, now_ms)?;
            let counted = self.count_failures(&changes, now_ms)?;
            let (pending, taken) = self.take_pending(u64::from(deleted) + moved.writes + counted + 1);
            carried = Some(taken);
            let mut params = vec![
                cp.rs_new.as_str().into(),
                int(u64::from(deleted) + moved.rows),
                int(deleted_bytes + moved.bytes),
                int(moved.rows),
                int(moved.bytes),
                int(u64::from(deleted)),
                int(u64::from(report.calls)),
                int(u64::from(last_alarm.is_some())),
                int(u64::from(report.lag_exceeded)),
                last_alarm.into(),
            ];
            params.extend(pending);
            params.push(cp.rs_expected.as_deref().into());
            if self.sql.run(CHECKPOINT_SQL, params)? != 1 {
                return Err(StoreError::Guard("rs changed since the fire read it"));
            }
            Ok(moved.parked)
        });
        match result {
            Ok(parked) => Ok(Commit::Committed { parked }),
            Err(e) => {
                if let Some(p) = carried {
                    self.add_pending(p);
                }
                match e {
                    StoreError::Guard(_) => {
                        self.record_conflict(report, last_alarm)?;
                        Ok(Commit::Conflict)
                    }
                    other => Err(other),
                }
            }
        }
    }

    /// Deletes the delivered ranges, each guarded by its row count.
    fn delete_delivered(&self, cp: &Checkpoint) -> Result<(u32, u64), StoreError> {
        let (mut rows, mut bytes) = (0u32, 0u64);
        for range in &cp.deletes {
            let n = self.sql.run(
                "DELETE FROM relay_outbox WHERE seq >= ? AND seq <= ?",
                vec![int(range.first), int(range.last)],
            )?;
            if n != range.rows {
                return Err(StoreError::Guard("a delivered row changed"));
            }
            rows += n;
            bytes += range.bytes;
        }
        Ok((rows, bytes))
    }

    /// Moves every queued row of each target being parked to `relay_parked`
    /// and marks the target parked with its reason.
    fn park_targets(&self, changes: &TargetChanges, now_ms: u64) -> Result<Moved, StoreError> {
        let mut moved = Moved::default();
        for (target, reason) in &changes.parked {
            let t: SqlValue = target.as_str().into();
            let (rows, bytes) = self.count(
                "SELECT COUNT(*), COALESCE(SUM(bytes), 0) FROM relay_outbox WHERE target = ?",
                vec![t.clone()],
            )?;
            moved.writes += u64::from(self.sql.run(
                "INSERT INTO relay_parked (seq, target, at_ms, bytes, body) \
                 SELECT seq, target, at_ms, bytes, body FROM relay_outbox WHERE target = ?",
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

    /// Counts a failed cycle for each failed target; forgets the record of
    /// each that took a batch again.
    fn count_failures(&self, changes: &TargetChanges, now_ms: u64) -> Result<u64, StoreError> {
        let mut written = 0u64;
        for (target, error) in &changes.failed {
            written += u64::from(self.sql.run(
                "INSERT INTO relay_targets (target, failed_cycles, parked, first_failure_ms, last_failure_ms, \
                 last_error) VALUES (?, 1, 0, ?, ?, ?) ON CONFLICT(target) DO UPDATE SET \
                 failed_cycles = failed_cycles + 1, last_failure_ms = excluded.last_failure_ms, \
                 last_error = excluded.last_error",
                vec![target.as_str().into(), int(now_ms), int(now_ms), error.as_str().into()],
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

    /// Counts a fire whose checkpoint lost its guard.
    fn record_conflict(&self, report: &FireReport, last_alarm: Option<&str>) -> Result<(), StoreError> {
        let (pending, taken) = self.take_pending(1);
        let mut params =
            vec![int(u64::from(report.calls)), int(u64::from(last_alarm.is_some())), last_alarm.into()];
        params.extend(pending);
        let result = self.sql.run(
            concat!(
                "UPDATE relay_state SET conflicts = conflicts + 1, fires = fires + 1, calls = calls + ?, ",
                "alarms = alarms + ?, last_alarm = COALESCE(?, last_alarm), ",
                pending_set!(),
                " WHERE id = 1"
            ),
            params,
        );
        if result.is_err() {
            self.add_pending(taken);
        }
        result.map(|_| ())
    }
}
