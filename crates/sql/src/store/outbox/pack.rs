//! Packed rows: one outbox row that holds several queued rows of one
//! enqueue, so a multi-row request costs one row written where it cost one
//! per row, and its delivery one more per fire that delivers from it
//! (the pack rewritten without its delivered rows), where it cost one per
//! row again.
//!
//! A pack is an outbox row whose `first_seq` is set:
//!
//! - `seq` is the newest sequence it was written with, `first_seq` the
//!   oldest, and `target` is [`PACK_TARGET`], which no valid name is;
//! - `body` is a JSON array of its rows, ascending, each
//!   `[seq, target, at_ms, due_ms, bytes, body]` (the row's body as a JSON
//!   string, so it comes back byte for byte);
//! - `bytes` is the sum of its rows' `bytes` (what the gauges count).
//!
//! Invariants: every row a pack holds has `first_seq <= seq <= pack.seq`;
//! packs' ranges never overlap (each is one enqueue's, and rows only leave
//! a pack); a pack holds at least one row; `pack.seq - first_seq` is less
//! than [`MAX_ROWS_PER_ENQUEUE`]. Rows leave a pack when they are
//! delivered (the checkpoint rewrites it, or removes it when it is empty)
//! and when their target is parked (they become plain rows first, see
//! [`Outbox::unpack_target`]). Every reader of queued rows reads packs
//! through [`QUEUED_ROWS`] or reads their rows itself.
//!
//! Writing packs is a setting ([`SourceConfig::pack_rows`]; a Worker's
//! configuration turns it on unless `RELAY_PACK_ROWS=off`, as the release
//! before it reads packs). A build that does not know packs must never run
//! on storage that holds one, so the first pack an instance writes raises
//! the schema version such a build requires (see `schema.rs`), and a
//! rollback to it stops with a clear error instead of sending a pack as a
//! row.
//!
//! [`SourceConfig::pack_rows`]: durable_relay_protocol::wire::SourceConfig::pack_rows

use serde_json::Value;

use super::{int, Outbox, Sql, SqlValue, StoreError};
use crate::core::{DeleteRange, StoredRow, MAX_ROWS_PER_ENQUEUE};

/// A pack's `target` column: not a valid target name, so no query for a
/// target's rows matches a pack.
pub(crate) const PACK_TARGET: &str = "*";

/// The fewest queued rows an enqueue packs. A pack costs two rows written
/// (the row and its index entry) to insert and two to remove, plus one per
/// fire that delivers part of it: two rows cost what they cost one by one
/// when one fire delivers both, and every row past them saves two.
pub const PACK_ROWS_MIN: u32 = 2;

/// The schema version a build must know to run on storage holding a pack.
pub(crate) const PACKS_REQUIRED_VERSION: u32 = 13;

/// Every queued row, packs unpacked, as a subquery with the outbox's
/// columns `seq, target, at_ms, bytes, body, due_ms` (tombstones left out).
/// For the readers that look at rows by target or at all of them; the hot
/// path reads packs in ranges of sequences instead.
pub(crate) const QUEUED_ROWS: &str = "(SELECT seq, target, at_ms, bytes, body, due_ms FROM relay_outbox \
     WHERE target != '' AND first_seq IS NULL UNION ALL \
     SELECT j.value ->> 0, j.value ->> 1, j.value ->> 2, j.value ->> 4, j.value ->> 5, j.value ->> 3 \
     FROM relay_outbox p, json_each(p.body) j WHERE p.first_seq IS NOT NULL)";

/// The `WHERE` terms that select the packs that may hold a row in
/// `(after, through]`: binds `after`, `through`, `through` (the last bounds
/// the index scan: no pack spans more than one enqueue's rows).
pub(crate) fn packs_overlapping() -> String {
    format!(
        "p.first_seq IS NOT NULL AND p.seq > ? AND p.first_seq <= ? AND p.seq <= ? + {MAX_ROWS_PER_ENQUEUE}"
    )
}

/// A pack as read: its key and its rows.
#[derive(Debug)]
struct Pack {
    /// Its `seq`: the newest sequence it was written with.
    seq: u64,
    /// Its rows, ascending.
    rows: Vec<StoredRow>,
}

/// `rows` as a pack's body.
pub(crate) fn encode(rows: &[StoredRow]) -> String {
    let items: Vec<Value> = rows
        .iter()
        .map(|r| serde_json::json!([r.seq, r.target, r.at_ms, r.due_ms, r.body.len() as u64, r.body]))
        .collect();
    Value::Array(items).to_string()
}

/// A pack's body as rows; corrupt when it is not what [`encode`] writes.
fn decode(seq: u64, body: &str) -> Result<Vec<StoredRow>, StoreError> {
    let corrupt = |why: &str| StoreError::Corrupt(format!("pack {seq}: {why}"));
    let items: Vec<(u64, String, u64, u64, u64, String)> =
        serde_json::from_str(body).map_err(|e| corrupt(&e.to_string()))?;
    let mut rows = Vec::with_capacity(items.len());
    for (row_seq, target, at_ms, due_ms, bytes, body) in items {
        if bytes != body.len() as u64
            || row_seq > seq
            || rows.last().is_some_and(|r: &StoredRow| r.seq >= row_seq)
        {
            return Err(corrupt("a row out of order, past the pack or of the wrong size"));
        }
        rows.push(StoredRow { seq: row_seq, target, at_ms, due_ms, body });
    }
    Ok(rows)
}

/// A pack's columns in the order `seq, target, at_ms, bytes, body, due_ms,
/// first_seq`. Invariant: `rows` is ascending and not empty.
pub(crate) fn pack_values(rows: &[StoredRow]) -> [SqlValue; 7] {
    let (first, last) = (&rows[0], &rows[rows.len() - 1]);
    let bytes: u64 = rows.iter().map(|r| r.body.len() as u64).sum();
    [
        int(last.seq),
        PACK_TARGET.into(),
        int(first.at_ms),
        int(bytes),
        encode(rows).into(),
        int(0),
        int(first.seq),
    ]
}

/// Whether `seq` lies in one of `ranges`.
fn delivered(ranges: &[DeleteRange], seq: u64) -> Option<usize> {
    ranges.iter().position(|r| r.first <= seq && seq <= r.last)
}

impl<S: Sql> Outbox<S> {
    /// Writes `rows` (one enqueue's queued rows, ascending) as one pack, over
    /// the tombstone `slot` when there is one. Answers the rows written.
    pub(super) fn write_pack(&self, rows: &[StoredRow], slot: Option<u64>) -> Result<u32, StoreError> {
        let mut written = self.require_pack_version()?;
        let values = pack_values(rows);
        written += match slot {
            Some(slot) => {
                // The guard counts the rows changed (returned), not the rows
                // written: Durable Objects bill the pack's new entry in the
                // partial index as a second row written.
                let done = self.sql.exec(
                    "UPDATE relay_outbox SET seq = ?, target = ?, at_ms = ?, bytes = ?, body = ?, due_ms = ?, \
                     first_seq = ? WHERE seq = ? AND target = '' RETURNING seq",
                    values.into_iter().chain([int(slot)]).collect(),
                )?;
                if done.rows.len() != 1 {
                    return Err(StoreError::Guard("the tombstone changed during enqueue"));
                }
                done.written
            }
            None => self.sql.run(
                "INSERT INTO relay_outbox (seq, target, at_ms, bytes, body, due_ms, first_seq) \
                 VALUES (?, ?, ?, ?, ?, ?, ?)",
                values.to_vec(),
            )?,
        };
        Ok(written)
    }

    /// Raises the required schema version to [`PACKS_REQUIRED_VERSION`],
    /// once per instance: from then on a build that does not know packs
    /// refuses this storage. Answers the rows written.
    fn require_pack_version(&self) -> Result<u32, StoreError> {
        if self.memory.packs_required.get() {
            return Ok(0);
        }
        let n = self.sql.run(
            "UPDATE relay_schema SET version = ? WHERE component = ? AND version < ?",
            vec![
                int(u64::from(PACKS_REQUIRED_VERSION)),
                super::COMPONENT.into(),
                int(u64::from(PACKS_REQUIRED_VERSION)),
            ],
        )?;
        self.memory.packs_required.set(true);
        Ok(n)
    }

    /// Removes the rows of `ranges` that packs hold: rewrites each pack
    /// that keeps rows, removes each that keeps none (a tombstone instead
    /// when `tombstone_newest` and it is the outbox's newest row, `newest`).
    /// Answers the rows removed per range, their bytes per range, and the
    /// rows written.
    pub(super) fn remove_from_packs(
        &self,
        ranges: &[DeleteRange],
        newest: Option<u64>,
        tombstone_newest: bool,
    ) -> Result<(Vec<u32>, u64), StoreError> {
        let mut removed = vec![0u32; ranges.len()];
        let (Some(lo), Some(hi)) =
            (ranges.iter().map(|r| r.first).min(), ranges.iter().map(|r| r.last).max())
        else {
            return Ok((removed, 0));
        };
        let mut written = 0u64;
        for pack in self.packs_between(lo.saturating_sub(1), hi)? {
            let (gone, kept): (Vec<StoredRow>, Vec<StoredRow>) =
                pack.rows.into_iter().partition(|r| delivered(ranges, r.seq).is_some());
            if gone.is_empty() {
                continue;
            }
            for r in &gone {
                if let Some(i) = delivered(ranges, r.seq) {
                    removed[i] += 1;
                }
            }
            written += u64::from(self.rewrite_pack(
                pack.seq,
                &kept,
                tombstone_newest && newest == Some(pack.seq),
            )?);
        }
        Ok((removed, written))
    }

    /// Stores `kept` as pack `seq`'s rows: the pack rewritten, or, with
    /// none kept, removed (made the tombstone when `tombstone`). Answers
    /// the rows written.
    fn rewrite_pack(&self, seq: u64, kept: &[StoredRow], tombstone: bool) -> Result<u32, StoreError> {
        // Each statement returns the row it changed: the guard counts those,
        // not the rows written, which Durable Objects count with index
        // entries.
        let done = if !kept.is_empty() {
            let bytes: u64 = kept.iter().map(|r| r.body.len() as u64).sum();
            self.sql.exec(
                "UPDATE relay_outbox SET body = ?, bytes = ? WHERE seq = ? AND first_seq IS NOT NULL RETURNING seq",
                vec![encode(kept).into(), int(bytes), int(seq)],
            )?
        } else if tombstone {
            self.sql.exec(
                "UPDATE relay_outbox SET target = '', bytes = 0, body = '', first_seq = NULL \
                 WHERE seq = ? AND first_seq IS NOT NULL RETURNING seq",
                vec![int(seq)],
            )?
        } else {
            self.sql.exec(
                "DELETE FROM relay_outbox WHERE seq = ? AND first_seq IS NOT NULL RETURNING seq",
                vec![int(seq)],
            )?
        };
        if done.rows.len() != 1 {
            return Err(StoreError::Guard("a pack changed while its rows were removed"));
        }
        Ok(done.written)
    }

    /// The packs that may hold a row in `(after, through]`, ascending.
    fn packs_between(&self, after: u64, through: u64) -> Result<Vec<Pack>, StoreError> {
        let rows = self.sql.rows(
            &format!("SELECT p.seq, p.body FROM relay_outbox p WHERE {} ORDER BY p.seq", packs_overlapping()),
            vec![int(after), int(through), int(through)],
        )?;
        rows.iter()
            .map(|r| {
                let seq = r.u64(0)?;
                Ok(Pack { seq, rows: decode(seq, &r.text(1)?)? })
            })
            .collect()
    }

    /// Makes `target`'s packed rows plain rows, so that what moves a
    /// target's rows by their `target` column moves them all. A pack whose
    /// own sequence is one of them is unpacked whole (a plain row takes that
    /// sequence). Run inside the transaction that moves them, which folds
    /// `os` into the state row, so a pack removed here needs no tombstone.
    /// Answers the rows written.
    pub(crate) fn unpack_target(&self, target: &str) -> Result<u64, StoreError> {
        let packs = self.sql.rows(
            "SELECT p.seq, p.body FROM relay_outbox p WHERE p.first_seq IS NOT NULL AND EXISTS \
             (SELECT 1 FROM json_each(p.body) j WHERE j.value ->> 1 = ?) ORDER BY p.seq",
            vec![target.into()],
        )?;
        let mut written = 0u64;
        for r in &packs {
            let seq = r.u64(0)?;
            let rows = decode(seq, &r.text(1)?)?;
            let whole = rows.iter().any(|row| row.seq == seq && row.target == target);
            let (out, kept): (Vec<StoredRow>, Vec<StoredRow>) =
                rows.into_iter().partition(|row| whole || row.target == target);
            written += u64::from(self.rewrite_pack(seq, &kept, false)?);
            for chunk in out.chunks(super::rows::INSERT_ROWS_PER_STATEMENT) {
                written += u64::from(self.insert_rows("relay_outbox", chunk)?);
            }
        }
        Ok(written)
    }
}

impl<S: Sql> Outbox<S> {
    /// Checks every pack against the invariants in this module's doc: its
    /// body decodes, it holds a row, its rows lie in its range and its
    /// bytes are theirs. Answers the first breach.
    pub(super) fn audit_packs(&self) -> Result<Option<String>, StoreError> {
        let packs = self.sql.rows(
            "SELECT seq, first_seq, bytes, body FROM relay_outbox WHERE first_seq IS NOT NULL",
            vec![],
        )?;
        for r in &packs {
            let (seq, first, bytes) = (r.u64(0)?, r.u64(1)?, r.u64(2)?);
            let rows = match decode(seq, &r.text(3)?) {
                Ok(rows) => rows,
                Err(e) => return Ok(Some(e.to_string())),
            };
            let sum: u64 = rows.iter().map(|row| row.body.len() as u64).sum();
            let in_range = rows.iter().all(|row| row.seq >= first);
            let span_ok = seq - first < u64::from(MAX_ROWS_PER_ENQUEUE) && first <= seq;
            if rows.is_empty() || !in_range || !span_ok || sum != bytes {
                return Ok(Some(format!(
                    "pack {seq} (from {first}, {bytes} bytes) holds {} rows unlike it",
                    rows.len()
                )));
            }
        }
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(seq: u64, target: &str, body: &str) -> StoredRow {
        StoredRow { seq, target: target.into(), at_ms: 7, due_ms: seq * 10, body: body.into() }
    }

    #[test]
    fn a_pack_body_gives_back_its_rows_byte_for_byte() {
        let rows = vec![row(3, "a", r#"{"puts":[["k", "é\u0000"]]}"#), row(5, "b", "{ }")];
        assert_eq!(decode(5, &encode(&rows)).unwrap(), rows);
    }

    #[test]
    fn a_pack_body_out_of_order_or_past_its_key_is_corrupt() {
        let rows = vec![row(5, "a", "{}"), row(3, "b", "{}")];
        assert!(matches!(decode(5, &encode(&rows)), Err(StoreError::Corrupt(_))));
        assert!(matches!(decode(4, &encode(&[row(5, "a", "{}")])), Err(StoreError::Corrupt(_))));
        assert!(matches!(decode(5, r#"[[5,"a",1,0,9,"{}"]]"#), Err(StoreError::Corrupt(_))), "wrong size");
        assert!(matches!(decode(5, "{"), Err(StoreError::Corrupt(_))));
    }
}
