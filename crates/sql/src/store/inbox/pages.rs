//! What an operator reads and repairs at a target: the watermark rows (all
//! of them, or a page), a watermark set or forgotten by hand, the totals
//! over every source, and the applied keys a page at a time. None of it is
//! on the apply's path.

use serde::{Deserialize, Serialize};

use super::{Inbox, KeyValue, KeysPage, Watermark, WatermarkPage, LEGACY_SOURCE_ID};
use crate::core::{Name, SourceId};
use crate::store::{int, Sql, StoreError};

/// A `relay_rh` row (source, id, watermark, applied rows, batches, rows
/// written) as a [`Watermark`].
fn watermark_row(r: &crate::store::Row) -> Result<Watermark, StoreError> {
    let id = r.text(1)?;
    Ok(Watermark {
        source: r.text(0)?,
        source_id: (id != LEGACY_SOURCE_ID).then_some(id),
        watermark: r.u64(2)?,
        applied_rows: r.u64(3)?,
        batches: r.u64(4)?,
        sql_rows_written: r.u64(5)?,
    })
}

/// Totals over every source a target applied rows from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct InboxTotals {
    /// Rows applied.
    pub applied_rows: u64,
    /// Batches that applied at least one row.
    pub batches: u64,
    /// SQLite rows written applying them.
    pub sql_rows_written: u64,
    /// Sources with a watermark here.
    pub sources: u64,
}

impl<S: Sql> Inbox<S> {
    /// Every watermark row, by source name, then id (the legacy row first).
    pub fn watermarks(&self) -> Result<Vec<Watermark>, StoreError> {
        let rows = self.sql.rows(
            "SELECT source, source_id, watermark, applied_rows, batches, sql_rows_written FROM relay_rh \
             ORDER BY source, source_id",
            vec![],
        )?;
        rows.iter().map(watermark_row).collect()
    }

    /// A page of watermark rows after the cursor `after` (a source name and
    /// its id, `None` for its legacy row), in the order of [`Inbox::watermarks`]:
    /// at most `limit` (1..=[`MAX_WATERMARKS_PER_PAGE`](crate::core::MAX_WATERMARKS_PER_PAGE))
    /// and [`MAX_PAGE_BYTES`](crate::core::MAX_PAGE_BYTES). A target can hear
    /// from thousands of sources, so no reply lists them all at once.
    pub fn watermarks_page(
        &self,
        after: Option<(&Name, Option<&SourceId>)>,
        limit: u32,
    ) -> Result<WatermarkPage, StoreError> {
        let limit = limit.clamp(1, crate::core::MAX_WATERMARKS_PER_PAGE);
        let (source, id, from_start) = match after {
            Some((source, id)) => (source.as_str(), id.map_or(LEGACY_SOURCE_ID, SourceId::as_str), 0),
            None => ("", LEGACY_SOURCE_ID, 1),
        };
        let rows = self.sql.rows(
            "SELECT source, source_id, watermark, applied_rows, batches, sql_rows_written FROM relay_rh \
             WHERE ? = 1 OR source > ? OR (source = ? AND source_id > ?) ORDER BY source, source_id LIMIT ?",
            vec![int(from_start), source.into(), source.into(), id.into(), int(u64::from(limit) + 1)],
        )?;
        let marks = rows.iter().map(watermark_row).collect::<Result<Vec<_>, _>>()?;
        let (watermarks, more) = crate::core::cut_page(marks, limit, crate::core::json_bytes);
        let next = watermarks.last().filter(|_| more).map(|w| match &w.source_id {
            Some(id) => format!("{}/{id}", w.source),
            None => w.source.clone(),
        });
        Ok(WatermarkPage { watermarks, next })
    }

    /// Sets this target's watermark for the sender `source` with `id`
    /// (`None`: the legacy row), as a fixture or a repair: rows at or below
    /// it will be skipped as duplicates.
    pub fn set_watermark(
        &self,
        source: &str,
        id: Option<&SourceId>,
        watermark: u64,
    ) -> Result<(), StoreError> {
        let id = id.map_or(LEGACY_SOURCE_ID, SourceId::as_str);
        self.sql.run(
            "INSERT INTO relay_rh (source, source_id, watermark, applied_rows, batches, sql_rows_written) \
             VALUES (?, ?, ?, 0, 0, 0) ON CONFLICT(source, source_id) DO UPDATE SET watermark = excluded.watermark",
            vec![source.into(), id.into(), int(watermark)],
        )?;
        Ok(())
    }

    /// Forgets this target's watermarks for the name `source`, whatever
    /// their ids (an explicit operator act: rows from a source of that name
    /// at or below them would apply again). Returns whether there was one.
    pub fn forget_watermark(&self, source: &str) -> Result<bool, StoreError> {
        Ok(self.sql.run("DELETE FROM relay_rh WHERE source = ?", vec![source.into()])? >= 1)
    }

    /// Totals over every source.
    pub fn totals(&self) -> Result<InboxTotals, StoreError> {
        let row = self.sql.first(
            "SELECT COALESCE(SUM(applied_rows), 0), COALESCE(SUM(batches), 0), \
             COALESCE(SUM(sql_rows_written), 0), COUNT(*) FROM relay_rh",
            vec![],
        )?;
        row.map_or(Ok(InboxTotals::default()), |r| {
            Ok(InboxTotals {
                applied_rows: r.u64(0)?,
                batches: r.u64(1)?,
                sql_rows_written: r.u64(2)?,
                sources: r.u64(3)?,
            })
        })
    }

    /// Keys starting with `prefix`, after `after`, ascending, at most
    /// `limit` (1..=[`MAX_KEYS_PER_PAGE`](crate::core::MAX_KEYS_PER_PAGE))
    /// and at most [`MAX_PAGE_BYTES`](crate::core::MAX_PAGE_BYTES) of keys
    /// and values. It reads the values' sizes first and then only the values
    /// the page holds.
    pub fn keys(&self, prefix: &str, after: &str, limit: u32) -> Result<KeysPage, StoreError> {
        let limit = limit.clamp(1, crate::core::MAX_KEYS_PER_PAGE);
        let sizes = self.sql.rows(
            "SELECT key, length(CAST(value AS BLOB)) FROM relay_kv WHERE key > ? AND substr(key, 1, length(?)) = ? \
             ORDER BY key LIMIT ?",
            vec![after.into(), prefix.into(), prefix.into(), int(u64::from(limit) + 1)],
        )?;
        let sizes = sizes
            .iter()
            .map(|r| {
                let key = KeyValue { key: r.text(0)?, value: "0".into() };
                // The pair as encoded, with its value in place of the one-byte stand-in.
                let bytes = (crate::core::json_bytes(&key) + r.u64(1)?).saturating_sub(1);
                Ok((key.key, bytes))
            })
            .collect::<Result<Vec<_>, StoreError>>()?;
        let (page, more) = crate::core::cut_page(sizes, limit, |(_, bytes)| *bytes);
        let Some((last, _)) = page.last() else { return Ok(KeysPage { keys: Vec::new(), next: None }) };
        let rows = self.sql.rows(
            "SELECT key, value FROM relay_kv WHERE key > ? AND key <= ? AND substr(key, 1, length(?)) = ? \
             ORDER BY key",
            vec![after.into(), last.as_str().into(), prefix.into(), prefix.into()],
        )?;
        let keys: Vec<KeyValue> = rows
            .iter()
            .map(|r| Ok(KeyValue { key: r.text(0)?, value: r.text(1)? }))
            .collect::<Result<_, StoreError>>()?;
        Ok(KeysPage { keys, next: more.then(|| last.clone()) })
    }

    /// The JSON text stored under `key`, if any.
    pub fn value(&self, key: &str) -> Result<Option<String>, StoreError> {
        let row = self.sql.first("SELECT value FROM relay_kv WHERE key = ?", vec![key.into()])?;
        row.map(|r| r.text(0)).transpose()
    }
}
