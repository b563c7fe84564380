//! Partitioned sources in the simulator: the shipped router
//! ([`crate::partition`]) over the simulated sources, each partition a real
//! [`Relay`](crate::Relay) taking routed requests through the real fence.

use std::rc::Rc;

use super::world::World;
use super::Sim;
use crate::core::{EnqueueRefusal, EnqueueRow, Fence, KeyVerdict, Name, Part, PartitionMap, Ticket};
use crate::partition::{self, Partitions, RouteFailure, RoutedEnqueue};
use crate::store::outbox::{EnqueueFailure, Enqueued, RoutedKey, Sealed, Settling};

/// The objects of one logical source, as a router's sink.
struct SimPartitions {
    world: Rc<World>,
    logical: Name,
}

impl SimPartitions {
    fn part(&self, part: Part) -> (Name, Rc<super::world::SimSource>) {
        let name = part.object(&self.logical);
        let src = self.world.source(&name);
        (name, src)
    }
}

/// An object's refusal, or a storage failure, which the simulator's
/// in-memory store never has.
#[allow(clippy::panic, reason = "the simulator's in-memory store does not fail")]
fn refusal(name: &Name, failure: EnqueueFailure) -> EnqueueRefusal {
    match failure {
        EnqueueFailure::Refused(r) => r,
        EnqueueFailure::Store(e) => panic!("at {name}: {e}"),
        EnqueueFailure::Aborted(never) => match never {},
    }
}

/// The endpoints the simulator's sources take rows for: none, as a source
/// configured with none.
static NO_ENDPOINTS: std::collections::BTreeSet<String> = std::collections::BTreeSet::new();

impl Partitions for SimPartitions {
    type Error = EnqueueRefusal;

    fn endpoints(&self) -> Option<&std::collections::BTreeSet<String>> {
        Some(&NO_ENDPOINTS)
    }

    async fn enqueue(
        &self,
        part: Part,
        key: Option<RoutedKey<'_>>,
        rows: &[EnqueueRow],
        fence: Fence,
    ) -> Result<Option<Enqueued>, EnqueueRefusal> {
        let (name, src) = self.part(part);
        #[allow(clippy::expect_used, reason = "the simulator's in-memory store does not fail")]
        let before = src.relay.outbox().state().expect("an in-memory store").os;
        let done = src.relay.enqueue_routed(self.world.now(), key, rows, fence).await;
        let done = done.map_err(|f| refusal(&name, f))?;
        if let Some(done) = &done {
            self.world.record_new(&name, rows, &done.seqs, before);
        }
        Ok(done)
    }

    async fn record_key(
        &self,
        home: u32,
        key: &str,
        digest: &str,
        reach: &[Part],
    ) -> Result<KeyVerdict, EnqueueRefusal> {
        let (name, src) = self.part(Part::Index(home));
        src.relay.record_key(self.world.now(), key, digest, reach).map_err(|f| refusal(&name, f))
    }

    async fn seal(
        &self,
        part: Part,
        key: &str,
        digest: &str,
        ticket: Ticket,
    ) -> Result<Sealed, EnqueueRefusal> {
        let (name, src) = self.part(part);
        src.relay.seal(self.world.now(), key, digest, ticket).map_err(|f| refusal(&name, f))
    }

    async fn probe_plain(
        &self,
        key: &str,
        digest: &str,
        fence: Fence,
    ) -> Result<Option<Enqueued>, EnqueueRefusal> {
        let (name, src) = self.part(Part::Plain);
        src.relay.probe_plain(self.world.now(), key, digest, fence).map_err(|f| refusal(&name, f))
    }

    async fn prepare(&self, part: Part, map: &PartitionMap) -> Result<Vec<Part>, EnqueueRefusal> {
        let (name, src) = self.part(part);
        src.relay.prepare(self.world.now(), map).map_err(|f| refusal(&name, f))
    }

    async fn activate(&self, part: Part, map: &PartitionMap) -> Result<(), EnqueueRefusal> {
        let (name, src) = self.part(part);
        src.relay.activate(self.world.now(), map).map_err(|f| refusal(&name, f))
    }

    fn refused(&self, refusal: EnqueueRefusal) -> EnqueueRefusal {
        refusal
    }

    fn unadopted(&self, error: &EnqueueRefusal) -> bool {
        matches!(error, EnqueueRefusal::EpochNotAdopted { .. })
    }

    #[allow(clippy::panic, reason = "an object that answers so is a bug the simulator reports")]
    fn moved_on_direct(&self, part: Part) -> EnqueueRefusal {
        panic!("object {part} of {} answered a direct enqueue with moved", self.logical)
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

    /// [`Relay::settling`](crate::Relay::settling) of object `part` of
    /// `logical` under `map`.
    #[allow(clippy::expect_used, reason = "the simulator's in-memory store does not fail")]
    pub fn settling(&self, logical: &str, part: Part, map: &PartitionMap) -> Settling {
        let name = part.object(&super::name(logical));
        self.world.source(&name).relay.settling(map, self.now_ms()).expect("an in-memory store")
    }
}
