//! Horizon pruning: expired dedup records, routed keys and discarded rows are deleted by
//! the alarm in bounded batches ([`PrunePlan`]), and an idle source wakes to
//! prune at most once per interval ([`idle_prune_at`](crate::core::schedule::idle_prune_at)).

use super::ledger::StateWrite;
use super::{int, Outbox, Sql, StoreError};
use crate::core::schedule::{idle_prune_at, records_prune};
use crate::core::PrunePlan;

impl<S: Sql> Outbox<S> {
    /// Deletes expired dedup records and discarded rows as the plan for
    /// `now_ms` allows. Writes nothing when nothing has expired. Returns the
    /// rows pruned.
    pub fn prune(&self, now_ms: u64) -> Result<u64, StoreError> {
        Ok(self.prune_reading(now_ms)?.0)
    }

    /// The pruning itself: the rows pruned, and the oldest times it read
    /// when it deleted nothing (they still hold, so [`Outbox::prune_wake`]
    /// need not read them again).
    pub(crate) fn prune_reading(&self, now_ms: u64) -> Result<(u64, Option<Oldest>), StoreError> {
        self.note_time(now_ms);
        let s = self.settings();
        let plan = PrunePlan::at(now_ms, s.dedup_horizon_ms, s.discard_horizon_ms);
        let batch = int(u64::from(plan.batch_rows));
        // Holds past their grace hold nothing back any more.
        let expired = now_ms.saturating_sub(crate::core::HOLD_GRACE_MS);
        // Most alarms find nothing expired: one read of the oldest times
        // spares them the four deletes.
        let oldest = self.oldest()?;
        let due = |t: Option<u64>, before: u64| t.is_some_and(|t| t <= before);
        if !(due(oldest.hold_due_ms, expired)
            || due(oldest.dedup_at_ms, plan.dedup_before_ms)
            || due(oldest.key_at_ms, plan.dedup_before_ms)
            || due(oldest.discarded_at_ms, plan.discard_before_ms))
        {
            return Ok((0, Some(oldest)));
        }
        let mut pruned =
            u64::from(self.sql.run("DELETE FROM relay_holds WHERE due_ms <= ?", vec![int(expired)])?);
        for step in 0..plan.steps_max {
            let dedup = self.sql.run(
                "DELETE FROM relay_dedup WHERE key IN (SELECT key FROM relay_dedup WHERE at_ms <= ? \
                 ORDER BY at_ms LIMIT ?)",
                vec![int(plan.dedup_before_ms), batch.clone()],
            )?;
            // A key's record expires a horizon after its generation; an
            // object's record of it a horizon after it was last written,
            // which is never before the generation.
            let keys = self.sql.run(
                "DELETE FROM relay_keys WHERE key IN (SELECT key FROM relay_keys WHERE gen_ms <= ? \
                 ORDER BY gen_ms LIMIT ?)",
                vec![int(plan.dedup_before_ms), batch.clone()],
            )?;
            let routed = self.sql.run(
                "DELETE FROM relay_routed WHERE key IN (SELECT key FROM relay_routed WHERE at_ms <= ? \
                 ORDER BY at_ms LIMIT ?)",
                vec![int(plan.dedup_before_ms), batch.clone()],
            )?;
            let dedup = dedup + keys + routed;
            let discarded = self.sql.run(
                "DELETE FROM relay_parked WHERE seq IN (SELECT seq FROM relay_parked \
                 WHERE discarded_at_ms IS NOT NULL AND discarded_at_ms <= ? LIMIT ?)",
                vec![int(plan.discard_before_ms), batch.clone()],
            )?;
            pruned += u64::from(dedup + discarded);
            if !plan.another_step(step, dedup, discarded) {
                break;
            }
        }
        if records_prune(pruned) {
            // Discarded rows were folded when they were discarded, so the
            // folded os covers them: pruning them cannot lower os.
            let (_, tail) = self.stored_and_tail()?;
            let write = StateWrite { last_prune_ms: Some(now_ms), writes: pruned, ..StateWrite::default() };
            self.write_state(&tail, &write)?;
        }
        Ok((pruned, None))
    }

    /// The oldest time of each kind of record that expires, in one read
    /// (each `MIN` is an index or primary-key lookup).
    fn oldest(&self) -> Result<Oldest, StoreError> {
        let row = self.sql.first(
            "SELECT (SELECT MIN(at_ms) FROM relay_dedup), \
             (SELECT MIN(discarded_at_ms) FROM relay_parked WHERE discarded_at_ms IS NOT NULL), \
             (SELECT MIN(m) FROM (SELECT MIN(gen_ms) AS m FROM relay_keys UNION ALL \
             SELECT MIN(at_ms) FROM relay_routed)), (SELECT MIN(due_ms) FROM relay_holds)",
            vec![],
        )?;
        let Some(r) = row else { return Ok(Oldest::default()) };
        Ok(Oldest {
            dedup_at_ms: r.opt_u64(0)?,
            discarded_at_ms: r.opt_u64(1)?,
            key_at_ms: r.opt_u64(2)?,
            hold_due_ms: r.opt_u64(3)?,
        })
    }

    /// When an idle source should wake to prune, if it keeps anything that
    /// will expire.
    pub fn idle_prune_at(&self, last_prune_ms: u64) -> Result<Option<u64>, StoreError> {
        Ok(self.wake_for(self.oldest()?, last_prune_ms))
    }

    /// [`idle_prune_at`](Outbox::idle_prune_at), from the oldest times a
    /// prune that deleted nothing read (`unchanged`), or else read afresh.
    pub(crate) fn prune_wake(
        &self,
        unchanged: Option<Oldest>,
        last_prune_ms: u64,
    ) -> Result<Option<u64>, StoreError> {
        match unchanged {
            Some(oldest) => Ok(self.wake_for(oldest, last_prune_ms)),
            None => self.idle_prune_at(last_prune_ms),
        }
    }

    /// [`idle_prune_at`](Outbox::idle_prune_at) from oldest times already read.
    fn wake_for(&self, oldest: Oldest, last_prune_ms: u64) -> Option<u64> {
        let s = self.settings();
        let dedup = oldest.dedup_at_ms.map(|d| d.saturating_add(s.dedup_horizon_ms));
        let discard = oldest.discarded_at_ms.map(|p| p.saturating_add(s.discard_horizon_ms));
        let keys = oldest.key_at_ms.map(|c| c.saturating_add(s.dedup_horizon_ms));
        let first_expiry = dedup.into_iter().chain(discard).chain(keys).min();
        idle_prune_at(first_expiry, last_prune_ms)
    }
}

/// The oldest time of each kind of record that expires; `None` where there
/// is none.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Oldest {
    /// The oldest dedup record's `at_ms`.
    dedup_at_ms: Option<u64>,
    /// The oldest discarded row's `discarded_at_ms`.
    discarded_at_ms: Option<u64>,
    /// The oldest routed key's time: a key's generation, or an object's
    /// last write of its record.
    key_at_ms: Option<u64>,
    /// The earliest hold's `due_ms`.
    hold_due_ms: Option<u64>,
}
