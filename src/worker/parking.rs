//! Operator actions on a source's parked targets (list, read, redrive,
//! discard) and the horizon pruning of dedup records and discarded rows.
//! Every action is idempotent: repeating it changes nothing more.

#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]
#![deny(clippy::unreachable, clippy::todo, clippy::unimplemented)]

use serde::{Deserialize, Serialize};
use worker::SqlStorageValue;

use super::outbox::{Outbox, PENDING_SET};
use super::storage::{int, StoreError};
use crate::core::dedup::{next_prune_ms, PRUNE_BATCH_ROWS, PRUNE_STEPS_PER_ALARM};
use crate::core::ScanState;

/// Most parked rows one read returns.
pub const MAX_PARKED_ROWS_PER_PAGE: u32 = 500;

/// A parked (or failing) target as operators see it.
#[derive(Clone, Debug, Deserialize, Serialize)]
pub struct TargetReport {
    /// The target.
    pub target: String,
    /// Consecutive failed cycles (0 once parked).
    pub failed_cycles: u32,
    /// Whether it is parked.
    pub parked: u32,
    /// Why it was parked.
    pub reason: Option<String>,
    /// First failure of the current run, ms.
    pub first_failure_ms: Option<u64>,
    /// Latest failure, ms.
    pub last_failure_ms: Option<u64>,
    /// The latest failure's message.
    pub last_error: Option<String>,
    /// Parked rows (not discarded).
    pub rows: u64,
}

/// One parked row.
#[derive(Clone, Debug, Deserialize, Serialize)]
pub struct ParkedRow {
    /// Its original sequence (kept through redrive).
    pub seq: u64,
    /// Commit-time clock reading, ms.
    pub at_ms: u64,
    /// Encoded effects (JSON: `{"puts":[[key, value]..],"deletes":[..]}`).
    #[serde(rename = "effects", alias = "body", serialize_with = "super::http::verbatim_json")]
    pub body: String,
}

/// One page of a parked target's rows.
#[derive(Serialize)]
pub struct ParkedPage<'a> {
    /// The target.
    pub target: &'a str,
    /// Its parked rows, ascending.
    pub rows: Vec<ParkedRow>,
    /// The `after` of the next page, when this one is full.
    pub next: Option<u64>,
}

/// What an operator action did.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct ActionOutcome {
    /// Rows moved (redrive) or discarded.
    pub rows: u64,
    /// Whether the target was parked before the action.
    pub was_parked: bool,
}

impl Outbox {
    /// Targets that are parked or have failed cycles, with their records.
    pub fn target_reports(&self) -> Result<Vec<TargetReport>, StoreError> {
        self.db().rows(
            "SELECT t.target, t.failed_cycles, t.parked, t.reason, t.first_failure_ms, t.last_failure_ms, \
             t.last_error, (SELECT COUNT(*) FROM relay_parked p WHERE p.target = t.target \
             AND p.discarded_at_ms IS NULL) AS rows FROM relay_targets t ORDER BY t.target",
            vec![],
        )
    }

    /// Parked rows of `target` after `after`, ascending, at most `limit`.
    pub fn parked_rows(&self, target: &str, after: u64, limit: u32) -> Result<Vec<ParkedRow>, StoreError> {
        self.db().rows(
            "SELECT seq, at_ms, body FROM relay_parked WHERE target = ? AND seq > ? AND discarded_at_ms IS NULL \
             ORDER BY seq LIMIT ?",
            vec![target.into(), int(after), int(u64::from(limit.clamp(1, MAX_PARKED_ROWS_PER_PAGE)))],
        )
    }

    fn parked_count(&self, target: &str) -> Result<(u64, u64), StoreError> {
        #[derive(Deserialize)]
        struct C {
            n: u64,
            b: u64,
        }
        let c: Vec<C> = self.db().rows(
            "SELECT COUNT(*) AS n, COALESCE(SUM(bytes), 0) AS b FROM relay_parked \
             WHERE target = ? AND discarded_at_ms IS NULL",
            vec![target.into()],
        )?;
        Ok(c.first().map_or((0, 0), |c| (c.n, c.b)))
    }

    fn is_parked(&self, target: &str) -> Result<bool, StoreError> {
        Ok(self.parked_set()?.contains(target))
    }

    /// Puts `target`'s parked rows back into the outbox under their original
    /// sequences and unparks it. Writes a completed `rs` marker, so the
    /// next fire rescans from the head and any fire in flight loses its
    /// checkpoint guard.
    pub fn redrive(&self, target: &str) -> Result<ActionOutcome, StoreError> {
        self.db().transaction(|| {
            let was_parked = self.is_parked(target)?;
            let (rows, bytes) = self.parked_count(target)?;
            let t: SqlStorageValue = target.into();
            let mut written = u64::from(self.db().run(
                "INSERT INTO relay_outbox (seq, target, at_ms, bytes, body) SELECT seq, target, at_ms, bytes, body \
                 FROM relay_parked WHERE target = ? AND discarded_at_ms IS NULL",
                vec![t.clone()],
            )?);
            written += u64::from(
                self.db().run("DELETE FROM relay_parked WHERE target = ? AND discarded_at_ms IS NULL", vec![t.clone()])?,
            );
            written += u64::from(self.db().run("DELETE FROM relay_targets WHERE target = ?", vec![t])?);
            let state = self.state()?;
            let marker = ScanState::restart_marker(state.rs.as_deref(), state.os).encode();
            let (mut pending, _) = self.take_pending(written + 1);
            let mut params =
                vec![marker.as_str().into(), int(rows), int(bytes), int(rows), int(bytes)];
            params.append(&mut pending);
            self.db().run(
                &format!(
                    "UPDATE relay_state SET rs = ?, queued_rows = queued_rows + ?, queued_bytes = queued_bytes + ?, \
                     parked_rows = parked_rows - ?, parked_bytes = parked_bytes - ?, {PENDING_SET} WHERE id = 1"
                ),
                params,
            )?;
            Ok(ActionOutcome { rows, was_parked })
        })
    }

    /// Marks `target`'s parked rows discarded (kept until the discard
    /// horizon, then pruned) and unparks it.
    pub fn discard(&self, target: &str, now_ms: u64) -> Result<ActionOutcome, StoreError> {
        self.db().transaction(|| {
            let was_parked = self.is_parked(target)?;
            let (rows, bytes) = self.parked_count(target)?;
            let mut written = u64::from(self.db().run(
                "UPDATE relay_parked SET discarded_at_ms = ? WHERE target = ? AND discarded_at_ms IS NULL",
                vec![int(now_ms), target.into()],
            )?);
            written +=
                u64::from(self.db().run("DELETE FROM relay_targets WHERE target = ?", vec![target.into()])?);
            let (mut pending, _) = self.take_pending(written + 1);
            let mut params = vec![int(rows), int(bytes)];
            params.append(&mut pending);
            self.db().run(
                &format!(
                    "UPDATE relay_state SET parked_rows = parked_rows - ?, parked_bytes = parked_bytes - ?, \
                     {PENDING_SET} WHERE id = 1"
                ),
                params,
            )?;
            Ok(ActionOutcome { rows, was_parked })
        })
    }

    /// Deletes expired dedup records and discarded rows, in at most
    /// [`PRUNE_STEPS_PER_ALARM`] batches of [`PRUNE_BATCH_ROWS`] each.
    /// Writes nothing when nothing has expired. Returns rows pruned.
    pub fn prune(&self, now_ms: u64) -> Result<u64, StoreError> {
        let dedup_before = now_ms.saturating_sub(self.settings().dedup_horizon_ms);
        let discard_before = now_ms.saturating_sub(self.settings().discard_horizon_ms);
        let mut pruned = 0u64;
        for _ in 0..PRUNE_STEPS_PER_ALARM {
            let n = self.db().run(
                "DELETE FROM relay_dedup WHERE key IN (SELECT key FROM relay_dedup WHERE at_ms <= ? \
                 ORDER BY at_ms LIMIT ?)",
                vec![int(dedup_before), int(u64::from(PRUNE_BATCH_ROWS))],
            )?;
            let m = self.db().run(
                "DELETE FROM relay_parked WHERE seq IN (SELECT seq FROM relay_parked \
                 WHERE discarded_at_ms IS NOT NULL AND discarded_at_ms <= ? LIMIT ?)",
                vec![int(discard_before), int(u64::from(PRUNE_BATCH_ROWS))],
            )?;
            pruned += u64::from(n + m);
            if n < PRUNE_BATCH_ROWS && m < PRUNE_BATCH_ROWS {
                break;
            }
        }
        if pruned > 0 {
            let (mut pending, _) = self.take_pending(pruned + 1);
            let mut params = vec![int(now_ms)];
            params.append(&mut pending);
            self.db().run(
                &format!("UPDATE relay_state SET last_prune_ms = ?, {PENDING_SET} WHERE id = 1"),
                params,
            )?;
        }
        Ok(pruned)
    }

    /// Dedup records remembered.
    pub fn dedup_records(&self) -> Result<u64, StoreError> {
        #[derive(Deserialize)]
        struct C {
            n: u64,
        }
        let c: Vec<C> = self.db().rows("SELECT COUNT(*) AS n FROM relay_dedup", vec![])?;
        Ok(c.first().map_or(0, |c| c.n))
    }

    /// When an idle source should wake to prune, if it holds records that
    /// will expire: at the earliest expiry, but at most once per interval.
    pub fn idle_prune_at(&self, last_prune_ms: u64) -> Result<Option<u64>, StoreError> {
        #[derive(Deserialize)]
        struct M {
            d: Option<u64>,
            p: Option<u64>,
        }
        let m: Vec<M> = self.db().rows(
            "SELECT (SELECT MIN(at_ms) FROM relay_dedup) AS d, \
             (SELECT MIN(discarded_at_ms) FROM relay_parked WHERE discarded_at_ms IS NOT NULL) AS p",
            vec![],
        )?;
        let Some(m) = m.first() else { return Ok(None) };
        let s = self.settings();
        let due = [m.d.map(|d| d + s.dedup_horizon_ms), m.p.map(|p| p + s.discard_horizon_ms)]
            .into_iter()
            .flatten()
            .min();
        Ok(due.map(|d| next_prune_ms(d, 0, last_prune_ms)))
    }
}
