//! What a source reports: its status (`GET /status`'s reply, a type the
//! protocol crate owns),
//! whether rows are delivered through a sequence, its relay watermark.

use super::*;

/// The failing targets passed over at `now_ms`: those an older version
/// listed in `rs`, and those whose retry is not due yet.
fn blocked_now(rs: Option<&ScanState>, targets: &[TargetReport], now_ms: u64) -> Vec<Name> {
    let mut blocked = rs.map_or_else(Vec::new, |s| s.blocked.clone());
    let deferred = targets.iter().filter(|t| t.retry_at_ms.is_some_and(|at| at > now_ms));
    blocked.extend(deferred.filter_map(|t| Name::new(t.target.as_str()).ok()));
    blocked.sort();
    blocked.dedup();
    blocked
}

impl<S: Sql, A: AlarmStore> Relay<S, A> {
    /// The source's status. Re-arms an alarm the platform dropped while
    /// rows wait (reported as `rearmed`).
    ///
    /// Counts not yet written are written first (one row, only when there
    /// are any), so a count once read never goes back, even if the object
    /// restarts; when the write is refused the status still answers, with
    /// them.
    pub async fn status(&self, now_ms: u64) -> Result<SourceStatus, StoreError> {
        let (stored, rearmed_at, _) = self.recheck(now_ms).await?;
        let _ = self.outbox.write_counts(now_ms, 0);
        // The state as it is, counts not yet written included.
        self.status_of(self.outbox.state()?, rearmed_at.or(stored), rearmed_at.is_some(), now_ms)
    }

    /// Assembles a status from the state row and what status read
    /// (`stored`: the alarm after the read).
    pub(super) fn status_of(
        &self,
        state: SourceState,
        stored: Option<u64>,
        rearmed: bool,
        now_ms: u64,
    ) -> Result<SourceStatus, StoreError> {
        let owed = self.outbox.owed_head()?;
        let decoded = state.rs.as_deref().map(ScanState::decode);
        let rs = decoded.clone().and_then(Result::ok);
        let limit = crate::core::STATUS_TARGETS;
        let parked = self.outbox.target_reports(TargetFilter::Parked, "", limit)?;
        let failing = self.outbox.target_reports(TargetFilter::Failing, "", limit)?;
        let capacity = self.outbox.capacity(&state);
        let per_row =
            (state.delivered_rows > 0).then(|| state.sql_rows_written as f64 / state.delivered_rows as f64);
        let today_ms = (utc_day(now_ms) == state.rows_written_day).then_some(now_ms);
        Ok(SourceStatus {
            source: self.name.to_string(),
            source_id: Some(self.id.to_string()),
            last_seq: state.os,
            queued_rows: state.queued_rows,
            queued_bytes: state.queued_bytes,
            parked_rows: state.parked_rows,
            parked_bytes: state.parked_bytes,
            enqueued_rows: state.enqueued_rows,
            delivered_rows: state.delivered_rows,
            alarms: state.alarms,
            fires: state.fires,
            subrequests: state.calls,
            conflicts: state.conflicts,
            dedup_hits: state.dedup_hits,
            rejected_full: state.rejected_full,
            lag_breaches: state.lag_breaches,
            sql_rows_written: state.sql_rows_written,
            sql_rows_written_per_delivered_row: per_row,
            rows_written_today: state.rows_written_today,
            rows_written_day: utc_date(state.rows_written_day),
            // A day's count read on a later day's clock projects nothing for it.
            rows_written_projected_today: today_ms
                .map_or(state.rows_written_today, |ms| projected_for_day(state.rows_written_today, ms)),
            rows_written_free_limit: WORKER_FREE_ROWS_WRITTEN_PER_DAY,
            blocked_targets: blocked_now(rs.as_ref(), &failing.targets, now_ms),
            scan_state_corrupt: matches!(decoded, Some(Err(_))),
            scan_state: rs,
            targets_truncated: parked.next.is_some() || failing.next.is_some(),
            parked_targets: parked.targets.iter().map(|t| (t.target.clone(), t.rows)).collect(),
            failing_targets: failing.targets.iter().map(|t| (t.target.clone(), t.failed_cycles)).collect(),
            oldest_row_age_ms: owed.map(|h| now_ms.saturating_sub(h.at_ms)),
            lag_exceeded: owed.is_some_and(|h| crate::core::schedule::lagging(h.at_ms.max(h.due_ms), now_ms)),
            relay_watermark: relay_watermark(owed, now_ms),
            capacity: CapacityReport {
                rows: capacity.rows,
                bytes: capacity.bytes,
                max_rows: capacity.max_rows,
                max_bytes: capacity.max_bytes,
                percent_full: capacity.percent_full(),
            },
            dedup_records: self.outbox.dedup_records()?,
            discarded_rows: self.outbox.discarded_rows()?,
            last_prune_ms: state.last_prune_ms,
            last_alarm: state.last_alarm.as_deref().and_then(|t| serde_json::from_str(t).ok()),
            alarm_at_ms: stored,
            rearmed,
            config: self.config.get(),
        })
    }

    /// Whether every row through `seq` has been applied at its target (or
    /// discarded by an operator); parked rows are not delivered.
    pub fn delivered_through(&self, seq: u64) -> Result<bool, StoreError> {
        let os = self.outbox.state()?.os;
        Ok(delivered_through(seq, os, self.outbox.owed_head()?))
    }

    /// A commit-time lower bound for the rows still owed (queued or parked).
    pub fn relay_watermark(&self, now_ms: u64) -> Result<u64, StoreError> {
        Ok(relay_watermark(self.outbox.owed_head()?, now_ms))
    }
}
