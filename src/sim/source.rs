//! A simulated source partition and the simulation shell around the engine:
//! one fire (read, call, checkpoint) and one alarm (fires, then re-arm),
//! with faults injected between the steps.

use std::collections::BTreeMap;

use super::{AlarmReport, Sim, ALARM_RETRY_MS};
use crate::core::{
    begin, encode_request, AlarmRun, CallOutcome, Checkpoint, EnqueueRow, Fire, FireReport, FireStart, Name,
    RelayBudget, ScanState, StoredRow, Wake,
};

/// Faults armed on a source, each consumed by the fire it affects.
#[derive(Clone, Debug, Default)]
pub(crate) struct SourceFaults {
    /// The next checkpoint fails after the target calls.
    pub(crate) crash_checkpoint: bool,
    /// Another writer changes `rs` just before the next checkpoint.
    pub(crate) conflict_checkpoint: bool,
    /// Row sets a concurrent writer enqueues during the next fires.
    pub(crate) append_mid_fire: Vec<Vec<EnqueueRow>>,
    /// A second fire overlaps the next one.
    pub(crate) overlap: bool,
}

/// One simulated source: its outbox, `os`, stored `rs` and alarm.
#[derive(Clone, Debug, Default)]
pub(crate) struct SimSource {
    /// Last allocated sequence.
    pub(crate) os: u64,
    /// Stored `rs` text, exactly as the engine wrote it.
    pub(crate) rs: Option<String>,
    /// Queued rows by sequence.
    pub(crate) outbox: BTreeMap<u64, StoredRow>,
    /// When the alarm is due.
    pub(crate) alarm_at: Option<u64>,
    /// Armed faults.
    pub(crate) faults: SourceFaults,
    /// Operating settings.
    pub(crate) policy: super::ops::SourcePolicy,
    /// Rows of parked targets, by sequence.
    pub(crate) parked: BTreeMap<u64, StoredRow>,
    /// Discarded parked rows kept until their horizon.
    pub(crate) discarded: BTreeMap<u64, super::ops::Discarded>,
    /// Failure records of targets that failed or are parked.
    pub(crate) targets: BTreeMap<Name, super::ops::TargetRecord>,
    /// Idempotency records by key.
    pub(crate) dedup: BTreeMap<String, crate::core::DedupRecord>,
    /// Keyed enqueues answered as duplicates.
    pub(crate) dedup_hits: u64,
    /// Enqueues refused because the outbox was full.
    pub(crate) rejected_full: u64,
    /// When expired records were last pruned.
    pub(crate) last_prune_ms: u64,
}

impl SimSource {
    /// Applies `cp` if its guards hold: `rs` unchanged and every delete
    /// range holding exactly the rows the fire saw. All or nothing.
    fn apply_checkpoint(&mut self, cp: &Checkpoint) -> bool {
        if self.rs != cp.rs_expected {
            return false;
        }
        for range in &cp.deletes {
            if self.outbox.range(range.first..=range.last).count() != range.rows as usize {
                return false;
            }
        }
        for range in &cp.deletes {
            let doomed: Vec<u64> = self.outbox.range(range.first..=range.last).map(|(s, _)| *s).collect();
            for seq in doomed {
                self.outbox.remove(&seq);
            }
        }
        self.rs = Some(cp.rs_new.clone());
        true
    }
}

/// How a fire's checkpoint ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Commit {
    /// The checkpoint committed.
    Committed,
    /// The checkpoint lost a guard (a concurrent checkpoint) and was dropped.
    Conflict,
    /// The source crashed before its checkpoint; the alarm handler threw.
    Crashed,
}

/// What one simulated fire did.
#[derive(Clone, Debug)]
pub struct FireOutcome {
    /// The engine's report.
    pub report: FireReport,
    /// The engine's wake-up decision.
    pub wake: Wake,
    /// How the checkpoint ended.
    pub commit: Commit,
    /// The scan state the checkpoint wrote (or would have written).
    pub scan: ScanState,
    /// Calls made, as (target, rows in the batch), in completion order.
    pub calls: Vec<(Name, usize)>,
}

impl Sim {
    /// One fire of `source` with `calls_left` calls; `depth` > 0 for an
    /// overlapping fire, which may not itself overlap.
    pub(crate) fn fire_once(
        &mut self,
        source: &Name,
        budget: RelayBudget,
        calls_left: u32,
        depth: u32,
    ) -> FireOutcome {
        let mut fire = self.read_fire(source, budget, calls_left);
        let appends = std::mem::take(&mut self.source_mut(source).faults.append_mid_fire);
        for rows in appends {
            // A concurrent writer may be refused like any other; ignore it.
            let _ = self.enqueue(source.as_str(), rows);
        }
        let mut overlap = depth == 0 && std::mem::take(&mut self.source_mut(source).faults.overlap);
        let mut calls_log = Vec::new();
        loop {
            if overlap && self.rng.chance(50) {
                overlap = false;
                self.fire_once(source, budget, calls_left, depth + 1);
            }
            let mut calls = fire.next_calls();
            if calls.is_empty() {
                break;
            }
            self.rng.shuffle(&mut calls);
            for call in &calls {
                let body = encode_request(source, call, fire.rows());
                let result = self.target_mut(&call.target).call(&body);
                let outcome = match result {
                    Ok(reply) => CallOutcome::Applied { watermark: reply.watermark, applied: reply.applied },
                    Err(failure) => CallOutcome::Failed(failure),
                };
                calls_log.push((call.target.clone(), call.seqs.len()));
                fire.record(call, outcome);
            }
        }
        if overlap {
            self.fire_once(source, budget, calls_left, depth + 1);
        }
        let settlement = fire.settle();
        let commit = self.commit(source, &settlement.checkpoint);
        if commit == Commit::Committed {
            let now = self.now_ms();
            self.source_mut(source).apply_target_changes(&settlement.report, now);
        }
        if self.audit_every_fire {
            if let Err(breach) = self.audit() {
                panic!("audit failed after a fire of {source} ({commit:?}): {breach}");
            }
        }
        FireOutcome {
            report: settlement.report,
            wake: settlement.wake,
            commit,
            scan: settlement.scan,
            calls: calls_log,
        }
    }

    /// Reads `os`, `rs` and the window, as the shell does at fire start.
    fn read_fire(&mut self, source: &Name, budget: RelayBudget, calls_left: u32) -> Fire {
        let now_ms = self.now_ms();
        let src = self.source_mut(source);
        let start = FireStart {
            source: source.clone(),
            os: src.os,
            rs_text: src.rs.clone(),
            now_ms,
            budget,
            calls_left,
            policy: src.policy.relay,
            failing: src.failing(),
        };
        let begun = begin(start);
        let w = begun.window;
        let range = || src.outbox.range(w.after.saturating_add(1)..=w.through);
        let sizes: Vec<(u64, u32)> =
            range().take(w.probe_rows() as usize).map(|(s, r)| (*s, r.body.len() as u32)).collect();
        let (n, exhausted) = w.take(&sizes);
        // Like the Durable Object shell, read bodies only as far as the fire
        // can use them; later rows arrive without one.
        let through = begun.bodies_through(range().take(n).map(|(s, r)| (*s, r.target.as_str())));
        let rows: Vec<StoredRow> = range()
            .take(n)
            .map(|(s, r)| match through {
                Some(t) if *s <= t => r.clone(),
                _ => StoredRow { body: String::new(), ..r.clone() },
            })
            .collect();
        Fire::new(begun, &rows, exhausted)
    }

    /// Applies a checkpoint, after the armed checkpoint faults.
    fn commit(&mut self, source: &Name, cp: &Checkpoint) -> Commit {
        let os = self.source_mut(source).os;
        let src = self.source_mut(source);
        if std::mem::take(&mut src.faults.crash_checkpoint) {
            return Commit::Crashed;
        }
        if std::mem::take(&mut src.faults.conflict_checkpoint) {
            // Another writer's checkpoint: same meaning, new generation.
            let mut other = src
                .rs
                .as_deref()
                .and_then(|t| ScanState::decode(t).ok())
                .unwrap_or_else(|| ScanState::new_cycle(os, None));
            other.generation += 1;
            src.rs = Some(other.encode());
        }
        if src.apply_checkpoint(cp) {
            Commit::Committed
        } else {
            Commit::Conflict
        }
    }
}

/// One alarm: fires until the engine or the budget says stop, then re-arm.
pub(crate) fn run_alarm(sim: &mut Sim, source: &Name, budget: RelayBudget) -> AlarmReport {
    let mut run = AlarmRun::new(budget);
    let mut fires = Vec::new();
    sim.source_mut(source).alarm_at = None;
    let mut crashed = false;
    while let Some(calls_left) = run.next_fire() {
        let fire = sim.fire_once(source, budget, calls_left, 0);
        match fire.commit {
            Commit::Committed => run.committed(&fire.report, fire.wake),
            Commit::Conflict => run.conflicted(&fire.report),
            Commit::Crashed => {
                run.conflicted(&fire.report);
                crashed = true;
            }
        }
        fires.push(fire);
        if crashed {
            break;
        }
    }
    let now = sim.now_ms();
    let src = sim.source_mut(source);
    src.prune(now);
    let due = if crashed {
        Some(now + ALARM_RETRY_MS)
    } else {
        run.final_wake().delay_ms(src.os).map(|d| now + d).or_else(|| src.idle_prune_at())
    };
    // An enqueue during the alarm may have armed it already; keep the earlier.
    src.alarm_at = match (src.alarm_at, due) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    AlarmReport { fires, totals: run.totals().clone(), next_alarm_ms: src.alarm_at }
}
