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
//!
//! What an operator reads and repairs (watermark pages, a watermark set or
//! forgotten by hand, totals, key pages) is `inbox/pages.rs`.

#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]
#![deny(clippy::unreachable, clippy::todo, clippy::unimplemented)]

use std::collections::BTreeMap;

pub use durable_relay_protocol::wire::{KeyValue, KeysPage, Watermark, WatermarkPage};

use super::{int, schema, Sql, SqlValue, StoreError};
use crate::core::{
    decode_request, plan_apply, ApplyError, ApplyReply, ApplyRequest, Effects, Name, RelayHook, Sender,
    SourceId,
};

mod pages;

pub use pages::InboxTotals;

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
