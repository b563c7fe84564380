//! [`Relay`]: the source side of the relay as one type, for the reference
//! source Durable Object and for embedders' own. It owns the outbox and
//! keeps the alarm right, so no caller hand-rolls any of it:
//!
//! - an enqueue arms the alarm in the same synchronous turn as the rows
//!   (a later alarm, such as a back-off, is brought forward to now);
//! - an alarm runs the driver, then arms the next wake-up it decided (or
//!   none), prunes, and reports;
//! - an alarm that hit a storage error arms a back-off of its own before it
//!   throws (1 s, doubling with each consecutive failure up to 60 s), so a
//!   platform that drops the alarm after its retries cannot strand the rows.
//!   (Seen in workerd: an alarm set by a handler that then throws replaces
//!   the platform's own retry, so the back-off starts short.)
//! - an alarm that met the platform's daily rows-written refusal (Workers
//!   Free) sleeps until 00:00 UTC, when writes come back, instead of
//!   retrying into the same refusal every few seconds: it arms its next
//!   alarm then and returns normally (an enqueue that gets through earlier
//!   brings it forward);
//! - a status read, or an enqueue, re-arms an alarm the platform dropped;
//! - the object's one alarm is shared with the host: the host keeps its own
//!   time through the relay ([`Relay::set_host_alarm`]), every arming sets
//!   the earlier of the relay's time and the host's (one function,
//!   `note_armed`), an alarm reports when the host's time has come
//!   ([`AlarmSummary::host_alarm`]), and a stored alarm found missing or
//!   later than both need (someone set or deleted it directly) is re-armed
//!   with a `relay_alarm_moved` warning;
//! - counts kept in memory (see the outbox's ledger) are written by an
//!   alarm once the oldest is older than
//!   [`UNWRITTEN_COUNTS_MAX_AGE_MS`],
//!   and by a status read before it reports them.
//!
//! The stored alarm is reached through [`AlarmStore`] (the Durable Object's
//! alarm in workerd, or a scheduler of the host's when a framework owns
//! that alarm; a simulated one in the simulator). What this instance
//! knows of it is cached ([`AlarmKnown`]): the platform clears an alarm when
//! it fires and only this code sets one, so the cache is exact once loaded,
//! and an alarm already early enough is never written again. A host that
//! sets the alarm itself breaks that exactness; a status read, a re-arm
//! sweep or `enqueueSync`'s recheck reads the stored alarm afresh and puts
//! it right.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use crate::core::schedule::{alarm_moved, arm, coalesced, enqueue_due, needs_rearm, shared_alarm};
use crate::core::{
    delivered_through, next_utc_day_ms, part_of, projected_for_day, relay_watermark, retry_backoff_ms,
    utc_date, utc_day, AlarmKnown, EnqueueRow, Fence, KeyVerdict, Name, Part, PartitionMap, ScanState,
    SourceId, Ticket, MAX_RETRY_HALVINGS, RETRY_HALVING_KEPT_ALARMS, SEQ_MAX, UNWRITTEN_COUNTS_MAX_AGE_MS,
    WORKER_FREE_ROWS_WRITTEN_PER_DAY,
};
use crate::driver::{run_alarm, AlarmError, AlarmSummary, FireObserver, Targets};
use crate::store::outbox::{
    ActionOutcome, EnqueueFailure, Enqueued, Outbox, ParkedPage, QueuedPage, RoutedKey, Sealed, Seat,
    Settling, SourceState, TargetFilter, TargetPage, TargetReport,
};
use crate::store::{int, Sql, StoreError};

mod alarm;
mod deliver;
mod enqueue;

use deliver::Run;
mod parked;
mod partitioned;
mod status;

pub use durable_relay_protocol::wire::{CapacityReport, Rearmed, SourceConfig, SourceStatus};

/// Where a source's alarm is stored. Times are absolute, ms since the epoch.
#[allow(async_fn_in_trait)]
pub trait AlarmStore {
    /// The stored alarm, if any.
    async fn get(&self) -> Result<Option<u64>, StoreError>;
    /// Stores an alarm at `at_ms` (replacing any other).
    async fn set(&self, at_ms: u64) -> Result<(), StoreError>;
    /// Removes the stored alarm.
    async fn delete(&self) -> Result<(), StoreError>;
    /// Reports, as one warning line, an alarm the relay found missing or
    /// later than it and its host need (someone set or deleted it behind
    /// the relay's back) and re-armed. The Durable Object's alarm logs it;
    /// by default it goes nowhere.
    fn moved(&self, warning: &serde_json::Value) {
        let _ = warning;
    }
}

/// Why an alarm failed. The alarm was re-armed with a back-off first
/// (when the store allowed), so throwing from the handler is safe.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlarmFailure {
    /// What went wrong.
    pub error: AlarmError,
    /// When the back-off alarm is due, if arming it succeeded.
    pub retry_at_ms: Option<u64>,
}

/// Marks a run (an alarm's, or an in-turn delivery) as going on for as
/// long as it lives, whichever way it ends.
struct Running<'a>(&'a Cell<bool>);

impl<'a> Running<'a> {
    fn start(flag: &'a Cell<bool>) -> Self {
        flag.set(true);
        Running(flag)
    }
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.0.set(false);
    }
}

/// The source side of the relay in one Durable Object: see the module doc.
pub struct Relay<S, A> {
    name: Name,
    /// The source object's id: with the name, what its targets key its
    /// watermark by (names collide across classes and Workers).
    id: SourceId,
    outbox: Outbox<S>,
    alarm: A,
    known: Cell<AlarmKnown>,
    /// The host's own alarm time as stored (`relay_host_alarm`), once read:
    /// `None` until then, `Some(None)` when the host has none. Only this
    /// code writes it, so once read it is exact.
    host: Cell<Option<Option<u64>>>,
    /// Consecutive alarms that failed; sets the back-off of the next.
    alarm_failures: Cell<u32>,
    /// When an alarm last delivered rows (this instance's memory): rows that
    /// arrive soon after may wait to share calls (`coalesce_ms`).
    last_delivery_ms: Cell<Option<u64>>,
    /// Whether an alarm of this instance is running. The platform consumes
    /// an alarm when it wakes the object, so a status read or a sweep
    /// during the fire finds none stored while rows wait; arming one then
    /// would wake the object again for nothing, since the fire arms its own
    /// next wake-up when it ends. An in-turn delivery consumes no alarm:
    /// while one runs, the stored alarm is checked as at any other time.
    /// See `delivering` for how the two exclude each other.
    firing: Cell<bool>,
    /// Whether an enqueue committed rows due now since the last in-turn
    /// delivery began: they ask for one. Asked while one runs, it runs
    /// once more when it ends, instead of a second running beside it. Not
    /// asked while the alarm runs (the enqueue arms the next alarm for
    /// now) nor for rows due later: then none runs.
    asked: Cell<bool>,
    /// Whether an in-turn delivery of this instance is running. Invariant:
    /// an in-turn run never starts while `firing` is set, and an alarm runs
    /// while this is set only once the delivery's latest run started
    /// [`IN_TURN_DEFER_MAX_MS`](crate::core::IN_TURN_DEFER_MAX_MS) ago or
    /// more (taken for stuck).
    delivering: Cell<bool>,
    /// When an enqueue last asked for an in-turn delivery, ms.
    asked_ms: Cell<u64>,
    /// Alarms in a row that kept a delivered row for a live stream (see
    /// `Relay::keep_for_stream`). Invariant: at most
    /// [`IN_TURN_KEPT_ALARMS_MAX`](crate::core::IN_TURN_KEPT_ALARMS_MAX).
    kept_alarms: Cell<u32>,
    /// When the running in-turn delivery started its latest run, ms.
    run_started_ms: Cell<u64>,
    /// When the running in-turn delivery last heard anything: its latest
    /// run's start, or a call's answer or failure, ms. How long it has
    /// awaited since sets how far ahead the alarm is kept for its rows
    /// (see [`in_turn_lease_ms`](crate::core::schedule::in_turn_lease_ms)).
    heard_ms: Cell<u64>,
    /// A `Cell` so a running source can be reconfigured without exclusive
    /// access. Invariant: its budget is valid.
    config: Cell<SourceConfig>,
    /// Which retry of a failed alarm the next alarm is, as the platform
    /// told the entry point (`alarmInfo.retryCount`); consumed by it. A
    /// retry runs a smaller fire (see [`RelayBudget::for_retry`]).
    ///
    /// [`RelayBudget::for_retry`]: crate::core::RelayBudget::for_retry
    retried: Cell<u32>,
    /// The halvings of the last retry that fitted, kept for later alarms
    /// (see [`KeptHalvings`]).
    kept: Cell<KeptHalvings>,
    /// The runtime's near-CPU-limit signal, given the work spent (see
    /// [`crate::driver::NearLimit`]); `None` where the runtime has none.
    near_limit: RefCell<Option<Rc<crate::driver::NearLimit<'static>>>>,
    /// The targets found to predate source ids, sent batches without one
    /// (see [`crate::peers`]); kept while the object is, relearnt after.
    pre_id: RefCell<crate::core::PreIdTargets>,
}

/// How much smaller than its budget a source's alarms run after a retry:
/// a retry the CPU limit made necessary fitted at `halvings` (see
/// [`RelayBudget::for_retry`]), so the next alarms keep that size, and only
/// after [`RETRY_HALVING_KEPT_ALARMS`] alarms that ran uncut try one step
/// larger. Kept in memory: an object the platform reset starts again from
/// the platform's retry count, which is exactly when it needs one.
///
/// Invariant: `halvings <= MAX_RETRY_HALVINGS`.
///
/// [`RelayBudget::for_retry`]: crate::core::RelayBudget::for_retry
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KeptHalvings {
    /// Halvings applied to alarms that are not retries.
    pub halvings: u32,
    /// Uncut alarms run at `halvings` since it was last set or lowered.
    pub uncut: u32,
}

impl KeptHalvings {
    /// After an alarm that completed, the `retry_count`th retry (0: none),
    /// cut short by the CPU gauge or not.
    pub fn after(self, retry_count: u32, cpu_cut: bool) -> KeptHalvings {
        if retry_count > 0 {
            return KeptHalvings { halvings: retry_count.min(MAX_RETRY_HALVINGS), uncut: 0 };
        }
        if self.halvings == 0 || cpu_cut {
            return self;
        }
        let uncut = self.uncut + 1;
        if uncut >= RETRY_HALVING_KEPT_ALARMS {
            KeptHalvings { halvings: self.halvings - 1, uncut: 0 }
        } else {
            KeptHalvings { uncut, ..self }
        }
    }
}

impl<S: Sql, A: AlarmStore> Relay<S, A> {
    /// Opens the source `name`, whose object's id is `id` (in workerd
    /// `state.id().to_string()`), on `sql` (creating or migrating its
    /// tables) with its alarm in `alarm`. Refuses a budget outside its
    /// ranges.
    pub fn open(
        name: Name,
        id: SourceId,
        sql: S,
        alarm: A,
        config: SourceConfig,
    ) -> Result<Self, AlarmError> {
        config.alarm.budget.validate()?;
        let outbox = Outbox::open(sql, config.settings)?;
        outbox.set_pack_rows(config.pack_rows);
        Ok(Relay {
            name,
            id,
            outbox,
            alarm,
            known: Cell::new(AlarmKnown::Unknown),
            host: Cell::new(None),
            alarm_failures: Cell::new(0),
            last_delivery_ms: Cell::new(None),
            firing: Cell::new(false),
            asked: Cell::new(false),
            delivering: Cell::new(false),
            asked_ms: Cell::new(0),
            kept_alarms: Cell::new(0),
            run_started_ms: Cell::new(0),
            heard_ms: Cell::new(0),
            config: Cell::new(config),
            retried: Cell::new(0),
            kept: Cell::new(KeptHalvings::default()),
            near_limit: RefCell::new(None),
            pre_id: RefCell::default(),
        })
    }

    /// Tells the source that its next alarm is the platform's `retry_count`th
    /// retry of a failed one (`alarmInfo.retryCount`; 0: not a retry), so it
    /// runs a smaller fire: rows and work halved per retry. Call it
    /// just before [`Relay::alarm`], which consumes it.
    pub fn alarm_retried(&self, retry_count: u32) {
        self.retried.set(retry_count);
    }

    /// Gives the source the runtime's near-CPU-limit signal (in workers-rs,
    /// `worker::signal::is_near_cpu_limit`), read between calls and
    /// statements; given the work units spent, which a runtime's own signal
    /// may ignore.
    pub fn set_near_cpu_limit(&self, near_limit: Rc<crate::driver::NearLimit<'static>>) {
        *self.near_limit.borrow_mut() = Some(near_limit);
    }

    /// The source's name.
    pub fn name(&self) -> &Name {
        &self.name
    }

    /// The source object's id, sent with every batch.
    pub fn id(&self) -> &SourceId {
        &self.id
    }

    /// The outbox (for reads; write through the methods here so the alarm
    /// stays right).
    pub fn outbox(&self) -> &Outbox<S> {
        &self.outbox
    }

    /// The database: write your own tables through it inside
    /// [`enqueue_with`](Relay::enqueue_with).
    pub fn sql(&self) -> &S {
        self.outbox.sql()
    }

    /// The configuration.
    pub fn config(&self) -> SourceConfig {
        self.config.get()
    }

    /// Replaces the configuration; refuses a budget outside its ranges.
    pub fn set_config(&self, config: SourceConfig) -> Result<(), AlarmError> {
        config.alarm.budget.validate()?;
        self.outbox.set_settings(config.settings);
        self.outbox.set_pack_rows(config.pack_rows);
        self.config.set(config);
        Ok(())
    }

    /// Replaces the endpoints rows may be addressed to (`endpoint:<name>`),
    /// and those of them that take many rows per request (the rest get one
    /// per call); a row to any other is refused as `unknown_endpoint`. None
    /// by default.
    pub fn set_endpoints(
        &self,
        names: std::collections::BTreeSet<String>,
        batched: std::collections::BTreeSet<String>,
    ) {
        self.outbox.set_endpoints(names, batched);
    }

    /// Where this source stands in its logical source: its name and which
    /// part its name spells (`logical:index`, or the plain object).
    fn seat(&self) -> Seat<'_> {
        Seat { name: &self.name, part: part_of(&self.name) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fitted_retry_is_kept_until_enough_uncut_alarms_try_one_step_larger() {
        let fitted = KeptHalvings::default().after(2, false);
        assert_eq!(fitted, KeptHalvings { halvings: 2, uncut: 0 });
        let mut kept = fitted;
        for _ in 1..RETRY_HALVING_KEPT_ALARMS {
            kept = kept.after(0, false);
            assert_eq!(kept.halvings, 2, "kept until the edge");
        }
        assert_eq!(
            kept.after(0, false),
            KeptHalvings { halvings: 1, uncut: 0 },
            "at the edge: one step larger"
        );
        assert_eq!(kept.after(0, true), kept, "an alarm the gauge cut is no evidence of room");
        assert_eq!(
            KeptHalvings::default().after(0, false),
            KeptHalvings::default(),
            "nothing kept, nothing counted"
        );
        assert_eq!(
            kept.after(u32::MAX, false).halvings,
            MAX_RETRY_HALVINGS,
            "past the last halving: the last"
        );
    }
}
