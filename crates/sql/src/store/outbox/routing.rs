//! An object's half of routing a partitioned logical source (see
//! [`crate::core::partition`], [`crate::core::adoption`] and
//! [`crate::core::keys`]), each step in the caller's transaction so that its
//! answer and its writes commit together:
//!
//! - the fence on every request: a routed request must run the map this
//!   object has active, and every row it carries must be one this object is
//!   a home of under it (`misrouted_row`); an unrouted enqueue is taken only
//!   where no map was ever prepared, or at a plain object a horizon after it
//!   went back to a plain layout;
//! - [`prepare`](Outbox::prepare) and [`activate`](Outbox::activate), the two
//!   phases of adoption;
//! - [`record_key`](Outbox::record_key) at a key's home, and
//!   [`seal`](Outbox::seal) and the keyed commit at the objects rows go to;
//! - the gate of a moving target's old home, and the scans an operator's
//!   resize questions need.

#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]
#![deny(clippy::unreachable, clippy::todo, clippy::unimplemented)]

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{int, EnqueueFailure, Enqueued, Outbox, Pending, Sql, StoreError};
use crate::core::{
    check_routed, check_unrouted, decide_activate, decide_key, decide_prepare, decide_routed, decide_seal,
    Adoption, EnqueueRefusal, EnqueueRow, Fence, Holdings, KeyRecord, KeyVerdict, Name, Part, PartitionMap,
    Prepared, RoutedRecord, Taken, Ticket, SEQ_MAX,
};

/// Where an object stands in its logical source, for the checks that need
/// its name.
#[derive(Clone, Copy, Debug)]
pub struct Seat<'a> {
    /// The source object's name (`logical:index`, or the logical name).
    pub name: &'a Name,
    /// Which part of its logical source it is.
    pub part: Part,
}

/// A routed request's key: the key, the content it names and the attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RoutedKey<'a> {
    /// The idempotency key.
    pub key: &'a str,
    /// Hex SHA-256 of the whole request's content.
    pub digest: &'a str,
    /// The attempt, as the key's home answered it.
    pub ticket: Ticket,
}

/// What a seal found: the rows this object took for the key, by target.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sealed {
    /// The rows taken, by target.
    pub taken: BTreeMap<String, Taken>,
    /// Rows in this object's outbox.
    pub queued_rows: u64,
    /// Rows parked at this object.
    pub parked_rows: u64,
}

/// What an object holds that keeps a change of its logical source's map
/// from settling.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Settling {
    /// Targets it holds rows for whose home under the current layout is
    /// another object.
    pub foreign_targets: u64,
    /// At the plain object: idempotency keys its plain enqueues recorded
    /// that are still live.
    pub plain_keys: u64,
    /// When the last of those expires, ms (0: none).
    pub plain_keys_until_ms: u64,
}

/// How an object's record of a routed key is stored: the targets it took.
type StoredTaken = BTreeMap<String, Taken>;

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

    /// Checks an enqueue's `fence` (with the `rows` it carries) against what
    /// this object adopted; see the module doc.
    /// Answers whether this object ever stored a map.
    fn check_fence(
        &self,
        seat: Seat<'_>,
        fence: Fence,
        rows: &[EnqueueRow],
        now_ms: u64,
    ) -> Result<bool, EnqueueFailure> {
        let adoption = self.adoption()?;
        if fence.epoch == 0 {
            let horizon = self.settings().dedup_horizon_ms;
            check_unrouted(&adoption, seat.name, seat.part, now_ms, horizon)?;
            return Ok(adoption.map.is_some());
        }
        let map = check_routed(&adoption, fence)?;
        if let Some(row) = rows.iter().find(|r| !map.reaches(&r.target, seat.part)) {
            return Err(EnqueueRefusal::Misrouted { target: row.target.to_string() }.into());
        }
        Ok(true)
    }

    /// An enqueue behind the fence. Unrouted (`fence.epoch == 0`), it is
    /// the plain [`enqueue`](Outbox::enqueue) where the fence allows one.
    /// Routed, a gated enqueue (`fence.gate`, one target) is taken only
    /// while this object still holds rows for its target (`Ok(None)` when
    /// not: the target has moved); a keyed one commits only the targets this
    /// object has not taken in the key's generation, and is refused when a
    /// newer attempt came first. Run it inside a transaction, like `enqueue`.
    pub fn enqueue_fenced(
        &self,
        seat: Seat<'_>,
        now_ms: u64,
        plain_key: Option<&str>,
        routed: Option<RoutedKey<'_>>,
        rows: &[EnqueueRow],
        fence: Fence,
    ) -> Result<Option<Enqueued>, EnqueueFailure> {
        self.note_time(now_ms);
        let routed_before = self.check_fence(seat, fence, rows, now_ms)?;
        if fence.epoch == 0 {
            if let (true, Some(key)) = (routed_before, plain_key) {
                if let Some(done) = self.routed_retry(now_ms, key, rows)? {
                    return Ok(Some(done));
                }
            }
            return self.enqueue(now_ms, plain_key, rows).map(Some);
        }
        let record = match routed {
            Some(k) => Some((k, self.routed_record(k.key)?)),
            None => None,
        };
        let taken = match &record {
            Some((k, stored)) => decide_routed(k.key, stored.as_ref(), k.ticket)?,
            None => BTreeMap::new(),
        };
        if fence.gate {
            let target = gate_target(rows)?;
            if !taken.contains_key(target.as_str()) && !self.holds_rows_for(target.as_str())? {
                return Ok(None);
            }
        }
        let done = self.commit_untaken(now_ms, rows, &taken)?;
        if let Some((k, _)) = record {
            self.write_taken(k, now_ms, rows, &done, taken)?;
        }
        Ok(Some(done))
    }

    /// Commits the rows whose target is not in `taken`, and answers every
    /// row: the new ones' sequences, the taken ones' from their record.
    fn commit_untaken(
        &self,
        now_ms: u64,
        rows: &[EnqueueRow],
        taken: &StoredTaken,
    ) -> Result<Enqueued, EnqueueFailure> {
        let fresh: Vec<EnqueueRow> =
            rows.iter().filter(|r| !taken.contains_key(r.target.as_str())).cloned().collect();
        let state = self.state()?;
        let committed = match fresh.is_empty() {
            true => None,
            false => Some(self.enqueue(now_ms, None, &fresh)?),
        };
        let mut new = committed.as_ref().map(|d| (d.seqs.iter(), d.due_ms.iter()));
        let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
        let (mut seqs, mut due_ms, mut at_ms) = (Vec::new(), Vec::new(), now_ms);
        for row in rows {
            let t = row.target.as_str();
            if let Some(old) = taken.get(t) {
                let k = seen.entry(t).or_insert(0);
                seqs.push(old.seqs.get(*k).copied().ok_or(StoreError::Corrupt(format!(
                    "a routed key's record holds fewer rows for {t} than its retry carries"
                )))?);
                due_ms.push(old.due_ms.get(*k).copied().unwrap_or(0));
                at_ms = old.at_ms;
                *k += 1;
            } else if let Some((s, d)) = new.as_mut() {
                seqs.push(s.next().copied().unwrap_or(0));
                due_ms.push(d.next().copied().unwrap_or(0));
            }
        }
        if let Some(done) = &committed {
            at_ms = done.at_ms;
        }
        let after = committed.as_ref();
        Ok(Enqueued {
            seqs,
            last_seq: after.map_or(state.os, |d| d.last_seq),
            duplicate: committed.is_none(),
            queued_rows: after.map_or(state.queued_rows, |d| d.queued_rows),
            parked_rows: after.map_or(state.parked_rows, |d| d.parked_rows),
            at_ms,
            due_ms: if due_ms.iter().any(|d| *d > 0) { due_ms } else { Vec::new() },
        })
    }

    /// An unrouted keyed enqueue at an object that was routed to (a plain
    /// object back from being partitioned): a live routed record of the key
    /// answers it, as a duplicate when it holds every row of the same
    /// content, and as a conflict otherwise; `None` when there is none.
    fn routed_retry(
        &self,
        now_ms: u64,
        key: &str,
        rows: &[EnqueueRow],
    ) -> Result<Option<Enqueued>, EnqueueFailure> {
        let horizon = self.settings().dedup_horizon_ms;
        let Some(record) = self.routed_record(key)? else { return Ok(None) };
        if !crate::core::key_live(record.ticket.gen_ms, now_ms, horizon) {
            return Ok(None);
        }
        let digest = crate::core::check(rows, Some(key), now_ms)?.digest;
        let whole = rows.iter().all(|r| record.taken.contains_key(r.target.as_str()));
        if digest.as_deref() != Some(record.digest.as_str()) || !whole {
            return Err(EnqueueRefusal::Conflict { key: key.to_owned() }.into());
        }
        self.commit_untaken(now_ms, rows, &record.taken).map(Some)
    }

    /// Records what this object took for key `k`: the targets taken before,
    /// and those `done` committed now.
    fn write_taken(
        &self,
        k: RoutedKey<'_>,
        now_ms: u64,
        rows: &[EnqueueRow],
        done: &Enqueued,
        mut taken: StoredTaken,
    ) -> Result<(), StoreError> {
        let mut fresh: StoredTaken = BTreeMap::new();
        for (i, row) in rows.iter().enumerate() {
            let t = row.target.as_str();
            if taken.contains_key(t) {
                continue;
            }
            let group =
                fresh.entry(t.to_owned()).or_insert(Taken { seqs: vec![], due_ms: vec![], at_ms: now_ms });
            group.seqs.push(done.seqs.get(i).copied().unwrap_or(0));
            group.due_ms.push(done.due_ms.get(i).copied().unwrap_or(0));
        }
        for group in fresh.values_mut() {
            if group.due_ms.iter().all(|d| *d == 0) {
                group.due_ms.clear();
            }
        }
        taken.extend(fresh);
        let record = RoutedRecord { digest: k.digest.to_owned(), ticket: k.ticket, taken, at_ms: now_ms };
        self.put_routed(k.key, &record)
    }

    /// An object's record of a routed key, if it has one.
    pub(crate) fn routed_record(&self, key: &str) -> Result<Option<RoutedRecord>, StoreError> {
        let row = self.sql.first(
            "SELECT digest, gen_ms, attempt, taken, at_ms FROM relay_routed WHERE key = ?",
            vec![key.into()],
        )?;
        let Some(r) = row else { return Ok(None) };
        let taken: StoredTaken = serde_json::from_str(&r.text(3)?)
            .map_err(|e| StoreError::Corrupt(format!("a routed key's record: {e}")))?;
        let ticket = Ticket { gen_ms: r.u64(1)?, attempt: r.u32(2)? };
        Ok(Some(RoutedRecord { digest: r.text(0)?, ticket, taken, at_ms: r.u64(4)? }))
    }

    fn put_routed(&self, key: &str, r: &RoutedRecord) -> Result<(), StoreError> {
        assert!(r.ticket.gen_ms <= SEQ_MAX && r.at_ms <= SEQ_MAX, "times the relay read from its clock");
        let taken = serde_json::to_string(&r.taken).map_err(|e| StoreError::Corrupt(e.to_string()))?;
        let n = self.sql.run(
            "INSERT INTO relay_routed (key, digest, gen_ms, attempt, taken, at_ms) VALUES (?, ?, ?, ?, ?, ?) \
             ON CONFLICT(key) DO UPDATE SET digest = excluded.digest, gen_ms = excluded.gen_ms, \
             attempt = excluded.attempt, taken = excluded.taken, at_ms = excluded.at_ms",
            vec![
                key.into(),
                r.digest.as_str().into(),
                int(r.ticket.gen_ms),
                int(u64::from(r.ticket.attempt)),
                taken.into(),
                int(r.at_ms),
            ],
        )?;
        self.add_pending(Pending { writes: u64::from(n), ..Pending::default() });
        Ok(())
    }

    /// Seals `key` for attempt `ticket` (see [`crate::core::keys`]): from now
    /// on this object refuses older attempts; answers what it took. No
    /// fence: a retry must reach every object an earlier attempt may have
    /// written to, whatever map each has. Run it inside a transaction.
    pub fn seal(
        &self,
        now_ms: u64,
        key: &str,
        digest: &str,
        ticket: Ticket,
    ) -> Result<Sealed, EnqueueFailure> {
        let stored = self.routed_record(key)?;
        let record = decide_seal(key, stored.as_ref(), digest, ticket, now_ms)?;
        if stored.as_ref() != Some(&record) {
            self.put_routed(key, &record)?;
        }
        if !record.taken.is_empty() {
            // A retry answered, in part, from what an earlier attempt took.
            self.add_pending(Pending { dedup_hits: 1, ..Pending::default() });
        }
        let state = self.state()?;
        Ok(Sealed { taken: record.taken, queued_rows: state.queued_rows, parked_rows: state.parked_rows })
    }

    /// As the home of `key`: records an attempt for content `digest` that
    /// may send rows to `reach` (see [`crate::core::keys`]). No fence: a
    /// key's home is the same under every map. Run it inside a transaction.
    pub fn record_key(
        &self,
        now_ms: u64,
        key: &str,
        digest: &str,
        reach: &[Part],
    ) -> Result<KeyVerdict, EnqueueFailure> {
        let row = self
            .sql
            .first("SELECT digest, gen_ms, attempt, reach FROM relay_keys WHERE key = ?", vec![key.into()])?;
        let stored = match row {
            Some(r) => Some(KeyRecord {
                digest: r.text(0)?,
                gen_ms: r.u64(1)?,
                attempt: r.u32(2)?,
                reach: serde_json::from_str(&r.text(3)?)
                    .map_err(|e| StoreError::Corrupt(format!("a key's reach: {e}")))?,
            }),
            None => None,
        };
        let horizon = self.settings().dedup_horizon_ms;
        let (verdict, record) = decide_key(key, stored.as_ref(), digest, reach, now_ms, horizon)?;
        let reach = serde_json::to_string(&record.reach).map_err(|e| StoreError::Corrupt(e.to_string()))?;
        let n = self.sql.run(
            "INSERT INTO relay_keys (key, digest, gen_ms, attempt, reach) VALUES (?, ?, ?, ?, ?) \
             ON CONFLICT(key) DO UPDATE SET digest = excluded.digest, gen_ms = excluded.gen_ms, \
             attempt = excluded.attempt, reach = excluded.reach",
            vec![
                key.into(),
                record.digest.as_str().into(),
                int(record.gen_ms),
                int(u64::from(record.attempt)),
                reach.into(),
            ],
        )?;
        self.add_pending(Pending { writes: u64::from(n), ..Pending::default() });
        Ok(verdict)
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
        let stored = self.adoption()?;
        if decide_activate(&stored, map)? {
            self.put_adoption(map, true, now_ms, &stored.known)?;
        }
        Ok(())
    }

    fn put_adoption(
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
        self.add_pending(Pending { writes: u64::from(n), ..Pending::default() });
        Ok(())
    }

    /// Live idempotency keys recorded by plain enqueues, and when the last
    /// expires (0: none).
    fn plain_keys(&self, now_ms: u64) -> Result<(u64, u64), StoreError> {
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
        let rows = self.sql.rows(
            "SELECT target FROM relay_outbox WHERE target != '' UNION \
             SELECT target FROM relay_parked WHERE discarded_at_ms IS NULL",
            vec![],
        )?;
        rows.iter().map(|r| r.text(0)).collect()
    }

    /// Whether rows for `target` are queued or parked (not discarded). Scans
    /// (the outbox has no index on target): only gated enqueues ask, while a
    /// change settles.
    fn holds_rows_for(&self, target: &str) -> Result<bool, StoreError> {
        let row = self.sql.first(
            "SELECT EXISTS (SELECT 1 FROM relay_outbox WHERE target = ?) \
             OR EXISTS (SELECT 1 FROM relay_parked WHERE target = ? AND discarded_at_ms IS NULL)",
            vec![target.into(), target.into()],
        )?;
        Ok(row.map_or(Ok(0), |r| r.u64(0))? != 0)
    }
}

/// The one target a gated enqueue carries.
fn gate_target(rows: &[EnqueueRow]) -> Result<&Name, EnqueueRefusal> {
    match rows {
        [first, rest @ ..] if rest.iter().all(|r| r.target == first.target) => Ok(&first.target),
        _ => Err(EnqueueRefusal::GateTargets),
    }
}
