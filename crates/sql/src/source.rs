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

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::core::schedule::{alarm_moved, arm, coalesced, enqueue_due, needs_rearm, shared_alarm};
use crate::core::{
    delivered_through, next_utc_day_ms, part_of, projected_for_day, relay_watermark, retry_backoff_ms,
    utc_date, utc_day, AlarmKnown, EnqueueRow, Fence, KeyVerdict, Name, Part, PartitionMap, ScanState,
    SourceId, Ticket, MAX_RETRY_HALVINGS, RETRY_HALVING_KEPT_ALARMS, SEQ_MAX, UNWRITTEN_COUNTS_MAX_AGE_MS,
    WORKER_FREE_ROWS_WRITTEN_PER_DAY,
};
use crate::driver::{run_alarm, AlarmError, AlarmOptions, AlarmSummary, FireObserver, Targets};
use crate::store::outbox::{
    ActionOutcome, EnqueueFailure, Enqueued, Outbox, OutboxSettings, ParkedPage, RoutedKey, Sealed, Seat,
    Settling, SourceState, TargetFilter, TargetPage, TargetReport,
};
use crate::store::{int, Sql, StoreError};

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

/// A source's configuration: its alarm limits and operating settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceConfig {
    /// Fires, targets, calls, rows, and concurrent calls per alarm.
    pub alarm: AlarmOptions,
    /// Parking, backpressure and retention.
    pub settings: OutboxSettings,
    /// How long rows that arrive while the source is delivering wait to
    /// share calls, ms (0: never wait). A source that was idle delivers a
    /// lone row at once either way. At most
    /// [`MAX_COALESCE_MS`](crate::core::MAX_COALESCE_MS).
    #[serde(default)]
    pub coalesce_ms: u64,
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

/// Occupancy against the backpressure bounds.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct CapacityReport {
    /// Rows waiting (queued plus parked).
    pub rows: u64,
    /// Body bytes waiting.
    pub bytes: u64,
    /// Bound on rows.
    pub max_rows: u64,
    /// Bound on bytes.
    pub max_bytes: u64,
    /// The larger of the two ratios, in percent.
    pub percent_full: f64,
}

/// What a status read reports (also the wire form of `GET /status`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SourceStatus {
    /// The source.
    pub source: String,
    /// The source object's id: with the name, what its targets key its
    /// watermark by (`GET .../watermarks` lists both). Absent from a relay
    /// older than ids.
    #[serde(default)]
    pub source_id: Option<String>,
    /// Last allocated sequence (the engine's `os`; pre-release builds
    /// named the field `os`, which is still read).
    #[serde(alias = "os")]
    pub last_seq: u64,
    /// Rows in the outbox.
    pub queued_rows: u64,
    /// Body bytes in the outbox.
    pub queued_bytes: u64,
    /// Rows parked (not discarded).
    pub parked_rows: u64,
    /// Body bytes parked.
    pub parked_bytes: u64,
    /// Rows ever enqueued.
    pub enqueued_rows: u64,
    /// Rows ever delivered.
    pub delivered_rows: u64,
    /// Alarms, fires, target calls (subrequests) and lost checkpoints.
    pub alarms: u64,
    /// Fires run.
    pub fires: u64,
    /// Target calls made; each is one subrequest.
    pub subrequests: u64,
    /// Checkpoints that lost their guard.
    pub conflicts: u64,
    /// Keyed enqueues answered as duplicates.
    pub dedup_hits: u64,
    /// Enqueues refused as full.
    pub rejected_full: u64,
    /// Fires that saw a row older than the lag bound.
    pub lag_breaches: u64,
    /// SQLite rows written by the relay, and per delivered row.
    pub sql_rows_written: u64,
    /// SQLite rows this source wrote in the current UTC day
    /// (`rows_written_day`), counts not yet written included. The Free
    /// allowance is the account's, shared by every object.
    #[serde(default)]
    pub rows_written_today: u64,
    /// The UTC date `rows_written_today` counts (`YYYY-MM-DD`).
    #[serde(default)]
    pub rows_written_day: String,
    /// What the day's rate so far projects for the whole UTC day (see
    /// [`projected_for_day`]).
    #[serde(default)]
    pub rows_written_projected_today: u64,
    /// The Workers Free allowance the projection compares with
    /// ([`WORKER_FREE_ROWS_WRITTEN_PER_DAY`]),
    /// per account.
    #[serde(default)]
    pub rows_written_free_limit: u64,
    /// `sql_rows_written / delivered_rows`, once anything was delivered.
    pub sql_rows_written_per_delivered_row: Option<f64>,
    /// The scan cycle's persisted state (the engine's `rs`, the field's
    /// name in pre-release builds), `None` when absent or corrupt.
    #[serde(alias = "rs")]
    pub scan_state: Option<ScanState>,
    /// Whether the stored scan state failed to decode (`rs_corrupt` in
    /// pre-release builds).
    #[serde(alias = "rs_corrupt")]
    pub scan_state_corrupt: bool,
    /// Failing targets whose rows are passed over now: their retry is not
    /// due yet (see `TargetReport::retry_at_ms`), by name; among the
    /// failing targets listed.
    pub blocked_targets: Vec<Name>,
    /// Parked targets and their parked rows: the first
    /// [`STATUS_TARGETS`](crate::core::STATUS_TARGETS) by name.
    pub parked_targets: BTreeMap<String, u64>,
    /// Failing (not parked) targets and their consecutive failed cycles:
    /// the first [`STATUS_TARGETS`](crate::core::STATUS_TARGETS) by name.
    pub failing_targets: BTreeMap<String, u32>,
    /// Whether more parked or failing targets exist than the two lists
    /// name: page them all with `GET /parked`.
    #[serde(default)]
    pub targets_truncated: bool,
    /// Age of the oldest owed (queued or parked) row, ms.
    pub oldest_row_age_ms: Option<u64>,
    /// Whether that row is past the lag bound.
    pub lag_exceeded: bool,
    /// The commit-time lower bound of the owed rows.
    pub relay_watermark: u64,
    /// Occupancy against the backpressure bounds.
    pub capacity: CapacityReport,
    /// Dedup records remembered, counted up to
    /// [`STATUS_COUNT_MAX`](crate::core::STATUS_COUNT_MAX) (which then
    /// means "at least").
    pub dedup_records: u64,
    /// Discarded rows still kept, counted up to
    /// [`STATUS_COUNT_MAX`](crate::core::STATUS_COUNT_MAX).
    pub discarded_rows: u64,
    /// When expired records were last pruned (0: never).
    pub last_prune_ms: u64,
    /// The last alarm's figures.
    pub last_alarm: Option<serde_json::Value>,
    /// The stored alarm after this read, ms since the epoch.
    pub alarm_at_ms: Option<u64>,
    /// Whether this read re-armed a dropped alarm, or one moved later than
    /// the relay and its host need.
    pub rearmed: bool,
    /// The alarm limits and operating settings in force.
    pub config: SourceConfig,
}

/// What a re-arm check found and did.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rearmed {
    /// Whether it set the alarm: rows were queued and none was set, or the
    /// stored one was later than the relay and its host need.
    pub rearmed: bool,
    /// The stored alarm afterwards, ms since the epoch.
    pub alarm_at_ms: Option<u64>,
    /// Rows queued.
    pub queued_rows: u64,
}

/// The failing targets passed over at `now_ms`: those an older version
/// listed in `rs`, and those whose retry is not due yet.
fn blocked_now(rs: Option<&ScanState>, targets: &[TargetReport], now_ms: u64) -> Vec<Name> {
    let mut blocked = rs.map_or_else(Vec::new, |s| s.blocked.clone());
    let deferred = targets.iter().filter(|t| t.retry_at_ms.is_some_and(|at| at > now_ms));
    blocked.extend(deferred.filter_map(|t| Name::new(t.target.as_str()).ok()));
    blocked.sort();
    blocked.dedup();
    blocked
}

/// Marks an alarm as running for as long as it lives, whichever way the
/// alarm ends.
struct Firing<'a>(&'a Cell<bool>);

impl<'a> Firing<'a> {
    fn start(flag: &'a Cell<bool>) -> Self {
        flag.set(true);
        Firing(flag)
    }
}

impl Drop for Firing<'_> {
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
    /// next wake-up when it ends.
    firing: Cell<bool>,
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
            config: Cell::new(config),
            retried: Cell::new(0),
            kept: Cell::new(KeptHalvings::default()),
            near_limit: RefCell::new(None),
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
        self.config.set(config);
        Ok(())
    }

    /// Enqueues `rows` (optionally under an idempotency key) in a
    /// transaction of its own, and arms the alarm in the same turn.
    pub async fn enqueue(
        &self,
        now_ms: u64,
        key: Option<&str>,
        rows: &[EnqueueRow],
    ) -> Result<Enqueued, EnqueueFailure> {
        // `EnqueueFailure` is `EnqueueFailure<Infallible>`: no writes, no abort.
        let (_, done) =
            self.enqueue_with(now_ms, key, rows, |_| Ok::<(), std::convert::Infallible>(())).await?;
        Ok(done)
    }

    /// Enqueues `rows` and runs `writes` (the caller's own state change, on
    /// [`sql`](Relay::sql)) in **one** transaction: both commit, or neither
    /// does. `writes` runs after the rows are written and sees what the
    /// enqueue did (its sequences, to store beside your own rows). An error
    /// from `writes` rolls everything back and comes back as
    /// [`EnqueueFailure::Aborted`]. The alarm is armed in the same turn.
    ///
    /// With an idempotency key, a repeat is answered as a duplicate
    /// (`enqueued.duplicate`, nothing of the relay's written) and `writes`
    /// still runs: skip your own writes then, as they were made the first
    /// time.
    pub async fn enqueue_with<R, E: std::fmt::Display>(
        &self,
        now_ms: u64,
        key: Option<&str>,
        rows: &[EnqueueRow],
        writes: impl FnMut(&Enqueued) -> Result<R, E>,
    ) -> Result<(R, Enqueued), EnqueueFailure<E>> {
        // Unfenced, the outbox never answers "moved".
        self.enqueue_in_transaction(now_ms, key, None, rows, Fence::default(), writes)
            .await?
            .ok_or(EnqueueFailure::Store(StoreError::Guard("an unfenced enqueue answered moved")))
    }

    /// [`commit_enqueue`](Relay::commit_enqueue) once the alarm is known,
    /// then the alarm armed in the same turn.
    async fn enqueue_in_transaction<R, E: std::fmt::Display>(
        &self,
        now_ms: u64,
        key: Option<&str>,
        routed: Option<RoutedKey<'_>>,
        rows: &[EnqueueRow],
        fence: Fence,
        writes: impl FnMut(&Enqueued) -> Result<R, E>,
    ) -> Result<Option<(R, Enqueued)>, EnqueueFailure<E>> {
        self.forget_past_alarm(now_ms);
        self.load_alarm().await.map_err(EnqueueFailure::Store)?;
        // No await from here until the alarm is armed: the rows, the new os,
        // the caller's writes and the arming commit together.
        let taken = self.commit_enqueue(now_ms, key, routed, rows, fence, writes)?;
        if let Some((_, done)) = &taken {
            self.arm_for(done, now_ms).await.map_err(EnqueueFailure::Store)?;
        }
        Ok(taken)
    }

    /// Makes ready for [`enqueue_now`](Relay::enqueue_now): loads what this
    /// instance knows of its alarm (one read, once).
    pub async fn ready(&self) -> Result<(), StoreError> {
        self.load_alarm().await
    }

    /// An enqueue with no await, for a caller already inside a transaction
    /// of its own (a JavaScript object's `transactionSync`): the rows are
    /// written in a nested transaction, so they commit or roll back with
    /// the caller's; the time the alarm must be set to, if it must move,
    /// is noted as armed and returned for the caller to set in the same
    /// turn. Refused until [`ready`](Relay::ready) has run.
    pub fn enqueue_now(
        &self,
        now_ms: u64,
        key: Option<&str>,
        rows: &[EnqueueRow],
    ) -> Result<(Enqueued, Option<u64>), EnqueueFailure> {
        if self.known.get() == AlarmKnown::Unknown {
            return Err(EnqueueFailure::Store(StoreError::Guard(
                "the relay's alarm is not loaded: await ready() before enqueueing without awaiting",
            )));
        }
        let no_writes = |_: &Enqueued| Ok::<(), std::convert::Infallible>(());
        let (_, done) = self
            .commit_enqueue(now_ms, key, None, rows, Fence::default(), no_writes)?
            .ok_or(EnqueueFailure::Store(StoreError::Guard("an unfenced enqueue answered moved")))?;
        let at = if done.duplicate {
            None
        } else {
            self.note_armed(Some(self.due_for(&done, now_ms)), 0).map_err(EnqueueFailure::Store)?
        };
        Ok((done, at))
    }

    /// Forgets the alarm this instance noted as armed: setting it failed.
    pub fn alarm_unknown(&self) {
        self.known.set(AlarmKnown::Unknown);
    }

    /// The enqueue's transaction: the outbox's (fenced) enqueue, then
    /// `writes`, committed together or not at all. `Ok(None)`: a gated
    /// enqueue found its target moved (the epoch it stored commits; `writes`
    /// does not run).
    fn commit_enqueue<R, E: std::fmt::Display>(
        &self,
        now_ms: u64,
        key: Option<&str>,
        routed: Option<RoutedKey<'_>>,
        rows: &[EnqueueRow],
        fence: Fence,
        mut writes: impl FnMut(&Enqueued) -> Result<R, E>,
    ) -> Result<Option<(R, Enqueued)>, EnqueueFailure<E>> {
        let mut failure: Option<EnqueueFailure<E>> = None;
        let result = self.outbox.sql().transaction(|| {
            let done = match self.outbox.enqueue_fenced(self.seat(), now_ms, key, routed, rows, fence) {
                Ok(Some(done)) => done,
                Ok(None) => return Ok(None),
                Err(EnqueueFailure::Refused(e)) => {
                    failure = Some(EnqueueFailure::Refused(e));
                    return Err(StoreError::Aborted("the enqueue was refused".into()));
                }
                Err(EnqueueFailure::Store(e)) => return Err(e),
                Err(EnqueueFailure::Aborted(never)) => match never {},
            };
            match writes(&done) {
                Ok(r) => Ok(Some((r, done))),
                Err(e) => {
                    let text = e.to_string();
                    failure = Some(EnqueueFailure::Aborted(e));
                    Err(StoreError::Aborted(text))
                }
            }
        });
        match (result, failure) {
            (Ok(v), _) => Ok(v),
            (Err(_), Some(f)) => Err(f),
            (Err(e), None) => Err(EnqueueFailure::Store(e)),
        }
    }

    /// Arms the alarm for what an enqueue wrote (nothing for a duplicate).
    async fn arm_for(&self, done: &Enqueued, now_ms: u64) -> Result<(), StoreError> {
        if done.duplicate {
            return Ok(());
        }
        self.arm_at(self.due_for(done, now_ms)).await
    }

    /// When the rows an enqueue wrote need the alarm. A delayed row needs
    /// none before it is due; one already set earlier (for other rows) is
    /// kept.
    fn due_for(&self, done: &Enqueued, now_ms: u64) -> u64 {
        enqueue_due(now_ms, self.last_delivery_ms.get(), self.config.get().coalesce_ms)
            .max(done.first_due_ms())
    }

    /// As an object of a logical source now routed by `map`: what keeps
    /// its last change from settling here (see [`Settling`]). A change has
    /// settled (its `from` may be dropped, under a new epoch) once every
    /// object answers nothing.
    pub fn settling(&self, map: &PartitionMap, now_ms: u64) -> Result<Settling, StoreError> {
        self.outbox.settling(self.seat().part, map, now_ms)
    }

    /// Where this source stands in its logical source: its name and which
    /// part its name spells (`logical:index`, or the plain object).
    fn seat(&self) -> Seat<'_> {
        Seat { name: &self.name, part: part_of(&self.name) }
    }

    /// The first phase of adopting a router's partition map (see
    /// [`Outbox::prepare`]): refused when a router running it would no
    /// longer reach what this object holds. Returns every object this one
    /// knows the logical source has had.
    pub fn prepare(&self, now_ms: u64, map: &PartitionMap) -> Result<Vec<Part>, EnqueueFailure> {
        self.refusable(|| self.outbox.prepare(self.seat(), now_ms, map))
    }

    /// The second phase of adoption: routed requests of `map` are taken
    /// from now on (see [`Outbox::activate`]).
    pub fn activate(&self, now_ms: u64, map: &PartitionMap) -> Result<(), EnqueueFailure> {
        self.refusable(|| self.outbox.activate(now_ms, map))
    }

    /// As the home of an idempotency key at a partitioned source: records an
    /// attempt (see [`Outbox::record_key`]).
    pub fn record_key(
        &self,
        now_ms: u64,
        key: &str,
        digest: &str,
        reach: &[Part],
    ) -> Result<KeyVerdict, EnqueueFailure> {
        self.refusable(|| self.outbox.record_key(now_ms, key, digest, reach))
    }

    /// Seals a routed key for a retry (see [`Outbox::seal`]).
    pub fn seal(
        &self,
        now_ms: u64,
        key: &str,
        digest: &str,
        ticket: Ticket,
    ) -> Result<Sealed, EnqueueFailure> {
        self.refusable(|| self.outbox.seal(now_ms, key, digest, ticket))
    }

    /// At the plain object of a partitioned source: its own record of a key
    /// (see [`Outbox::probe_plain`]).
    pub fn probe_plain(
        &self,
        now_ms: u64,
        key: &str,
        digest: &str,
        fence: Fence,
    ) -> Result<Option<Enqueued>, EnqueueFailure> {
        self.refusable(|| self.outbox.probe_plain(self.seat(), now_ms, key, digest, fence))
    }

    /// Runs `body` in one transaction of its own; a refusal rolls it back
    /// and comes back as itself.
    fn refusable<T>(&self, mut body: impl FnMut() -> Result<T, EnqueueFailure>) -> Result<T, EnqueueFailure> {
        let mut failure = None;
        let result = self.outbox.sql().transaction(|| match body() {
            Ok(v) => Ok(v),
            Err(EnqueueFailure::Store(e)) => Err(e),
            Err(other) => {
                failure = Some(other);
                Err(StoreError::Aborted("refused".into()))
            }
        });
        result.map_err(|e| failure.take().unwrap_or(EnqueueFailure::Store(e)))
    }

    /// Enqueues `rows` routed to this object of a logical source (see
    /// [`crate::core::partition`]): refused with `stale_epoch` when the
    /// router's map is older than the one this object holds, and with
    /// `epoch_not_adopted` when it is not the active one (the router adopts
    /// it first); a gated enqueue (`fence.gate`, one target) is accepted
    /// only while this object still holds rows for its target, and
    /// otherwise answered `Ok(None)`: the target has moved to its new home.
    /// A keyed one (`key`) commits only the targets this object has not
    /// taken for the key, and is refused once a newer attempt sealed it.
    pub async fn enqueue_routed(
        &self,
        now_ms: u64,
        key: Option<RoutedKey<'_>>,
        rows: &[EnqueueRow],
        fence: Fence,
    ) -> Result<Option<Enqueued>, EnqueueFailure> {
        let no_writes = |_: &Enqueued| Ok::<(), std::convert::Infallible>(());
        let taken = self.enqueue_in_transaction(now_ms, None, key, rows, fence, no_writes).await?;
        Ok(taken.map(|(_, done)| done))
    }

    /// Runs one alarm: the driver's fires against `targets`, then arms the
    /// next wake-up. On a storage error it arms a back-off first and then
    /// fails, so the caller may throw; but when the platform refused a write
    /// for the account's daily allowance it arms the alarm at 00:00 UTC and
    /// answers a summary with `write_limited` set (and no figures of the
    /// fires it lost), since the platform's own retries, seconds apart, would
    /// only meet the same refusal and then drop the alarm.
    pub async fn alarm(
        &self,
        targets: &impl Targets,
        now: &dyn Fn() -> u64,
        observer: &impl FireObserver,
    ) -> Result<AlarmSummary, AlarmFailure> {
        // The platform consumed the alarm that woke us.
        self.known.set(AlarmKnown::None);
        let _firing = Firing::start(&self.firing);
        let started = now();
        let retry_count = self.retried.replace(0);
        let near_limit = self.near_limit.borrow().clone();
        let signal = |work: u64| near_limit.as_ref().is_some_and(|f| f(work));
        let mut options = self.config.get().alarm;
        // A retry halves by its count; what a fitted retry kept, beyond that.
        let kept = self.kept.get().halvings.saturating_sub(retry_count);
        options.budget = options.budget.for_retry(kept);
        match run_alarm(
            &self.outbox,
            &self.name,
            &self.id,
            &options,
            targets,
            now,
            observer,
            retry_count,
            &signal,
        )
        .await
        {
            Ok(mut summary) => {
                self.alarm_failures.set(0);
                self.kept.set(self.kept.get().after(retry_count, summary.cpu_cut));
                let config = self.config.get();
                if summary.rows_delivered > 0 {
                    self.last_delivery_ms.set(Some(now()));
                }
                summary.next_in_ms = coalesced(
                    summary.next_in_ms,
                    summary.queued_rows,
                    config.alarm.budget.rows_per_fire,
                    config.coalesce_ms,
                );
                summary.host_alarm = self.take_host_alarm(now());
                let relay_due = summary.next_in_ms.map(|delay| now().saturating_add(delay));
                let armed = self.arm(relay_due, 0).await;
                armed.map_err(|e| AlarmFailure { error: AlarmError::Store(e), retry_at_ms: None })?;
                // Counts waiting too long are written now (one row); if that
                // fails they wait for the next chance, and the alarm stands.
                let _ = self.outbox.write_counts(now(), UNWRITTEN_COUNTS_MAX_AGE_MS);
                Ok(summary)
            }
            // Writes come back with the next UTC day, not sooner.
            Err(AlarmError::Store(e)) if e.is_write_limit() => {
                let at = next_utc_day_ms(now());
                let host_alarm = self.take_host_alarm(now());
                match self.arm_at(at).await {
                    Ok(()) => Ok(AlarmSummary { host_alarm, ..self.write_limited(started, at, now()) }),
                    Err(_) => Err(AlarmFailure { error: AlarmError::Store(e), retry_at_ms: None }),
                }
            }
            Err(error) => {
                // Do not rely on the platform's few retries: back off ourselves.
                let failures = self.alarm_failures.get().saturating_add(1);
                self.alarm_failures.set(failures);
                let at = now().saturating_add(retry_backoff_ms(failures));
                // A host time already due waits with the back-off: the
                // next alarm that succeeds reports it.
                let retry_at_ms = self.arm(Some(at), at).await.ok().map(|()| at);
                Err(AlarmFailure { error, retry_at_ms })
            }
        }
    }

    /// The summary of an alarm that started at `started` and that the daily
    /// write refusal stopped at `ended`; it sleeps until `next_at_ms`. Its
    /// queue as it stands (reads still work).
    fn write_limited(&self, started: u64, next_at_ms: u64, ended: u64) -> AlarmSummary {
        let state = self.outbox.state().unwrap_or_default();
        AlarmSummary {
            source: self.name.to_string(),
            write_limited: true,
            next_in_ms: Some(next_at_ms.saturating_sub(ended)),
            subrequest_cap: self.config.get().alarm.budget.calls_per_alarm(),
            started_at_ms: started,
            duration_ms: ended.saturating_sub(started),
            queued_rows: state.queued_rows,
            queued_bytes: state.queued_bytes,
            parked_rows: state.parked_rows,
            ..AlarmSummary::default()
        }
    }

    /// The source's status. Re-arms an alarm the platform dropped while
    /// rows wait (reported as `rearmed`).
    ///
    /// Counts not yet written are written first (one row, only when there
    /// are any), so a count once read never goes back, even if the object
    /// restarts; when the write is refused the status still answers, with
    /// them.
    pub async fn status(&self, now_ms: u64) -> Result<SourceStatus, StoreError> {
        let (stored, rearmed_at, _) = self.recheck(now_ms).await?;
        let _ = self.outbox.write_counts(now_ms, 0);
        // The state as it is, counts not yet written included.
        self.status_of(self.outbox.state()?, rearmed_at.or(stored), rearmed_at.is_some(), now_ms)
    }

    /// Reads the stored alarm afresh and re-arms one the outbox needs but
    /// does not have (the platform dropped it, or a caller's transaction
    /// rolled back an alarm noted by [`enqueue_now`](Relay::enqueue_now)).
    /// Answers the stored alarm as read, and whether it re-armed.
    pub async fn recheck_alarm(&self, now_ms: u64) -> Result<(Option<u64>, bool), StoreError> {
        let (stored, rearmed, _) = self.recheck(now_ms).await?;
        Ok((stored, rearmed.is_some()))
    }

    /// [`recheck_alarm`](Relay::recheck_alarm), also answering the rows
    /// queued (one read of the state); the time it re-armed at, if it did.
    ///
    /// Beside a dropped alarm it puts right one the host moved: the stored
    /// alarm is missing or later than the time this instance last armed
    /// (still ahead), or than the host's own time. It re-arms at the
    /// earlier of what the relay and the host need and logs a
    /// `relay_alarm_moved` warning naming the fix.
    async fn recheck(&self, now_ms: u64) -> Result<(Option<u64>, Option<u64>, u64), StoreError> {
        let armed_before = self.known.get();
        let stored = self.alarm.get().await?;
        self.known.set(stored.map_or(AlarmKnown::None, AlarmKnown::At));
        let queued_rows = self.outbox.state()?.queued_rows;
        // A running fire arms its own next wake-up.
        if self.firing.get() {
            return Ok((stored, None, queued_rows));
        }
        // What the relay needs: now, for rows with no alarm or whose alarm
        // this instance armed in the past (it is due, not later); else the
        // time it armed, while still ahead.
        let relay_due = match armed_before {
            _ if needs_rearm(queued_rows, stored) => Some(now_ms),
            AlarmKnown::At(at) if at >= now_ms => Some(at),
            AlarmKnown::At(_) if queued_rows > 0 => Some(now_ms),
            _ => None,
        };
        let needed = shared_alarm(relay_due, self.host_alarm()?);
        if !alarm_moved(needed, stored, now_ms) {
            return Ok((stored, None, queued_rows));
        }
        self.arm(relay_due, 0).await?;
        let rearmed_at = needed.map(|at| at.max(now_ms));
        self.alarm.moved(&serde_json::json!({"event": "relay_alarm_moved", "source": self.name.as_str(),
                "stored_ms": stored, "rearmed_ms": rearmed_at, "queued_rows": queued_rows,
                "fix": "the object's alarm was missing or later than the relay or its host needs, so it was \
                        re-armed: if your code calls setAlarm or deleteAlarm on the object's storage, arm \
                        your own time through the relay instead (setAlarm / set_alarm), which keeps both"}));
        Ok((stored, rearmed_at, queued_rows))
    }

    /// Sets the alarm if rows are queued and none is set: the platform
    /// drops an alarm whose retries all failed, and a source that then gets
    /// no traffic would keep its rows. Puts right an alarm moved later
    /// than the relay and its host need, too (see `recheck`). Reads the state row and the alarm;
    /// call it from a scheduled sweep over your sources.
    pub async fn rearm(&self, now_ms: u64) -> Result<Rearmed, StoreError> {
        let (stored, rearmed_at, queued_rows) = self.recheck(now_ms).await?;
        Ok(Rearmed { rearmed: rearmed_at.is_some(), alarm_at_ms: rearmed_at.or(stored), queued_rows })
    }

    /// Assembles a status from the state row and what status read
    /// (`stored`: the alarm after the read).
    fn status_of(
        &self,
        state: SourceState,
        stored: Option<u64>,
        rearmed: bool,
        now_ms: u64,
    ) -> Result<SourceStatus, StoreError> {
        let owed = self.outbox.owed_head()?;
        let decoded = state.rs.as_deref().map(ScanState::decode);
        let rs = decoded.clone().and_then(Result::ok);
        let limit = crate::core::STATUS_TARGETS;
        let parked = self.outbox.target_reports(TargetFilter::Parked, "", limit)?;
        let failing = self.outbox.target_reports(TargetFilter::Failing, "", limit)?;
        let capacity = self.outbox.capacity(&state);
        let per_row =
            (state.delivered_rows > 0).then(|| state.sql_rows_written as f64 / state.delivered_rows as f64);
        let today_ms = (utc_day(now_ms) == state.rows_written_day).then_some(now_ms);
        Ok(SourceStatus {
            source: self.name.to_string(),
            source_id: Some(self.id.to_string()),
            last_seq: state.os,
            queued_rows: state.queued_rows,
            queued_bytes: state.queued_bytes,
            parked_rows: state.parked_rows,
            parked_bytes: state.parked_bytes,
            enqueued_rows: state.enqueued_rows,
            delivered_rows: state.delivered_rows,
            alarms: state.alarms,
            fires: state.fires,
            subrequests: state.calls,
            conflicts: state.conflicts,
            dedup_hits: state.dedup_hits,
            rejected_full: state.rejected_full,
            lag_breaches: state.lag_breaches,
            sql_rows_written: state.sql_rows_written,
            sql_rows_written_per_delivered_row: per_row,
            rows_written_today: state.rows_written_today,
            rows_written_day: utc_date(state.rows_written_day),
            // A day's count read on a later day's clock projects nothing for it.
            rows_written_projected_today: today_ms
                .map_or(state.rows_written_today, |ms| projected_for_day(state.rows_written_today, ms)),
            rows_written_free_limit: WORKER_FREE_ROWS_WRITTEN_PER_DAY,
            blocked_targets: blocked_now(rs.as_ref(), &failing.targets, now_ms),
            scan_state_corrupt: matches!(decoded, Some(Err(_))),
            scan_state: rs,
            targets_truncated: parked.next.is_some() || failing.next.is_some(),
            parked_targets: parked.targets.iter().map(|t| (t.target.clone(), t.rows)).collect(),
            failing_targets: failing.targets.iter().map(|t| (t.target.clone(), t.failed_cycles)).collect(),
            oldest_row_age_ms: owed.map(|h| now_ms.saturating_sub(h.at_ms)),
            lag_exceeded: owed.is_some_and(|h| crate::core::schedule::lagging(h.at_ms.max(h.due_ms), now_ms)),
            relay_watermark: relay_watermark(owed, now_ms),
            capacity: CapacityReport {
                rows: capacity.rows,
                bytes: capacity.bytes,
                max_rows: capacity.max_rows,
                max_bytes: capacity.max_bytes,
                percent_full: capacity.percent_full(),
            },
            dedup_records: self.outbox.dedup_records()?,
            discarded_rows: self.outbox.discarded_rows()?,
            last_prune_ms: state.last_prune_ms,
            last_alarm: state.last_alarm.as_deref().and_then(|t| serde_json::from_str(t).ok()),
            alarm_at_ms: stored,
            rearmed,
            config: self.config.get(),
        })
    }

    /// Whether every row through `seq` has been applied at its target (or
    /// discarded by an operator); parked rows are not delivered.
    pub fn delivered_through(&self, seq: u64) -> Result<bool, StoreError> {
        let os = self.outbox.state()?.os;
        Ok(delivered_through(seq, os, self.outbox.owed_head()?))
    }

    /// A commit-time lower bound for the rows still owed (queued or parked).
    pub fn relay_watermark(&self, now_ms: u64) -> Result<u64, StoreError> {
        Ok(relay_watermark(self.outbox.owed_head()?, now_ms))
    }

    /// A page of the parked and failing targets, in name order after
    /// `after`: at most `limit` (1..=[`MAX_TARGETS_PER_PAGE`](crate::core::MAX_TARGETS_PER_PAGE)).
    pub fn targets(&self, after: &str, limit: u32) -> Result<TargetPage, StoreError> {
        self.outbox.target_reports(TargetFilter::All, after, limit)
    }

    /// A page of `target`'s parked rows.
    pub fn parked_page(&self, target: &Name, after: u64, limit: u32) -> Result<ParkedPage, StoreError> {
        self.outbox.parked_page(target.as_str(), after, limit)
    }

    /// Puts `target`'s parked rows back in order and arms the alarm.
    pub async fn redrive(&self, target: &Name, now_ms: u64) -> Result<ActionOutcome, StoreError> {
        // Loaded first, so the redrive and its arming share one turn.
        self.forget_past_alarm(now_ms);
        self.load_alarm().await?;
        self.outbox.note_time(now_ms);
        let outcome = self.outbox.redrive(target.as_str())?;
        if outcome.rows > 0 {
            self.arm_at(now_ms).await?;
        }
        Ok(outcome)
    }

    /// Drops `target`'s parked rows (kept until the discard horizon).
    pub fn discard(&self, target: &Name, now_ms: u64) -> Result<ActionOutcome, StoreError> {
        self.outbox.discard(target.as_str(), now_ms)
    }

    /// Deletes the stored alarm, as the platform does after too many failed
    /// retries: without telling this instance, whose memory of the alarm
    /// is left as it was (a test fault: the next status read, enqueue or
    /// re-arm must set it again).
    pub async fn drop_alarm(&self) -> Result<(), StoreError> {
        self.alarm.delete().await
    }

    /// Forgets a remembered alarm whose time has passed. An alarm that came
    /// due runs `alarm()`, which forgets it first; still remembering one
    /// means the platform dropped it unseen (its retries failed), and
    /// trusting the memory would leave new rows with no alarm. The next
    /// use reads the stored alarm again (one read).
    fn forget_past_alarm(&self, now_ms: u64) {
        if matches!(self.known.get(), AlarmKnown::At(at) if at < now_ms) {
            self.known.set(AlarmKnown::Unknown);
        }
    }

    /// Loads what this instance knows of its alarm, if it does not know.
    async fn load_alarm(&self) -> Result<(), StoreError> {
        if self.known.get() != AlarmKnown::Unknown {
            return Ok(());
        }
        let stored = self.alarm.get().await?;
        // An alarm handler may have started meanwhile and knows better.
        if self.known.get() == AlarmKnown::Unknown {
            self.known.set(stored.map_or(AlarmKnown::None, AlarmKnown::At));
        }
        Ok(())
    }

    /// Ensures an alarm is due no later than `due_ms` (and the host's
    /// time); writes nothing when the known alarm already is.
    async fn arm_at(&self, due_ms: u64) -> Result<(), StoreError> {
        self.arm(Some(due_ms), 0).await
    }

    /// Ensures the alarm is due no later than the relay's `relay_due` and
    /// the host's own time (counted no earlier than `host_floor`); writes
    /// nothing when the known alarm already is early enough.
    async fn arm(&self, relay_due: Option<u64>, host_floor: u64) -> Result<(), StoreError> {
        let Some(at) = self.note_armed(relay_due, host_floor)? else { return Ok(()) };
        self.alarm.set(at).await.inspect_err(|_| {
            // We no longer know what is stored; the next use reloads it.
            self.known.set(AlarmKnown::Unknown);
        })
    }

    /// Notes the alarm as armed at the earlier of the relay's `relay_due`
    /// and the host's own time (counted no earlier than `host_floor`), and
    /// answers the time to set it to, or `None` when the known alarm
    /// already is early enough (nothing to write). Every arming comes
    /// here, so no path arms the relay's time alone.
    fn note_armed(&self, relay_due: Option<u64>, host_floor: u64) -> Result<Option<u64>, StoreError> {
        // A host time counted no earlier than the relay's cannot be the
        // earlier one: not read (a back-off arms even when reads fail).
        let host = match relay_due {
            Some(due) if due <= host_floor => None,
            _ => self.host_alarm()?.map(|at| at.max(host_floor)),
        };
        let Some(due_ms) = shared_alarm(relay_due, host) else { return Ok(None) };
        let Some(at) = arm(self.known.get(), due_ms) else { return Ok(None) };
        self.known.set(AlarmKnown::At(at));
        self.outbox.note_write();
        Ok(Some(at))
    }

    /// The host's own alarm time: what it set with
    /// [`set_host_alarm`](Relay::set_host_alarm) and no alarm has reported
    /// yet. Never the relay's own time (the object's alarm may be earlier).
    pub fn host_alarm(&self) -> Result<Option<u64>, StoreError> {
        if let Some(at) = self.host.get() {
            return Ok(at);
        }
        let row = self.outbox.sql().first("SELECT at_ms FROM relay_host_alarm WHERE id = 1", vec![])?;
        let at = row.map(|r| r.u64(0)).transpose()?;
        self.host.set(Some(at));
        Ok(at)
    }

    /// Sets the host's own alarm time (ms since the epoch; replacing any
    /// other), kept in the relay's tables so a restart does not lose it:
    /// the object's alarm is armed at the earlier of it and the relay's
    /// own, and the alarm that finds it come reports it
    /// ([`AlarmSummary::host_alarm`]). The host's way to use the object's
    /// one alarm beside the relay: setting the object's alarm directly
    /// would move the relay's. A time later than the one set before leaves
    /// the object's alarm where it is; it may then wake once early, which
    /// reports nothing to the host. Refuses a time past [`SEQ_MAX`].
    pub async fn set_host_alarm(&self, at_ms: u64, now_ms: u64) -> Result<(), StoreError> {
        if at_ms > SEQ_MAX {
            return Err(StoreError::Guard("an alarm time past SEQ_MAX"));
        }
        self.forget_past_alarm(now_ms);
        self.load_alarm().await?;
        self.outbox.sql().run(
            "INSERT INTO relay_host_alarm (id, at_ms) VALUES (1, ?) ON CONFLICT(id) DO UPDATE SET at_ms = excluded.at_ms",
            vec![int(at_ms)],
        )?;
        self.outbox.note_write();
        self.host.set(Some(Some(at_ms)));
        self.arm(Some(at_ms), 0).await
    }

    /// Clears the host's own alarm time. The object's alarm stays where it
    /// is (it may be the relay's too); if it was armed for the host alone
    /// it wakes once and reports nothing to the host.
    pub fn delete_host_alarm(&self) -> Result<(), StoreError> {
        self.outbox.sql().run("DELETE FROM relay_host_alarm", vec![])?;
        self.outbox.note_write();
        self.host.set(Some(None));
        Ok(())
    }

    /// Whether the host's own time has come at `now_ms`; if so clears it,
    /// as the platform clears an alarm that fired. Should clearing the
    /// stored time fail it is forgotten here all the same, and an instance
    /// that starts later reports it again: like the platform's alarms, the
    /// host's is delivered at least once.
    fn take_host_alarm(&self, now_ms: u64) -> bool {
        match self.host_alarm() {
            Ok(Some(at)) if at <= now_ms => {
                self.host.set(Some(None));
                if self.outbox.sql().run("DELETE FROM relay_host_alarm", vec![]).is_ok() {
                    self.outbox.note_write();
                }
                true
            }
            _ => false,
        }
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
