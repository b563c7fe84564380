//! The source's enqueues: alone, with the caller's own writes in one
//! transaction, or with no await inside a caller's transaction; each runs
//! the outbox's plain [`Outbox::enqueue`] in its transaction and arms the
//! alarm in the same turn as its rows.

use super::*;
use crate::store::outbox::Entry;

impl<S: Sql, A: AlarmStore> Relay<S, A> {
    /// Enqueues `rows` (optionally under an idempotency key) in a
    /// transaction of its own, and arms the alarm in the same turn.
    pub async fn enqueue(
        &self,
        now_ms: u64,
        key: Option<&str>,
        rows: &[EnqueueRow],
    ) -> Result<Enqueued, EnqueueFailure> {
        self.know_alarm(now_ms).await?;
        // No await from here until the alarm is armed: the rows, the new os
        // and the arming commit together.
        let done = self.refusable(|| self.outbox.enqueue(Entry::Unrouted(self.seat()), now_ms, key, rows))?;
        self.arm_for(&done, now_ms).await?;
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
        mut writes: impl FnMut(&Enqueued) -> Result<R, E>,
    ) -> Result<(R, Enqueued), EnqueueFailure<E>> {
        self.know_alarm(now_ms).await.map_err(EnqueueFailure::widen)?;
        // No await from here until the alarm is armed: the rows, the new os,
        // the caller's writes and the arming commit together.
        let (r, done) = self.refusable(|| {
            let entry = Entry::Unrouted(self.seat());
            let done = self.outbox.enqueue(entry, now_ms, key, rows).map_err(EnqueueFailure::widen)?;
            Ok((writes(&done).map_err(EnqueueFailure::Aborted)?, done))
        })?;
        self.arm_for(&done, now_ms).await?;
        Ok((r, done))
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
        let done = self.refusable(|| self.outbox.enqueue(Entry::Unrouted(self.seat()), now_ms, key, rows))?;
        let at = if done.duplicate {
            None
        } else {
            self.note_armed(Some(self.due_for(&done, now_ms)), 0).map_err(EnqueueFailure::Store)?
        };
        // The caller's transaction may yet roll these rows back: the
        // delivery they ask for reads them.
        self.outbox.forget_handover();
        Ok((done, at))
    }

    /// Forgets the alarm this instance noted as armed: setting it failed.
    pub fn alarm_unknown(&self) {
        self.known.set(AlarmKnown::Unknown);
    }

    /// Runs `body` in one transaction of its own (nested in the caller's,
    /// if one is open); a refusal or an abort rolls it back and comes back
    /// as itself.
    pub(super) fn refusable<T, E: std::fmt::Display>(
        &self,
        mut body: impl FnMut() -> Result<T, EnqueueFailure<E>>,
    ) -> Result<T, EnqueueFailure<E>> {
        let mut failure = None;
        let result = self.outbox.sql().transaction(|| match body() {
            Ok(v) => Ok(v),
            Err(EnqueueFailure::Store(e)) => Err(e),
            Err(other) => {
                let text = other.to_string();
                failure = Some(other);
                Err(StoreError::Aborted(text))
            }
        });
        result.map_err(|e| failure.take().unwrap_or(EnqueueFailure::Store(e)))
    }

    /// Makes sure this instance knows its alarm before an enqueue: one it
    /// noted as armed in the past may have fired, so it is read afresh.
    pub(super) async fn know_alarm(&self, now_ms: u64) -> Result<(), EnqueueFailure> {
        self.forget_past_alarm(now_ms);
        self.load_alarm().await.map_err(EnqueueFailure::Store)
    }

    /// Arms the alarm for what an enqueue wrote (nothing for a duplicate).
    pub(super) async fn arm_for(&self, done: &Enqueued, now_ms: u64) -> Result<(), StoreError> {
        if done.duplicate {
            return Ok(());
        }
        self.arm_at(self.due_for(done, now_ms)).await
    }

    /// When the rows an enqueue wrote need the alarm. A delayed row needs
    /// none before it is due; one already set earlier (for other rows) is
    /// kept. Rows due now at a source that delivers in turn need it only
    /// as the safety net for a delivery the platform cuts off
    /// ([`IN_TURN_ALARM_GRACE_MS`](crate::core::IN_TURN_ALARM_GRACE_MS) on),
    /// or, while an in-turn delivery runs (it takes them), by its lease
    /// (see `lease_at`): they ask for an in-turn delivery instead (see
    /// [`Relay::deliver`]). While this instance's alarm runs they ask for
    /// none (one delivery at a time) and need the next alarm now.
    pub(super) fn due_for(&self, done: &Enqueued, now_ms: u64) -> u64 {
        let config = self.config.get();
        let due =
            enqueue_due(now_ms, self.last_delivery_ms.get(), config.coalesce_ms).max(done.first_due_ms());
        if config.in_turn && config.coalesce_ms == 0 && due <= now_ms {
            if self.firing.get() {
                // One delivery at a time: the alarm running now may have
                // read the outbox before these rows; the next takes them.
                return now_ms;
            }
            self.asked.set(true);
            self.asked_ms.set(now_ms);
            // The rows are committed (or, for `enqueue_now`, forgotten
            // again): the delivery asked for may take them from memory.
            self.outbox.commit_handover();
            return self.lease_at(now_ms);
        }
        due
    }
}
