//! The target side's storage: applied keys and one watermark per source
//! (`rh`), and the one synchronous apply that checks the watermark, skips
//! duplicates, applies the rest (plus any hook effects) and advances the
//! watermark in a single transaction.
//!
//! Schema (component `relay_target`):
//!
//! ```sql
//! relay_kv (key TEXT PRIMARY KEY, value TEXT)   -- value: canonical JSON text
//! relay_rh (source TEXT, source_id TEXT, watermark, applied_rows, batches, sql_rows_written,
//!           claimed, PRIMARY KEY (source, source_id))
//! ```
//!
//! A source is its name and its object's id ([`SourceId`]): two classes or
//! two Workers may each have an object named `default`, and each keeps its
//! own watermark here. `source_id` is `''` ([`LEGACY_SOURCE_ID`]) for a
//! watermark written before ids existed (version 5 moved every row there)
//! and for a sender that sends no id (an older build still running), which
//! keeps using that row. The first identified sender of a name claims the
//! name, in the transaction of its first apply that writes: it takes over
//! the legacy row if there is one (the row takes its id and keeps its
//! watermark, so an upgrade never applies a row twice), and its row is
//! marked `claimed`. From then on a batch of that name without an id (the
//! same object rolled back to a build older than ids, or a batch such a
//! build sent that arrives late) applies against the claimer's watermark,
//! so a rollback after the upgrade applies nothing twice either. Another
//! identified sender of the name has a watermark of its own from 0.
//!
//! Version 3 drops two test-only tables that versions 1 and 2 created in
//! every target (the fault switch and the applied-sequence log); test
//! builds keep them under their own component (`crate::testing`). Version
//! 4 makes both tables WITHOUT ROWID, so an applied row costs two rows
//! written even when each call carries one: its key and the watermark.
//! Version 5 keys the watermark by (name, id). Version 6 marks the claims;
//! version 5 runs on it (see `SCHEMA`).
//!
//! Invariant: a source's watermark never moves back, and it moves only in
//! the transaction that applies the rows up to it.

#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]
#![deny(clippy::unreachable, clippy::todo, clippy::unimplemented)]

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub use durable_relay_protocol::wire::{KeyValue, KeysPage, Watermark, WatermarkPage};

use super::{int, schema, Sql, SqlValue, StoreError};
use crate::core::{
    decode_request, plan_apply, ApplyError, ApplyReply, ApplyRequest, Effects, Name, RelayHook, Sender,
    SourceId,
};

const COMPONENT: &str = "relay_target";

const MIGRATIONS: &[&[&str]] = &[
    &[
        "CREATE TABLE relay_kv (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
        "CREATE TABLE relay_rh (
        source TEXT PRIMARY KEY,
        watermark INTEGER NOT NULL,
        applied_rows INTEGER NOT NULL,
        batches INTEGER NOT NULL,
        sql_rows_written INTEGER NOT NULL
    )",
        "CREATE TABLE relay_target_faults (id INTEGER PRIMARY KEY CHECK (id = 1), reject INTEGER NOT NULL)",
        "CREATE TABLE relay_apply_log (source TEXT NOT NULL, seq INTEGER NOT NULL)",
    ],
    &["ALTER TABLE relay_target_faults ADD COLUMN delay_ms INTEGER NOT NULL DEFAULT 0"],
    &["DROP TABLE relay_target_faults", "DROP TABLE relay_apply_log"],
    // Version 4: keys and watermarks in WITHOUT ROWID tables, where the
    // primary key is the table: writing a key or a watermark writes one
    // b-tree row, not a table row and an index row.
    &[
        "CREATE TABLE relay_kv_v4 (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID",
        "INSERT INTO relay_kv_v4 (key, value) SELECT key, value FROM relay_kv",
        "DROP TABLE relay_kv",
        "ALTER TABLE relay_kv_v4 RENAME TO relay_kv",
        "CREATE TABLE relay_rh_v4 (
        source TEXT PRIMARY KEY,
        watermark INTEGER NOT NULL,
        applied_rows INTEGER NOT NULL,
        batches INTEGER NOT NULL,
        sql_rows_written INTEGER NOT NULL
    ) WITHOUT ROWID",
        "INSERT INTO relay_rh_v4 SELECT source, watermark, applied_rows, batches, sql_rows_written FROM relay_rh",
        "DROP TABLE relay_rh",
        "ALTER TABLE relay_rh_v4 RENAME TO relay_rh",
    ],
    // Version 5: one watermark per (name, id). Every watermark written
    // before ids existed becomes the legacy row of its name ('').
    &[
        "CREATE TABLE relay_rh_v5 (
        source TEXT NOT NULL,
        source_id TEXT NOT NULL,
        watermark INTEGER NOT NULL,
        applied_rows INTEGER NOT NULL,
        batches INTEGER NOT NULL,
        sql_rows_written INTEGER NOT NULL,
        PRIMARY KEY (source, source_id)
    ) WITHOUT ROWID",
        "INSERT INTO relay_rh_v5 SELECT source, '', watermark, applied_rows, batches, sql_rows_written FROM relay_rh",
        "DROP TABLE relay_rh",
        "ALTER TABLE relay_rh_v5 RENAME TO relay_rh",
    ],
    // Version 6: which identified sender of each name a sender without an
    // id (an older build, or one rolled back to) applies against: the one
    // that took over the name's legacy watermark, or the name's first. Only
    // adds a column with a default: version 5 runs on it. Where a name has
    // one identified row and no legacy row, that sender is taken to be it.
    &[
        "ALTER TABLE relay_rh ADD COLUMN claimed INTEGER NOT NULL DEFAULT 0",
        "UPDATE relay_rh SET claimed = 1 WHERE source_id != '' AND NOT EXISTS \
         (SELECT 1 FROM relay_rh o WHERE o.source = relay_rh.source AND o.source_id != relay_rh.source_id)",
    ],
];

/// The `source_id` of a watermark with no id: written before ids existed,
/// or by a sender that sends none.
pub const LEGACY_SOURCE_ID: &str = "";

/// The inbox's stored schema: version 6 only adds a column with a default
/// that version 5 never reads, so the release that wrote version 5 runs on
/// it.
pub(crate) const SCHEMA: schema::Schema =
    schema::Schema { component: COMPONENT, migrations: MIGRATIONS, required: 5 };

/// Key-value pairs per multi-row upsert (two parameters each).
const UPSERT_KEYS_PER_STATEMENT: usize = 50;
/// Keys per multi-key delete (one parameter each).
const DELETE_KEYS_PER_STATEMENT: usize = 100;

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

/// The watermark an apply checks and advances, and whose it is.
struct Found {
    /// Whose watermark: the name, and the id the row is kept under (the
    /// hook is told the same).
    sender: Sender,
    /// The watermark now (0 where none is kept).
    watermark: u64,
    /// What the first apply that writes claims for the sender.
    claim: Claim,
}

/// What an identified sender's first apply that writes claims: the name's
/// legacy watermark, or the name itself (no identified sender had it), so
/// that senders of the name without an id apply against its watermark.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Claim {
    /// Nothing: the sender has its row, or another sender claimed the name,
    /// or the sender has no id.
    No,
    /// The legacy row: it takes the sender's id and keeps its watermark.
    Legacy,
    /// The name: the sender's new row is the one senders without an id use.
    First,
}

/// Why an apply call failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApplyFailure {
    /// The batch is invalid (permanent: resending it cannot help).
    Rejected(ApplyError),
    /// The hook refused the batch (transient: its policy may change).
    Hook(String),
    /// Storage failed (transient).
    Unavailable(String),
}

/// A target's applied state over a SQLite database.
pub struct Inbox<S> {
    sql: S,
}

impl<S: Sql> Inbox<S> {
    /// Opens the inbox, creating or migrating its tables.
    pub fn open(sql: S) -> Result<Inbox<S>, StoreError> {
        schema::migrate_schema(&sql, &SCHEMA)?;
        Ok(Inbox { sql })
    }

    /// The database this inbox lives in (a hook may write its own tables
    /// through a clone: it runs inside the apply transaction).
    pub fn sql(&self) -> &S {
        &self.sql
    }

    /// Decodes an apply body and applies it.
    pub fn apply_body(&self, body: &str, hook: &impl RelayHook) -> Result<ApplyReply, ApplyFailure> {
        let request = decode_request(body).map_err(ApplyFailure::Rejected)?;
        self.apply(&request, hook)
    }

    /// Applies a validated batch in one transaction; see the module doc.
    pub fn apply(&self, request: &ApplyRequest, hook: &impl RelayHook) -> Result<ApplyReply, ApplyFailure> {
        let mut hook_error = None;
        let result = self.sql.transaction(|| {
            let found = self.lookup(&request.source, request.source_id.as_ref())?;
            let plan = plan_apply(found.watermark, request);
            let rows = plan.to_apply(request);
            if rows.is_empty() {
                return Ok(plan.reply(request));
            }
            let extra = hook.extra_effects(&found.sender, rows).map_err(|e| {
                hook_error = Some(e);
                StoreError::Aborted("the hook refused the batch".into())
            })?;
            let written = write_effects(&self.sql, rows.iter().map(|r| &r.effects).chain([&extra]))? + 1;
            let figures = [int(plan.watermark), int(rows.len() as u64), int(u64::from(written))];
            self.advance(&found, figures)?;
            Ok(plan.reply(request))
        });
        match (result, hook_error) {
            (Ok(reply), _) => Ok(reply),
            (Err(_), Some(e)) => Err(ApplyFailure::Hook(e)),
            (Err(e), None) => Err(ApplyFailure::Unavailable(e.to_string())),
        }
    }

    /// Writes the watermark `found` names (watermark, rows applied, rows
    /// written), claiming the legacy row first when `found` says so.
    fn advance(&self, found: &Found, figures: [SqlValue; 3]) -> Result<(), StoreError> {
        let source = found.sender.name.as_str();
        let id = found.sender.id.as_ref().map_or(LEGACY_SOURCE_ID, SourceId::as_str);
        if found.claim == Claim::Legacy {
            // The legacy row becomes this sender's, keeping its count.
            self.sql.run(
                "UPDATE relay_rh SET source_id = ?, claimed = 1 WHERE source = ? AND source_id = ?",
                vec![id.into(), source.into(), LEGACY_SOURCE_ID.into()],
            )?;
        }
        let mut params = vec![source.into(), id.into()];
        params.extend(figures);
        params.push(int(u64::from(found.claim == Claim::First)));
        self.sql.run(
            "INSERT INTO relay_rh (source, source_id, watermark, applied_rows, batches, sql_rows_written, claimed) \
             VALUES (?, ?, ?, ?, 1, ?, ?) ON CONFLICT(source, source_id) DO UPDATE SET \
             watermark = excluded.watermark, applied_rows = applied_rows + excluded.applied_rows, \
             batches = batches + 1, sql_rows_written = sql_rows_written + excluded.sql_rows_written",
            params,
        )?;
        Ok(())
    }

    /// The watermark a sender `source` with `id` applies against (see
    /// [`Found`]). An identified sender: its own row if it has one; else
    /// its name's legacy row, which its first apply that writes claims;
    /// else 0, and its first apply claims the name if no identified sender
    /// has. A sender without an id: the row of the identified sender that
    /// claimed its name, else the legacy row, else 0. One read, of the rows
    /// of that name that can answer.
    fn lookup(&self, source: &Name, id: Option<&SourceId>) -> Result<Found, StoreError> {
        let own = id.map_or(LEGACY_SOURCE_ID, SourceId::as_str);
        let rows = self.sql.rows(
            "SELECT source_id, watermark, claimed FROM relay_rh \
             WHERE source = ? AND (source_id = ? OR source_id = ? OR claimed = 1)",
            vec![source.as_str().into(), own.into(), LEGACY_SOURCE_ID.into()],
        )?;
        let mut mine = None;
        let mut legacy = None;
        let mut claimer = None;
        for r in &rows {
            let (row_id, watermark) = (r.text(0)?, r.u64(1)?);
            if r.u64(2)? == 1 && row_id != LEGACY_SOURCE_ID {
                claimer = Some((row_id.clone(), watermark));
            }
            if row_id == own && id.is_some() {
                mine = Some(watermark);
            } else if row_id == LEGACY_SOURCE_ID {
                legacy = Some(watermark);
            }
        }
        let sender = |id: Option<SourceId>| Sender { name: source.clone(), id };
        let Some(id) = id else {
            if let Some((claimer, watermark)) = claimer {
                let claimer = SourceId::new(claimer).map_err(|e| StoreError::Corrupt(e.to_string()))?;
                return Ok(Found { sender: sender(Some(claimer)), watermark, claim: Claim::No });
            }
            return Ok(Found { sender: sender(None), watermark: legacy.unwrap_or(0), claim: Claim::No });
        };
        let (watermark, claim) = match (mine, legacy, claimer) {
            (Some(w), _, _) => (w, Claim::No),
            (None, _, Some(_)) => (0, Claim::No),
            (None, Some(w), None) => (w, Claim::Legacy),
            (None, None, None) => (0, Claim::First),
        };
        Ok(Found { sender: sender(Some(id.clone())), watermark, claim })
    }

    /// This target's watermark for the sender `source` with `id` (`None`:
    /// a sender without an id): the one its next apply checks, so an
    /// identified sender that has not yet claimed its name's legacy row
    /// reads that row's (0 if there is none).
    pub fn watermark(&self, source: &Name, id: Option<&SourceId>) -> Result<u64, StoreError> {
        Ok(self.lookup(source, id)?.watermark)
    }

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

/// Writes the net effect of `effects` (in order) on each key: one upsert
/// or delete per distinct key. Returns rows written.
pub fn write_effects<'a>(
    sql: &impl Sql,
    effects: impl Iterator<Item = &'a Effects>,
) -> Result<u32, StoreError> {
    let mut net: BTreeMap<&str, Option<&str>> = BTreeMap::new();
    for e in effects {
        for (k, v) in &e.puts {
            net.insert(k, Some(v.as_str()));
        }
        for k in &e.deletes {
            net.insert(k, None);
        }
    }
    let puts: Vec<(&str, &str)> = net.iter().filter_map(|(k, v)| v.map(|v| (*k, v))).collect();
    let deletes: Vec<&str> = net.iter().filter(|(_, v)| v.is_none()).map(|(k, _)| *k).collect();
    let mut written = 0;
    for chunk in puts.chunks(UPSERT_KEYS_PER_STATEMENT) {
        let placeholders = vec!["(?, ?)"; chunk.len()].join(", ");
        let params = chunk.iter().flat_map(|(k, v)| [(*k).into(), (*v).into()]).collect();
        written += sql.run(
            &format!(
                "INSERT INTO relay_kv (key, value) VALUES {placeholders} \
                 ON CONFLICT(key) DO UPDATE SET value = excluded.value"
            ),
            params,
        )?;
    }
    for chunk in deletes.chunks(DELETE_KEYS_PER_STATEMENT) {
        let placeholders = vec!["?"; chunk.len()].join(", ");
        let params = chunk.iter().map(|k| (*k).into()).collect();
        written += sql.run(&format!("DELETE FROM relay_kv WHERE key IN ({placeholders})"), params)?;
    }
    Ok(written)
}
