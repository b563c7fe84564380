//! The source side's SQLite storage: the outbox, the one-row state (`os`,
//! `rs`, gauges, counters), and the synchronous operations on them: enqueue
//! (idempotent, bounded), reading a fire's window, and writing its guarded
//! checkpoint (deletes, parking, failure counts). Operator actions on parked
//! targets and pruning live in `parking.rs`.
//!
//! This is the embedding API for a workers-rs author's own source DO: call
//! [`Outbox::enqueue`] in the same synchronous block (or [`Db::transaction`])
//! as your own writes so both commit together, and run
//! [`relay::run_alarm`](super::relay::run_alarm) from your `alarm()`.
//!
//! Schema (component `relay_source`; version 2 adds parking and dedup):
//!
//! ```sql
//! relay_state   (id = 1, os, rs, queued_rows, queued_bytes, parked_rows, parked_bytes,
//!                counters..., last_alarm, last_prune_ms)
//! relay_outbox  (seq INTEGER PRIMARY KEY, target, at_ms, bytes, body)
//! relay_parked  (seq INTEGER PRIMARY KEY, target, at_ms, bytes, body, discarded_at_ms)
//! relay_targets (target PRIMARY KEY, failed_cycles, parked, reason, first/last_failure_ms, last_error)
//! relay_dedup   (key PRIMARY KEY, digest, first_seq, rows, at_ms)
//! ```
//!
//! Invariants: `queued_rows`/`queued_bytes` equal the outbox's row count and
//! body bytes, and `parked_rows`/`parked_bytes` those of the not-discarded
//! parked rows; each is changed only in the transaction that moves rows. A
//! target with `parked = 1` has no rows in `relay_outbox`.

#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]
#![deny(clippy::unreachable, clippy::todo, clippy::unimplemented)]

use std::cell::Cell;
use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};
use worker::SqlStorageValue;

use super::storage::{int, Db, StoreError};
use crate::core::dedup::{validate_key, DEFAULT_DEDUP_HORIZON_MS, DEFAULT_DISCARD_HORIZON_MS};
use crate::core::{
    begin, content_digest, decide, encode_rows, plan_encoded, Capacity, Checkpoint, Dedup, DedupRecord,
    EnqueueError, EnqueueRefusal, EnqueueRow, Fire, FireReport, FireStart, Head, Name, RelayBudget,
    RelayPolicy, StoredRow, DEFAULT_MAX_QUEUED_BYTES, DEFAULT_MAX_QUEUED_ROWS,
};

const COMPONENT: &str = "relay_source";

const MIGRATIONS: &[&[&str]] = &[
    &[
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
    ],
    &[
        "ALTER TABLE relay_state ADD COLUMN parked_rows INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE relay_state ADD COLUMN parked_bytes INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE relay_state ADD COLUMN dedup_hits INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE relay_state ADD COLUMN rejected_full INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE relay_state ADD COLUMN lag_breaches INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE relay_state ADD COLUMN last_prune_ms INTEGER NOT NULL DEFAULT 0",
        "CREATE TABLE relay_parked (
            seq INTEGER PRIMARY KEY,
            target TEXT NOT NULL,
            at_ms INTEGER NOT NULL,
            bytes INTEGER NOT NULL,
            body TEXT NOT NULL,
            discarded_at_ms INTEGER
        )",
        "CREATE TABLE relay_targets (
            target TEXT PRIMARY KEY,
            failed_cycles INTEGER NOT NULL,
            parked INTEGER NOT NULL,
            reason TEXT,
            first_failure_ms INTEGER,
            last_failure_ms INTEGER,
            last_error TEXT
        )",
        "CREATE TABLE relay_dedup (
            key TEXT PRIMARY KEY,
            digest TEXT NOT NULL,
            first_seq INTEGER NOT NULL,
            rows INTEGER NOT NULL,
            at_ms INTEGER NOT NULL
        )",
        "CREATE INDEX relay_dedup_at ON relay_dedup (at_ms)",
    ],
];

/// Rows per multi-row INSERT: five bound parameters each, under SQLite's
/// 100-parameter limit per statement.
const INSERT_ROWS_PER_STATEMENT: usize = 20;

/// A source's operating settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct OutboxSettings {
    /// When to park failing targets.
    pub policy: RelayPolicy,
    /// Backpressure bound on waiting rows (queued plus parked).
    pub max_rows: u64,
    /// Backpressure bound on waiting body bytes.
    pub max_bytes: u64,
    /// How long idempotency keys are remembered.
    pub dedup_horizon_ms: u64,
    /// How long discarded parked rows are kept.
    pub discard_horizon_ms: u64,
}

impl Default for OutboxSettings {
    fn default() -> Self {
        OutboxSettings {
            policy: RelayPolicy::default(),
            max_rows: DEFAULT_MAX_QUEUED_ROWS,
            max_bytes: DEFAULT_MAX_QUEUED_BYTES,
            dedup_horizon_ms: DEFAULT_DEDUP_HORIZON_MS,
            discard_horizon_ms: DEFAULT_DISCARD_HORIZON_MS,
        }
    }
}

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
    /// Parked rows (not discarded).
    pub parked_rows: u64,
    /// Body bytes of parked rows.
    pub parked_bytes: u64,
    /// Rows ever enqueued.
    pub enqueued_rows: u64,
    /// Rows ever deleted as delivered.
    pub delivered_rows: u64,
    /// SQLite rows written by the relay (inserts, deletes, moves, state
    /// updates, alarm arms), for rows-written-per-delivered-row.
    pub sql_rows_written: u64,
    /// Alarms run.
    pub alarms: u64,
    /// Fires run.
    pub fires: u64,
    /// Target calls made.
    pub calls: u64,
    /// Checkpoints that lost their guard.
    pub conflicts: u64,
    /// Keyed enqueues answered as duplicates.
    pub dedup_hits: u64,
    /// Enqueues refused with 429.
    pub rejected_full: u64,
    /// Fires that saw a row older than the lag bound.
    pub lag_breaches: u64,
    /// When expired records were last pruned.
    pub last_prune_ms: u64,
    /// JSON figures of the last alarm.
    pub last_alarm: Option<String>,
}

/// Counts gathered where nothing may be written (duplicates, refusals) or
/// outside SQL (alarm arms); added to the next state-row write.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Pending {
    writes: u64,
    dedup_hits: u64,
    rejected_full: u64,
}

/// The `SET` fragment that adds [`Pending`] counts; binds three parameters.
pub(crate) const PENDING_SET: &str =
    "sql_rows_written = sql_rows_written + ?, dedup_hits = dedup_hits + ?, rejected_full = rejected_full + ?";

/// A source's outbox over its Durable Object's SQLite storage.
pub struct Outbox {
    db: Db,
    settings: OutboxSettings,
    pending: Cell<Pending>,
    faults: Cell<SourceFaults>,
}

/// What an enqueue did.
#[derive(Clone, Debug, Serialize)]
pub struct Enqueued {
    /// The sequences (the original ones for a duplicate).
    pub seqs: Vec<u64>,
    /// `os` afterwards.
    pub os: u64,
    /// Whether this repeated an earlier keyed enqueue and wrote nothing.
    pub duplicate: bool,
    /// Rows waiting afterwards (queued plus parked).
    pub queued_rows: u64,
}

impl Outbox {
    /// Opens the outbox, creating or migrating its tables.
    pub fn open(db: Db, settings: OutboxSettings) -> Result<Outbox, StoreError> {
        db.migrate(COMPONENT, MIGRATIONS)?;
        Ok(Outbox {
            db,
            settings,
            pending: Cell::new(Pending::default()),
            faults: Cell::new(SourceFaults::default()),
        })
    }

    /// The database this outbox lives in.
    pub fn db(&self) -> &Db {
        &self.db
    }

    /// The operating settings.
    pub fn settings(&self) -> &OutboxSettings {
        &self.settings
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
        let mut p = self.pending.get();
        p.writes += 1;
        self.pending.set(p);
    }

    /// Takes the pending counts as the three [`PENDING_SET`] parameters,
    /// plus `writes` rows this statement's transaction wrote itself.
    pub(crate) fn take_pending(&self, writes: u64) -> (Vec<SqlStorageValue>, Pending) {
        let p = self.pending.replace(Pending::default());
        (vec![int(p.writes + writes), int(p.dedup_hits), int(p.rejected_full)], p)
    }

    /// Counts not yet written: (rows written, dedup hits, refusals as full).
    /// Status adds them to the persisted counters.
    pub fn unwritten_counts(&self) -> (u64, u64, u64) {
        let p = self.pending.get();
        (p.writes, p.dedup_hits, p.rejected_full)
    }

    /// Puts counts back after a transaction that carried them rolled back.
    pub(crate) fn restore_pending(&self, p: Pending) {
        let mut now = self.pending.get();
        now.writes += p.writes;
        now.dedup_hits += p.dedup_hits;
        now.rejected_full += p.rejected_full;
        self.pending.set(now);
    }

    /// Reads the state row.
    pub fn state(&self) -> Result<SourceState, StoreError> {
        let rows: Vec<SourceState> = self.db.rows("SELECT * FROM relay_state WHERE id = 1", vec![])?;
        rows.into_iter().next().ok_or(StoreError::Sql("relay_state row is missing".into()))
    }

    /// The first queued row, if any.
    pub fn head(&self) -> Result<Option<Head>, StoreError> {
        #[derive(Deserialize)]
        struct H {
            seq: u64,
            at_ms: u64,
        }
        let rows: Vec<H> =
            self.db.rows("SELECT seq, at_ms FROM relay_outbox ORDER BY seq LIMIT 1", vec![])?;
        Ok(rows.first().map(|h| Head { seq: h.seq, at_ms: h.at_ms }))
    }

    /// Occupancy under the backpressure bounds.
    pub fn capacity(&self, state: &SourceState) -> Capacity {
        Capacity {
            rows: state.queued_rows + state.parked_rows,
            bytes: state.queued_bytes + state.parked_bytes,
            max_rows: self.settings.max_rows,
            max_bytes: self.settings.max_bytes,
        }
    }

    /// Validates `rows`, then writes them and the new `os`; with `key`, an
    /// enqueue repeated within the horizon answers its original sequences
    /// and writes nothing. Synchronous: call it in the same block as your
    /// own writes, with no `.await` between, or inside your
    /// [`Db::transaction`], so they commit together. On error nothing was
    /// written.
    pub fn enqueue(
        &self,
        now_ms: u64,
        key: Option<&str>,
        rows: &[EnqueueRow],
    ) -> Result<Enqueued, EnqueueFailure> {
        let state = self.state()?;
        let encoded = encode_rows(rows)?;
        let digest = match key {
            None => None,
            Some(k) => {
                validate_key(k).map_err(|e| EnqueueFailure::Refused(EnqueueRefusal::Key(e)))?;
                let digest = content_digest(&encoded);
                match decide(self.dedup_record(k)?.as_ref(), &digest, now_ms, self.settings.dedup_horizon_ms)
                {
                    Dedup::Fresh => Some(digest),
                    Dedup::Duplicate(seqs) => {
                        let mut p = self.pending.get();
                        p.dedup_hits += 1;
                        self.pending.set(p);
                        let queued_rows = state.queued_rows + state.parked_rows;
                        return Ok(Enqueued { seqs, os: state.os, duplicate: true, queued_rows });
                    }
                    Dedup::Conflict => {
                        return Err(EnqueueFailure::Refused(EnqueueRefusal::Conflict { key: k.to_owned() }))
                    }
                }
            }
        };
        let plan = plan_encoded(state.os, now_ms, &encoded, &self.capacity(&state)).inspect_err(|e| {
            if matches!(e, EnqueueError::OutboxFull { .. }) {
                let mut p = self.pending.get();
                p.rejected_full += 1;
                self.pending.set(p);
            }
        })?;
        let parked_targets = self.parked_set()?;
        let (parked, queued): (Vec<StoredRow>, Vec<StoredRow>) =
            plan.rows.iter().cloned().partition(|r| parked_targets.contains(&r.target));
        let mut written = 0u64;
        for (table, list) in [("relay_outbox", &queued), ("relay_parked", &parked)] {
            for chunk in list.chunks(INSERT_ROWS_PER_STATEMENT) {
                written += u64::from(self.insert(table, chunk)?);
            }
        }
        if let (Some(k), Some(d)) = (key, digest) {
            let record = DedupRecord {
                key: k.into(),
                digest: d,
                first_seq: plan.rows.first().map_or(0, |r| r.seq),
                rows: plan.rows.len() as u32,
                at_ms: now_ms,
            };
            written += u64::from(self.put_dedup(&record)?);
        }
        let bytes = |list: &[StoredRow]| list.iter().map(|r| r.body.len() as u64).sum::<u64>();
        let (n, nq, np) = (plan.rows.len() as u64, queued.len() as u64, parked.len() as u64);
        let (mut params, pending) = self.take_pending(written + 1);
        let mut all = vec![int(plan.os), int(nq), int(bytes(&queued)), int(np), int(bytes(&parked)), int(n)];
        all.append(&mut params);
        all.push(int(state.os));
        let updated = self.db.run(
            &format!(
                "UPDATE relay_state SET os = ?, queued_rows = queued_rows + ?, queued_bytes = queued_bytes + ?, \
                 parked_rows = parked_rows + ?, parked_bytes = parked_bytes + ?, enqueued_rows = enqueued_rows + ?, \
                 {PENDING_SET} WHERE id = 1 AND os = ?"
            ),
            all,
        );
        if updated.as_ref().map_or(true, |n| *n != 1) {
            self.restore_pending(pending);
            updated?;
            return Err(EnqueueFailure::Store(StoreError::Guard("os changed during enqueue")));
        }
        let queued_rows = state.queued_rows + state.parked_rows + n;
        Ok(Enqueued { seqs: plan.seqs(), os: plan.os, duplicate: false, queued_rows })
    }

    fn insert(&self, table: &str, rows: &[StoredRow]) -> Result<u32, StoreError> {
        let placeholders = vec!["(?, ?, ?, ?, ?)"; rows.len()].join(", ");
        let mut params: Vec<SqlStorageValue> = Vec::with_capacity(rows.len() * 5);
        for r in rows {
            params.push(int(r.seq));
            params.push(r.target.as_str().into());
            params.push(int(r.at_ms));
            params.push(int(r.body.len() as u64));
            params.push(r.body.as_str().into());
        }
        self.db.run(
            &format!("INSERT INTO {table} (seq, target, at_ms, bytes, body) VALUES {placeholders}"),
            params,
        )
    }

    fn dedup_record(&self, key: &str) -> Result<Option<DedupRecord>, StoreError> {
        #[derive(Deserialize)]
        struct R {
            key: String,
            digest: String,
            first_seq: u64,
            rows: u32,
            at_ms: u64,
        }
        let rows: Vec<R> = self.db.rows("SELECT * FROM relay_dedup WHERE key = ?", vec![key.into()])?;
        Ok(rows.into_iter().next().map(|r| DedupRecord {
            key: r.key,
            digest: r.digest,
            first_seq: r.first_seq,
            rows: r.rows,
            at_ms: r.at_ms,
        }))
    }

    fn put_dedup(&self, r: &DedupRecord) -> Result<u32, StoreError> {
        self.db.run(
            "INSERT INTO relay_dedup (key, digest, first_seq, rows, at_ms) VALUES (?, ?, ?, ?, ?) \
             ON CONFLICT(key) DO UPDATE SET digest = excluded.digest, first_seq = excluded.first_seq, \
             rows = excluded.rows, at_ms = excluded.at_ms",
            vec![
                r.key.as_str().into(),
                r.digest.as_str().into(),
                int(r.first_seq),
                int(u64::from(r.rows)),
                int(r.at_ms),
            ],
        )
    }

    /// Names of parked targets.
    pub(crate) fn parked_set(&self) -> Result<BTreeSet<String>, StoreError> {
        #[derive(Deserialize)]
        struct T {
            target: String,
        }
        let rows: Vec<T> = self.db.rows("SELECT target FROM relay_targets WHERE parked = 1", vec![])?;
        Ok(rows.into_iter().map(|t| t.target).collect())
    }

    /// Consecutive failed cycles of targets that have any.
    fn failing(&self) -> Result<std::collections::BTreeMap<Name, u32>, StoreError> {
        #[derive(Deserialize)]
        struct F {
            target: String,
            failed_cycles: u32,
        }
        let rows: Vec<F> = self.db.rows(
            "SELECT target, failed_cycles FROM relay_targets WHERE failed_cycles > 0 AND parked = 0",
            vec![],
        )?;
        Ok(rows.into_iter().filter_map(|f| Some((Name::new(f.target).ok()?, f.failed_cycles))).collect())
    }

    /// Reads what a fire needs (`os`, `rs`, failure counts, the window) and
    /// starts it.
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
            policy: self.settings.policy,
            failing: self.failing()?,
        });
        let w = begun.window;
        // Row metadata first (no bodies): it cuts the window and tells which
        // rows the fire can send; only those bodies are read.
        #[derive(Deserialize)]
        struct Meta {
            seq: u64,
            target: String,
            at_ms: u64,
            bytes: u32,
        }
        let mut meta: Vec<Meta> = self.db.rows(
            "SELECT seq, target, at_ms, bytes FROM relay_outbox WHERE seq > ? AND seq <= ? ORDER BY seq LIMIT ?",
            vec![int(w.after), int(w.through), int(u64::from(w.probe_rows()))],
        )?;
        let sizes: Vec<(u64, u32)> = meta.iter().map(|m| (m.seq, m.bytes)).collect();
        let (take, exhausted) = w.take(&sizes);
        meta.truncate(take);
        let through = begun.bodies_through(meta.iter().map(|m| (m.seq, m.target.as_str())));
        let mut bodies = match through {
            None => Vec::new(),
            Some(last) => self.bodies_between(w.after, last)?,
        }
        .into_iter()
        .peekable();
        let rows = meta
            .iter()
            .map(|m| {
                let body = bodies.next_if(|(seq, _)| *seq == m.seq).map(|(_, b)| b).unwrap_or_default();
                StoredRow { seq: m.seq, target: m.target.clone(), at_ms: m.at_ms, body }
            })
            .collect::<Vec<_>>();
        Ok(Fire::new(begun, &rows, exhausted))
    }

    /// `(seq, body)` of rows with `after < seq <= last`, ascending.
    fn bodies_between(&self, after: u64, last: u64) -> Result<Vec<(u64, String)>, StoreError> {
        #[derive(Deserialize)]
        struct R {
            seq: u64,
            body: String,
        }
        let rows: Vec<R> = self.db.rows(
            "SELECT seq, body FROM relay_outbox WHERE seq > ? AND seq <= ? ORDER BY seq",
            vec![int(after), int(last)],
        )?;
        Ok(rows.into_iter().map(|r| (r.seq, r.body)).collect())
    }

    /// Applies a fire's checkpoint atomically if its guards hold: `rs` is
    /// still what the fire read, and every delete range still holds exactly
    /// the rows it saw. Parks the targets the fire parked (moving all their
    /// queued rows) and updates failure counts in the same transaction.
    /// Returns false (nothing written) when a guard fails.
    pub fn checkpoint(
        &self,
        cp: &Checkpoint,
        report: &FireReport,
        now_ms: u64,
        last_alarm: Option<&str>,
    ) -> Result<bool, StoreError> {
        let mut carried = None;
        let result = self.db.transaction(|| {
            let (deleted, deleted_bytes) = self.delete_delivered(cp)?;
            let moved = self.park_targets(report, now_ms)?;
            let counted = self.count_failures(report, now_ms)?;
            let written = u64::from(deleted) + moved.writes + counted + 1;
            let (mut pending, taken) = self.take_pending(written);
            carried = Some(taken);
            let expected: SqlStorageValue = match &cp.rs_expected {
                Some(t) => t.as_str().into(),
                None => SqlStorageValue::Null,
            };
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
                last_alarm.map_or(SqlStorageValue::Null, |s| s.into()),
            ];
            params.append(&mut pending);
            params.push(expected);
            let n = self.db.run(
                &format!(
                    "UPDATE relay_state SET rs = ?, queued_rows = queued_rows - ?, queued_bytes = queued_bytes - ?, \
                     parked_rows = parked_rows + ?, parked_bytes = parked_bytes + ?, delivered_rows = delivered_rows + ?, \
                     fires = fires + 1, calls = calls + ?, alarms = alarms + ?, lag_breaches = lag_breaches + ?, \
                     last_alarm = COALESCE(?, last_alarm), {PENDING_SET} WHERE id = 1 AND rs IS ?"
                ),
                params,
            )?;
            if n != 1 {
                return Err(StoreError::Guard("rs changed since the fire read it"));
            }
            Ok(())
        });
        match result {
            Ok(()) => Ok(true),
            Err(e) => {
                if let Some(p) = carried {
                    self.restore_pending(p);
                }
                match e {
                    StoreError::Guard(_) => {
                        self.record_conflict(report, last_alarm)?;
                        Ok(false)
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
            let n = self.db.run(
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

    /// Moves every queued row of each target the fire parked to
    /// `relay_parked` and marks the target parked with its reason.
    fn park_targets(&self, report: &FireReport, now_ms: u64) -> Result<Moved, StoreError> {
        let mut moved = Moved::default();
        for (target, reason) in &report.parked {
            let (rows, bytes) = self.outbox_rows_of(target.as_str())?;
            let t: SqlStorageValue = target.as_str().into();
            moved.writes += u64::from(self.db.run(
                "INSERT INTO relay_parked (seq, target, at_ms, bytes, body) \
                 SELECT seq, target, at_ms, bytes, body FROM relay_outbox WHERE target = ?",
                vec![t.clone()],
            )?);
            let n = self.db.run("DELETE FROM relay_outbox WHERE target = ?", vec![t.clone()])?;
            debug_assert_eq!(u64::from(n), rows);
            moved.writes += u64::from(n);
            moved.writes += u64::from(self.db.run(
                "INSERT INTO relay_targets (target, failed_cycles, parked, reason, first_failure_ms, last_failure_ms, last_error) \
                 VALUES (?, 0, 1, ?, ?, ?, ?) ON CONFLICT(target) DO UPDATE SET failed_cycles = 0, parked = 1, \
                 reason = excluded.reason, first_failure_ms = COALESCE(first_failure_ms, excluded.first_failure_ms), \
                 last_failure_ms = excluded.last_failure_ms, last_error = excluded.last_error",
                vec![t, reason.as_str().into(), int(now_ms), int(now_ms), reason.as_str().into()],
            )?);
            moved.rows += rows;
            moved.bytes += bytes;
            worker::console_warn!(
                "{}",
                serde_json::json!({"event": "relay_target_parked", "target": target.as_str(), "rows": rows, "reason": reason})
            );
        }
        Ok(moved)
    }

    /// Rows and bytes queued for `target`.
    pub(crate) fn outbox_rows_of(&self, target: &str) -> Result<(u64, u64), StoreError> {
        #[derive(Deserialize)]
        struct C {
            n: u64,
            b: u64,
        }
        let c: Vec<C> = self.db.rows(
            "SELECT COUNT(*) AS n, COALESCE(SUM(bytes), 0) AS b FROM relay_outbox WHERE target = ?",
            vec![target.into()],
        )?;
        Ok(c.first().map_or((0, 0), |c| (c.n, c.b)))
    }

    /// Counts a failed cycle for each target that failed (and was not
    /// parked); forgets the count of each that took a batch again.
    fn count_failures(&self, report: &FireReport, now_ms: u64) -> Result<u64, StoreError> {
        let mut written = 0u64;
        for (target, failure) in &report.failed {
            if report.parked.iter().any(|(p, _)| p == target) {
                continue;
            }
            written += u64::from(self.db.run(
                "INSERT INTO relay_targets (target, failed_cycles, parked, first_failure_ms, last_failure_ms, last_error) \
                 VALUES (?, 1, 0, ?, ?, ?) ON CONFLICT(target) DO UPDATE SET failed_cycles = failed_cycles + 1, \
                 last_failure_ms = excluded.last_failure_ms, last_error = excluded.last_error",
                vec![target.as_str().into(), int(now_ms), int(now_ms), failure.message().into()],
            )?);
        }
        for target in &report.recovered {
            written += u64::from(self.db.run(
                "DELETE FROM relay_targets WHERE target = ? AND parked = 0",
                vec![target.as_str().into()],
            )?);
        }
        Ok(written)
    }

    /// Counts a fire whose checkpoint lost its guard.
    fn record_conflict(&self, report: &FireReport, last_alarm: Option<&str>) -> Result<(), StoreError> {
        let (mut pending, taken) = self.take_pending(1);
        let mut params = vec![
            int(u64::from(report.calls)),
            int(u64::from(last_alarm.is_some())),
            last_alarm.map_or(SqlStorageValue::Null, |s| s.into()),
        ];
        params.append(&mut pending);
        let result = self.db.run(
            &format!(
                "UPDATE relay_state SET conflicts = conflicts + 1, fires = fires + 1, calls = calls + ?, \
                 alarms = alarms + ?, last_alarm = COALESCE(?, last_alarm), {PENDING_SET} WHERE id = 1"
            ),
            params,
        );
        if result.is_err() {
            self.restore_pending(taken);
        }
        result.map(|_| ())
    }
}

/// Rows moved to the parked list by one checkpoint.
#[derive(Clone, Copy, Debug, Default)]
struct Moved {
    rows: u64,
    bytes: u64,
    writes: u64,
}

/// Test-only faults a source can be told to inject.
#[derive(Clone, Copy, Debug, Default)]
pub struct SourceFaults {
    /// Fail this many checkpoints after the target calls, as a crash
    /// between the target apply and the source cleanup would.
    pub crash_checkpoints: u32,
}

/// Why an enqueue wrote nothing.
#[derive(Debug)]
pub enum EnqueueFailure {
    /// The request was refused (a 4xx: limits, key, conflict, full).
    Refused(EnqueueRefusal),
    /// Storage failed (a 5xx).
    Store(StoreError),
}

impl From<EnqueueError> for EnqueueFailure {
    fn from(e: EnqueueError) -> Self {
        EnqueueFailure::Refused(EnqueueRefusal::Invalid(e))
    }
}

impl From<StoreError> for EnqueueFailure {
    fn from(e: StoreError) -> Self {
        EnqueueFailure::Store(e)
    }
}
