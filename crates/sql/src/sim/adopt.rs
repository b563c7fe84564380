//! Objects that already hold data: a source or a target opened on a
//! database filled elsewhere (an upgrade fixture at an older schema
//! version), so the current code migrates it on open and the simulator
//! then drives it like any other object.

use super::{name, stored_rows, Sim, SqliteSql};
use crate::core::{Name, StoredRow};
use crate::driver::AlarmError;
use crate::store::StoreError;

impl Sim {
    /// Opens `target` on `sql`, a database holding an inbox at any schema
    /// version this build knows: the inbox migrates it. Adopt the targets
    /// before their sources (see [`Sim::adopt_source`]). Refuses a target
    /// the world already has.
    pub fn adopt_target(&mut self, target: &str, sql: SqliteSql) -> Result<(), StoreError> {
        let t = name(target);
        if self.world.targets.borrow().contains_key(&t) {
            return Err(StoreError::Guard("the target already exists in this world"));
        }
        self.world.open_target(&t, sql)
    }

    /// Opens `source` on `sql`, a database holding an outbox at any schema
    /// version this build knows: the relay migrates it, then re-arms its
    /// alarm when rows wait (as a status read does for an alarm the
    /// platform dropped). The rows it holds (queued, or parked and not
    /// discarded) become what the audit expects to arrive, except those at
    /// or below the watermark their target already holds for this source
    /// (the target applied them and the source's checkpoint was lost):
    /// those must be skipped as duplicates. A held row must not reach its
    /// target before its stored due time. Refuses a source the world
    /// already has.
    pub fn adopt_source(&mut self, source: &str, sql: SqliteSql) -> Result<(), AlarmError> {
        let s = name(source);
        if self.world.sources.borrow().contains_key(&s) {
            return Err(StoreError::Guard("the source already exists in this world").into());
        }
        let src = self.world.open_source(&s, sql)?;
        let now = self.now_ms();
        futures::executor::block_on(src.relay.recheck_alarm(now))?;
        let mut held = stored_rows(src.relay.sql(), crate::store::outbox::pack::QUEUED_ROWS, "")?;
        held.extend(stored_rows(src.relay.sql(), "relay_parked", "WHERE discarded_at_ms IS NULL")?);
        held.sort_by_key(|r| r.seq);
        for row in held {
            self.expect_held(&s, &row)?;
        }
        Ok(())
    }

    /// Records a row an adopted source holds as owed to its target, unless
    /// the target's watermark for the source already covers it.
    fn expect_held(&self, source: &Name, row: &StoredRow) -> Result<(), StoreError> {
        let target = Name::new(row.target.as_str()).map_err(|e| {
            StoreError::Corrupt(format!("row {} names target {:?}: {e}", row.seq, row.target))
        })?;
        self.world.ensure_target(&target);
        let watermark = match self.world.targets.borrow().get(&target) {
            Some(t) => {
                let (name, id) = self.world.identity(source);
                t.inbox.watermark(&name, Some(&id))?
            }
            None => 0,
        };
        let pair = (source.clone(), target);
        if watermark > 0 {
            self.world.adopted_watermarks.borrow_mut().insert(pair.clone(), watermark);
        }
        if row.seq <= watermark {
            return Ok(());
        }
        self.world.enqueued.borrow_mut().entry(pair).or_default().push(row.seq);
        if row.due_ms > self.now_ms() {
            self.world.not_before.borrow_mut().insert((source.clone(), row.seq), row.due_ms);
        }
        Ok(())
    }
}
