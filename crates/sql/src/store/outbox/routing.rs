//! An object's half of routing a partitioned logical source (see
//! [`crate::core::partition`], [`crate::core::adoption`] and
//! [`crate::core::keys`]), each step in the caller's transaction so that its
//! answer and its writes commit together:
//!
//! - the fence on every request: a routed request must run the map this
//!   object has active, and every row it carries must be one this object is
//!   a home of under it (`misrouted_row`); an unrouted enqueue is taken only
//!   where no map was ever prepared, or at a plain object a horizon after it
//!   went back to a plain layout (the state row says whether a map was ever
//!   stored, so an unrouted enqueue reads the map only where one was);
//! - [`prepare`](Outbox::prepare) and [`activate`](Outbox::activate), the two
//!   phases of adoption;
//! - [`record_key`](Outbox::record_key) at a key's home, and
//!   [`seal`](Outbox::seal) and the keyed commit at the objects rows go to;
//! - the gate of a moving target's old home, and the scans an operator's
//!   resize questions need.

#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]
#![deny(clippy::unreachable, clippy::todo, clippy::unimplemented)]

use std::collections::BTreeMap;

use super::{
    int, EnqueueFailure, Enqueued, Entry, FenceChecked, Outbox, Pending, RoutedKey, Sealed, Seat, Sql,
    StoreError,
};
use crate::core::{
    check_routed, check_unrouted, decide_key, decide_routed, decide_seal, EnqueueRefusal, EnqueueRow, Fence,
    KeyRecord, KeyVerdict, Name, Part, RoutedRecord, Taken, Ticket, SEQ_MAX,
};

/// How an object's record of a routed key is stored: the targets it took.
type StoredTaken = BTreeMap<String, Taken>;

impl<S: Sql> Outbox<S> {
    /// Checks a request's `fence` (with the `rows` it carries) against what
    /// this object adopted; see the module doc.
    pub(super) fn check_fence(
        &self,
        seat: Seat<'_>,
        fence: Fence,
        rows: &[EnqueueRow],
        now_ms: u64,
    ) -> Result<(), EnqueueFailure> {
        let adoption = self.adoption()?;
        if fence.epoch == 0 {
            let horizon = self.settings().dedup_horizon_ms;
            check_unrouted(&adoption, seat.name, seat.part, now_ms, horizon)?;
            return Ok(());
        }
        let map = check_routed(&adoption, fence)?;
        if let Some(row) = rows.iter().find(|r| !map.reaches(&r.target, seat.part)) {
            return Err(EnqueueRefusal::Misrouted { target: row.target.to_string() }.into());
        }
        Ok(())
    }

    /// The fence of an unrouted enqueue at an object whose state row says
    /// it stored a map: refused where the map allows no unrouted enqueue;
    /// a keyed one at an object that was routed to is answered from the
    /// routed record of its key, if it has a live one (`Some`). `None`:
    /// the plain enqueue goes on.
    pub(super) fn unrouted_at_mapped(
        &self,
        seat: Seat<'_>,
        now_ms: u64,
        key: Option<&str>,
        rows: &[EnqueueRow],
    ) -> Result<Option<Enqueued>, EnqueueFailure> {
        let adoption = self.adoption()?;
        let horizon = self.settings().dedup_horizon_ms;
        check_unrouted(&adoption, seat.name, seat.part, now_ms, horizon)?;
        match (adoption.map.is_some(), key) {
            (true, Some(key)) => self.routed_retry(now_ms, key, rows),
            _ => Ok(None),
        }
    }

    /// A routed enqueue (see the module doc), which wraps the plain
    /// [`enqueue`](Outbox::enqueue); one with no fence (`fence.epoch == 0`)
    /// is the plain enqueue, unkeyed. A gated enqueue (`fence.gate`, one
    /// target) is taken only while this object still holds rows for its
    /// target (`Ok(None)` when not: the target has moved); a keyed one
    /// commits only the targets this object has not taken in the key's
    /// generation, and is refused when a newer attempt came first. Run it
    /// inside a transaction, like `enqueue`.
    pub fn enqueue_fenced(
        &self,
        seat: Seat<'_>,
        now_ms: u64,
        routed: Option<RoutedKey<'_>>,
        rows: &[EnqueueRow],
        fence: Fence,
    ) -> Result<Option<Enqueued>, EnqueueFailure> {
        if fence.epoch == 0 {
            return self.enqueue(Entry::Unrouted(seat), now_ms, None, rows).map(Some);
        }
        self.check_endpoints(rows)?;
        self.note_time(now_ms);
        self.check_fence(seat, fence, rows, now_ms)?;
        let record = match routed {
            Some(k) => Some((k, self.routed_record(k.key)?)),
            None => None,
        };
        let taken = match &record {
            Some((k, stored)) => decide_routed(k.key, stored.as_ref(), k.ticket)?,
            None => BTreeMap::new(),
        };
        if fence.gate {
            // Whether the target holds rows here must not count a row
            // already delivered.
            self.flush_delivered()?;
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
        let committed = match fresh.is_empty() {
            true => None,
            false => Some(self.enqueue(Entry::Fenced(FenceChecked::new()), now_ms, None, &fresh)?),
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
        // What the enqueue answered, or, when every row was taken before,
        // the state as it stands (one read only then).
        let (last_seq, queued_rows, parked_rows) = match &committed {
            Some(d) => (d.last_seq, d.queued_rows, d.parked_rows),
            None => {
                let state = self.state()?;
                (state.os, state.queued_rows, state.parked_rows)
            }
        };
        Ok(Enqueued {
            seqs,
            last_seq,
            duplicate: committed.is_none(),
            queued_rows,
            parked_rows,
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

    /// Whether rows for `target` are queued or parked (not discarded). Scans
    /// (the outbox has no index on target): only gated enqueues ask, while a
    /// change settles.
    fn holds_rows_for(&self, target: &str) -> Result<bool, StoreError> {
        let row = self.sql.first(
            &format!(
                "SELECT EXISTS (SELECT 1 FROM {} WHERE target = ?) \
                 OR EXISTS (SELECT 1 FROM relay_parked WHERE target = ? AND discarded_at_ms IS NULL)",
                super::pack::QUEUED_ROWS
            ),
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
