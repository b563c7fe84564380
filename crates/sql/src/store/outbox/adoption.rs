//! An object's record of the partition maps routers brought it: the read
//! (`relay_partition`), the two phases of adoption ([`prepare`](Outbox::prepare)
//! and [`activate`](Outbox::activate)), the probe of a plain layout, and the
//! scans an operator's resize questions need (how a change settles here,
//! which targets this object holds rows for). Each runs in the caller's
//! transaction.

#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]
#![deny(clippy::unreachable, clippy::todo, clippy::unimplemented)]

use super::{int, EnqueueFailure, Enqueued, Outbox, Pending, Seat, Settling, Sql, StoreError};
use crate::core::{
    decide_activate, decide_prepare, Adoption, EnqueueRefusal, Fence, Holdings, Name, Part, PartitionMap,
    Prepared, SEQ_MAX,
};

impl<S: Sql> Outbox<S> {
    /// What this object stored of the maps routers brought it.
    pub fn adoption(&self) -> Result<Adoption, StoreError> {
        let row = self
            .sql
            .first("SELECT epoch, map, active, since_ms, known FROM relay_partition WHERE id = 1", vec![])?;
        let Some(row) = row else { return Ok(Adoption::default()) };
        let map: Option<PartitionMap> = match row.opt_text(1)? {
            Some(text) => Some(
                serde_json::from_str(&text)
                    .map_err(|e| StoreError::Corrupt(format!("stored partition map: {e}")))?,
            ),
            None => None,
        };
        let active = map.is_some() && row.u64(2)? != 0;
        let known: Vec<Part> = match row.opt_text(4)? {
            Some(text) => serde_json::from_str(&text)
                .map_err(|e| StoreError::Corrupt(format!("the objects a partition knows: {e}")))?,
            // Stored before objects were remembered: the map's own.
            None => map.as_ref().map(PartitionMap::parts).unwrap_or_default(),
        };
        Ok(Adoption { epoch: row.u64(0)?, map, active, since_ms: row.u64(3)?, known })
    }

    /// At the plain object, behind the fence: what its plain enqueues
    /// recorded for `key` (a source that was plain before it was
    /// partitioned): the original enqueue as a duplicate, `None` for a key
    /// it does not know, a conflict for other content. Run it inside a
    /// transaction.
    pub fn probe_plain(
        &self,
        seat: Seat<'_>,
        now_ms: u64,
        key: &str,
        digest: &str,
        fence: Fence,
    ) -> Result<Option<Enqueued>, EnqueueFailure> {
        self.flush_delivered()?;
        self.check_fence(seat, fence, &[], now_ms)?;
        let Some(record) = self.dedup_record(key)? else { return Ok(None) };
        let horizon = self.settings().dedup_horizon_ms;
        match crate::core::decide(Some(&record), digest, now_ms, horizon) {
            crate::core::Dedup::Fresh => Ok(None),
            crate::core::Dedup::Conflict => Err(EnqueueRefusal::Conflict { key: key.to_owned() }.into()),
            crate::core::Dedup::Duplicate(seqs) => {
                let state = self.state()?;
                Ok(Some(Enqueued {
                    seqs,
                    last_seq: state.os,
                    duplicate: true,
                    queued_rows: state.queued_rows,
                    parked_rows: state.parked_rows,
                    at_ms: record.at_ms,
                    due_ms: record.due_ms,
                }))
            }
        }
    }

    /// Prepares `map` as `seat` (the first phase of adoption; see
    /// [`crate::core::adoption`]): refused when its epoch is older than the
    /// stored one, when it is another map under the stored epoch, or when a
    /// router running it would no longer reach what this object holds.
    /// Returns every object this one knows the logical source has had (see
    /// [`Adoption::known`]). Run it inside a transaction.
    pub fn prepare(
        &self,
        seat: Seat<'_>,
        now_ms: u64,
        map: &PartitionMap,
    ) -> Result<Vec<Part>, EnqueueFailure> {
        self.flush_delivered()?;
        let stored = self.adoption()?;
        let holdings = Holdings {
            targets: self.targets_held()?,
            plain_keys: match seat.part {
                Part::Plain => Some(self.plain_keys(now_ms)?),
                Part::Index(_) => None,
            },
        };
        let known = stored.known_with(map);
        match decide_prepare(&stored, seat.name, seat.part, map, &holdings)? {
            Prepared::Store => self.put_adoption(map, false, 0, &known)?,
            Prepared::Already if known != stored.known => {
                self.put_adoption(map, stored.active, stored.since_ms, &known)?
            }
            Prepared::Already => {}
        }
        Ok(known)
    }

    /// Activates `map` (the second phase of adoption): only the map this
    /// object prepared. Run it inside a transaction.
    pub fn activate(&self, now_ms: u64, map: &PartitionMap) -> Result<(), EnqueueFailure> {
        self.flush_delivered()?;
        let stored = self.adoption()?;
        if decide_activate(&stored, map)? {
            self.put_adoption(map, true, now_ms, &stored.known)?;
        }
        Ok(())
    }

    /// Stores `map` as prepared (`active` false) or active since
    /// `since_ms`, with the objects `known`, and marks the state row as that
    /// of an object that stored a map.
    pub(super) fn put_adoption(
        &self,
        map: &PartitionMap,
        active: bool,
        since_ms: u64,
        known: &[Part],
    ) -> Result<(), StoreError> {
        assert!(map.epoch <= SEQ_MAX, "a validated map's epoch");
        let text = serde_json::to_string(map).map_err(|e| StoreError::Corrupt(e.to_string()))?;
        let known = serde_json::to_string(known).map_err(|e| StoreError::Corrupt(e.to_string()))?;
        let n = self.sql.run(
            "INSERT INTO relay_partition (id, epoch, map, active, since_ms, known) VALUES (1, ?, ?, ?, ?, ?) \
             ON CONFLICT(id) DO UPDATE SET epoch = excluded.epoch, map = excluded.map, \
             active = excluded.active, since_ms = excluded.since_ms, known = excluded.known",
            vec![int(map.epoch), text.into(), int(u64::from(active)), int(since_ms), known.into()],
        )?;
        // The state row says a map is stored, so unrouted enqueues consult
        // the fence from now on; a row only the first time.
        let flagged =
            self.sql.run("UPDATE relay_state SET map_stored = 1 WHERE id = 1 AND map_stored = 0", vec![])?;
        self.add_pending(Pending { writes: u64::from(n) + u64::from(flagged), ..Pending::default() });
        Ok(())
    }

    /// Live idempotency keys recorded by plain enqueues, and when the last
    /// expires (0: none).
    pub(super) fn plain_keys(&self, now_ms: u64) -> Result<(u64, u64), StoreError> {
        let horizon = self.settings().dedup_horizon_ms;
        let live_after = now_ms.saturating_sub(horizon);
        let row = self.sql.first(
            "SELECT COUNT(*), COALESCE(MAX(at_ms), 0) FROM relay_dedup WHERE at_ms > ?",
            vec![int(live_after)],
        )?;
        let (keys, last) = row.map_or(Ok((0, 0)), |r| Ok::<_, StoreError>((r.u64(0)?, r.u64(1)?)))?;
        Ok((keys, if keys > 0 { last.saturating_add(horizon) } else { 0 }))
    }

    /// As `part` of a logical source now routed by `layout`'s homes: what
    /// keeps a change from settling here (see [`Settling`]).
    pub fn settling(&self, part: Part, map: &PartitionMap, now_ms: u64) -> Result<Settling, StoreError> {
        self.flush_delivered()?;
        let current = PartitionMap { partitions: map.partitions, epoch: map.epoch, from: Vec::new() };
        let held = self.targets_held()?;
        let foreign = held
            .iter()
            .filter_map(|t| Name::new(t.as_str()).ok())
            .filter(|t| !current.reaches(t, part))
            .count() as u64;
        let (plain_keys, until) = match part {
            Part::Plain if !current.has_plain() => self.plain_keys(now_ms)?,
            _ => (0, 0),
        };
        Ok(Settling { foreign_targets: foreign, plain_keys, plain_keys_until_ms: until })
    }

    /// The distinct targets with queued or parked (not discarded) rows.
    /// Scans: an operator's question while a change settles, and a new
    /// map's preparation, which must see every held target. Not paged: the
    /// outbox has no index on target (one would cost every enqueue a write),
    /// so each page would scan it all again; the scan is bounded by the
    /// source's capacity (`max_rows`) and runs only while a change settles,
    /// never on status, enqueue or the alarm.
    pub fn targets_held(&self) -> Result<Vec<String>, StoreError> {
        self.flush_delivered()?;
        let rows = self.sql.rows(
            &format!(
                "SELECT target FROM {} UNION SELECT target FROM relay_parked WHERE discarded_at_ms IS NULL",
                super::pack::QUEUED_ROWS
            ),
            vec![],
        )?;
        rows.iter().map(|r| r.text(0)).collect()
    }
}
