//! The simulated world: sources (each a real [`Relay`] on its own native
//! SQLite), targets (each a real [`Inbox`] on its own), a manual clock, one
//! seeded generator, and the audit's record of what was enqueued.
//!
//! Everything lives behind one `Rc<World>` so that the simulated targets
//! (called by the real driver in the middle of a fire) can reach the world
//! to inject what would interleave there in workerd: an enqueue, a second
//! fire, another writer's checkpoint. No mutable `RefCell` borrow is held
//! across an `.await` (a source's relay is borrowed shared for a whole
//! alarm, and only reconfigured between alarms).

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet};
use std::rc::{Rc, Weak};

use super::rng::SimRng;
use super::sqlite::SqliteSql;
use super::SimAlarm;
use crate::core::{Name, RelayBudget, RelayHook, SourceId, DEFAULT_MAX_IN_FLIGHT};
use crate::driver::{AlarmError, AlarmOptions, NearLimit};
use crate::source::{Relay, SourceConfig};
use crate::store::inbox::Inbox;
use crate::store::outbox::OutboxSettings;
use crate::store::StoreError;
use crate::testing::{FaultySql, TestTables};

/// A simulated source's store: the native SQLite behind the fault wrapper.
pub type SimSql = FaultySql<SqliteSql>;

/// The relay of a simulated source.
pub type SimRelay = Relay<SimSql, SimAlarm>;

/// Faults that interleave with a source's next fire, injected by the
/// simulated targets during its calls.
#[derive(Default)]
pub(crate) struct MidFire {
    /// Another writer changes `rs` before the checkpoint.
    pub(crate) conflict: bool,
    /// Row sets a concurrent writer enqueues.
    pub(crate) appends: Vec<Vec<crate::core::EnqueueRow>>,
    /// A second fire runs to completion at a seeded point.
    pub(crate) overlap: bool,
}

/// One simulated source.
pub(crate) struct SimSource {
    pub(crate) relay: SimRelay,
    /// The stored alarm, shared with the relay's [`SimAlarm`].
    pub(crate) alarm: Rc<Cell<Option<u64>>>,
    /// The relay's handle on that alarm, to inject refusals of its sets.
    pub(crate) alarm_store: SimAlarm,
    pub(crate) mid_fire: RefCell<MidFire>,
}

/// How a simulated target behaves when called.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TargetFault {
    /// Applies batches and answers.
    #[default]
    Healthy,
    /// Refuses every call with a transient error until healed.
    Reject,
    /// Refuses every call as a permanent error until healed.
    RejectPermanently,
}

/// One of the platform's named failures of a call, injected at a target:
/// the call fails with the platform's own message, classified by the
/// shipped [`classify_thrown`](crate::core::classify_thrown).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PlatformFault {
    /// "Durable Object reset because its code was updated", before or
    /// after the target applied the batch.
    CodeUpdated {
        /// Whether the target applied the batch first.
        applied: bool,
    },
    /// "Network connection lost", before or after the apply.
    NetworkLost {
        /// Whether the target applied the batch first.
        applied: bool,
    },
    /// "Durable Object is overloaded": the call never ran.
    Overloaded,
    /// The caller's timeout ran out while the target applied the batch.
    TimeoutAfterApply,
}

impl PlatformFault {
    /// Whether the target applies the batch before the call fails.
    pub fn applies(self) -> bool {
        match self {
            PlatformFault::CodeUpdated { applied } | PlatformFault::NetworkLost { applied } => applied,
            PlatformFault::Overloaded => false,
            PlatformFault::TimeoutAfterApply => true,
        }
    }

    /// The error the caller sees.
    pub fn message(self) -> &'static str {
        match self {
            PlatformFault::CodeUpdated { .. } => "Durable Object reset because its code was updated.",
            PlatformFault::NetworkLost { .. } => "Network connection lost.",
            PlatformFault::Overloaded => "Durable Object is overloaded. Too many requests queued.",
            PlatformFault::TimeoutAfterApply => "no answer within 15000 ms",
        }
    }
}

/// Which release an object runs, as far as what crosses the wire between
/// objects tells them apart: two releases meet during every deploy.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Release {
    /// This release.
    #[default]
    Current,
    /// The release before source ids: as a source it sends batches
    /// without its id; as a target it refuses a batch that carries one
    /// (422 `malformed_batch`, in that release's words) and writes nothing.
    BeforeIds,
}

/// What a target of the release before ids answered a batch with an id:
/// its decoder's refusal of a field it does not declare, as the source
/// reads it (status, then the body).
pub(crate) const BEFORE_IDS_REFUSAL: &str = "422: {\"error\":{\"code\":\"malformed_batch\",\"message\":\
    \"batch does not decode: unknown field `source_id`, expected `source` or `rows` at line 1 column 25\"}}";

/// One simulated target.
pub(crate) struct SimTarget {
    pub(crate) inbox: Inbox<SqliteSql>,
    pub(crate) tables: TestTables<SqliteSql>,
    pub(crate) fault: TargetFault,
    /// Replies to lose after applying (the apply stands).
    pub(crate) lose_replies: u32,
    /// The platform's failures its next calls meet, in order.
    pub(crate) platform: std::collections::VecDeque<PlatformFault>,
    pub(crate) hook: Option<Box<dyn RelayHook>>,
    /// Calls received, failed ones included.
    pub(crate) calls: u64,
    /// The release it runs.
    pub(crate) release: Release,
}

/// The world.
pub(crate) struct World {
    pub(crate) seed: u64,
    pub(crate) rng: RefCell<SimRng>,
    pub(crate) clock: Cell<u64>,
    pub(crate) sources: RefCell<BTreeMap<Name, Rc<SimSource>>>,
    pub(crate) targets: RefCell<BTreeMap<Name, SimTarget>>,
    /// Every accepted sequence per (source, target), ascending: what must
    /// arrive.
    pub(crate) enqueued: RefCell<BTreeMap<(Name, Name), Vec<u64>>>,
    /// Rows an operator discarded: the audit excuses them.
    pub(crate) discarded: RefCell<BTreeSet<(Name, u64)>>,
    /// Calls logical reads made to the objects of logical sources: what a
    /// read costs in subrequests where each object is a Durable Object.
    pub(crate) object_calls: Cell<u64>,
    /// Operating settings per source.
    pub(crate) settings: RefCell<BTreeMap<Name, OutboxSettings>>,
    /// Coalescing waits per source, ms.
    pub(crate) coalesce: RefCell<BTreeMap<Name, u64>>,
    /// Whether every source delivers in turn (see `SourceConfig::in_turn`).
    pub(crate) in_turn: Cell<bool>,
    /// Whether every fire ends with the audit, panicking on a breach.
    pub(crate) audit_every_fire: Cell<bool>,
    /// Target calls made in all.
    pub(crate) total_calls: Cell<u64>,
    /// The time each delayed row asked not to be delivered before, per
    /// (source, seq), worked out from the request here, apart from the
    /// relay's own bookkeeping.
    pub(crate) not_before: RefCell<BTreeMap<(Name, u64), u64>>,
    /// Rows a target was sent before their time: the audit reports them.
    pub(crate) early: RefCell<Vec<String>>,
    /// Per (source, target), the watermark the target already held when
    /// the source was adopted with rows in flight (see `Sim::adopt_source`):
    /// the apply log starts after it.
    pub(crate) adopted_watermarks: RefCell<BTreeMap<(Name, Name), u64>>,
    /// Whether objects open on databases recycled from an earlier world
    /// (see [`SqliteSql::recycled`]) rather than fresh ones.
    pub(crate) recycle: Cell<bool>,
    /// Per simulated source placed in a class of its own (see
    /// `Sim::place_source`): that class and the object's name. Any other
    /// source is the object of its own name in [`SIM_SOURCE_CLASS`].
    pub(crate) places: RefCell<BTreeMap<Name, (String, Name)>>,
    /// The simulated CPU limit and the run's work.
    pub(crate) cpu: super::cpu::SimCpu,
    /// Per source, how many times in a row its alarm has failed: the
    /// platform's `retryCount` for its next alarm.
    pub(crate) retries: RefCell<BTreeMap<Name, u32>>,
    /// The sources that run another release than this one (kept across
    /// their restarts, as a deployment is).
    pub(crate) source_releases: RefCell<BTreeMap<Name, Release>>,
}

/// The class a simulated source's object belongs to unless placed in
/// another: its id derives from this and its name.
pub const SIM_SOURCE_CLASS: &str = "RelaySource";

/// The simulated clock starts here (Nov 2023), far from zero so that
/// saturating subtractions never hide a bug.
const EPOCH_MS: u64 = 1_700_000_000_000;

impl World {
    pub(crate) fn new(seed: u64) -> World {
        World {
            seed,
            rng: RefCell::new(SimRng::new(seed)),
            clock: Cell::new(EPOCH_MS),
            sources: RefCell::new(BTreeMap::new()),
            targets: RefCell::new(BTreeMap::new()),
            enqueued: RefCell::new(BTreeMap::new()),
            discarded: RefCell::new(BTreeSet::new()),
            object_calls: Cell::new(0),
            settings: RefCell::new(BTreeMap::new()),
            coalesce: RefCell::new(BTreeMap::new()),
            in_turn: Cell::new(false),
            audit_every_fire: Cell::new(false),
            total_calls: Cell::new(0),
            not_before: RefCell::new(BTreeMap::new()),
            early: RefCell::new(Vec::new()),
            adopted_watermarks: RefCell::new(BTreeMap::new()),
            recycle: Cell::new(false),
            places: RefCell::new(BTreeMap::new()),
            cpu: super::cpu::SimCpu::default(),
            retries: RefCell::new(BTreeMap::new()),
            source_releases: RefCell::new(BTreeMap::new()),
        }
    }

    /// The object the simulated source `handle` is: its name and its id,
    /// derived from its class and name as workerd's ids differ per class.
    pub(crate) fn identity(&self, handle: &Name) -> (Name, SourceId) {
        match self.places.borrow().get(handle) {
            Some((class, name)) => (name.clone(), SourceId::derive(class, name.as_str())),
            None => (handle.clone(), SourceId::derive(SIM_SOURCE_CLASS, handle.as_str())),
        }
    }

    /// The simulated source that is the sender `source` with `id` (a
    /// sender without an id is the one of that name in the default class).
    pub(crate) fn handle_of(&self, source: &Name, id: Option<&SourceId>) -> Name {
        let Some(id) = id else { return source.clone() };
        let places = self.places.borrow();
        let placed = places
            .iter()
            .find(|(_, (class, name))| name == source && SourceId::derive(class, name.as_str()) == *id);
        placed.map_or_else(|| source.clone(), |(handle, _)| handle.clone())
    }

    pub(crate) fn now(&self) -> u64 {
        self.clock.get()
    }

    /// The source `name`, opened on a fresh database on first use.
    #[allow(
        clippy::expect_used,
        reason = "an in-memory SQLite always opens; a failure is a broken test host"
    )]
    pub(crate) fn source(&self, name: &Name) -> Rc<SimSource> {
        if let Some(s) = self.sources.borrow().get(name) {
            return s.clone();
        }
        let key = format!("source {name}");
        let sql = match self.recycle.get() {
            true => SqliteSql::recycled(&key),
            false => SqliteSql::memory(),
        };
        let source = self.open_source(name, sql.expect("an in-memory database")).expect("a valid source");
        if self.recycle.get() {
            SqliteSql::opened(&key).expect("an in-memory database");
        }
        source
    }

    /// Opens the source `name` on `sql` (creating or migrating its tables)
    /// and adds it to the world.
    pub(crate) fn open_source(&self, name: &Name, sql: SqliteSql) -> Result<Rc<SimSource>, AlarmError> {
        let settings = self.settings.borrow().get(name).copied().unwrap_or_default();
        let alarm = Rc::new(Cell::new(None));
        let coalesce = self.coalesce.borrow().get(name).copied().unwrap_or(0);
        let config = source_config(RelayBudget::default(), settings, coalesce, self.in_turn.get());
        let (object, id) = self.identity(name);
        let sql = FaultySql::new(sql);
        let alarm_store = SimAlarm::sharing(alarm.clone()).cut_by(sql.cut_off().clone());
        let relay = Relay::open(object, id, sql, alarm_store.clone(), config)?;
        let source = Rc::new(SimSource { relay, alarm, alarm_store, mid_fire: RefCell::default() });
        self.sources.borrow_mut().insert(name.clone(), source.clone());
        Ok(source)
    }

    /// Makes sure the target `name` exists.
    #[allow(
        clippy::expect_used,
        reason = "an in-memory SQLite always opens; a failure is a broken test host"
    )]
    pub(crate) fn ensure_target(&self, name: &Name) {
        if self.targets.borrow().contains_key(name) {
            return;
        }
        let key = format!("target {name}");
        let sql = match self.recycle.get() {
            true => SqliteSql::recycled(&key),
            false => SqliteSql::memory(),
        };
        self.open_target(name, sql.expect("an in-memory database")).expect("inbox and test tables");
        if self.recycle.get() {
            SqliteSql::opened(&key).expect("an in-memory database");
        }
    }

    /// Opens the target `name` on `sql` (creating or migrating its inbox,
    /// then its test tables) and adds it to the world.
    pub(crate) fn open_target(&self, name: &Name, sql: SqliteSql) -> Result<(), StoreError> {
        let target = SimTarget {
            inbox: Inbox::open(sql.clone())?,
            tables: TestTables::open(sql)?,
            fault: TargetFault::Healthy,
            lose_replies: 0,
            platform: std::collections::VecDeque::new(),
            hook: None,
            calls: 0,
            release: Release::Current,
        };
        self.targets.borrow_mut().insert(name.clone(), target);
        Ok(())
    }

    /// Records accepted rows for the audit.
    pub(crate) fn record_enqueued(&self, source: &Name, rows: &[crate::core::EnqueueRow], seqs: &[u64]) {
        let mut enqueued = self.enqueued.borrow_mut();
        for (row, seq) in rows.iter().zip(seqs) {
            enqueued.entry((source.clone(), row.target.clone())).or_default().push(*seq);
        }
        drop(enqueued);
        let now = self.now();
        for (row, seq) in rows.iter().zip(seqs) {
            self.ensure_target(&row.target);
            let asked = match (row.not_before_ms, row.delay_ms) {
                (Some(at), _) => at,
                (None, Some(ms)) => now + ms,
                (None, None) => 0,
            };
            if asked > now {
                self.not_before.borrow_mut().insert((source.clone(), *seq), asked);
            }
        }
    }

    /// Records the rows of a routed call that are new: those given a
    /// sequence past `os_before` (a keyed retry's call answers the targets
    /// an earlier attempt committed with their old sequences).
    pub(crate) fn record_new(
        &self,
        source: &Name,
        rows: &[crate::core::EnqueueRow],
        seqs: &[u64],
        os_before: u64,
    ) {
        let (new_rows, new_seqs): (Vec<_>, Vec<u64>) =
            rows.iter().zip(seqs).filter(|(_, s)| **s > os_before).map(|(r, s)| (r.clone(), *s)).unzip();
        self.record_enqueued(source, &new_rows, &new_seqs);
    }

    /// Notes every row of a target call sent before its time.
    pub(crate) fn check_not_early(&self, body: &str) {
        let Ok(request) = crate::core::decode_request(body) else { return };
        let now = self.now();
        let not_before = self.not_before.borrow();
        let handle = self.handle_of(&request.source, request.source_id.as_ref());
        for row in &request.rows {
            if let Some(&at) = not_before.get(&(handle.clone(), row.seq)) {
                if now < at {
                    let early = format!(
                        "row {} of {} sent at {now}, {} ms before its time",
                        row.seq,
                        request.source,
                        at - now
                    );
                    self.early.borrow_mut().push(early);
                }
            }
        }
    }
}

/// A source's configuration for `budget` and `settings`, packing rows
/// where the world's sources do (see [`Sim::set_pack_rows`](crate::sim::Sim::set_pack_rows)).
pub(crate) fn source_config(
    budget: RelayBudget,
    settings: OutboxSettings,
    coalesce_ms: u64,
    in_turn: bool,
) -> SourceConfig {
    SourceConfig {
        alarm: AlarmOptions { budget, max_in_flight: DEFAULT_MAX_IN_FLIGHT },
        settings,
        coalesce_ms,
        in_turn,
        pack_rows: PACK_ROWS.with(Cell::get),
    }
}

thread_local! {
    /// Whether the simulated sources of this thread pack multi-row
    /// enqueues. A thread's, not a world's: the explorers build many worlds
    /// per run, and a test runs on a thread of its own.
    pub(crate) static PACK_ROWS: Cell<bool> = const { Cell::new(false) };
}

/// The near-limit signal a source reads while `world` runs its alarm: the
/// world's CPU fault judges the work, and a kill crashes the source's next
/// checkpoint.
pub(crate) fn cpu_signal(world: &Rc<World>, source: &Name) -> Rc<NearLimit<'static>> {
    let world: Weak<World> = Rc::downgrade(world);
    let source = source.clone();
    Rc::new(move |work: u64| {
        let Some(world) = world.upgrade() else { return false };
        let verdict = world.cpu.observe(work);
        if verdict.killed {
            if let Some(src) = world.sources.borrow().get(&source) {
                src.relay.sql().crash_checkpoints(1);
            }
        }
        verdict.near_limit
    })
}
