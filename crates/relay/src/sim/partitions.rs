//! Partitioned sources in the simulator: the shipped router
//! ([`crate::partition`]) over the simulated sources, each partition a real
//! [`Relay`](crate::Relay) taking routed enqueues through the real fence.

use std::rc::Rc;

use super::world::World;
use super::Sim;
use crate::core::{partition_name, EnqueueRefusal, EnqueueRow, Fence, Name, PartitionMap};
use crate::partition::{self, Partitions, RouteFailure, RoutedEnqueue};
use crate::store::outbox::{EnqueueFailure, Enqueued};

/// The partitions of one logical source, as a router's sink.
struct SimPartitions {
    world: Rc<World>,
    logical: Name,
}

impl SimPartitions {
    fn partition(&self, index: u32) -> (Name, Rc<super::world::SimSource>) {
        let name = partition_name(&self.logical, index);
        let src = self.world.source(&name);
        (name, src)
    }
}

/// A partition's refusal, or a storage failure, which the simulator's
/// in-memory store never has.
#[allow(clippy::panic, reason = "the simulator's in-memory store does not fail")]
fn refusal(name: &Name, failure: EnqueueFailure) -> EnqueueRefusal {
    match failure {
        EnqueueFailure::Refused(r) => r,
        EnqueueFailure::Store(e) => panic!("at {name}: {e}"),
        EnqueueFailure::Aborted(never) => match never {},
    }
}

impl Partitions for SimPartitions {
    type Error = EnqueueRefusal;

    async fn enqueue(
        &self,
        index: u32,
        key: Option<&str>,
        call: Option<&Name>,
        rows: &[EnqueueRow],
        fence: Fence,
    ) -> Result<Option<Enqueued>, EnqueueRefusal> {
        let (name, src) = self.partition(index);
        let done = src.relay.enqueue_routed(self.world.now(), key, call, rows, fence).await;
        let done = done.map_err(|f| refusal(&name, f))?;
        if let Some(done) = &done {
            if !done.duplicate {
                self.world.record_enqueued(&name, rows, &done.seqs);
            }
        }
        Ok(done)
    }

    async fn claim(
        &self,
        index: u32,
        key: &str,
        digest: &str,
        probe: bool,
        fence: Fence,
    ) -> Result<(), EnqueueRefusal> {
        let (name, src) = self.partition(index);
        src.relay.claim(self.world.now(), key, digest, probe, fence).map_err(|f| refusal(&name, f))?;
        Ok(())
    }

    async fn adopt(&self, index: u32, map: &PartitionMap) -> Result<Option<PartitionMap>, EnqueueRefusal> {
        let (name, src) = self.partition(index);
        src.relay.adopt(map).map_err(|f| refusal(&name, f))
    }

    fn refused(&self, refusal: EnqueueRefusal) -> EnqueueRefusal {
        refusal
    }

    fn unadopted(&self, error: &EnqueueRefusal) -> bool {
        matches!(error, EnqueueRefusal::EpochNotAdopted { .. })
    }

    #[allow(clippy::panic, reason = "a partition that answers so is a bug the simulator reports")]
    fn moved_on_direct(&self, index: u32) -> EnqueueRefusal {
        panic!("partition {index} of {} answered a direct enqueue with moved", self.logical)
    }
}

impl Sim {
    /// Enqueues `rows` at logical source `logical` through the router, by
    /// `map`. Partition `i` is the simulated source `logical:i`.
    pub fn enqueue_routed(
        &mut self,
        logical: &str,
        map: &PartitionMap,
        key: Option<&str>,
        rows: Vec<EnqueueRow>,
    ) -> Result<RoutedEnqueue, RouteFailure<EnqueueRefusal>> {
        let sink = SimPartitions { world: self.world.clone(), logical: super::name(logical) };
        futures::executor::block_on(partition::enqueue(map, &sink, key, &rows, self.now_ms()))
    }

    /// [`Relay::foreign_targets`](crate::Relay::foreign_targets) of
    /// partition `index` of `logical` under `partitions`.
    #[allow(clippy::expect_used, reason = "the simulator's in-memory store does not fail")]
    pub fn foreign_targets(&self, logical: &str, partitions: u32, index: u32) -> u64 {
        let name = partition_name(&super::name(logical), index);
        self.world.source(&name).relay.foreign_targets(partitions, index).expect("an in-memory store")
    }
}
