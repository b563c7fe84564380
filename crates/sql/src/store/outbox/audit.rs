//! The outbox's invariants (see the module doc of `outbox`), checked on the
//! real tables. The simulator runs this after every fire; the test builds
//! of the Worker serve it so end-to-end tests run it after every test.

use super::pack::QUEUED_ROWS;
use super::{int, Outbox, Sql, StoreError};
use crate::core::{Name, ScanState};

/// One broken invariant, described.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuditFailure(pub String);

impl std::fmt::Display for AuditFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "outbox audit: {}", self.0)
    }
}

impl<S: Sql> Outbox<S> {
    /// Checks every invariant; the first breach is the error.
    pub fn audit(&self) -> Result<Result<(), AuditFailure>, StoreError> {
        let checks = [
            Self::audit_counters as fn(&Self) -> Result<Option<String>, StoreError>,
            Self::audit_kept_row,
            Self::audit_parked_targets,
            Self::audit_sequences,
            Self::audit_cycle,
            Self::audit_map_stored,
            Self::audit_packs,
        ];
        for check in checks {
            if let Some(breach) = check(self)? {
                return Ok(Err(AuditFailure(breach)));
            }
        }
        Ok(Ok(()))
    }

    /// A delivered row kept for the next enqueue (see `handover.rs`) is
    /// still in the outbox as it was delivered, past the folded `os` (a
    /// state read, as the counters' check before this made, forgets one
    /// another instance's checkpoint took).
    fn audit_kept_row(&self) -> Result<Option<String>, StoreError> {
        let Some(kept) = self.memory.delivered.get() else { return Ok(None) };
        let row = self.sql.first(
            "SELECT COUNT(*), (SELECT os FROM relay_state WHERE id = 1) FROM relay_outbox \
             WHERE seq = ? AND bytes = ? AND target != '' AND first_seq IS NULL",
            vec![int(kept.seq), int(kept.bytes)],
        )?;
        let (found, folded) = row.map_or(Ok((0, 0)), |r| Ok::<_, StoreError>((r.u64(0)?, r.u64(1)?)))?;
        let missing = found != 1 || kept.seq <= folded;
        let breach = || {
            format!("the delivered row {} kept for the next enqueue is not in the outbox's tail", kept.seq)
        };
        Ok(missing.then(breach))
    }

    /// The gauges (the state row with its tail folded in) equal `COUNT` and
    /// `SUM` over the live rows (a kept delivered row is not one), and
    /// every row's `bytes` is its body's length.
    fn audit_counters(&self) -> Result<Option<String>, StoreError> {
        let state = self.state()?;
        let kept = self.memory.delivered.get().map_or(0, |d| d.seq);
        let queued = self.count(
            &format!("SELECT COUNT(*), COALESCE(SUM(bytes), 0) FROM {QUEUED_ROWS} WHERE seq != ?"),
            vec![int(kept)],
        )?;
        let parked = self.count(
            "SELECT COUNT(*), COALESCE(SUM(bytes), 0) FROM relay_parked WHERE discarded_at_ms IS NULL",
            vec![],
        )?;
        if queued != (state.queued_rows, state.queued_bytes) {
            return Ok(Some(format!(
                "queued_rows/queued_bytes are {}/{} but the outbox holds {}/{}",
                state.queued_rows, state.queued_bytes, queued.0, queued.1
            )));
        }
        if parked != (state.parked_rows, state.parked_bytes) {
            return Ok(Some(format!(
                "parked_rows/parked_bytes are {}/{} but the parked list holds {}/{}",
                state.parked_rows, state.parked_bytes, parked.0, parked.1
            )));
        }
        let wrong = self.sql.first(
            &format!(
                "SELECT seq FROM (SELECT seq, bytes, body FROM {QUEUED_ROWS} UNION ALL \
                 SELECT seq, bytes, body FROM relay_parked) WHERE bytes != length(CAST(body AS BLOB)) LIMIT 1"
            ),
            vec![],
        )?;
        Ok(wrong.map(|r| format!("row {:?} records a wrong byte count", r.u64(0))))
    }

    /// A parked target has nothing queued, and its record says parked.
    fn audit_parked_targets(&self) -> Result<Option<String>, StoreError> {
        let row = self.sql.first(
            &format!(
                "SELECT t.target FROM relay_targets t WHERE t.parked = 1 AND \
                 EXISTS (SELECT 1 FROM {QUEUED_ROWS} o WHERE o.target = t.target) LIMIT 1"
            ),
            vec![],
        )?;
        if let Some(r) = row {
            return Ok(Some(format!("parked target {} has queued rows", r.text(0)?)));
        }
        let row = self.sql.first(
            "SELECT target FROM relay_targets WHERE parked NOT IN (0, 1) OR (parked = 1 AND failed_cycles != 0) \
             OR (parked = 0 AND failed_cycles < 1) LIMIT 1",
            vec![],
        )?;
        Ok(row.map(|r| format!("target record {:?} is inconsistent", r.text(0))))
    }

    /// The folded `os` is at most the effective one; at most one tombstone
    /// exists and it is the outbox's newest row.
    fn audit_sequences(&self) -> Result<Option<String>, StoreError> {
        let folded = self.stored()?.os;
        let os = self.state()?.os;
        if folded > os {
            return Ok(Some(format!("the folded os {folded} is past the effective os {os}")));
        }
        let tombstones = self.sql.rows("SELECT seq FROM relay_outbox WHERE target = ''", vec![])?;
        let newest = self.sql.first("SELECT MAX(seq) FROM relay_outbox", vec![])?;
        let newest = newest.map(|r| r.opt_u64(0)).transpose()?.flatten();
        match tombstones.as_slice() {
            [] => Ok(None),
            [one] if Some(one.u64(0)?) == newest => Ok(None),
            _ => Ok(Some(format!("{} tombstones; the outbox's newest row is {newest:?}", tombstones.len()))),
        }
    }

    /// The state row's `map_stored` says whether `relay_partition` holds a
    /// row: an unrouted enqueue consults the fence only where it is set, so
    /// a flag left unset past a stored map would let one past it.
    fn audit_map_stored(&self) -> Result<Option<String>, StoreError> {
        let flagged = self.stored()?.map_stored;
        let row = self.sql.first("SELECT EXISTS (SELECT 1 FROM relay_partition)", vec![])?;
        let stored = row.map_or(Ok(0), |r| r.u64(0))? != 0;
        Ok((flagged != stored).then(|| {
            format!("the state row's map_stored is {flagged} but relay_partition holds a row: {stored}")
        }))
    }

    /// A stored `rs` decodes, ends at or before `os`, and while its cycle is
    /// active every queued row at or below the cursor that is due belongs to
    /// a failing target (passed over) or one the `rs` lists as blocked.
    fn audit_cycle(&self) -> Result<Option<String>, StoreError> {
        let state = self.state()?;
        let Some(text) = state.rs else { return Ok(None) };
        let scan = match ScanState::decode(&text) {
            Ok(scan) => scan,
            Err(e) => return Ok(Some(e.to_string())),
        };
        if scan.cycle_end > state.os {
            return Ok(Some(format!("rs cycle_end {} is past os {}", scan.cycle_end, state.os)));
        }
        if scan.is_complete() {
            return Ok(None);
        }
        let rows = self.sql.rows(
            &format!(
                "SELECT o.seq, o.target FROM {QUEUED_ROWS} o WHERE o.seq <= ? AND o.due_ms <= ? \
                 AND NOT EXISTS (SELECT 1 FROM relay_targets t WHERE t.target = o.target AND t.parked = 0 \
                 AND t.failed_cycles > 0) ORDER BY o.seq"
            ),
            vec![super::int(scan.cursor), super::int(scan.clock_ms)],
        )?;
        for r in rows {
            let target = r.text(1)?;
            if !Name::new(target.clone()).is_ok_and(|n| scan.is_blocked(&n)) {
                return Ok(Some(format!(
                    "row {} is at or below cursor {} but its target {target} is neither failing nor blocked",
                    r.u64(0)?,
                    scan.cursor
                )));
            }
        }
        Ok(None)
    }
}
