//! A partitioned logical source read and acted on as one source in the
//! simulator: the shipped fan-out and merge ([`crate::logical`]) over the
//! simulated sources, each object a real [`Relay`](crate::Relay).

use super::{name, Sim};
use crate::core::{Layout, Name, Part, PartitionMap};
use crate::logical::{self, Objects};
use crate::store::outbox::{ActionOutcome, Settling, TargetPage};
use crate::store::StoreError;
use durable_relay_protocol::wire::{LogicalStatus, LogicalTargetPage, QueuedPage, Rearmed, SourceStatus};

/// The objects of one logical source, as a logical read's sink.
struct SimObjects<'a> {
    sim: &'a Sim,
    logical: Name,
}

impl SimObjects<'_> {
    /// The simulated source that is object `part`, for one call.
    fn source(&self, part: Part) -> std::rc::Rc<super::world::SimSource> {
        let calls = &self.sim.world.object_calls;
        calls.set(calls.get() + 1);
        self.sim.world.source(&part.object(&self.logical))
    }
}

impl Objects for SimObjects<'_> {
    type Error = StoreError;

    async fn status(&self, part: Part) -> Result<SourceStatus, StoreError> {
        self.source(part).relay.status(self.sim.now_ms()).await
    }

    async fn settling(&self, part: Part, layout: Layout) -> Result<Settling, StoreError> {
        let map = PartitionMap { partitions: layout, epoch: 1, from: Vec::new() };
        self.source(part).relay.settling(&map, self.sim.now_ms())
    }

    async fn relay_watermark(&self, part: Part) -> Result<u64, StoreError> {
        self.source(part).relay.relay_watermark(self.sim.now_ms())
    }

    async fn targets(&self, part: Part, after: Option<&Name>, limit: u32) -> Result<TargetPage, StoreError> {
        self.source(part).relay.targets(after.map_or("", Name::as_str), limit)
    }

    async fn redrive(&self, part: Part, target: &Name) -> Result<ActionOutcome, StoreError> {
        self.source(part).relay.redrive(target, self.sim.now_ms()).await
    }

    async fn discard(&self, part: Part, target: &Name) -> Result<ActionOutcome, StoreError> {
        let object = part.object(&self.logical);
        // The audit must know which rows an operator dropped.
        for seq in self.sim.parked_rows(object.as_str(), target.as_str()) {
            self.sim.world.discarded.borrow_mut().insert((object.clone(), seq));
        }
        self.source(part).relay.discard(target, self.sim.now_ms())
    }

    async fn rearm(&self, part: Part) -> Result<Rearmed, StoreError> {
        self.source(part).relay.rearm(self.sim.now_ms()).await
    }

    async fn queued(
        &self,
        part: Part,
        target: &Name,
        after: u64,
        limit: u32,
    ) -> Result<QueuedPage, StoreError> {
        self.source(part).relay.queued_page(target, after, limit)
    }
}

/// The simulator's store is in memory: a storage error is a bug.
#[allow(clippy::panic, reason = "the simulator's in-memory store does not fail")]
fn ok<T>(what: &str, done: Result<T, StoreError>) -> T {
    done.unwrap_or_else(|e| panic!("logical {what}: {e}"))
}

impl Sim {
    /// The logical status of `logical` under `map`, gathered by
    /// [`crate::logical::status`].
    pub fn logical_status(&self, logical: &str, map: &PartitionMap) -> LogicalStatus {
        let sink = SimObjects { sim: self, logical: name(logical) };
        ok("status", futures::executor::block_on(logical::status(&sink.logical, map, &sink)))
    }

    /// The least of the objects' watermarks ([`crate::logical::relay_watermark`]).
    pub fn logical_watermark(&self, logical: &str, map: &PartitionMap) -> u64 {
        let sink = SimObjects { sim: self, logical: name(logical) };
        ok("watermark", futures::executor::block_on(logical::relay_watermark(map, &sink)))
    }

    /// A merged page of parked and failing targets ([`crate::logical::targets`]).
    pub fn logical_targets(
        &self,
        logical: &str,
        map: &PartitionMap,
        after: Option<&str>,
        limit: u32,
    ) -> LogicalTargetPage {
        let sink = SimObjects { sim: self, logical: name(logical) };
        let after = after.map(name);
        ok("targets", futures::executor::block_on(logical::targets(map, &sink, after.as_ref(), limit)))
    }

    /// Redrives `target` at every object ([`crate::logical::redrive`]).
    pub fn logical_redrive(&mut self, logical: &str, map: &PartitionMap, target: &str) -> ActionOutcome {
        let sink = SimObjects { sim: self, logical: name(logical) };
        ok("redrive", futures::executor::block_on(logical::redrive(map, &sink, &name(target))))
    }

    /// Discards `target`'s parked rows at every object ([`crate::logical::discard`]).
    pub fn logical_discard(&mut self, logical: &str, map: &PartitionMap, target: &str) -> ActionOutcome {
        let sink = SimObjects { sim: self, logical: name(logical) };
        ok("discard", futures::executor::block_on(logical::discard(map, &sink, &name(target))))
    }

    /// Re-arms every object that holds rows and no alarm ([`crate::logical::rearm`]).
    pub fn logical_rearm(&mut self, logical: &str, map: &PartitionMap) -> Rearmed {
        let sink = SimObjects { sim: self, logical: name(logical) };
        ok("rearm", futures::executor::block_on(logical::rearm(map, &sink)))
    }

    /// A page of `target`'s queued rows where they are
    /// ([`crate::logical::queued`]).
    pub fn logical_queued(
        &self,
        logical: &str,
        map: &PartitionMap,
        target: &str,
        after: u64,
        limit: u32,
    ) -> QueuedPage {
        let sink = SimObjects { sim: self, logical: name(logical) };
        ok("queued", futures::executor::block_on(logical::queued(map, &sink, &name(target), after, limit)))
    }

    /// Whether the logical name's per-object routes reach the plain object
    /// ([`crate::logical::reaches_plain`]).
    pub fn reaches_plain(&self, logical: &str, map: &PartitionMap) -> bool {
        let sink = SimObjects { sim: self, logical: name(logical) };
        ok("reach", futures::executor::block_on(logical::reaches_plain(map, &sink)))
    }

    /// Calls logical reads have made to objects so far, in all: each is a
    /// subrequest where the objects are Durable Objects.
    pub fn object_calls(&self) -> u64 {
        self.world.object_calls.get()
    }
}
