//! The simulator's switches, each a fault or a placement a test turns on
//! between steps: target failures and lost replies, the platform's named
//! transient faults, hooks and watermarks at targets, a source's storage
//! (crashed or conflicting checkpoints, refused writes and alarm sets,
//! corrupt rows), its alarm (dropped, set behind its back), restarts, CPU
//! cuts, and where a source object lives.

use super::*;

impl Sim {
    // ---- fault injection ------------------------------------------------

    pub(super) fn set_fault(&mut self, target: &str, fault: TargetFault) {
        let t = name(target);
        self.world.ensure_target(&t);
        if let Some(t) = self.world.targets.borrow_mut().get_mut(&t) {
            t.fault = fault;
        }
    }

    /// Sets how long rows arriving while `source` delivers wait to share
    /// calls (`RELAY_COALESCE_MS`; 0, the default, never waits).
    pub fn set_coalesce(&mut self, source: &str, ms: u64) {
        let s = name(source);
        self.world.coalesce.borrow_mut().insert(s.clone(), ms);
        let src = self.world.source(&s);
        let mut config = src.relay.config();
        config.coalesce_ms = ms;
        let _ = src.relay.set_config(config);
    }

    /// Injects `fault` (or none): the runtime's near-CPU-limit signal, or
    /// the invocation killed, after a number of the run's work units.
    pub fn cpu_fault(&mut self, fault: Option<CpuFault>) {
        self.world.cpu.fault.set(fault);
        self.world.cpu.killed.set(false);
    }

    /// Makes `target` refuse every call (a transient error) until healed.
    pub fn fail_target(&mut self, target: &str) {
        self.set_fault(target, TargetFault::Reject);
    }

    /// Makes `target` refuse every call as a permanent error until healed.
    pub fn fail_target_permanently(&mut self, target: &str) {
        self.set_fault(target, TargetFault::RejectPermanently);
    }

    /// Makes `target` healthy again.
    pub fn heal_target(&mut self, target: &str) {
        self.set_fault(target, TargetFault::Healthy);
    }

    /// Deploys `release` to the target `target`: from its next call on it
    /// answers as that release does.
    pub fn deploy_target(&mut self, target: &str, release: Release) {
        let t = name(target);
        self.world.ensure_target(&t);
        if let Some(t) = self.world.targets.borrow_mut().get_mut(&t) {
            t.release = release;
        }
    }

    /// Deploys `release` to the source `source`: from its next call on,
    /// its batches cross the wire as that release sends them.
    pub fn deploy_source(&mut self, source: &str, release: Release) {
        self.world.source_releases.borrow_mut().insert(name(source), release);
    }

    /// Makes `target` apply its next `n` calls and then lose the replies.
    pub fn lose_replies(&mut self, target: &str, n: u32) {
        let t = name(target);
        self.world.ensure_target(&t);
        if let Some(t) = self.world.targets.borrow_mut().get_mut(&t) {
            t.lose_replies = n;
        }
    }

    /// Makes `target`'s next calls meet `faults`, in order (then it answers
    /// as its [`TargetFault`] says).
    pub fn platform_faults(&mut self, target: &str, faults: &[PlatformFault]) {
        let t = name(target);
        self.world.ensure_target(&t);
        if let Some(t) = self.world.targets.borrow_mut().get_mut(&t) {
            t.platform.extend(faults.iter().copied());
        }
    }

    /// Installs a hook at `target` that adds effects to each apply.
    pub fn set_hook(&mut self, target: &str, hook: Box<dyn RelayHook>) {
        let t = name(target);
        self.world.ensure_target(&t);
        if let Some(t) = self.world.targets.borrow_mut().get_mut(&t) {
            t.hook = Some(hook);
        }
    }

    /// Sets `target`'s watermark for `source` (a fixture): rows at or below
    /// it will be skipped as duplicates.
    #[allow(clippy::expect_used, reason = "the simulator's in-memory store does not fail")]
    pub fn set_watermark(&mut self, target: &str, source: &str, watermark: u64) {
        let t = name(target);
        self.world.ensure_target(&t);
        let (source, id) = self.world.identity(&name(source));
        if let Some(t) = self.world.targets.borrow().get(&t) {
            t.inbox.set_watermark(source.as_str(), Some(&id), watermark).expect("set the watermark");
        }
    }

    /// Makes the simulated source `handle` the object `object` of the class
    /// `class`: its id derives from both, as workerd's differ per class, so
    /// two simulated sources may share an object name (each in its own
    /// class) and still be two sources at their targets. Any other source
    /// is the object of its own name in [`SIM_SOURCE_CLASS`].
    /// Place a source before its first use.
    pub fn place_source(&mut self, handle: &str, class: &str, object: &str) {
        let handle = name(handle);
        assert!(
            !self.world.sources.borrow().contains_key(&handle),
            "{handle} is already open; place it before its first use"
        );
        self.world.places.borrow_mut().insert(handle, (class.to_owned(), name(object)));
    }

    /// The name and id the simulated source `handle` sends with its rows.
    pub fn identity(&self, handle: &str) -> (Name, crate::core::SourceId) {
        self.world.identity(&name(handle))
    }

    /// Makes `source`'s next checkpoint fail after its target calls, as a
    /// crash between the target apply and the source cleanup would: the
    /// store fails the checkpoint statement, its transaction rolls back, and
    /// the alarm throws (the platform retries it).
    pub fn crash_next_checkpoint(&mut self, source: &str) {
        self.world.source(&name(source)).relay.sql().crash_checkpoints(1);
    }

    /// Refuses (`on`) or lets through every write of `source`'s store with
    /// the platform's error for an account past its daily rows-written
    /// allowance, as Workers Free does until 00:00 UTC; reads still run.
    pub fn refuse_writes(&mut self, source: &str, on: bool) {
        self.world.source(&name(source)).relay.sql().refuse_writes(on);
    }

    /// Refuses (or accepts again) every `setAlarm` of `source` as past the
    /// daily allowance, as the platform may, since it bills one as a row
    /// written; until the object restarts.
    pub fn refuse_alarm_sets(&mut self, source: &str, on: bool) {
        self.world.source(&name(source)).alarm_store.refuse_sets(on);
    }

    /// Restarts `source`'s object, as an eviction or a deploy does: a new
    /// instance opens the same database, and the stored alarm stays; what
    /// the old instance held only in memory is gone.
    #[allow(clippy::expect_used, reason = "the database opened before, so it opens again")]
    pub fn restart_source(&mut self, source: &str) {
        let s = name(source);
        let old = self.world.source(&s);
        let (sql, alarm) = (old.relay.sql().inner().clone(), old.alarm.get());
        self.world.sources.borrow_mut().remove(&s);
        drop(old);
        let new = self.world.open_source(&s, sql).expect("the source reopens");
        new.alarm.set(alarm);
    }

    /// Makes another writer change `rs` during `source`'s next fire (while it
    /// awaits its first target call), so its checkpoint guard fails.
    pub fn conflict_next_checkpoint(&mut self, source: &str) {
        self.world.source(&name(source)).mid_fire.borrow_mut().conflict = true;
    }

    /// Has a concurrent writer enqueue `rows` at `source` during its next
    /// fire (while it awaits its first target call).
    pub fn append_during_next_fire(&mut self, source: &str, rows: Vec<EnqueueRow>) {
        self.world.source(&name(source)).mid_fire.borrow_mut().appends.push(rows);
    }

    /// Starts a second fire on `source` at a seeded point of its next fire's
    /// target calls; it runs to completion before the first goes on.
    pub fn overlap_next_fire(&mut self, source: &str) {
        self.world.source(&name(source)).mid_fire.borrow_mut().overlap = true;
    }

    /// Replaces the stored body of row `seq` (to simulate corruption).
    #[allow(clippy::expect_used, reason = "the simulator's in-memory store does not fail")]
    pub fn corrupt_row(&mut self, source: &str, seq: u64, body: &str) {
        let src = self.world.source(&name(source));
        let relay = &src.relay;
        let n = relay
            .sql()
            .run("UPDATE relay_outbox SET body = ? WHERE seq = ?", vec![body.into(), crate::store::int(seq)])
            .expect("corrupt a row");
        assert_eq!(n, 1, "corrupt_row of a row not queued");
        relay.outbox().forget_memory();
    }

    /// Replaces the stored `rs` text.
    #[allow(clippy::expect_used, reason = "the simulator's in-memory store does not fail")]
    pub fn corrupt_rs(&mut self, source: &str, text: &str) {
        let src = self.world.source(&name(source));
        let relay = &src.relay;
        relay.sql().run("UPDATE relay_state SET rs = ? WHERE id = 1", vec![text.into()]).expect("corrupt rs");
        relay.outbox().forget_memory();
    }

    /// Makes the sources opened from now on deliver in turn (see
    /// `SourceConfig::in_turn`): an enqueue asks for a delivery, which
    /// [`Sim::deliver`] then runs.
    pub fn set_in_turn(&mut self, on: bool) {
        self.world.in_turn.set(on);
    }

    /// Makes the sources this thread configures from now on store a
    /// multi-row enqueue as one packed row (see `SourceConfig::pack_rows`),
    /// in every world the thread builds: the explorers run their whole
    /// space on the packed layout this way.
    pub fn set_pack_rows(on: bool) {
        super::world::PACK_ROWS.with(|p| p.set(on));
    }

    /// Runs the in-turn delivery `source`'s enqueues asked for, as the
    /// enqueue's invocation does after its reply (none if none asked).
    #[allow(clippy::expect_used, reason = "the simulator's convenience form")]
    pub fn deliver(&mut self, source: &str, budget: RelayBudget) -> Vec<crate::driver::AlarmSummary> {
        let s = name(source);
        let src = self.world.source(&s);
        let targets = self.targets(&s, budget);
        let now = || self.world.now();
        let runs = src.relay.deliver(targets.as_ref(), &now, &crate::driver::NoObserver);
        futures::executor::block_on(runs).expect("an in-turn delivery")
    }

    /// Deletes `source`'s stored alarm, as the platform does after too many
    /// failed retries.
    pub fn drop_alarm(&mut self, source: &str) {
        self.world.source(&name(source)).alarm.set(None);
    }

    /// Sets `source`'s stored alarm to `at_ms` (or deletes it) behind the
    /// relay's back, as a host that calls the object's `setAlarm` or
    /// `deleteAlarm` itself does.
    pub fn set_alarm_directly(&mut self, source: &str, at_ms: Option<u64>) {
        self.world.source(&name(source)).alarm.set(at_ms);
    }

    // ---- inspection -----------------------------------------------------

    /// Makes every fire end with [`Sim::audit`], panicking (with the seed)
    /// on the first breach, so a property test sees the fire that broke it.
    pub fn audit_every_fire(&mut self, on: bool) {
        self.world.audit_every_fire.set(on);
    }
}
