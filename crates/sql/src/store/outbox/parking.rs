//! Operator actions on a source's parked targets: list, read, redrive,
//! discard. Each is idempotent: repeating it changes nothing more.

use super::ledger::StateWrite;
use super::{int, ActionOutcome, Outbox, Sql, SqlValue, StoreError, TargetPage, TargetReport};
use crate::core::{Failing, ScanState};

/// Which target records a page lists.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TargetFilter {
    /// Parked and failing.
    All,
    /// Parked only.
    Parked,
    /// Failing (not parked) only.
    Failing,
}

/// A `relay_targets` row (with its parked-row count) as a report.
fn report(r: &crate::store::Row) -> Result<TargetReport, StoreError> {
    let (failed_cycles, parked, last_failure_ms) = (r.u32(1)?, r.u64(2)? != 0, r.opt_u64(5)?);
    let retry_after_ms = r.opt_u64(8)?.unwrap_or(0);
    let retry_at_ms = match (parked, last_failure_ms) {
        (false, Some(last)) if failed_cycles > 0 => {
            Some(Failing { cycles: failed_cycles, last_failure_ms: last, retry_after_ms }.retry_at_ms())
        }
        _ => None,
    };
    Ok(TargetReport {
        target: r.text(0)?,
        failed_cycles,
        parked,
        reason: r.opt_text(3)?,
        first_failure_ms: r.opt_u64(4)?,
        last_failure_ms,
        last_error: r.opt_text(6)?,
        rows: r.u64(7)?,
        retry_at_ms,
    })
}

/// A count as a signed gauge change.
fn signed(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

impl<S: Sql> Outbox<S> {
    /// A page of the target records `which` selects, in name order after
    /// `after`: at most `limit` (1..=[`MAX_TARGETS_PER_PAGE`]) and at most
    /// [`MAX_PAGE_BYTES`](crate::core::MAX_PAGE_BYTES) of records. Reads the
    /// page's records and each listed parked target's rows (by index), never
    /// the others.
    ///
    /// [`MAX_TARGETS_PER_PAGE`]: crate::core::MAX_TARGETS_PER_PAGE
    pub fn target_reports(
        &self,
        which: TargetFilter,
        after: &str,
        limit: u32,
    ) -> Result<TargetPage, StoreError> {
        self.flush_delivered()?;
        let limit = limit.clamp(1, crate::core::MAX_TARGETS_PER_PAGE);
        let filter = match which {
            TargetFilter::All => "",
            TargetFilter::Parked => "t.parked = 1 AND",
            TargetFilter::Failing => "t.parked = 0 AND",
        };
        let rows = self.sql.rows(
            &format!(
                "SELECT t.target, t.failed_cycles, t.parked, t.reason, t.first_failure_ms, t.last_failure_ms, \
                 t.last_error, (SELECT COUNT(*) FROM relay_parked p WHERE p.target = t.target \
                 AND p.discarded_at_ms IS NULL), t.retry_after_ms FROM relay_targets t WHERE {filter} t.target > ? \
                 ORDER BY t.target LIMIT ?"
            ),
            vec![after.into(), int(u64::from(limit) + 1)],
        )?;
        let targets = rows.iter().map(report).collect::<Result<Vec<_>, _>>()?;
        let (targets, more) = crate::core::cut_page(targets, limit, crate::core::json_bytes);
        let next = if more { targets.last().map(|t| t.target.clone()) } else { None };
        Ok(TargetPage { targets, next })
    }

    fn parked_count(&self, target: &str) -> Result<(u64, u64), StoreError> {
        self.count(
            "SELECT COUNT(*), COALESCE(SUM(bytes), 0) FROM relay_parked WHERE target = ? AND discarded_at_ms IS NULL",
            vec![target.into()],
        )
    }

    /// Puts `target`'s parked rows back into the outbox under their original
    /// sequences and unparks it, in one transaction. Writes a completed `rs`
    /// marker, so the next fire rescans from the head (no row returns below
    /// an active cursor) and any fire in flight loses its checkpoint guard.
    pub fn redrive(&self, target: &str) -> Result<ActionOutcome, StoreError> {
        self.flush_delivered()?;
        self.sql.transaction(|| {
            let (stored, tail) = self.stored_and_tail()?;
            let was_parked = self.is_parked(target)?;
            let (rows, bytes) = self.parked_count(target)?;
            let t: SqlValue = target.into();
            // The rows come back below os, maybe above a tombstone, which must
            // stay the newest row; this write folds os, so it is not needed.
            let mut written = match self.tombstone()? {
                Some(seq) => {
                    u64::from(self.sql.run("DELETE FROM relay_outbox WHERE seq = ?", vec![int(seq)])?)
                }
                None => 0,
            };
            written += u64::from(self.sql.run(
                "INSERT INTO relay_outbox (seq, target, at_ms, bytes, body, due_ms) \
                 SELECT seq, target, at_ms, bytes, body, due_ms \
                 FROM relay_parked WHERE target = ? AND discarded_at_ms IS NULL",
                vec![t.clone()],
            )?);
            written += u64::from(self.sql.run(
                "DELETE FROM relay_parked WHERE target = ? AND discarded_at_ms IS NULL",
                vec![t.clone()],
            )?);
            written += u64::from(self.sql.run("DELETE FROM relay_targets WHERE target = ?", vec![t])?);
            let marker = ScanState::restart_marker(stored.rs.as_deref(), tail.os).encode();
            let (r, b) = (signed(rows), signed(bytes));
            let write = StateWrite {
                rs: Some(&marker),
                queued: (r, b),
                parked: (-r, -b),
                writes: written,
                ..StateWrite::default()
            };
            self.write_state(&tail, &write)?;
            Ok(ActionOutcome { rows, was_parked })
        })
    }

    /// Marks `target`'s parked rows discarded (kept until the discard
    /// horizon, then pruned) and unparks it, in one transaction. A parked
    /// target owes nothing afterwards (it had no queued rows), so its delay
    /// hold is dropped with it: a later row waits for nothing discarded. A
    /// target that is failing but not parked keeps its record, which passes
    /// it over for the rest of the cycle; it has nothing to discard.
    pub fn discard(&self, target: &str, now_ms: u64) -> Result<ActionOutcome, StoreError> {
        self.flush_delivered()?;
        self.note_time(now_ms);
        self.sql.transaction(|| {
            let (_, tail) = self.stored_and_tail()?;
            let was_parked = self.is_parked(target)?;
            let (rows, bytes) = self.parked_count(target)?;
            let mut written = u64::from(self.sql.run(
                "UPDATE relay_parked SET discarded_at_ms = ? WHERE target = ? AND discarded_at_ms IS NULL",
                vec![int(now_ms), target.into()],
            )?);
            if was_parked {
                written +=
                    u64::from(self.sql.run(
                        "DELETE FROM relay_targets WHERE target = ? AND parked = 1",
                        vec![target.into()],
                    )?);
                written +=
                    u64::from(self.sql.run("DELETE FROM relay_holds WHERE target = ?", vec![target.into()])?);
            }
            let write = StateWrite {
                parked: (-signed(rows), -signed(bytes)),
                discarded: rows,
                writes: written,
                ..StateWrite::default()
            };
            self.write_state(&tail, &write)?;
            Ok(ActionOutcome { rows, was_parked })
        })
    }

    /// Discarded rows still kept (until their horizon).
    /// Discarded rows still kept, counted up to
    /// [`STATUS_COUNT_MAX`](crate::core::STATUS_COUNT_MAX).
    pub fn discarded_rows(&self) -> Result<u64, StoreError> {
        let row = self.sql.first(
            "SELECT COUNT(*) FROM (SELECT 1 FROM relay_parked WHERE discarded_at_ms IS NOT NULL LIMIT ?)",
            vec![int(u64::from(crate::core::STATUS_COUNT_MAX))],
        )?;
        row.map_or(Ok(0), |r| r.u64(0))
    }
}
