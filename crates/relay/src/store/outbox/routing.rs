//! A partition's half of routing (see [`crate::core::partition`]), each
//! step in the caller's transaction so its answer and its writes commit
//! together:
//!
//! - the epoch fence on every routed request: an older epoch is refused
//!   (`stale_epoch`), a newer one must be adopted first
//!   (`epoch_not_adopted`), and under the adopted map every row must be
//!   one this partition is a home of (`misrouted_row`); an unrouted enqueue
//!   at a partition that adopted a map is refused (`partition_enqueue`);
//! - [`adopt`](Outbox::adopt): take a newer map only if a router running it
//!   still reaches every target this partition holds rows for;
//! - [`claim`](Outbox::claim): as the home of an idempotency key, record
//!   which content the key names, so a key reused for other content is
//!   refused before any partition writes a row;
//! - the gate of a moving target's old home, and the scans an operator's
//!   resize questions need.

#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]
#![deny(clippy::unreachable, clippy::todo, clippy::unimplemented)]

use super::enqueue::RecordKey;
use super::{int, EnqueueFailure, Enqueued, Outbox, Pending, Sql, StoreError};
use crate::core::{decide_claim, Claim, EnqueueRefusal, EnqueueRow, Fence, Name, PartitionMap, SEQ_MAX};

/// What this partition has adopted.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Adopted {
    /// The newest epoch (0: none; not a partition, or not yet routed to).
    pub epoch: u64,
    /// The map adopted with it (`None` for one adopted before maps were
    /// stored: its routers' rows are then not checked for ownership).
    pub map: Option<PartitionMap>,
}

/// Where a partition stands, for the checks that need its name.
#[derive(Clone, Copy, Debug)]
pub struct Seat<'a> {
    /// The source object's name (`logical:index`).
    pub name: &'a Name,
    /// Its index, when its name spells one.
    pub index: Option<u32>,
}

impl<S: Sql> Outbox<S> {
    /// The epoch and map this partition adopted.
    pub fn adopted(&self) -> Result<Adopted, StoreError> {
        let row = self.sql.first("SELECT epoch, map FROM relay_partition WHERE id = 1", vec![])?;
        let Some(row) = row else { return Ok(Adopted::default()) };
        let map = match row.opt_text(1)? {
            Some(text) => Some(
                serde_json::from_str(&text)
                    .map_err(|e| StoreError::Corrupt(format!("stored partition map: {e}")))?,
            ),
            None => None,
        };
        Ok(Adopted { epoch: row.u64(0)?, map })
    }

    /// Checks `fence` (with the `rows` it carries) against what this
    /// partition adopted; see the module doc.
    fn check_fence(&self, seat: Seat<'_>, fence: Fence, rows: &[EnqueueRow]) -> Result<(), EnqueueFailure> {
        let adopted = self.adopted()?;
        if fence.epoch == 0 {
            if adopted.epoch > 0 {
                return Err(EnqueueRefusal::PartitionEnqueue { source: seat.name.to_string() }.into());
            }
            return Ok(());
        }
        if fence.epoch < adopted.epoch {
            return Err(EnqueueRefusal::StaleEpoch { sent: fence.epoch, stored: adopted.epoch }.into());
        }
        let map = match adopted.map {
            Some(map) if fence.epoch == adopted.epoch && map.id() == fence.map_id => map,
            _ => {
                return Err(
                    EnqueueRefusal::EpochNotAdopted { sent: fence.epoch, stored: adopted.epoch }.into()
                )
            }
        };
        if let Some(index) = seat.index {
            if let Some(row) = rows.iter().find(|r| !map.reaches(&r.target, index)) {
                return Err(EnqueueRefusal::Misrouted { target: row.target.to_string() }.into());
            }
        }
        Ok(())
    }

    /// [`enqueue`](Outbox::enqueue) behind the fence: an unrouted enqueue
    /// (`fence.epoch == 0`) where no map was adopted is a plain enqueue;
    /// otherwise the fence is checked first, then, for a gated enqueue,
    /// whether this partition still holds rows for the one target
    /// (`Ok(None)` when not: the target has moved). A routed key is
    /// recorded per router `call` (see `RecordKey` in `enqueue.rs`). Run it inside a
    /// transaction, like `enqueue`.
    pub fn enqueue_fenced(
        &self,
        seat: Seat<'_>,
        now_ms: u64,
        key: Option<&str>,
        call: Option<&Name>,
        rows: &[EnqueueRow],
        fence: Fence,
    ) -> Result<Option<Enqueued>, EnqueueFailure> {
        self.check_fence(seat, fence, rows)?;
        let at = if fence.epoch == 0 { RecordKey::Plain } else { RecordKey::Routed(call) };
        if fence.gate {
            let target = match rows {
                [first, rest @ ..] if rest.iter().all(|r| r.target == first.target) => &first.target,
                _ => return Err(EnqueueRefusal::GateTargets.into()),
            };
            // A retry of a keyed enqueue this partition took is answered
            // here (a duplicate, or a conflict), never sent on to the new home.
            let remembered = match key {
                Some(k) => self
                    .dedup_record(&at.stored(k))?
                    .is_some_and(|r| !r.expired(now_ms, self.settings().dedup_horizon_ms)),
                None => false,
            };
            if !remembered && !self.holds_rows_for(target.as_str())? {
                return Ok(None);
            }
        }
        self.enqueue_recorded(now_ms, key.map(|k| (k, at)), rows).map(Some)
    }

    /// Adopts `map` as partition `seat`: refused when its epoch is older
    /// than the adopted one, or when a router running it would no longer
    /// reach a target this partition holds rows for. Adopting the adopted
    /// map again changes nothing; another map under the same epoch (an
    /// operator dropped `from`) is checked like a new one. Returns the map
    /// adopted before, if any. Run it inside a transaction.
    pub fn adopt(&self, seat: Seat<'_>, map: &PartitionMap) -> Result<Option<PartitionMap>, EnqueueFailure> {
        let adopted = self.adopted()?;
        if map.epoch < adopted.epoch {
            return Err(EnqueueRefusal::StaleEpoch { sent: map.epoch, stored: adopted.epoch }.into());
        }
        if adopted.map.as_ref() == Some(map) {
            return Ok(adopted.map);
        }
        let index = seat.index.ok_or_else(|| EnqueueRefusal::Misrouted { target: seat.name.to_string() })?;
        for held in self.targets_held()? {
            let Ok(target) = Name::new(held.as_str()) else { continue };
            if !map.reaches(&target, index) {
                let count = adopted.map.as_ref().and_then(|m| {
                    m.layouts()
                        .find(|n| crate::core::home(&target, *n) == index && !map.layouts().any(|c| c == *n))
                });
                return Err(EnqueueRefusal::UnsettledLayout {
                    partition: seat.name.to_string(),
                    target: held,
                    count,
                }
                .into());
            }
        }
        assert!(map.epoch <= SEQ_MAX, "a validated map's epoch");
        let text = serde_json::to_string(map).map_err(|e| StoreError::Corrupt(e.to_string()))?;
        let n = self.sql.run(
            "INSERT INTO relay_partition (id, epoch, map) VALUES (1, ?, ?) \
             ON CONFLICT(id) DO UPDATE SET epoch = excluded.epoch, map = excluded.map",
            vec![int(map.epoch), text.into()],
        )?;
        self.add_pending(Pending { writes: u64::from(n), ..Pending::default() });
        Ok(adopted.map)
    }

    /// As the home of idempotency `key` at a partitioned source: records
    /// that it names content `digest` unless it names other content, which
    /// is refused (`idempotency_conflict`). With `probe`, only compares (an
    /// older layout's home, consulted while a resize settles). Behind the
    /// same fence as an enqueue. Run it inside a transaction.
    pub fn claim(
        &self,
        seat: Seat<'_>,
        now_ms: u64,
        key: &str,
        digest: &str,
        probe: bool,
        fence: Fence,
    ) -> Result<Claim, EnqueueFailure> {
        self.check_fence(seat, Fence { gate: false, ..fence }, &[])?;
        let row = self.sql.first("SELECT digest, at_ms FROM relay_claims WHERE key = ?", vec![key.into()])?;
        let stored = row.map(|r| Ok::<_, StoreError>((r.text(0)?, r.u64(1)?))).transpose()?;
        let horizon = self.settings().dedup_horizon_ms;
        let verdict = decide_claim(stored.as_ref().map(|(d, at)| (d.as_str(), *at)), digest, now_ms, horizon);
        match verdict {
            Claim::Conflict => return Err(EnqueueRefusal::Conflict { key: key.to_owned() }.into()),
            Claim::Fresh if !probe => {
                let n = self.sql.run(
                    "INSERT INTO relay_claims (key, digest, at_ms) VALUES (?, ?, ?) ON CONFLICT(key) \
                     DO UPDATE SET digest = excluded.digest, at_ms = excluded.at_ms",
                    vec![key.into(), digest.into(), int(now_ms)],
                )?;
                self.add_pending(Pending { writes: u64::from(n), ..Pending::default() });
            }
            Claim::Fresh | Claim::Retry => {}
        }
        Ok(verdict)
    }

    /// The distinct targets with queued or parked (not discarded) rows.
    /// Scans: an operator's question while a resize settles, and a new
    /// map's adoption, which must see every held target. Not paged: the
    /// outbox has no index on target (one would cost every enqueue a write),
    /// so each page would scan it all again; the scan is bounded by the
    /// source's capacity (`max_rows`) and runs only while a resize settles,
    /// never on status, enqueue or the alarm.
    pub fn targets_held(&self) -> Result<Vec<String>, StoreError> {
        let rows = self.sql.rows(
            "SELECT target FROM relay_outbox WHERE target != '' UNION \
             SELECT target FROM relay_parked WHERE discarded_at_ms IS NULL",
            vec![],
        )?;
        rows.iter().map(|r| r.text(0)).collect()
    }

    /// Whether rows for `target` are queued or parked (not discarded). Scans
    /// (the outbox has no index on target): only gated enqueues ask, while a
    /// resize settles.
    fn holds_rows_for(&self, target: &str) -> Result<bool, StoreError> {
        let row = self.sql.first(
            "SELECT EXISTS (SELECT 1 FROM relay_outbox WHERE target = ?) \
             OR EXISTS (SELECT 1 FROM relay_parked WHERE target = ? AND discarded_at_ms IS NULL)",
            vec![target.into(), target.into()],
        )?;
        Ok(row.map_or(Ok(0), |r| r.u64(0))? != 0)
    }
}
