//! The simulator's operating API: keyed (idempotent) enqueue, operating
//! settings, parked targets with redrive and discard, and reads of every
//! source's and target's real tables.

use super::{name, stored_rows, Sim};
use crate::core::{EnqueueRefusal, EnqueueRow, RelayPolicy, ScanState, StoredRow};
use crate::store::outbox::{EnqueueFailure, OutboxSettings};
use crate::store::Sql;

/// A source's operating settings, as the simulator takes them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SourcePolicy {
    /// When to park failing targets.
    pub relay: RelayPolicy,
    /// Backpressure bound on waiting rows (queued plus parked).
    pub max_rows: u64,
    /// Backpressure bound on waiting body bytes.
    pub max_bytes: u64,
    /// How long idempotency keys are remembered, ms.
    pub dedup_horizon_ms: u64,
    /// How long discarded parked rows are kept, ms.
    pub discard_horizon_ms: u64,
}

impl Default for SourcePolicy {
    fn default() -> Self {
        let s = OutboxSettings::default();
        SourcePolicy {
            relay: s.policy,
            max_rows: s.max_rows,
            max_bytes: s.max_bytes,
            dedup_horizon_ms: s.dedup_horizon_ms,
            discard_horizon_ms: s.discard_horizon_ms,
        }
    }
}

impl From<SourcePolicy> for OutboxSettings {
    fn from(p: SourcePolicy) -> Self {
        OutboxSettings {
            policy: p.relay,
            max_rows: p.max_rows,
            max_bytes: p.max_bytes,
            dedup_horizon_ms: p.dedup_horizon_ms,
            discard_horizon_ms: p.discard_horizon_ms,
        }
    }
}

/// What a source knows about one target that has failed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TargetRecord {
    /// Consecutive cycles in which its delivery failed.
    pub failed_cycles: u32,
    /// Why it is parked, if it is.
    pub parked: Option<String>,
    /// First failure of the current run of failures, ms.
    pub first_failure_ms: Option<u64>,
    /// Latest failure, ms.
    pub last_failure_ms: Option<u64>,
}

/// A successful enqueue.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Enqueued {
    /// The sequences (the original ones for a duplicate).
    pub seqs: Vec<u64>,
    /// Whether this repeated an earlier keyed enqueue and wrote nothing.
    pub duplicate: bool,
    /// Each row's effective due time (empty when none is delayed); see
    /// [`crate::Enqueued::due_ms`].
    pub due_ms: Vec<u64>,
}

impl Sim {
    /// Sets `source`'s operating settings (parking policy, backpressure
    /// bounds, horizons).
    #[allow(clippy::expect_used, reason = "the settings' budget is the source's current, valid one")]
    pub fn set_policy(&mut self, source: &str, policy: SourcePolicy) {
        let s = name(source);
        let settings = OutboxSettings::from(policy);
        self.world.settings.borrow_mut().insert(s.clone(), settings);
        let src = self.world.source(&s);
        let relay = &src.relay;
        let mut config = relay.config();
        config.settings = settings;
        relay.set_config(config).expect("a valid configuration");
    }

    /// Enqueues through the real alarm keeper, with an optional idempotency
    /// key: the same key and content answer with the original sequences
    /// (`duplicate`), the same key with other content is refused; neither
    /// writes anything.
    #[allow(clippy::panic, reason = "the simulator's store is in memory; a storage error is a bug")]
    pub fn enqueue_keyed(
        &mut self,
        source: &str,
        key: Option<&str>,
        rows: Vec<EnqueueRow>,
    ) -> Result<Enqueued, EnqueueRefusal> {
        let s = name(source);
        let src = self.world.source(&s);
        let now = self.now_ms();
        let relay = &src.relay;
        match futures::executor::block_on(relay.enqueue(now, key, &rows)) {
            Ok(done) => {
                if !done.duplicate {
                    self.world.record_enqueued(&s, &rows, &done.seqs);
                }
                Ok(Enqueued { seqs: done.seqs, duplicate: done.duplicate, due_ms: done.due_ms })
            }
            Err(EnqueueFailure::Refused(r)) => Err(r),
            Err(EnqueueFailure::Store(e)) => panic!("enqueue at {source}: {e}"),
            Err(EnqueueFailure::Aborted(never)) => match never {},
        }
    }

    /// Puts `target`'s parked rows back into the outbox in their original
    /// order and unparks it (arming the alarm). Returns the rows moved (0
    /// when nothing was parked: idempotent).
    #[allow(clippy::expect_used, reason = "the simulator's store is in memory")]
    pub fn redrive(&mut self, source: &str, target: &str) -> u32 {
        let src = self.world.source(&name(source));
        let now = self.now_ms();
        let relay = &src.relay;
        let done = futures::executor::block_on(relay.redrive(&name(target), now)).expect("redrive");
        done.rows as u32
    }

    /// Drops `target`'s parked rows (kept as discarded until their horizon)
    /// and unparks it. Returns the rows discarded (0 when none: idempotent).
    #[allow(clippy::expect_used, reason = "the simulator's store is in memory")]
    pub fn discard(&mut self, source: &str, target: &str) -> u32 {
        let s = name(source);
        for seq in self.parked_rows(source, target) {
            self.world.discarded.borrow_mut().insert((s.clone(), seq));
        }
        let src = self.world.source(&s);
        let relay = &src.relay;
        relay.discard(&name(target), self.now_ms()).expect("discard").rows as u32
    }

    /// Parked targets of `source`: name, record and parked row count.
    #[allow(clippy::expect_used, reason = "the simulator's store is in memory")]
    pub fn parked_targets(&self, source: &str) -> Vec<(String, TargetRecord, u32)> {
        let src = self.world.source(&name(source));
        let relay = &src.relay;
        every_target(relay)
            .into_iter()
            .filter(|t| t.parked)
            .map(|t| {
                let record = TargetRecord {
                    failed_cycles: t.failed_cycles,
                    parked: t.reason.clone(),
                    first_failure_ms: t.first_failure_ms,
                    last_failure_ms: t.last_failure_ms,
                };
                (t.target, record, t.rows as u32)
            })
            .collect()
    }

    /// `source`'s failure record for `target`.
    #[allow(clippy::expect_used, reason = "the simulator's store is in memory")]
    pub fn target_record(&self, source: &str, target: &str) -> Option<TargetRecord> {
        let src = self.world.source(&name(source));
        let relay = &src.relay;
        every_target(relay).into_iter().find(|t| t.target == target).map(|t| TargetRecord {
            failed_cycles: t.failed_cycles,
            parked: if t.parked { t.reason } else { None },
            first_failure_ms: t.first_failure_ms,
            last_failure_ms: t.last_failure_ms,
        })
    }

    /// Sequences parked at `source` for `target`, ascending.
    #[allow(clippy::expect_used, reason = "the simulator's store is in memory")]
    pub fn parked_rows(&self, source: &str, target: &str) -> Vec<u64> {
        let src = self.world.source(&name(source));
        let relay = &src.relay;
        let rows = relay
            .sql()
            .rows(
                "SELECT seq FROM relay_parked WHERE target = ? AND discarded_at_ms IS NULL ORDER BY seq",
                vec![target.into()],
            )
            .expect("parked rows");
        rows.iter().map(|r| r.u64(0).expect("a sequence")).collect()
    }

    /// Dedup records `source` remembers.
    #[allow(clippy::expect_used, reason = "the simulator's store is in memory")]
    pub fn dedup_records(&self, source: &str) -> usize {
        let src = self.world.source(&name(source));
        let n = src.relay.outbox().dedup_records().expect("dedup records");
        n as usize
    }

    /// Discarded rows `source` still keeps.
    #[allow(clippy::expect_used, reason = "the simulator's store is in memory")]
    pub fn discarded_rows(&self, source: &str) -> usize {
        let src = self.world.source(&name(source));
        let n = src.relay.outbox().discarded_rows().expect("discarded rows");
        n as usize
    }

    /// (dedup hits, enqueues refused as full) at `source`, written or not.
    #[allow(clippy::expect_used, reason = "the simulator's store is in memory")]
    pub fn admission_counters(&self, source: &str) -> (u64, u64) {
        let src = self.world.source(&name(source));
        let relay = &src.relay;
        let state = relay.outbox().state().expect("state");
        (state.dedup_hits, state.rejected_full)
    }

    /// Sequences queued at `source`, ascending.
    pub fn queued(&self, source: &str) -> Vec<u64> {
        self.queued_rows(source).into_iter().map(|r| r.seq).collect()
    }

    /// Rows queued at `source`, as stored.
    #[allow(clippy::expect_used, reason = "the simulator's store is in memory")]
    pub fn queued_rows(&self, source: &str) -> Vec<StoredRow> {
        let src = self.world.source(&name(source));
        let relay = &src.relay;
        stored_rows(relay.sql(), crate::store::outbox::pack::QUEUED_ROWS, "").expect("queued rows")
    }

    /// `source`'s last allocated sequence.
    #[allow(clippy::expect_used, reason = "the simulator's store is in memory")]
    pub fn os(&self, source: &str) -> u64 {
        let src = self.world.source(&name(source));
        let os = src.relay.outbox().state().expect("state").os;
        os
    }

    /// `source`'s scan state, if stored and valid.
    #[allow(clippy::expect_used, reason = "the simulator's store is in memory")]
    pub fn rs(&self, source: &str) -> Option<ScanState> {
        let src = self.world.source(&name(source));
        let state = src.relay.outbox().state().expect("state");
        ScanState::decode(state.rs.as_deref()?).ok()
    }

    /// `source`'s `relay_watermark` now (parked rows hold it back).
    #[allow(clippy::expect_used, reason = "the simulator's store is in memory")]
    pub fn relay_watermark(&self, source: &str) -> u64 {
        let src = self.world.source(&name(source));
        src.relay.relay_watermark(self.now_ms()).expect("watermark")
    }

    /// Whether every row of `source` through `seq` was applied (or
    /// discarded): parked rows are not delivered.
    #[allow(clippy::expect_used, reason = "the simulator's store is in memory")]
    pub fn delivered_through(&self, source: &str, seq: u64) -> bool {
        let src = self.world.source(&name(source));
        src.relay.delivered_through(seq).expect("delivered_through")
    }

    /// `target`'s watermark for `source` (0 if none).
    #[allow(clippy::expect_used, reason = "the simulator's store is in memory")]
    pub fn watermark(&self, target: &str, source: &str) -> u64 {
        let (source, id) = self.world.identity(&name(source));
        let targets = self.world.targets.borrow();
        targets.get(&name(target)).map_or(0, |t| t.inbox.watermark(&source, Some(&id)).expect("watermark"))
    }

    /// Sequences from `source` that `target` applied, in application order.
    #[allow(clippy::expect_used, reason = "the simulator's store is in memory")]
    pub fn applied(&self, target: &str, source: &str) -> Vec<u64> {
        let (source, id) = self.world.identity(&name(source));
        let targets = self.world.targets.borrow();
        targets
            .get(&name(target))
            .map_or_else(Vec::new, |t| t.tables.applied(source.as_str(), Some(&id)).expect("apply log"))
    }

    /// The JSON text of `key` at `target`.
    #[allow(clippy::expect_used, reason = "the simulator's store is in memory")]
    pub fn value(&self, target: &str, key: &str) -> Option<String> {
        let targets = self.world.targets.borrow();
        targets.get(&name(target)).and_then(|t| t.inbox.value(key).expect("value"))
    }

    /// The target's inbox, for reads of anything else (watermarks, totals).
    pub fn with_target<R>(
        &self,
        target: &str,
        f: impl FnOnce(&crate::store::inbox::Inbox<super::SqliteSql>) -> R,
    ) -> R {
        let t = name(target);
        self.world.ensure_target(&t);
        let targets = self.world.targets.borrow();
        #[allow(clippy::expect_used, reason = "ensured just above")]
        let target = targets.get(&t).expect("the target exists");
        f(&target.inbox)
    }

    /// The source's relay, for reads of anything else (status, targets,
    /// the outbox's tables).
    pub fn with_relay<R>(&self, source: &str, f: impl FnOnce(&super::SimRelay) -> R) -> R {
        let src = self.world.source(&name(source));
        let relay = &src.relay;
        f(relay)
    }
}

/// Every target record of `relay`, page by page.
#[allow(clippy::expect_used, reason = "the simulator's store is in memory")]
fn every_target<S: crate::store::Sql, A: crate::source::AlarmStore>(
    relay: &crate::source::Relay<S, A>,
) -> Vec<crate::store::outbox::TargetReport> {
    let mut all = Vec::new();
    let mut after = String::new();
    loop {
        let page = relay.targets(&after, crate::core::MAX_TARGETS_PER_PAGE).expect("target reports");
        all.extend(page.targets);
        match page.next {
            Some(next) => after = next,
            None => return all,
        }
    }
}
