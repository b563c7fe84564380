//! What a fire reads: `os` and the stored `rs`, then the window of rows
//! after the cursor with the records of the window's failing targets.
//!
//! The window is read in two steps so a fire never reads bodies it cannot
//! send: first every row's sequence, target, time and size, with its
//! target's failure record if it has one (which cut the window at its row
//! and byte bounds, and tell which rows belong to targets this fire can
//! reach), then the bodies of those rows only. Only the window's targets'
//! records are read, so a fire costs the same however many targets fail.

use std::collections::BTreeMap;

use super::handover::Handover;
use super::{int, Outbox, Sql, StoreError};
use crate::core::{Begun, Failing, FireStart, Name, RelayBudget, StoredRow};

/// One window row without its body.
struct Meta {
    seq: u64,
    target: String,
    at_ms: u64,
    due_ms: u64,
    bytes: u32,
    /// Its target's failure record, when the target is failing (not parked).
    failing: Option<Failing>,
}

impl<S: Sql> Outbox<S> {
    /// Reads what a fire of `source` needs before it begins.
    pub fn fire_start(
        &self,
        source: &Name,
        budget: RelayBudget,
        calls_left: u32,
        now_ms: u64,
    ) -> Result<FireStart, StoreError> {
        self.note_time(now_ms);
        let (os, rs_text) = match self.take_handover() {
            Some(h) => {
                let start = (h.os, h.rs_text.clone());
                *self.memory.handed.borrow_mut() = Some(h);
                start
            }
            None => {
                self.flush_delivered()?;
                let state = self.state()?;
                (state.os, state.rs)
            }
        };
        Ok(FireStart {
            source: source.clone(),
            os,
            rs_text,
            now_ms,
            budget,
            calls_left,
            policy: self.settings().policy,
            failing: BTreeMap::new(),
            batched_endpoints: self.batched_endpoints(),
        })
    }

    /// Ends the fire that began last: when it took its window from an
    /// enqueue's handover and no enqueue ran since, the rows it handed (all
    /// the outbox held) and the parked rows the enqueue saw.
    pub(crate) fn end_handed(&self) -> Option<(u64, u64)> {
        let h = self.memory.handed.borrow_mut().take()?;
        self.no_enqueue_since(&h).then_some((h.rows.len() as u64, h.parked_rows))
    }

    /// Reads the begun fire's window: its rows, ascending, with bodies only
    /// for the rows the fire can send, and whether they are all the rows left
    /// up to the cycle end. Adds the failure records of the window's targets
    /// to `begun.start.failing`.
    pub fn read_window(&self, begun: &mut Begun) -> Result<(Vec<StoredRow>, bool), StoreError> {
        let w = begun.window;
        let handed = self.memory.handed.borrow().clone();
        let mut meta = match &handed {
            Some(h) => {
                self.memory.packed_window.set(h.packed);
                handed_meta(h, w.after, w.through, w.probe_rows())
            }
            None => self.window_meta(w.after, w.through, w.probe_rows())?,
        };
        let sizes: Vec<(u64, u32)> = meta.iter().map(|m| (m.seq, m.bytes)).collect();
        let (take, exhausted) = w.take(&sizes);
        meta.truncate(take);
        for m in &meta {
            // A stored name that no longer validates cannot be a row's target.
            if let (Some(f), Ok(name)) = (m.failing, Name::new(m.target.as_str())) {
                begun.start.failing.insert(name, f);
            }
        }
        let through = begun.bodies_through(meta.iter().map(|m| (m.seq, m.target.as_str(), m.due_ms)));
        let mut bodies = match (through, &handed) {
            (None, _) => Vec::new(),
            (Some(last), Some(h)) => {
                let between = h.rows.iter().filter(|r| r.seq > w.after && r.seq <= last);
                between.map(|r| (r.seq, r.body.clone())).collect()
            }
            (Some(last), None) => self.bodies_between(w.after, last)?,
        }
        .into_iter()
        .peekable();
        let window = meta
            .into_iter()
            .map(|m| {
                let body = bodies.next_if(|(seq, _)| *seq == m.seq).map(|(_, b)| b).unwrap_or_default();
                StoredRow { seq: m.seq, target: m.target, at_ms: m.at_ms, due_ms: m.due_ms, body }
            })
            .collect();
        Ok((window, exhausted))
    }

    /// The window's rows after `after` up to `through`, at most `limit`,
    /// without bodies, each with its target's failure record if failing.
    /// Plain rows and packed rows are read in one statement: the first
    /// `limit` plain rows, and the rows in range of the first `limit` packs
    /// that hold one (see `pack.rs`). Where that many packs were read, rows
    /// past the last of them may be missing, so the window ends there; it
    /// still holds `limit` rows or more, so it is not taken for the end of
    /// the range.
    fn window_meta(&self, after: u64, through: u64, limit: u32) -> Result<Vec<Meta>, StoreError> {
        let (a, t, l) = (int(after), int(through), int(u64::from(limit)));
        let rows = self.sql.rows(
            &format!(
                "SELECT * FROM (SELECT o.seq, o.target, o.at_ms, o.bytes, o.due_ms, {FAILING}, NULL \
                 FROM relay_outbox o LEFT JOIN relay_targets t ON {FAILING_JOIN} = o.target \
                 WHERE o.seq > ? AND o.seq <= ? AND o.target != '' AND o.first_seq IS NULL \
                 ORDER BY o.seq LIMIT ?) UNION ALL \
                 SELECT j.value ->> 0, j.value ->> 1, j.value ->> 2, j.value ->> 4, j.value ->> 3, {FAILING}, p.seq \
                 FROM (SELECT p.seq, p.body FROM relay_outbox p WHERE {packs} AND EXISTS (SELECT 1 FROM \
                 json_each(p.body) e WHERE e.value ->> 0 > ? AND e.value ->> 0 <= ?) ORDER BY p.seq LIMIT ?) p, \
                 json_each(p.body) j LEFT JOIN relay_targets t ON {FAILING_JOIN} = j.value ->> 1 \
                 WHERE j.value ->> 0 > ? AND j.value ->> 0 <= ?",
                packs = super::pack::packs_overlapping(),
            ),
            vec![a.clone(), t.clone(), l.clone(), a.clone(), t.clone(), t.clone(), a.clone(), t.clone(), l, a, t],
        )?;
        let mut packs = 0u32;
        let mut last_pack = 0u64;
        let mut meta = rows
            .iter()
            .map(|r| {
                if let Some(pack) = r.opt_u64(8)? {
                    packs += u32::from(pack != last_pack);
                    last_pack = last_pack.max(pack);
                }
                let failing = match (r.opt_u64(5)?, r.opt_u64(6)?) {
                    (Some(cycles), last) => Some(Failing {
                        cycles: u32::try_from(cycles).unwrap_or(u32::MAX),
                        last_failure_ms: last.unwrap_or(0),
                        retry_after_ms: r.opt_u64(7)?.unwrap_or(0),
                    }),
                    (None, _) => None,
                };
                Ok(Meta {
                    seq: r.u64(0)?,
                    target: r.text(1)?,
                    at_ms: r.u64(2)?,
                    bytes: r.u32(3)?,
                    due_ms: r.u64(4)?,
                    failing,
                })
            })
            .collect::<Result<Vec<_>, StoreError>>()?;
        self.memory.packed_window.set(packs > 0);
        if packs > 0 {
            meta.sort_by_key(|m| m.seq);
            if packs >= limit {
                meta.retain(|m| m.seq <= last_pack);
            }
            meta.truncate(limit as usize);
        }
        Ok(meta)
    }

    /// `(seq, body)` of rows with `after < seq <= last`, ascending, plain
    /// and packed.
    fn bodies_between(&self, after: u64, last: u64) -> Result<Vec<(u64, String)>, StoreError> {
        let (a, l) = (int(after), int(last));
        let rows = self.sql.rows(
            &format!(
                "SELECT seq, body FROM relay_outbox WHERE seq > ? AND seq <= ? AND target != '' \
                 AND first_seq IS NULL UNION ALL SELECT j.value ->> 0, j.value ->> 5 FROM relay_outbox p, \
                 json_each(p.body) j WHERE {packs} AND j.value ->> 0 > ? AND j.value ->> 0 <= ? ORDER BY 1",
                packs = super::pack::packs_overlapping(),
            ),
            vec![a.clone(), l.clone(), a.clone(), l.clone(), l.clone(), a, l],
        )?;
        rows.iter().map(|r| Ok((r.u64(0)?, r.text(1)?))).collect()
    }
}

/// A window row's target's failure record, as the window's columns 5-7.
const FAILING: &str = "t.failed_cycles, t.last_failure_ms, t.retry_after_ms";

/// What joins a failing (not parked) target's record to a window row's
/// target, written before `= <the row's target>`.
const FAILING_JOIN: &str = "t.parked = 0 AND t.failed_cycles > 0 AND t.target";

/// [`Outbox::window_meta`] over a handover's rows: the same selection, from
/// memory.
fn handed_meta(h: &Handover, after: u64, through: u64, limit: u32) -> Vec<Meta> {
    let rows = h.rows.iter().filter(|r| r.seq > after && r.seq <= through).take(limit as usize);
    rows.map(|r| Meta {
        seq: r.seq,
        target: r.target.clone(),
        at_ms: r.at_ms,
        due_ms: r.due_ms,
        bytes: u32::try_from(r.body.len()).unwrap_or(u32::MAX),
        failing: Name::new(r.target.as_str()).ok().and_then(|n| h.failing.get(&n).copied()),
    })
    .collect()
}
