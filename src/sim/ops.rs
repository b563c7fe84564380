//! The simulator's operating features, mirroring the Durable Object shell:
//! keyed (idempotent) enqueue, backpressure bounds, parked targets with
//! redrive and discard, and horizon pruning of dedup records and discarded
//! rows.

use std::collections::BTreeMap;

use super::{name, Sim};
use crate::core::dedup::{decide, next_prune_ms, validate_key, DEFAULT_DISCARD_HORIZON_MS, PRUNE_BATCH_ROWS};
use crate::core::{
    content_digest, Capacity, Dedup, DedupRecord, EnqueueRefusal, EnqueueRow, Name, RelayPolicy, ScanState,
    StoredRow, DEFAULT_MAX_QUEUED_BYTES, DEFAULT_MAX_QUEUED_ROWS,
};

/// A source's operating settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SourcePolicy {
    /// When to park failing targets.
    pub relay: RelayPolicy,
    /// Backpressure bound on waiting rows (queued plus parked).
    pub max_rows: u64,
    /// Backpressure bound on waiting body bytes.
    pub max_bytes: u64,
    /// How long idempotency keys are remembered.
    pub dedup_horizon_ms: u64,
    /// How long discarded parked rows are kept.
    pub discard_horizon_ms: u64,
}

impl Default for SourcePolicy {
    fn default() -> Self {
        SourcePolicy {
            relay: RelayPolicy::default(),
            max_rows: DEFAULT_MAX_QUEUED_ROWS,
            max_bytes: DEFAULT_MAX_QUEUED_BYTES,
            dedup_horizon_ms: crate::core::dedup::DEFAULT_DEDUP_HORIZON_MS,
            discard_horizon_ms: DEFAULT_DISCARD_HORIZON_MS,
        }
    }
}

/// What a source knows about one target that has failed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TargetRecord {
    /// Consecutive cycles in which its delivery failed.
    pub failed_cycles: u32,
    /// Why it is parked, if it is.
    pub parked: Option<String>,
    /// First failure of the current run of failures, ms.
    pub first_failure_ms: Option<u64>,
    /// Latest failure, ms.
    pub last_failure_ms: Option<u64>,
}

/// A successful enqueue.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Enqueued {
    /// The sequences (the original ones for a duplicate).
    pub seqs: Vec<u64>,
    /// Whether this repeated an earlier keyed enqueue and wrote nothing.
    pub duplicate: bool,
}

/// A parked row kept after discard, until its horizon.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Discarded {
    pub(crate) row: StoredRow,
    pub(crate) at_ms: u64,
}

impl Sim {
    /// Sets `source`'s operating settings.
    pub fn set_policy(&mut self, source: &str, policy: SourcePolicy) {
        self.source_mut(&name(source)).policy = policy;
    }

    /// Enqueues with an optional idempotency key: the same key and content
    /// answer with the original sequences (`duplicate`), the same key with
    /// other content is refused; neither writes anything.
    pub fn enqueue_keyed(
        &mut self,
        source: &str,
        key: Option<&str>,
        rows: Vec<EnqueueRow>,
    ) -> Result<Enqueued, EnqueueRefusal> {
        let s = name(source);
        let now = self.now_ms();
        let encoded = crate::core::encode_rows(&rows)?;
        let digest = key.map(|_| content_digest(&encoded));
        if let Some(k) = key {
            validate_key(k).map_err(EnqueueRefusal::Key)?;
            let src = self.source_mut(&s);
            let horizon = src.policy.dedup_horizon_ms;
            match decide(src.dedup.get(k), digest.as_deref().unwrap_or(""), now, horizon) {
                Dedup::Duplicate(seqs) => {
                    src.dedup_hits += 1;
                    return Ok(Enqueued { seqs, duplicate: true });
                }
                Dedup::Conflict => return Err(EnqueueRefusal::Conflict { key: k.to_owned() }),
                Dedup::Fresh => {}
            }
        }
        let src = self.source_mut(&s);
        let capacity = src.capacity();
        let plan = match crate::core::plan_encoded(src.os, now, &encoded, &capacity) {
            Ok(p) => p,
            Err(e) => {
                src.rejected_full += u64::from(matches!(e, crate::core::EnqueueError::OutboxFull { .. }));
                return Err(e.into());
            }
        };
        src.os = plan.os;
        for row in &plan.rows {
            let parked = src.targets.get(&name(&row.target)).is_some_and(|t| t.parked.is_some());
            let list = if parked { &mut src.parked } else { &mut src.outbox };
            list.insert(row.seq, row.clone());
        }
        if let (Some(k), Some(d)) = (key, digest) {
            let record = DedupRecord {
                key: k.to_owned(),
                digest: d,
                first_seq: plan.rows[0].seq,
                rows: plan.rows.len() as u32,
                at_ms: now,
            };
            src.dedup.insert(k.to_owned(), record);
        }
        src.alarm_at.get_or_insert(now);
        for row in &plan.rows {
            self.enqueued.entry((s.clone(), name(&row.target))).or_default().push(row.seq);
        }
        for t in rows.iter().map(|r| r.target.clone()) {
            self.target_mut(&t);
        }
        Ok(Enqueued { seqs: plan.seqs(), duplicate: false })
    }

    /// Puts `target`'s parked rows back into the outbox in their original
    /// order and unparks it; the next fire starts a new cycle. Returns the
    /// rows moved (0 when nothing was parked: idempotent).
    pub fn redrive(&mut self, source: &str, target: &str) -> u32 {
        let (s, t) = (name(source), name(target));
        let now = self.now_ms();
        let src = self.source_mut(&s);
        let rows = src.take_parked(&t);
        let seqs: Vec<u64> = rows.iter().map(|r| r.seq).collect();
        src.outbox.extend(rows.into_iter().map(|r| (r.seq, r)));
        src.targets.remove(&t);
        src.rs = Some(ScanState::restart_marker(src.rs.as_deref(), src.os).encode());
        src.alarm_at = Some(src.alarm_at.map_or(now, |a| a.min(now)));
        seqs.len() as u32
    }

    /// Drops `target`'s parked rows (kept as discarded until their horizon)
    /// and unparks it. Returns the rows discarded (0 when none: idempotent).
    pub fn discard(&mut self, source: &str, target: &str) -> u32 {
        let (s, t) = (name(source), name(target));
        let now = self.now_ms();
        let src = self.source_mut(&s);
        let rows = src.take_parked(&t);
        let seqs: Vec<u64> = rows.iter().map(|r| r.seq).collect();
        src.discarded.extend(rows.into_iter().map(|row| (row.seq, Discarded { row, at_ms: now })));
        src.targets.remove(&t);
        for seq in &seqs {
            self.discarded_seqs.insert((s.clone(), *seq));
        }
        seqs.len() as u32
    }

    /// Parked targets of `source`, with their records and parked row counts.
    pub fn parked_targets(&self, source: &str) -> Vec<(String, TargetRecord, u32)> {
        let Some(src) = self.sources.get(&name(source)) else {
            return Vec::new();
        };
        src.targets
            .iter()
            .filter(|(_, r)| r.parked.is_some())
            .map(|(t, r)| {
                let n = src.parked.values().filter(|row| row.target == t.as_str()).count() as u32;
                (t.to_string(), r.clone(), n)
            })
            .collect()
    }

    /// Sequences parked at `source` for `target`, ascending.
    pub fn parked_rows(&self, source: &str, target: &str) -> Vec<u64> {
        self.sources.get(&name(source)).map_or_else(Vec::new, |s| {
            s.parked.values().filter(|r| r.target == target).map(|r| r.seq).collect()
        })
    }

    /// `source`'s failure record for `target`.
    pub fn target_record(&self, source: &str, target: &str) -> Option<TargetRecord> {
        self.sources.get(&name(source))?.targets.get(&name(target)).cloned()
    }

    /// Dedup records `source` remembers.
    pub fn dedup_records(&self, source: &str) -> usize {
        self.sources.get(&name(source)).map_or(0, |s| s.dedup.len())
    }

    /// Discarded rows `source` still keeps.
    pub fn discarded_rows(&self, source: &str) -> usize {
        self.sources.get(&name(source)).map_or(0, |s| s.discarded.len())
    }

    /// (dedup hits, enqueues refused as full) at `source`.
    pub fn admission_counters(&self, source: &str) -> (u64, u64) {
        self.sources.get(&name(source)).map_or((0, 0), |s| (s.dedup_hits, s.rejected_full))
    }
}

impl super::source::SimSource {
    /// Removes and returns `target`'s parked rows, ascending.
    fn take_parked(&mut self, target: &Name) -> Vec<StoredRow> {
        let seqs: Vec<u64> =
            self.parked.values().filter(|r| r.target == target.as_str()).map(|r| r.seq).collect();
        seqs.iter().map(|s| self.parked.remove(s).expect("listed above")).collect()
    }

    /// Occupancy under this source's bounds.
    pub(crate) fn capacity(&self) -> Capacity {
        let rows = (self.outbox.len() + self.parked.len()) as u64;
        let bytes = self.outbox.values().chain(self.parked.values()).map(|r| r.body.len() as u64).sum();
        Capacity { rows, bytes, max_rows: self.policy.max_rows, max_bytes: self.policy.max_bytes }
    }

    /// Consecutive failed cycles per failing target, for a fire.
    pub(crate) fn failing(&self) -> BTreeMap<Name, u32> {
        self.targets
            .iter()
            .filter(|(_, r)| r.failed_cycles > 0)
            .map(|(t, r)| (t.clone(), r.failed_cycles))
            .collect()
    }

    /// Deletes expired dedup records and discarded rows, at most one batch
    /// of each. Returns whether anything expired remains.
    pub(crate) fn prune(&mut self, now_ms: u64) -> bool {
        let horizon = self.policy.dedup_horizon_ms;
        let expired: Vec<String> = self
            .dedup
            .values()
            .filter(|r| r.expired(now_ms, horizon))
            .take(PRUNE_BATCH_ROWS as usize)
            .map(|r| r.key.clone())
            .collect();
        for k in &expired {
            self.dedup.remove(k);
        }
        let horizon = self.policy.discard_horizon_ms;
        let gone: Vec<u64> = self
            .discarded
            .iter()
            .filter(|(_, d)| now_ms.saturating_sub(d.at_ms) >= horizon)
            .take(PRUNE_BATCH_ROWS as usize)
            .map(|(s, _)| *s)
            .collect();
        for s in &gone {
            self.discarded.remove(s);
        }
        self.last_prune_ms = now_ms;
        self.dedup.values().any(|r| r.expired(now_ms, self.policy.dedup_horizon_ms))
    }

    /// When an idle source should wake to prune, if it holds records.
    pub(crate) fn idle_prune_at(&self) -> Option<u64> {
        let oldest_dedup = self.dedup.values().map(|r| r.at_ms + self.policy.dedup_horizon_ms).min();
        let oldest_discard = self.discarded.values().map(|d| d.at_ms + self.policy.discard_horizon_ms).min();
        let due = oldest_dedup.into_iter().chain(oldest_discard).min()?;
        Some(next_prune_ms(due, 0, self.last_prune_ms))
    }

    /// Applies the parking and failure counting a settled fire decided:
    /// moves every queued row of a parked target to the parked list.
    pub(crate) fn apply_target_changes(&mut self, report: &crate::core::FireReport, now_ms: u64) {
        for t in &report.recovered {
            self.targets.remove(t);
        }
        for (t, f) in &report.failed {
            if report.parked.iter().any(|(p, _)| p == t) {
                continue;
            }
            let _ = f;
            let r = self.targets.entry(t.clone()).or_default();
            r.failed_cycles += 1;
            r.first_failure_ms.get_or_insert(now_ms);
            r.last_failure_ms = Some(now_ms);
        }
        for (t, reason) in &report.parked {
            let seqs: Vec<u64> =
                self.outbox.values().filter(|r| r.target == t.as_str()).map(|r| r.seq).collect();
            for seq in seqs {
                let row = self.outbox.remove(&seq).expect("listed above");
                self.parked.insert(seq, row);
            }
            let r = self.targets.entry(t.clone()).or_default();
            r.failed_cycles = 0;
            r.parked = Some(reason.clone());
            r.first_failure_ms.get_or_insert(now_ms);
            r.last_failure_ms = Some(now_ms);
        }
    }
}
