//! The source side's storage: the outbox, the parked list, the per-target
//! failure records, the dedup records and the one-row state, over any
//! [`Sql`] database.
//!
//! - [`enqueue`](Outbox::enqueue) applies the core's admission decision,
//!   after one read (`view.rs`);
//! - `handover.rs`: what a lone row's round trip does not read or write
//!   again (the enqueue's handover to its delivery, the delivered row kept
//!   for the next enqueue's slot);
//! - [`fire_start`](Outbox::fire_start) and [`read_window`](Outbox::read_window)
//!   read what a fire needs;
//! - [`checkpoint`](Outbox::checkpoint) writes a settled fire, guarded;
//! - `parking.rs`: operator actions on parked targets;
//! - `listing.rs`: pages of one target's parked or queued rows;
//! - `pack.rs`: packed rows, one outbox row for several rows of an enqueue;
//! - `prune.rs`: horizon pruning of dedup records, key claims and discarded rows;
//! - `routing.rs`: an object's half of routing (fence, two-phase adoption, keys);
//! - `audit.rs`: the invariants below, checked on the real tables;
//! - `migrations.rs`: the schema below, step by step, and which steps a
//!   build must know to run on it.
//!
//! Schema (component `relay_source`, version 13; version 2 added parking and
//! dedup, version 7 the indexes that keep status and parking reads bounded,
//! version 8 the records that keep a partitioned source's keys exactly once,
//! version 9 the rows written in the current UTC day, version 10 the host's
//! alarm time, version 11 whether a partition map was ever stored, version
//! 12 the pause a target asked for, version 13 packed rows):
//!
//! ```sql
//! relay_state   (id = 1, os, rs, queued_rows, queued_bytes, parked_rows, parked_bytes,
//!                counters..., last_alarm, last_prune_ms, rows_written_day, rows_written_today,
//!                map_stored)
//! relay_outbox  (seq INTEGER PRIMARY KEY, target, at_ms, bytes, body, due_ms,
//!                first_seq) -- version 13: set on a pack (see pack.rs), indexed where set
//! relay_parked  (seq INTEGER PRIMARY KEY, target, at_ms, bytes, body, discarded_at_ms, due_ms)
//! relay_holds   (target PRIMARY KEY, due_ms)   -- version 4: delayed rows
//! relay_partition (id = 1, epoch, map, active, since_ms, known) -- partitioned sources: the
//!                map prepared, whether (and since when) it is active, the objects known
//! relay_keys    (key PRIMARY KEY, digest, gen_ms, attempt, reach) -- keys at their home
//! relay_routed  (key PRIMARY KEY, digest, gen_ms, attempt, taken, at_ms) -- what an object
//!                took for a routed key, by target
//! relay_targets (target PRIMARY KEY, failed_cycles, parked, reason, first/last_failure_ms, last_error,
//!                retry_after_ms) -- version 12: the pause the target asked for
//! relay_dedup   (key PRIMARY KEY, digest, first_seq, rows, at_ms, due_ms)
//! relay_host_alarm (id = 1, at_ms) -- version 10: the host's own alarm time
//! ```
//!
//! Invariants (checked by [`Outbox::audit`]):
//! - `queued_rows`/`queued_bytes` equal the outbox's row count and body
//!   bytes, and `parked_rows`/`parked_bytes` those of the parked rows not
//!   discarded; each changes only in the transaction that moves rows;
//! - a target with `parked = 1` has no row in `relay_outbox`;
//! - every sequence stored is at most `os`;
//! - while the stored `rs` cycle is active, every outbox row at or below
//!   its cursor has its target in `blocked` or is held (`due_ms` past the
//!   cycle's `clock_ms`);
//! - among one target's queued and parked rows, `due_ms` never decreases
//!   with the sequence (ignoring rows already due);
//! - `map_stored` is 1 exactly when `relay_partition` holds a row.

mod adoption;
mod audit;
mod checkpoint;
mod enqueue;
mod handover;
mod ledger;
mod listing;
mod migrations;
pub(crate) mod pack;
mod parking;
mod prune;
mod routing;
mod rows;
mod view;
mod window;

use std::cell::Cell;

use serde::Serialize;

pub use checkpoint::{Commit, LastRun, CHECKPOINT_GUARD_SQL};
pub use durable_relay_protocol::wire::{
    ActionOutcome, Enqueued, OutboxSettings, ParkedPage, ParkedRow, QueuedPage, RoutedKey, Sealed, Settling,
    TargetPage, TargetReport,
};
pub use enqueue::{EnqueueFailure, Entry, FenceChecked, Seat};
pub use ledger::Pending;
pub use pack::PACK_ROWS_MIN;
pub use parking::TargetFilter;

use super::{int, schema, Sql, SqlValue, StoreError};
use crate::core::{Capacity, Head};
use migrations::COMPONENT;
pub(crate) use migrations::SCHEMA;

/// The `SET` fragment that adds the pending counts (see [`Pending`]) and
/// counts their rows written into the UTC day's (a later day starts from
/// zero; a clock behind the stored day adds to the stored day); binds eleven
/// parameters. A macro so statements can be built with `concat!`.
macro_rules! pending_set {
    () => {
        concat!(
            "sql_rows_written = sql_rows_written + ?, dedup_hits = dedup_hits + ?, ",
            "rejected_full = rejected_full + ?, fires = fires + ?, calls = calls + ?, alarms = alarms + ?, ",
            "conflicts = conflicts + ?, lag_breaches = lag_breaches + ?, ",
            "rows_written_today = CASE WHEN rows_written_day >= ? THEN rows_written_today ELSE 0 END + ?, ",
            "rows_written_day = MAX(rows_written_day, ?)"
        )
    };
}
pub(crate) use pending_set;

/// The source's state as it is, whatever the state row has folded yet
/// (see `ledger.rs`): what every reader sees.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
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
    /// Rows ever enqueued (sequences are allocated contiguously: `os`).
    pub enqueued_rows: u64,
    /// Rows ever delivered: `os - queued - parked - discarded_total`.
    pub delivered_rows: u64,
    /// Rows ever discarded by an operator.
    pub discarded_total: u64,
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
    /// Enqueues refused as full.
    pub rejected_full: u64,
    /// Fires that saw a row older than the lag bound.
    pub lag_breaches: u64,
    /// When expired records were last pruned (0: never).
    pub last_prune_ms: u64,
    /// JSON figures of the last alarm.
    pub last_alarm: Option<String>,
    /// The UTC day (days since the epoch) of the newest time this outbox
    /// was told (see [`Outbox::note_time`]).
    pub rows_written_day: u64,
    /// SQLite rows written by the relay in that day, counts not yet
    /// written included.
    pub rows_written_today: u64,
}

/// A source's outbox over a SQLite database.
pub struct Outbox<S> {
    sql: S,
    /// The operating settings; a `Cell` so a running source can be
    /// reconfigured without exclusive access.
    settings: Cell<OutboxSettings>,
    /// Counts not yet written; see [`Pending`].
    pending: Cell<Pending>,
    /// When the oldest of them was counted, by [`clock_ms`](Outbox::note_time).
    pending_since_ms: Cell<Option<u64>>,
    /// The newest time an operation was given, ms since the epoch: what
    /// day counts not yet written belong to.
    clock_ms: Cell<u64>,
    /// The last alarm's figures when its checkpoint wrote no state row.
    last_alarm: std::cell::RefCell<Option<String>>,
    /// The handover and the delivered row kept (see `handover.rs`).
    memory: handover::Memory,
    /// The endpoints rows may be addressed to (`endpoint:<name>`), as the
    /// operator configured them; a row to any other is refused. Not stored.
    endpoints: std::cell::RefCell<std::collections::BTreeSet<String>>,
    /// Of `endpoints`, those that take many rows per request.
    batched: std::cell::RefCell<std::collections::BTreeSet<String>>,
    /// Whether a multi-row enqueue writes its rows as one pack (see
    /// `pack.rs`). Not stored; every build reads packs either way.
    pack_rows: Cell<bool>,
}

impl<S: Sql> Outbox<S> {
    /// Opens the outbox, creating or migrating its tables.
    pub fn open(sql: S, settings: OutboxSettings) -> Result<Outbox<S>, StoreError> {
        schema::migrate_schema(&sql, &SCHEMA)?;
        Ok(Outbox {
            sql,
            settings: Cell::new(settings),
            pending: Cell::new(Pending::default()),
            pending_since_ms: Cell::new(None),
            clock_ms: Cell::new(0),
            last_alarm: std::cell::RefCell::new(None),
            memory: handover::Memory::default(),
            endpoints: std::cell::RefCell::new(std::collections::BTreeSet::new()),
            batched: std::cell::RefCell::new(std::collections::BTreeSet::new()),
            pack_rows: Cell::new(false),
        })
    }

    /// Whether a multi-row enqueue writes its rows as one pack.
    pub fn set_pack_rows(&self, on: bool) {
        self.pack_rows.set(on);
    }

    /// The database this outbox lives in: write your own tables through
    /// it, in the same transaction as an enqueue.
    pub fn sql(&self) -> &S {
        &self.sql
    }

    /// The operating settings.
    pub fn settings(&self) -> OutboxSettings {
        self.settings.get()
    }

    /// Replaces the operating settings (they are not stored).
    pub fn set_settings(&self, settings: OutboxSettings) {
        self.settings.set(settings);
    }

    /// Replaces the endpoints rows may be addressed to, and those of them
    /// that take many rows per request (not stored).
    pub fn set_endpoints(
        &self,
        names: std::collections::BTreeSet<String>,
        batched: std::collections::BTreeSet<String>,
    ) {
        *self.batched.borrow_mut() = batched.intersection(&names).cloned().collect();
        *self.endpoints.borrow_mut() = names;
    }

    /// The endpoints that take many rows per request.
    pub(crate) fn batched_endpoints(&self) -> std::collections::BTreeSet<String> {
        self.batched.borrow().clone()
    }

    /// The oldest row still owed to a target (queued or parked), in one
    /// statement: the head of each table (tombstones and discarded rows are
    /// not rows), tagged 0 for queued and 1 for parked.
    pub fn owed_head(&self) -> Result<Option<Head>, StoreError> {
        self.flush_delivered()?;
        let rows = self.sql.rows(
            "SELECT 0, seq, at_ms, due_ms FROM (SELECT seq, at_ms, due_ms FROM relay_outbox \
             WHERE target != '' AND first_seq IS NULL ORDER BY seq LIMIT 1) \
             UNION ALL SELECT 0, j.value ->> 0, j.value ->> 2, j.value ->> 3 FROM (SELECT body FROM relay_outbox \
             WHERE first_seq IS NOT NULL ORDER BY seq LIMIT 1) p, json_each(p.body) j WHERE j.key = 0 \
             UNION ALL SELECT 1, seq, at_ms, due_ms FROM (SELECT seq, at_ms, due_ms FROM relay_parked \
             WHERE discarded_at_ms IS NULL ORDER BY seq LIMIT 1)",
            vec![],
        )?;
        let (mut queued, mut parked) = (None, None);
        for r in rows {
            let head = Head { seq: r.u64(1)?, at_ms: r.u64(2)?, due_ms: r.u64(3)? };
            if r.u64(0)? == 0 {
                // A plain row and a pack's first row: the older is the head.
                queued = Some(queued.filter(|q: &Head| q.seq < head.seq).unwrap_or(head));
            } else {
                parked = Some(head);
            }
        }
        Ok(crate::core::owed_head(queued, parked))
    }

    /// Occupancy under the backpressure bounds.
    pub fn capacity(&self, state: &SourceState) -> Capacity {
        Capacity {
            rows: state.queued_rows + state.parked_rows,
            bytes: state.queued_bytes + state.parked_bytes,
            max_rows: self.settings().max_rows,
            max_bytes: self.settings().max_bytes,
        }
    }

    /// Counts a row written outside SQL (an alarm arm).
    pub fn note_write(&self) {
        self.add_pending(Pending { writes: 1, ..Pending::default() });
    }

    /// Counts not yet written ([`state`](Outbox::state) already adds them).
    pub fn unwritten(&self) -> Pending {
        self.pending.get()
    }

    fn add_pending(&self, p: Pending) {
        let mut now = self.pending.get();
        if now == Pending::default() && p != Pending::default() && self.pending_since_ms.get().is_none() {
            self.pending_since_ms.set(Some(self.clock_ms.get()));
        }
        now.add(p);
        self.pending.set(now);
    }

    /// Tells the outbox the time (ms since the epoch) an operation runs at:
    /// the day its rows written count towards, and the age of counts not
    /// yet written. Never moves back.
    pub fn note_time(&self, now_ms: u64) {
        self.clock_ms.set(self.clock_ms.get().max(now_ms));
    }

    /// Whether `target` is parked: one keyed read.
    pub fn is_parked(&self, target: &str) -> Result<bool, StoreError> {
        let row = self.sql.first(
            "SELECT EXISTS (SELECT 1 FROM relay_targets WHERE target = ? AND parked = 1)",
            vec![target.into()],
        )?;
        Ok(row.map_or(Ok(0), |r| r.u64(0))? != 0)
    }

    /// Rows and body bytes of `query`'s `COUNT(*), COALESCE(SUM(bytes), 0)`.
    fn count(&self, query: &str, params: Vec<SqlValue>) -> Result<(u64, u64), StoreError> {
        let row = self.sql.first(query, params)?;
        row.map_or(Ok((0, 0)), |r| Ok((r.u64(0)?, r.u64(1)?)))
    }

    /// Dedup records remembered, counted up to
    /// [`STATUS_COUNT_MAX`](crate::core::STATUS_COUNT_MAX).
    pub fn dedup_records(&self) -> Result<u64, StoreError> {
        let row = self.sql.first(
            "SELECT COUNT(*) FROM (SELECT 1 FROM relay_dedup LIMIT ?)",
            vec![int(u64::from(crate::core::STATUS_COUNT_MAX))],
        )?;
        row.map_or(Ok(0), |r| r.u64(0))
    }
}
