//! The target side's SQLite storage: applied keys and one watermark per
//! source, and the one synchronous apply that checks the watermark, skips
//! duplicates, applies the rest (plus any hook effects) and advances the
//! watermark in a single transaction.
//!
//! This is the embedding API for a workers-rs author's own target DO: hand
//! the apply request body to [`Inbox::apply_body`] from your `fetch`, with a
//! [`RelayHook`] for effects of your own; a hook may also hold a clone of the
//! [`Db`] and write its own tables, since it runs inside the transaction.
//!
//! Schema (component `relay_target`, version 1):
//!
//! ```sql
//! relay_kv (key TEXT PRIMARY KEY, value TEXT)            -- value: JSON text
//! relay_rh (source TEXT PRIMARY KEY, watermark, applied_rows, batches, sql_rows_written)
//! relay_target_faults (id = 1, reject, delay_ms)         -- test-only switch (v2 adds delay_ms)
//! relay_apply_log (source, seq)                          -- test-only, see ApplyLog
//! ```

#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]
#![deny(clippy::unreachable, clippy::todo, clippy::unimplemented)]

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::storage::{int, Db, StoreError};
use crate::core::{decode_request, plan_apply, ApplyError, ApplyReply, ApplyRequest, Effects, RelayHook};

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
];

/// The test-only fault switch of a target.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
pub struct TargetFaults {
    /// 0 applies, 1 refuses (transient, 503), 2 refuses as permanent (422).
    pub reject: u32,
    /// Wait this long before applying (so a source's call times out while
    /// the apply still happens, as with a lost reply).
    pub delay_ms: u64,
}

/// Key-value pairs per multi-row upsert (two parameters each).
const UPSERT_KEYS_PER_STATEMENT: usize = 50;
/// Keys per multi-key delete (one parameter each).
const DELETE_KEYS_PER_STATEMENT: usize = 100;
/// Most keys one listing returns.
pub const MAX_KEYS_PER_PAGE: u32 = 1_000;

/// One source's watermark row at a target.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, Eq)]
pub struct Watermark {
    /// The source partition.
    pub source: String,
    /// Highest applied sequence from it.
    pub watermark: u64,
    /// Rows applied from it.
    pub applied_rows: u64,
    /// Batches that applied at least one row.
    pub batches: u64,
    /// SQLite rows written applying them.
    pub sql_rows_written: u64,
}

/// One stored key.
#[derive(Clone, Debug, Deserialize, Serialize)]
pub struct KeyValue {
    /// The key.
    pub key: String,
    /// Its value's canonical JSON text; it serialises as that JSON value
    /// itself, verbatim, so numbers keep every digit.
    #[serde(serialize_with = "super::http::verbatim_json")]
    pub value: String,
}

/// One page of a key listing.
#[derive(Serialize)]
pub struct KeysPage {
    /// The keys, ascending.
    pub keys: Vec<KeyValue>,
    /// The `after` of the next page, when this one is full.
    pub next: Option<String>,
}

/// A target's applied state over its Durable Object's SQLite storage.
pub struct Inbox {
    db: Db,
}

/// Why an apply call failed.
#[derive(Debug)]
pub enum ApplyFailure {
    /// The batch is invalid or the hook refused it (a 4xx: permanent).
    Rejected(ApplyError),
    /// Storage failed, or the test fault switch is on (a 5xx: transient).
    Unavailable(String),
}

impl ApplyFailure {
    /// The HTTP refusal a source reads: 422 for a permanent rejection, 503
    /// for a transient one (a hook refusal is transient: the hook's policy
    /// may change).
    pub fn http(self) -> super::http::HttpError {
        use super::http::HttpError;
        match self {
            ApplyFailure::Rejected(ApplyError::Hook(m)) => HttpError::new(503, "hook_refused", m),
            ApplyFailure::Rejected(e) => HttpError::new(422, e.code(), e.to_string()),
            ApplyFailure::Unavailable(m) => HttpError::new(503, "unavailable", m),
        }
    }
}

impl Inbox {
    /// Serves a source's apply call: reads the body, applies it with
    /// `hook`, and answers as the relay's sources expect. Use it from your
    /// own target DO's `fetch`.
    pub async fn handle_apply(
        &self,
        req: &mut worker::Request,
        hook: &impl RelayHook,
    ) -> worker::Result<worker::Response> {
        let body = match super::http::read_body(req).await {
            Ok(b) => b,
            Err(e) => return e.response(),
        };
        match self.apply_body(&body, hook) {
            Ok(reply) => super::http::json(&reply),
            Err(e) => e.http().response(),
        }
    }

    /// Opens the inbox, creating or migrating its tables.
    pub fn open(db: Db) -> Result<Inbox, StoreError> {
        db.migrate(COMPONENT, MIGRATIONS)?;
        Ok(Inbox { db })
    }

    /// Decodes an apply body and applies it.
    pub fn apply_body(&self, body: &str, hook: &impl RelayHook) -> Result<ApplyReply, ApplyFailure> {
        match self.faults().map_err(|e| ApplyFailure::Unavailable(e.to_string()))?.reject {
            0 => {}
            1 => return Err(ApplyFailure::Unavailable("test fault: target rejects calls".into())),
            _ => {
                let e = ApplyError::Malformed("test fault: target rejects calls as invalid".into());
                return Err(ApplyFailure::Rejected(e));
            }
        }
        let request = decode_request(body).map_err(ApplyFailure::Rejected)?;
        self.apply(&request, hook)
    }

    /// Applies a validated batch in one transaction; see the module doc.
    pub fn apply(&self, request: &ApplyRequest, hook: &impl RelayHook) -> Result<ApplyReply, ApplyFailure> {
        let mut hook_error = None;
        let result = self.db.transaction(|| {
            let watermark = self.watermark(request.source.as_str())?;
            let plan = plan_apply(watermark, request);
            let rows = plan.to_apply(request);
            if rows.is_empty() {
                return Ok(plan.reply(request));
            }
            let extra = match hook.extra_effects(&request.source, rows) {
                Ok(e) => e,
                Err(e) => {
                    hook_error = Some(e);
                    return Err(StoreError::Guard("hook refused the batch"));
                }
            };
            let mut written = write_effects(&self.db, rows.iter().map(|r| &r.effects).chain([&extra]))?;
            written += 1;
            self.db.run(
                "INSERT INTO relay_rh (source, watermark, applied_rows, batches, sql_rows_written) VALUES (?, ?, ?, 1, ?) \
                 ON CONFLICT(source) DO UPDATE SET watermark = excluded.watermark, \
                 applied_rows = applied_rows + excluded.applied_rows, batches = batches + 1, \
                 sql_rows_written = sql_rows_written + excluded.sql_rows_written",
                vec![
                    request.source.as_str().into(),
                    int(plan.watermark),
                    int(rows.len() as u64),
                    int(u64::from(written)),
                ],
            )?;
            Ok(plan.reply(request))
        });
        match (result, hook_error) {
            (Ok(reply), _) => Ok(reply),
            (Err(_), Some(e)) => Err(ApplyFailure::Rejected(ApplyError::Hook(e))),
            (Err(e), None) => Err(ApplyFailure::Unavailable(e.to_string())),
        }
    }

    /// This target's watermark for `source` (0 if it never applied one).
    pub fn watermark(&self, source: &str) -> Result<u64, StoreError> {
        #[derive(Deserialize)]
        struct W {
            watermark: u64,
        }
        let rows: Vec<W> =
            self.db.rows("SELECT watermark FROM relay_rh WHERE source = ?", vec![source.into()])?;
        Ok(rows.first().map_or(0, |w| w.watermark))
    }

    /// Every source's watermark row, by source name.
    pub fn watermarks(&self) -> Result<Vec<Watermark>, StoreError> {
        self.db.rows("SELECT * FROM relay_rh ORDER BY source", vec![])
    }

    /// Forgets this target's watermark for `source` (an explicit operator
    /// act: rows from `source` at or below it would apply again). Returns
    /// whether there was one.
    pub fn forget_watermark(&self, source: &str) -> Result<bool, StoreError> {
        Ok(self.db.run("DELETE FROM relay_rh WHERE source = ?", vec![source.into()])? == 1)
    }

    /// Totals over every source: rows applied, batches, SQLite rows written.
    pub fn totals(&self) -> Result<(u64, u64, u64), StoreError> {
        #[derive(Deserialize)]
        struct T {
            rows: u64,
            batches: u64,
            written: u64,
        }
        let t: Vec<T> = self.db.rows(
            "SELECT COALESCE(SUM(applied_rows), 0) AS rows, COALESCE(SUM(batches), 0) AS batches, \
             COALESCE(SUM(sql_rows_written), 0) AS written FROM relay_rh",
            vec![],
        )?;
        Ok(t.first().map_or((0, 0, 0), |t| (t.rows, t.batches, t.written)))
    }

    /// Keys starting with `prefix`, after `after`, ascending, at most `limit`.
    pub fn keys(&self, prefix: &str, after: &str, limit: u32) -> Result<Vec<KeyValue>, StoreError> {
        let limit = limit.clamp(1, MAX_KEYS_PER_PAGE);
        self.db.rows(
            "SELECT key, value FROM relay_kv WHERE key > ? AND substr(key, 1, length(?)) = ? ORDER BY key LIMIT ?",
            vec![after.into(), prefix.into(), prefix.into(), int(u64::from(limit))],
        )
    }

    /// The test fault switch.
    pub fn faults(&self) -> Result<TargetFaults, StoreError> {
        let rows: Vec<TargetFaults> =
            self.db.rows("SELECT reject, delay_ms FROM relay_target_faults WHERE id = 1", vec![])?;
        Ok(rows.first().copied().unwrap_or_default())
    }

    /// Sets the test fault switch.
    pub fn set_faults(&self, f: TargetFaults) -> Result<(), StoreError> {
        self.db.run(
            "INSERT INTO relay_target_faults (id, reject, delay_ms) VALUES (1, ?, ?) ON CONFLICT(id) \
             DO UPDATE SET reject = excluded.reject, delay_ms = excluded.delay_ms",
            vec![int(u64::from(f.reject)), int(f.delay_ms)],
        )?;
        Ok(())
    }
}

/// Writes the net effect of `effects` (in order) on each key: one
/// upsert or delete per distinct key. Returns rows written.
pub(crate) fn write_effects<'a>(
    db: &Db,
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
        written += db.run(
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
        written += db.run(&format!("DELETE FROM relay_kv WHERE key IN ({placeholders})"), params)?;
    }
    Ok(written)
}

/// A hook that records every applied row, in application order, in
/// `relay_apply_log`. The reference target installs it only when the test
/// fault routes are on, so end-to-end tests can check order and
/// exactly-once application row by row.
pub struct ApplyLog {
    /// The target's database; the hook writes inside the apply transaction.
    pub db: Db,
}

impl RelayHook for ApplyLog {
    fn extra_effects(
        &self,
        source: &crate::core::Name,
        rows: &[crate::core::ApplyRow],
    ) -> Result<Effects, String> {
        for chunk in rows.chunks(DELETE_KEYS_PER_STATEMENT / 2) {
            let placeholders = vec!["(?, ?)"; chunk.len()].join(", ");
            let params = chunk.iter().flat_map(|r| [source.as_str().into(), int(r.seq)]).collect();
            self.db
                .run(&format!("INSERT INTO relay_apply_log (source, seq) VALUES {placeholders}"), params)
                .map_err(|e| e.to_string())?;
        }
        Ok(Effects::default())
    }
}

impl Inbox {
    /// The sequences from `source` in the apply log, in application order.
    pub fn applied_log(&self, source: &str) -> Result<Vec<u64>, StoreError> {
        #[derive(Deserialize)]
        struct S {
            seq: u64,
        }
        let rows: Vec<S> = self
            .db
            .rows("SELECT seq FROM relay_apply_log WHERE source = ? ORDER BY rowid", vec![source.into()])?;
        Ok(rows.into_iter().map(|s| s.seq).collect())
    }

    /// The database this inbox lives in.
    pub fn db(&self) -> &Db {
        &self.db
    }
}
