//! The source's enqueues: alone, with the caller's own writes in one
//! transaction, or with no await inside a caller's transaction; each arms
//! the alarm in the same turn as its rows.

use super::*;

impl<S: Sql, A: AlarmStore> Relay<S, A> {
    /// Enqueues `rows` (optionally under an idempotency key) in a
    /// transaction of its own, and arms the alarm in the same turn.
    pub async fn enqueue(
        &self,
        now_ms: u64,
        key: Option<&str>,
        rows: &[EnqueueRow],
    ) -> Result<Enqueued, EnqueueFailure> {
        // `EnqueueFailure` is `EnqueueFailure<Infallible>`: no writes, no abort.
        let (_, done) =
            self.enqueue_with(now_ms, key, rows, |_| Ok::<(), std::convert::Infallible>(())).await?;
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
        writes: impl FnMut(&Enqueued) -> Result<R, E>,
    ) -> Result<(R, Enqueued), EnqueueFailure<E>> {
        // Unfenced, the outbox never answers "moved".
        self.enqueue_in_transaction(now_ms, key, None, rows, Fence::default(), writes)
            .await?
            .ok_or(EnqueueFailure::Store(StoreError::Guard("an unfenced enqueue answered moved")))
    }

    /// [`commit_enqueue`](Relay::commit_enqueue) once the alarm is known,
    /// then the alarm armed in the same turn.
    pub(super) async fn enqueue_in_transaction<R, E: std::fmt::Display>(
        &self,
        now_ms: u64,
        key: Option<&str>,
        routed: Option<RoutedKey<'_>>,
        rows: &[EnqueueRow],
        fence: Fence,
        writes: impl FnMut(&Enqueued) -> Result<R, E>,
    ) -> Result<Option<(R, Enqueued)>, EnqueueFailure<E>> {
        self.forget_past_alarm(now_ms);
        self.load_alarm().await.map_err(EnqueueFailure::Store)?;
        // No await from here until the alarm is armed: the rows, the new os,
        // the caller's writes and the arming commit together.
        let taken = self.commit_enqueue(now_ms, key, routed, rows, fence, writes)?;
        if let Some((_, done)) = &taken {
            self.arm_for(done, now_ms).await.map_err(EnqueueFailure::Store)?;
        }
        Ok(taken)
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
        let no_writes = |_: &Enqueued| Ok::<(), std::convert::Infallible>(());
        let (_, done) = self
            .commit_enqueue(now_ms, key, None, rows, Fence::default(), no_writes)?
            .ok_or(EnqueueFailure::Store(StoreError::Guard("an unfenced enqueue answered moved")))?;
        let at = if done.duplicate {
            None
        } else {
            self.note_armed(Some(self.due_for(&done, now_ms)), 0).map_err(EnqueueFailure::Store)?
        };
        Ok((done, at))
    }

    /// Forgets the alarm this instance noted as armed: setting it failed.
    pub fn alarm_unknown(&self) {
        self.known.set(AlarmKnown::Unknown);
    }

    /// The enqueue's transaction: the outbox's (fenced) enqueue, then
    /// `writes`, committed together or not at all. `Ok(None)`: a gated
    /// enqueue found its target moved (the epoch it stored commits; `writes`
    /// does not run).
    pub(super) fn commit_enqueue<R, E: std::fmt::Display>(
        &self,
        now_ms: u64,
        key: Option<&str>,
        routed: Option<RoutedKey<'_>>,
        rows: &[EnqueueRow],
        fence: Fence,
        mut writes: impl FnMut(&Enqueued) -> Result<R, E>,
    ) -> Result<Option<(R, Enqueued)>, EnqueueFailure<E>> {
        let mut failure: Option<EnqueueFailure<E>> = None;
        let result = self.outbox.sql().transaction(|| {
            let done = match self.outbox.enqueue_fenced(self.seat(), now_ms, key, routed, rows, fence) {
                Ok(Some(done)) => done,
                Ok(None) => return Ok(None),
                Err(EnqueueFailure::Refused(e)) => {
                    failure = Some(EnqueueFailure::Refused(e));
                    return Err(StoreError::Aborted("the enqueue was refused".into()));
                }
                Err(EnqueueFailure::Store(e)) => return Err(e),
                Err(EnqueueFailure::Aborted(never)) => match never {},
            };
            match writes(&done) {
                Ok(r) => Ok(Some((r, done))),
                Err(e) => {
                    let text = e.to_string();
                    failure = Some(EnqueueFailure::Aborted(e));
                    Err(StoreError::Aborted(text))
                }
            }
        });
        match (result, failure) {
            (Ok(v), _) => Ok(v),
            (Err(_), Some(f)) => Err(f),
            (Err(e), None) => Err(EnqueueFailure::Store(e)),
        }
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
    /// kept.
    pub(super) fn due_for(&self, done: &Enqueued, now_ms: u64) -> u64 {
        enqueue_due(now_ms, self.last_delivery_ms.get(), self.config.get().coalesce_ms)
            .max(done.first_due_ms())
    }
}
