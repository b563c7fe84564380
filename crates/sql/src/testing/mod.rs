//! Test plumbing (cargo feature `testing`): fault injection as wrappers
//! around the real store, and the target's test tables. Never in a
//! production build: the production schema has none of these tables and no
//! production apply reads them.
//!
//! - [`FaultySql`]: wraps any [`Sql`]; armed, it fails the next checkpoint
//!   statement, as a crash between the target apply and the source cleanup
//!   would (the checkpoint's transaction rolls back, the alarm fails); or it
//!   refuses every write with the platform's own message for an account past
//!   its daily rows-written allowance, as Workers Free does until 00:00 UTC;
//! - [`TestTables`]: a target's fault switch (refuse calls, transiently or
//!   permanently; delay them) and its applied-sequence log, kept under their
//!   own schema component (`relay_testing`), with the bodies that set
//!   them and the seeding of failing targets (all in `tables.rs`);
//! - [`ApplyLog`]: the hook that writes that log inside the apply
//!   transaction, so tests check order and exactly-once row by row;
//! - [`MemoryAlarm`]: an alarm kept in memory, for a relay whose alarm is
//!   not under test;
//! - [`CutOff`]: the platform ending an invocation at a chosen boundary
//!   (a statement or an alarm operation), shared by a `FaultySql` and its
//!   object's `MemoryAlarm`;
//! - [`conformance`]: one storage suite for every [`Sql`] backend;
//! - [`upgrade`]: a database brought to an older schema version, for the
//!   upgrade fixtures.

pub mod conformance;
mod cut;
mod tables;
pub mod upgrade;

pub use cut::{CutOff, INJECTED_CUT};
pub use tables::*;

use std::cell::Cell;

use crate::source::AlarmStore;
use crate::store::outbox::CHECKPOINT_GUARD_SQL;
use crate::store::{Rows, Sql, SqlValue, StoreError, PLATFORM_WRITE_LIMIT_MESSAGE};

/// An alarm kept in memory (shared by its clones).
#[derive(Clone, Default)]
pub struct MemoryAlarm {
    /// The alarm's time, ms since the epoch.
    at: std::rc::Rc<Cell<Option<u64>>>,
    /// Whether setting the alarm is refused as past the daily allowance of
    /// rows written (the platform bills a `setAlarm` as a row written, so
    /// it may refuse it with the rest).
    refuse_sets: std::rc::Rc<Cell<bool>>,
    /// The cut-off its object's invocations may meet (see [`CutOff`]).
    cut: CutOff,
}

impl MemoryAlarm {
    /// An alarm kept in `at`, which the caller may read and set too.
    pub fn sharing(at: std::rc::Rc<Cell<Option<u64>>>) -> MemoryAlarm {
        MemoryAlarm { at, refuse_sets: std::rc::Rc::default(), cut: CutOff::default() }
    }

    /// This alarm, failing as `cut` says: the object's store shares it, so
    /// each of the alarm's operations is one more boundary of the cut.
    pub fn cut_by(mut self, cut: CutOff) -> MemoryAlarm {
        self.cut = cut;
        self
    }

    /// Refuses (or accepts again) every set of this alarm and its clones
    /// with the platform's daily write refusal; deleting still works.
    pub fn refuse_sets(&self, on: bool) {
        self.refuse_sets.set(on);
    }
}

impl AlarmStore for MemoryAlarm {
    async fn get(&self) -> Result<Option<u64>, StoreError> {
        self.cut.effect()?;
        Ok(self.at.get())
    }

    async fn set(&self, at_ms: u64) -> Result<(), StoreError> {
        self.cut.effect()?;
        if self.refuse_sets.get() {
            return Err(StoreError::from_platform(PLATFORM_WRITE_LIMIT_MESSAGE.into()));
        }
        self.at.set(Some(at_ms));
        Ok(())
    }

    async fn delete(&self) -> Result<(), StoreError> {
        self.cut.effect()?;
        self.at.set(None);
        Ok(())
    }
}

/// A store that fails checkpoints on demand; otherwise the store it wraps.
#[derive(Clone)]
pub struct FaultySql<S> {
    inner: S,
    /// Checkpoints still to fail.
    crash_checkpoints: std::rc::Rc<Cell<u32>>,
    /// Whether every write is refused as past the daily allowance.
    refuse_writes: std::rc::Rc<Cell<bool>>,
    /// Rows read and written by every statement so far, so a test can
    /// measure what one request costs.
    io: std::rc::Rc<Cell<SqlIo>>,
    /// The cut-off its invocations may meet: each statement is a boundary.
    cut: CutOff,
}

/// Rows read and written, summed over statements.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SqlIo {
    /// Rows read (see [`Rows::read`]).
    pub read: u64,
    /// Rows written.
    pub written: u64,
    /// Statements run.
    pub statements: u64,
}

impl<S: Sql> FaultySql<S> {
    /// Wraps `inner` with no fault armed.
    pub fn new(inner: S) -> FaultySql<S> {
        FaultySql {
            inner,
            crash_checkpoints: std::rc::Rc::new(Cell::new(0)),
            refuse_writes: std::rc::Rc::default(),
            io: std::rc::Rc::default(),
            cut: CutOff::default(),
        }
    }

    /// The cut-off every statement through this store (and its clones)
    /// counts against; share it with the object's alarm.
    pub fn cut_off(&self) -> &CutOff {
        &self.cut
    }

    /// Refuses (or stops refusing) every statement that writes, with the
    /// platform's message for an account past its daily rows-written
    /// allowance ([`PLATFORM_WRITE_LIMIT_MESSAGE`]); reads still run.
    pub fn refuse_writes(&self, on: bool) {
        self.refuse_writes.set(on);
    }

    /// Rows read and written through this store so far.
    pub fn io(&self) -> SqlIo {
        self.io.get()
    }

    /// Fails the next `n` checkpoints.
    pub fn crash_checkpoints(&self, n: u32) {
        self.crash_checkpoints.set(n);
    }

    /// The wrapped store.
    pub fn inner(&self) -> &S {
        &self.inner
    }
}

/// The error an injected crash raises.
pub const INJECTED_CRASH: &str = "injected crash before the checkpoint";

/// Whether `query` may write: anything but a plain `SELECT` (the relay's
/// writes are `INSERT`, `UPDATE`, `DELETE`, DDL, and `WITH ... INSERT`).
fn writes(query: &str) -> bool {
    let upper = query.trim_start().to_ascii_uppercase();
    let select = upper.starts_with("SELECT");
    !select || ["INSERT ", "UPDATE ", "DELETE "].iter().any(|w| upper.contains(w))
}

impl<S: Sql> Sql for FaultySql<S> {
    fn exec(&self, query: &str, params: Vec<SqlValue>) -> Result<Rows, StoreError> {
        self.cut.effect()?;
        let armed = self.crash_checkpoints.get();
        if armed > 0 && query == CHECKPOINT_GUARD_SQL {
            self.crash_checkpoints.set(armed - 1);
            return Err(StoreError::Sql(INJECTED_CRASH.into()));
        }
        if self.refuse_writes.get() && writes(query) {
            // Through the shipped classifier, as the platform's error goes.
            return Err(StoreError::from_platform(PLATFORM_WRITE_LIMIT_MESSAGE.into()));
        }
        let rows = self.inner.exec(query, params)?;
        let io = self.io.get();
        self.io.set(SqlIo {
            read: io.read + u64::from(rows.read),
            written: io.written + u64::from(rows.written),
            statements: io.statements + 1,
        });
        Ok(rows)
    }

    fn transaction<T>(&self, body: impl FnMut() -> Result<T, StoreError>) -> Result<T, StoreError> {
        self.inner.transaction(body)
    }
}
