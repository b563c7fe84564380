//! The source side's SQLite storage: the outbox table, the one-row state
//! (`os`, `rs`, counters), and the synchronous operations on them: enqueue,
//! reading a fire's window, and writing its guarded checkpoint.
//!
//! This is the embedding API for a workers-rs author's own source DO: call
//! [`Outbox::enqueue`] in the same synchronous block (or [`Db::transaction`])
//! as your own writes so both commit together, and run
//! [`relay::run_alarm`](super::relay::run_alarm) from your `alarm()`.
//!
//! Schema (component `relay_source`, version 1):
//!
//! ```sql
//! relay_state  (id = 1, os, rs, queued_rows, queued_bytes, counters..., last_alarm)
//! relay_outbox (seq INTEGER PRIMARY KEY, target, at_ms, bytes, body)
//! ```
//!
//! Invariant: `queued_rows` and `queued_bytes` equal the outbox's row count
//! and body bytes; both are changed only in the statements that insert and
//! delete outbox rows, in the same transaction.

use std::cell::Cell;

use serde::{Deserialize, Serialize};
use worker::SqlStorageValue;

use super::storage::{int, Db, StoreError};
use crate::core::{
    begin, plan_enqueue, Checkpoint, EnqueueError, EnqueuePlan, EnqueueRow, Fire, FireStart, Head,
    Name, RelayBudget, StoredRow,
};

const COMPONENT: &str = "relay_source";

const MIGRATIONS: &[&[&str]] = &[&[
    "CREATE TABLE relay_state (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        os INTEGER NOT NULL,
        rs TEXT,
        queued_rows INTEGER NOT NULL,
        queued_bytes INTEGER NOT NULL,
        enqueued_rows INTEGER NOT NULL,
        delivered_rows INTEGER NOT NULL,
        sql_rows_written INTEGER NOT NULL,
        alarms INTEGER NOT NULL,
        fires INTEGER NOT NULL,
        calls INTEGER NOT NULL,
        conflicts INTEGER NOT NULL,
        last_alarm TEXT
    )",
    "INSERT INTO relay_state VALUES (1, 0, NULL, 0, 0, 0, 0, 0, 0, 0, 0, 0, NULL)",
    "CREATE TABLE relay_outbox (
        seq INTEGER PRIMARY KEY,
        target TEXT NOT NULL,
        at_ms INTEGER NOT NULL,
        bytes INTEGER NOT NULL,
        body TEXT NOT NULL
    )",
]];

/// Rows per multi-row INSERT: five bound parameters each, under SQLite's
/// 100-parameter limit per statement.
const INSERT_ROWS_PER_STATEMENT: usize = 20;

/// The source's state row.
#[derive(Clone, Debug, Deserialize, Serialize)]
pub struct SourceState {
    /// Last allocated sequence.
    pub os: u64,
    /// Stored scan state text, if any.
    pub rs: Option<String>,
    /// Rows in the outbox.
    pub queued_rows: u64,
    /// Body bytes in the outbox.
    pub queued_bytes: u64,
    /// Rows ever enqueued.
    pub enqueued_rows: u64,
    /// Rows ever deleted as delivered.
    pub delivered_rows: u64,
    /// SQLite rows written by the relay (inserts, deletes, state updates,
    /// alarm arms), for rows-written-per-delivered-row.
    pub sql_rows_written: u64,
    /// Alarms run.
    pub alarms: u64,
    /// Fires run.
    pub fires: u64,
    /// Target calls made.
    pub calls: u64,
    /// Checkpoints that lost their guard.
    pub conflicts: u64,
    /// JSON figures of the last alarm.
    pub last_alarm: Option<String>,
}

/// A source's outbox over its Durable Object's SQLite storage.
pub struct Outbox {
    db: Db,
    /// Rows written outside SQL statements (alarm arms), not yet added to
    /// the persisted `sql_rows_written`.
    unrecorded_writes: Cell<u64>,
    /// Test-only faults armed on this instance.
    faults: Cell<SourceFaults>,
}

/// What an enqueue did.
#[derive(Clone, Debug)]
pub struct Enqueued {
    /// The plan that was written.
    pub plan: EnqueuePlan,
    /// The outbox's size afterwards.
    pub queued_rows: u64,
}

impl Outbox {
    /// Opens the outbox, creating or migrating its tables.
    pub fn open(db: Db) -> Result<Outbox, StoreError> {
        db.migrate(COMPONENT, MIGRATIONS)?;
        Ok(Outbox {
            db,
            unrecorded_writes: Cell::new(0),
            faults: Cell::new(SourceFaults::default()),
        })
    }

    /// The database this outbox lives in.
    pub fn db(&self) -> &Db {
        &self.db
    }

    /// Arms test-only faults (see [`SourceFaults`]).
    pub fn inject_faults(&self, faults: SourceFaults) {
        self.faults.set(faults);
    }

    /// Consumes one armed checkpoint crash, if any.
    pub(crate) fn take_crash(&self) -> bool {
        let mut f = self.faults.get();
        let crash = f.crash_checkpoints > 0;
        f.crash_checkpoints = f.crash_checkpoints.saturating_sub(1);
        self.faults.set(f);
        crash
    }

    /// Counts a row written outside SQL (an alarm arm).
    pub fn note_write(&self) {
        self.unrecorded_writes.set(self.unrecorded_writes.get() + 1);
    }

    fn take_unrecorded(&self) -> u64 {
        self.unrecorded_writes.replace(0)
    }

    /// Reads the state row.
    pub fn state(&self) -> Result<SourceState, StoreError> {
        let rows: Vec<SourceState> = self
            .db
            .rows("SELECT * FROM relay_state WHERE id = 1", vec![])?;
        rows.into_iter()
            .next()
            .ok_or(StoreError::Sql("relay_state row is missing".into()))
    }

    /// The first queued row, if any.
    pub fn head(&self) -> Result<Option<Head>, StoreError> {
        #[derive(Deserialize)]
        struct H {
            seq: u64,
            at_ms: u64,
        }
        let rows: Vec<H> = self.db.rows(
            "SELECT seq, at_ms FROM relay_outbox ORDER BY seq LIMIT 1",
            vec![],
        )?;
        Ok(rows.first().map(|h| Head {
            seq: h.seq,
            at_ms: h.at_ms,
        }))
    }

    /// Validates `rows`, then writes them and the new `os`. Synchronous:
    /// call it in the same block as your own writes, with no `.await`
    /// between, or inside your [`Db::transaction`], so they commit together.
    /// On error nothing was written.
    pub fn enqueue(&self, now_ms: u64, rows: &[EnqueueRow]) -> Result<Enqueued, EnqueueFailure> {
        let state = self.state()?;
        let plan = plan_enqueue(
            state.os,
            now_ms,
            rows,
            &crate::core::Capacity::with_defaults(state.queued_rows, state.queued_bytes),
        )?;
        let mut written = 0u64;
        for chunk in plan.rows.chunks(INSERT_ROWS_PER_STATEMENT) {
            written += u64::from(self.insert(chunk)?);
        }
        let n = plan.rows.len() as u64;
        let recorded = written + 1 + self.take_unrecorded();
        let updated = self.db.run(
            "UPDATE relay_state SET os = ?, queued_rows = queued_rows + ?, queued_bytes = queued_bytes + ?, \
             enqueued_rows = enqueued_rows + ?, sql_rows_written = sql_rows_written + ? WHERE id = 1 AND os = ?",
            vec![int(plan.os), int(n), int(plan.bytes), int(n), int(recorded), int(state.os)],
        )?;
        if updated != 1 {
            return Err(EnqueueFailure::Store(StoreError::Guard(
                "os changed during enqueue",
            )));
        }
        Ok(Enqueued {
            queued_rows: state.queued_rows + n,
            plan,
        })
    }

    fn insert(&self, rows: &[StoredRow]) -> Result<u32, StoreError> {
        let placeholders = vec!["(?, ?, ?, ?, ?)"; rows.len()].join(", ");
        let mut params: Vec<SqlStorageValue> = Vec::with_capacity(rows.len() * 5);
        for r in rows {
            params.push(int(r.seq));
            params.push(r.target.as_str().into());
            params.push(int(r.at_ms));
            params.push(int(r.body.len() as u64));
            params.push(r.body.as_str().into());
        }
        let query = format!(
            "INSERT INTO relay_outbox (seq, target, at_ms, bytes, body) VALUES {placeholders}"
        );
        self.db.run(&query, params)
    }

    /// Reads what a fire needs (`os`, `rs`, the window) and starts it.
    pub fn read_fire(
        &self,
        source: &Name,
        budget: RelayBudget,
        calls_left: u32,
        now_ms: u64,
    ) -> Result<Fire, StoreError> {
        let state = self.state()?;
        let begun = begin(FireStart {
            source: source.clone(),
            os: state.os,
            rs_text: state.rs,
            now_ms,
            budget,
            calls_left,
            policy: Default::default(),
            failing: Default::default(),
        });
        let w = begun.window;
        #[derive(Deserialize)]
        struct Size {
            seq: u64,
            bytes: u32,
        }
        let sizes: Vec<Size> = self.db.rows(
            "SELECT seq, bytes FROM relay_outbox WHERE seq > ? AND seq <= ? ORDER BY seq LIMIT ?",
            vec![int(w.after), int(w.through), int(u64::from(w.probe_rows()))],
        )?;
        let sizes: Vec<(u64, u32)> = sizes.iter().map(|s| (s.seq, s.bytes)).collect();
        let (take, exhausted) = w.take(&sizes);
        let rows = match take.checked_sub(1).map(|i| sizes[i].0) {
            None => Vec::new(),
            Some(last) => self.rows_between(w.after, last)?,
        };
        Ok(Fire::new(begun, &rows, exhausted))
    }

    /// Stored rows with `after < seq <= last`, ascending.
    fn rows_between(&self, after: u64, last: u64) -> Result<Vec<StoredRow>, StoreError> {
        #[derive(Deserialize)]
        struct R {
            seq: u64,
            target: String,
            at_ms: u64,
            body: String,
        }
        let rows: Vec<R> = self.db.rows(
            "SELECT seq, target, at_ms, body FROM relay_outbox WHERE seq > ? AND seq <= ? ORDER BY seq",
            vec![int(after), int(last)],
        )?;
        Ok(rows
            .into_iter()
            .map(|r| StoredRow {
                seq: r.seq,
                target: r.target,
                at_ms: r.at_ms,
                body: r.body,
            })
            .collect())
    }

    /// Applies a fire's checkpoint atomically if its guards hold: `rs` is
    /// still what the fire read, and every delete range still holds exactly
    /// the rows it saw. Returns false (nothing written) when a guard fails.
    pub fn checkpoint(
        &self,
        cp: &Checkpoint,
        fire: FireCounts,
        last_alarm: Option<&str>,
    ) -> Result<bool, StoreError> {
        let result = self.db.transaction(|| {
            let (mut rows, mut bytes, mut written) = (0u64, 0u64, 0u64);
            for range in &cp.deletes {
                let n = self.db.run(
                    "DELETE FROM relay_outbox WHERE seq >= ? AND seq <= ?",
                    vec![int(range.first), int(range.last)],
                )?;
                if n != range.rows {
                    return Err(StoreError::Guard("a delivered row changed"));
                }
                rows += u64::from(n);
                bytes += range.bytes;
                written += u64::from(n);
            }
            let expected: SqlStorageValue = match &cp.rs_expected {
                Some(t) => t.as_str().into(),
                None => SqlStorageValue::Null,
            };
            let n = self.db.run(
                "UPDATE relay_state SET rs = ?, queued_rows = queued_rows - ?, queued_bytes = queued_bytes - ?, \
                 delivered_rows = delivered_rows + ?, sql_rows_written = sql_rows_written + ?, \
                 fires = fires + 1, calls = calls + ?, alarms = alarms + ?, last_alarm = COALESCE(?, last_alarm) \
                 WHERE id = 1 AND rs IS ?",
                vec![
                    cp.rs_new.as_str().into(),
                    int(rows),
                    int(bytes),
                    int(rows),
                    int(written + 1 + self.unrecorded_writes.get()),
                    int(u64::from(fire.calls)),
                    int(u64::from(last_alarm.is_some())),
                    last_alarm.map_or(SqlStorageValue::Null, |s| s.into()),
                    expected,
                ],
            )?;
            if n != 1 {
                return Err(StoreError::Guard("rs changed since the fire read it"));
            }
            Ok(())
        });
        match result {
            Ok(()) => {
                self.take_unrecorded();
                Ok(true)
            }
            Err(StoreError::Guard(_)) => {
                self.record_conflict(fire, last_alarm)?;
                Ok(false)
            }
            Err(e) => Err(e),
        }
    }

    /// Counts a fire whose checkpoint lost its guard.
    fn record_conflict(
        &self,
        fire: FireCounts,
        last_alarm: Option<&str>,
    ) -> Result<(), StoreError> {
        self.db.run(
            "UPDATE relay_state SET conflicts = conflicts + 1, fires = fires + 1, calls = calls + ?, \
             alarms = alarms + ?, sql_rows_written = sql_rows_written + ?, last_alarm = COALESCE(?, last_alarm) WHERE id = 1",
            vec![
                int(u64::from(fire.calls)),
                int(u64::from(last_alarm.is_some())),
                int(1 + self.take_unrecorded()),
                last_alarm.map_or(SqlStorageValue::Null, |s| s.into()),
            ],
        )?;
        Ok(())
    }
}

/// Test-only faults a source can be told to inject.
#[derive(Clone, Copy, Debug, Default)]
pub struct SourceFaults {
    /// Fail this many checkpoints after the target calls, as a crash
    /// between the target apply and the source cleanup would.
    pub crash_checkpoints: u32,
}

/// A fire's figures that the checkpoint adds to the counters.
#[derive(Clone, Copy, Debug, Default)]
pub struct FireCounts {
    /// Target calls the fire made.
    pub calls: u32,
}

/// Why an enqueue wrote nothing.
#[derive(Debug)]
pub enum EnqueueFailure {
    /// The request broke a limit (a 4xx).
    Invalid(EnqueueError),
    /// Storage failed (a 5xx).
    Store(StoreError),
}

impl From<EnqueueError> for EnqueueFailure {
    fn from(e: EnqueueError) -> Self {
        EnqueueFailure::Invalid(e)
    }
}

impl From<StoreError> for EnqueueFailure {
    fn from(e: StoreError) -> Self {
        EnqueueFailure::Store(e)
    }
}
