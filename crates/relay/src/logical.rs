//! A partitioned logical source read and acted on as one source over
//! Durable Object stubs: its status, watermark and parked targets gathered
//! from every object that may hold its rows, and redrive, discard and rearm
//! done at each, the replies merged. The fan-out and the merge are written
//! once in [`durable_relay_sql::logical`] (the simulator runs the same);
//! here each object is a [`SourceClient`](crate::client::SourceClient). What is read per object
//! (positions, parked rows, the alarm history) is asked of that object
//! through [`PartitionedClient::part`]. The reference Worker's front door
//! serves these for a source named in `RELAY_PARTITIONS`; a Worker of your
//! own can call them the same way. The replies are the protocol's
//! ([`crate::protocol::wire::logical`]).

#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

use crate::client::PartitionedClient;
use crate::core::{Layout, Name, Part};
use crate::http::RelayError;
use crate::protocol::wire::{
    ActionOutcome, LogicalStatus, LogicalTargetPage, QueuedPage, Rearmed, Settling, SourceStatus, TargetPage,
};
use crate::routes::SourceOp;
pub use durable_relay_sql::logical::{merge_pages, objects, Objects};

impl PartitionedClient<'_> {
    /// The logical source's status, from every object's (and, while a
    /// change settles, what keeps each from settling).
    pub async fn status(&self) -> Result<LogicalStatus, RelayError> {
        durable_relay_sql::logical::status(self.logical(), self.map(), &Stubs(self)).await
    }

    /// The least of the objects' watermarks: a commit-time lower bound of
    /// the rows the logical source still owes, ms.
    pub async fn relay_watermark(&self) -> Result<u64, RelayError> {
        durable_relay_sql::logical::relay_watermark(self.map(), &Stubs(self)).await
    }

    /// A page of the parked and failing targets, every object's page
    /// merged ([`merge_pages`]).
    pub async fn targets(&self, after: Option<&Name>, limit: u32) -> Result<LogicalTargetPage, RelayError> {
        durable_relay_sql::logical::targets(self.map(), &Stubs(self), after, limit).await
    }

    /// Puts `target`'s parked rows back at every object; the outcomes summed.
    pub async fn redrive(&self, target: &Name) -> Result<ActionOutcome, RelayError> {
        durable_relay_sql::logical::redrive(self.map(), &Stubs(self), target).await
    }

    /// Drops `target`'s parked rows at every object; the outcomes summed.
    pub async fn discard(&self, target: &Name) -> Result<ActionOutcome, RelayError> {
        durable_relay_sql::logical::discard(self.map(), &Stubs(self), target).await
    }

    /// Re-arms every object that holds rows and no alarm: re-armed if any
    /// was, the rows summed, the soonest alarm.
    pub async fn rearm(&self) -> Result<Rearmed, RelayError> {
        durable_relay_sql::logical::rearm(self.map(), &Stubs(self)).await
    }

    /// A page of the rows still queued for `target`, from the object that
    /// holds them now (named in the page's `source`, where its `next`
    /// applies): see [`durable_relay_sql::logical::queued`].
    pub async fn queued(&self, target: &Name, after: u64, limit: u32) -> Result<QueuedPage, RelayError> {
        durable_relay_sql::logical::queued(self.map(), &Stubs(self), target, after, limit).await
    }

    /// Whether the logical name's own per-object routes (a position's
    /// `delivered-through`, a parked target's rows, the alarm history)
    /// reach the plain object: while the map lists it, and while a map
    /// that does not leaves rows there
    /// ([`durable_relay_sql::logical::reaches_plain`]).
    pub async fn reaches_plain(&self) -> Result<bool, RelayError> {
        durable_relay_sql::logical::reaches_plain(self.map(), &Stubs(self)).await
    }
}

/// The objects of a partitioned client's logical source, each the source
/// object of its name, reached through its stub.
struct Stubs<'a, 'b>(&'a PartitionedClient<'b>);

impl Objects for Stubs<'_, '_> {
    type Error = RelayError;

    async fn status(&self, part: Part) -> Result<SourceStatus, RelayError> {
        self.0.part(part)?.status().await
    }

    async fn settling(&self, part: Part, layout: Layout) -> Result<Settling, RelayError> {
        self.0.part(part)?.call(SourceOp::Settling(layout), None).await
    }

    async fn relay_watermark(&self, part: Part) -> Result<u64, RelayError> {
        self.0.part(part)?.relay_watermark().await
    }

    async fn targets(&self, part: Part, after: Option<&Name>, limit: u32) -> Result<TargetPage, RelayError> {
        self.0.part(part)?.targets(after, limit).await
    }

    async fn redrive(&self, part: Part, target: &Name) -> Result<ActionOutcome, RelayError> {
        self.0.part(part)?.redrive(target).await
    }

    async fn discard(&self, part: Part, target: &Name) -> Result<ActionOutcome, RelayError> {
        self.0.part(part)?.discard(target).await
    }

    async fn rearm(&self, part: Part) -> Result<Rearmed, RelayError> {
        self.0.part(part)?.rearm().await
    }

    async fn queued(
        &self,
        part: Part,
        target: &Name,
        after: u64,
        limit: u32,
    ) -> Result<QueuedPage, RelayError> {
        self.0.part(part)?.queued(target, after, limit).await
    }
}
