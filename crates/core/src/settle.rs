//! Settling a fire: the new `rs`, the delivered rows to delete, the guards
//! the checkpoint carries, the next wake-up, and the fire's report.
//!
//! The cursor walks the window in sequence order. A delivered row is passed
//! and deleted. A row held by a delay is passed and its due time noted, so
//! the source wakes for it. An undelivered row of a failing target the
//! cycle passes over, or of a target whose call failed in this fire, is
//! passed: the target's record (written by this checkpoint for a new
//! failure) keeps it passed over for the rest of the cycle, however many
//! targets fail. The walk stops before the first undelivered row of a
//! healthy target (one the target budget paused, or whose batches were cut
//! by the call budget), of a failing target deferred to the next fire (see
//! [`crate::fire::retry`]) and before a corrupt row. Delivered rows past the
//! stop are deleted too: their target's watermark already covers them.
//! What the fire reports is in `report`.

mod report;

pub use report::{FireReport, TargetChanges};

use crate::fire::retry::{turn_through, waits_its_turn};
use crate::fire::{Fire, Group, GroupState};
use crate::limits::{retry_backoff_ms, RETRY_BACKOFF_MS, TARGET_RETRY_BACKOFF_MAX_MS};
use crate::scan::ScanState;

/// A run of delivered rows to delete. Every window row in `first..=last`
/// is in the run, and no other outbox row lies in that range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeleteRange {
    /// First sequence in the run.
    pub first: u64,
    /// Last sequence in the run.
    pub last: u64,
    /// Rows the range holds. Guard: the shell deletes exactly this many or
    /// aborts the checkpoint.
    pub rows: u32,
    /// Body bytes of those rows, for the source's queued-bytes gauge.
    pub bytes: u64,
}

/// The guarded write that ends a fire. The shell applies it atomically or
/// not at all.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Checkpoint {
    /// Guard: the stored `rs` must still be exactly this (`None`: absent).
    pub rs_expected: Option<String>,
    /// The value to store as `rs`.
    pub rs_new: String,
    /// Delivered rows to delete, each range guarded by its row count.
    pub deletes: Vec<DeleteRange>,
}

/// When the source should fire next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wake {
    /// Right away: the fire delivered and rows remain.
    Now,
    /// After a back-off: the fire delivered nothing.
    After {
        /// Delay in ms.
        delay_ms: u64,
    },
    /// The outbox was empty as of `os_read`: no alarm unless a row was
    /// appended since, which the shell sees as `os` past `os_read`.
    Idle {
        /// The `os` the fire read.
        os_read: u64,
    },
    /// Every row queued as of `os_read` is held by a delay: wake when the
    /// first is due, or at once if a row was appended since.
    Until {
        /// The `os` the fire read.
        os_read: u64,
        /// Until the earliest held row is due, ms.
        delay_ms: u64,
    },
}

impl Wake {
    /// The delay before the next fire given the current `os`, or `None`
    /// when the source may sleep.
    pub fn delay_ms(&self, os_now: u64) -> Option<u64> {
        match *self {
            Wake::Now => Some(0),
            Wake::After { delay_ms } => Some(delay_ms),
            Wake::Idle { os_read } | Wake::Until { os_read, .. } if os_now > os_read => Some(0),
            Wake::Idle { .. } => None,
            Wake::Until { delay_ms, .. } => Some(delay_ms),
        }
    }
}

/// The result of settling a fire.
#[derive(Clone, Debug)]
pub struct Settlement {
    /// The guarded write to apply.
    pub checkpoint: Checkpoint,
    /// The scan state `checkpoint.rs_new` encodes.
    pub scan: ScanState,
    /// When to fire next, if the checkpoint commits.
    pub wake: Wake,
    /// What happened.
    pub report: FireReport,
}

/// How the cursor walk ended.
struct Walk {
    scan: ScanState,
    /// Stopped before a healthy target's undelivered row or a corrupt row.
    interrupted: bool,
}

impl Fire {
    /// Settles the fire after every call was recorded.
    pub fn settle(mut self) -> Settlement {
        assert_eq!(self.in_flight, 0, "settle with calls outstanding");
        let answered = self.answered_retries();
        let failed_retries = self.retries.made - answered;
        self.pass_deferred(failed_retries);
        self.note_waiting_turns();
        let walk = self.walk();
        let mut scan = walk.scan;
        let deleted = self.delete_ranges();
        let rows_delivered: u32 = deleted.iter().map(|r| r.rows).sum();
        let complete = !walk.interrupted && self.corrupt.is_none() && self.exhausted;
        if complete {
            scan.cursor = scan.cycle_end;
        }
        scan.retries = scan.retries.saturating_add(failed_retries);
        scan.recovered = scan.recovered.saturating_add(answered);
        // Over the whole cycle: a bound per fire would let the targets early
        // in the outbox take every turn. A cycle an older build began kept
        // only its bound: it stands for the times it had seen.
        let kept = match scan.waiting_ms.is_empty() {
            true => scan.waiting_retry_ms.into_iter().collect(),
            false => std::mem::take(&mut scan.waiting_ms),
        };
        scan.waiting_ms = self.retries.cycle_waiting(&kept);
        scan.waiting_retry_ms = turn_through(&scan.waiting_ms, self.budget().retries_per_cycle());
        let start = &self.begun.scan;
        let advanced = self.begun.new_cycle || scan.cursor != start.cursor;
        let rows_parked = self.rows_parked();
        let left = rows_delivered + rows_parked;
        let wake = self.wake(&mut scan, left, complete, advanced);
        scan.generation += 1;
        let checkpoint = Checkpoint {
            rs_expected: self.begun.start.rs_text.clone(),
            rs_new: scan.encode(),
            deletes: deleted,
        };
        let mut report = self.report(rows_delivered, complete);
        report.rows_parked = rows_parked;
        Settlement { checkpoint, scan, wake, report }
    }

    /// This fire's retries whose target answered: it took its batches, is
    /// healthy again and costs the cycle none of its retries.
    fn answered_retries(&self) -> u32 {
        let answered =
            self.groups.iter().filter(|g| g.retry && g.applied_once && g.state == GroupState::Active);
        answered.count() as u32
    }

    /// Passes over the targets this fire deferred when no retry is left for
    /// the next fire to give them: the next fire would pass them anyway,
    /// and the cursor need not stop for them.
    fn pass_deferred(&mut self, failed_retries: u32) {
        let spent = self.begun.scan.retries.saturating_add(failed_retries);
        if spent < self.budget().retries_per_cycle() {
            return;
        }
        for g in 0..self.groups.len() {
            if self.groups[g].state == GroupState::Deferred {
                let at = self.group_retry_at(g);
                self.retries.pass(at);
                self.groups[g].state = GroupState::Blocked;
            }
        }
    }

    /// Notes the due failing targets this fire passed over because more
    /// overdue ones went first: they wait for a later cycle's turn.
    fn note_waiting_turns(&mut self) {
        let scan = &self.begun.scan;
        for g in &self.groups {
            if g.state != GroupState::Blocked || scan.is_blocked(&g.target) {
                continue;
            }
            if let Some(f) = self.begun.start.failing.get(&g.target).filter(|f| waits_its_turn(scan, f)) {
                self.retries.pass(f.retry_at_ms());
            }
        }
    }

    /// Moves the cursor over the window; see the module doc.
    fn walk(&self) -> Walk {
        let mut scan = self.begun.scan.clone();
        let stop = self.stop_seq();
        let mut walk_end = Walk { scan: scan.clone(), interrupted: false };
        for (i, row) in self.rows.iter().enumerate() {
            if stop.is_some_and(|s| row.seq >= s) {
                walk_end.interrupted = true;
                break;
            }
            if !self.delivered[i] {
                let group = &self.groups[self.row_group[i] as usize];
                match group.state {
                    GroupState::Parked(_) => {}
                    GroupState::Blocked | GroupState::Failed(_) => {
                        scan.passed_failing = true;
                        if let Some(at) = self.retry_at(group) {
                            scan.next_retry_ms = Some(scan.next_retry_ms.map_or(at, |r| r.min(at)));
                        }
                    }
                    _ if self.held[i] => {
                        let due = scan.next_due_ms.map_or(row.due_ms, |d| d.min(row.due_ms));
                        scan.next_due_ms = Some(due);
                    }
                    ref s => panic!("row {} of a healthy group ({s:?}) before the stop", row.seq),
                }
            }
            scan.cursor = row.seq;
        }
        if self.corrupt.is_some() {
            walk_end.interrupted = true;
        }
        walk_end.scan = scan;
        walk_end
    }

    /// The first row the cursor must not pass: the first undelivered row of
    /// any group that neither is blocked nor failed (a deferred one
    /// included), or the corrupt row.
    fn stop_seq(&self) -> Option<u64> {
        let healthy = self.groups.iter().filter_map(|g| match g.state {
            GroupState::Waiting | GroupState::Active | GroupState::Deferred if g.next < g.due_len => {
                Some(self.rows[g.rows[g.next] as usize].seq)
            }
            _ => None,
        });
        healthy.chain(self.corrupt.as_ref().map(|(s, _)| *s)).min()
    }

    /// Runs of consecutive delivered window rows.
    fn delete_ranges(&self) -> Vec<DeleteRange> {
        let mut out: Vec<DeleteRange> = Vec::new();
        let mut run_open = false;
        for (i, row) in self.rows.iter().enumerate() {
            if !self.delivered[i] {
                run_open = false;
                continue;
            }
            // Its size is its body's: a row read without one never leaves here.
            debug_assert!(row.sendable, "row {} delivered without its body", row.seq);
            match out.last_mut() {
                Some(r) if run_open => {
                    r.last = row.seq;
                    r.rows += 1;
                    r.bytes += u64::from(row.bytes);
                }
                _ => out.push(DeleteRange {
                    first: row.seq,
                    last: row.seq,
                    rows: 1,
                    bytes: u64::from(row.bytes),
                }),
            }
            run_open = true;
        }
        out
    }

    /// Undelivered window rows of targets being parked.
    fn rows_parked(&self) -> u32 {
        let parked =
            |i: usize| matches!(self.groups[self.row_group[i] as usize].state, GroupState::Parked(_));
        (0..self.rows.len()).filter(|&i| !self.delivered[i] && parked(i)).count() as u32
    }

    /// Decides the next wake-up and updates the idle streak. `rows_delivered`
    /// counts every window row that left the outbox (delivered or parked).
    fn wake(&self, scan: &mut ScanState, rows_delivered: u32, complete: bool, advanced: bool) -> Wake {
        if rows_delivered > 0 {
            scan.idle_fires = 0;
        }
        let os_read = self.begun.start.os;
        let held_left = self.held_left();
        let settled = complete
            && scan.blocked.is_empty()
            && !scan.passed_failing
            && self.corrupt.is_none()
            && (rows_delivered + held_left) as usize == self.rows.len();
        // Until a held row is due, when the cycle ends with nothing else owed.
        let until_due =
            scan.next_due_ms.filter(|_| complete).map(|d| d.saturating_sub(self.begun.start.now_ms));
        if settled && scan.cycle_end == os_read {
            scan.idle_fires = 0;
            return match until_due {
                None => Wake::Idle { os_read },
                Some(delay_ms) => Wake::Until { os_read, delay_ms },
            };
        }
        if rows_delivered > 0 || (settled && until_due.is_some()) {
            // Delivered, or only held rows left in a cycle that ended
            // before newer rows: go again.
            return Wake::Now;
        }
        if advanced && !complete {
            // Scanning past failing or held rows toward rows that may be
            // healthy: go on at once. The targets that failed here are
            // passed over until their own back-off ends, so going on calls
            // none of them again, and the cursor moved, so this ends with
            // the cycle.
            return Wake::Now;
        }
        scan.idle_fires = scan.idle_fires.saturating_add(1);
        let backoff = retry_backoff_ms(scan.idle_fires);
        // A back-off never makes a held row wait past its due time, nor a
        // failing target past its turn (see `until_retry`).
        let until_retry = self.until_retry(scan).filter(|_| complete);
        let delay_ms = [Some(backoff), until_due, until_retry].into_iter().flatten().min().unwrap_or(backoff);
        Wake::After { delay_ms }
    }

    /// How soon a cycle that ended idle must come round for its failing
    /// targets, if sooner than its back-off. One that left none of them
    /// due and waiting comes by the earliest retry time it passed over (a
    /// second apart at least). One that left some waiting (they are due
    /// already) comes within a target's longest back-off when one of its
    /// retries answered, since targets are coming back and more may have,
    /// or when it made none, since the ones that go first next time have
    /// not been tried; when it made retries and every one failed, it is an
    /// outage: the source backs off as an idle one does (up to a minute,
    /// an alarm a minute at most), and the next cycle still retries those
    /// that waited longest first.
    fn until_retry(&self, scan: &ScanState) -> Option<u64> {
        if scan.waiting_retry_ms.is_none() {
            let now = self.begun.start.now_ms;
            return scan.next_retry_ms.map(|r| r.saturating_sub(now).max(RETRY_BACKOFF_MS));
        }
        let every_retry_failed = scan.retries > 0 && scan.recovered == 0;
        (!every_retry_failed).then_some(TARGET_RETRY_BACKOFF_MAX_MS)
    }

    /// When a passed-over target may be called again: a failing target's
    /// record says; one that failed in this fire waits its next back-off
    /// from now, or the pause it asked for if longer. `None` for a target
    /// an older version listed as blocked.
    fn retry_at(&self, group: &Group) -> Option<u64> {
        let start = &self.begun.start;
        let known = start.failing.get(&group.target);
        match group.state {
            GroupState::Failed(_) => {
                let cycles = self.failed_cycles(group);
                let wait = crate::limits::target_retry_backoff_ms(cycles).max(group.retry_after_ms);
                Some(start.now_ms.saturating_add(wait))
            }
            _ => known.map(crate::fire::Failing::retry_at_ms),
        }
    }

    /// Undelivered window rows held by a delay (not those leaving with a
    /// parked target).
    fn held_left(&self) -> u32 {
        let parked =
            |i: usize| matches!(self.groups[self.row_group[i] as usize].state, GroupState::Parked(_));
        (0..self.rows.len()).filter(|&i| self.held[i] && !self.delivered[i] && !parked(i)).count() as u32
    }
}
