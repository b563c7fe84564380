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

impl Partitions for SimPartitions {
    type Error = EnqueueRefusal;

    #[allow(clippy::panic, reason = "the simulator's in-memory store does not fail")]
    async fn enqueue(
        &self,
        index: u32,
        key: Option<&str>,
        rows: &[EnqueueRow],
        fence: Fence,
    ) -> Result<Option<Enqueued>, EnqueueRefusal> {
        let name = partition_name(&self.logical, index);
        let src = self.world.source(&name);
        match src.relay.enqueue_routed(self.world.now(), key, rows, fence).await {
            Ok(Some(done)) => {
                if !done.duplicate {
                    self.world.record_enqueued(&name, rows, &done.seqs);
                }
                Ok(Some(done))
            }
            Ok(None) => Ok(None),
            Err(EnqueueFailure::Refused(r)) => Err(r),
            Err(EnqueueFailure::Store(e)) => panic!("enqueue at {name}: {e}"),
            Err(EnqueueFailure::Aborted(never)) => match never {},
        }
    }

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
        futures::executor::block_on(partition::enqueue(map, &sink, key, &rows))
    }

    /// [`Relay::foreign_targets`](crate::Relay::foreign_targets) of
    /// partition `index` of `logical` under `partitions`.
    #[allow(clippy::expect_used, reason = "the simulator's in-memory store does not fail")]
    pub fn foreign_targets(&self, logical: &str, partitions: u32, index: u32) -> u64 {
        let name = partition_name(&super::name(logical), index);
        self.world.source(&name).relay.foreign_targets(partitions, index).expect("an in-memory store")
    }
}
