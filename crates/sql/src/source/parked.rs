//! The operator's view of parked and failing targets, and their actions on
//! them: list, page through parked rows, redrive, discard; and the rows
//! still queued for one target.

use super::*;

impl<S: Sql, A: AlarmStore> Relay<S, A> {
    /// A page of the parked and failing targets, in name order after
    /// `after`: at most `limit` (1..=[`MAX_TARGETS_PER_PAGE`](crate::core::MAX_TARGETS_PER_PAGE)).
    pub fn targets(&self, after: &str, limit: u32) -> Result<TargetPage, StoreError> {
        self.outbox.target_reports(TargetFilter::All, after, limit)
    }

    /// A page of `target`'s parked rows.
    pub fn parked_page(&self, target: &Name, after: u64, limit: u32) -> Result<ParkedPage, StoreError> {
        self.outbox.parked_page(target.as_str(), after, limit)
    }

    /// A page of the rows still queued for `target`, in the order it
    /// receives them.
    pub fn queued_page(&self, target: &Name, after: u64, limit: u32) -> Result<QueuedPage, StoreError> {
        let page = self.outbox.queued_page(target.as_str(), after, limit)?;
        Ok(QueuedPage { source: self.name().to_string(), ..page })
    }

    /// Puts `target`'s parked rows back in order and arms the alarm.
    pub async fn redrive(&self, target: &Name, now_ms: u64) -> Result<ActionOutcome, StoreError> {
        // Loaded first, so the redrive and its arming share one turn.
        self.forget_past_alarm(now_ms);
        self.load_alarm().await?;
        self.outbox.note_time(now_ms);
        let outcome = self.outbox.redrive(target.as_str())?;
        if outcome.rows > 0 {
            self.arm_at(now_ms).await?;
        }
        Ok(outcome)
    }

    /// Drops `target`'s parked rows (kept until the discard horizon).
    pub fn discard(&self, target: &Name, now_ms: u64) -> Result<ActionOutcome, StoreError> {
        self.outbox.discard(target.as_str(), now_ms)
    }
}
