//! The source as one object of a partitioned logical source: the router's
//! steps (prepare and activate a map, record and seal keys, probe the plain
//! layout, how a change settles here) and the routed enqueue behind the
//! fence.

use super::*;

impl<S: Sql, A: AlarmStore> Relay<S, A> {
    /// As an object of a logical source now routed by `map`: what keeps
    /// its last change from settling here (see [`Settling`]). A change has
    /// settled (its `from` may be dropped, under a new epoch) once every
    /// object answers nothing.
    pub fn settling(&self, map: &PartitionMap, now_ms: u64) -> Result<Settling, StoreError> {
        self.outbox.settling(self.seat().part, map, now_ms)
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
        self.know_alarm(now_ms).await?;
        // No await from here until the alarm is armed, as in `enqueue`.
        let taken = self.refusable(|| self.outbox.enqueue_fenced(self.seat(), now_ms, key, rows, fence))?;
        if let Some(done) = &taken {
            self.arm_for(done, now_ms).await?;
        }
        Ok(taken)
    }
}
