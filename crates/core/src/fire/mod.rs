//! Planning one relay fire: the scan window, target groups, and the target
//! calls the shell makes, as a state machine with no I/O.
//!
//! The shell drives it:
//!
//! 1. [`begin`] turns what it read (`os`, the stored `rs` text) into the
//!    effective scan state and a [`WindowQuery`];
//! 2. it reads row sizes, lets [`WindowQuery::take`] cut the window, reads
//!    those rows and builds a [`Fire`];
//! 3. it repeatedly asks [`Fire::next_calls`] for calls (distinct targets,
//!    safe to run concurrently), makes them, and [`Fire::record`]s each
//!    outcome, until no call is left;
//! 4. [`Fire::settle`] (in `settle.rs`) yields the guarded checkpoint and
//!    the next wake-up.
//!
//! Rows are grouped by target in first-sequence order. Failing targets are
//! passed over unless the cycle retries them (see [`retry`]), and so are
//! rows held by a delay (a suffix of their target's rows; a target whose
//! first row is held is skipped whole). A group needs a target slot to
//! apply; reaching the target budget pauses the cursor before the next
//! group without blocking it. A group whose call turns out to be
//! duplicate-only gives its slot back.
//!
//! - `begin.rs`: the cycle and the window; `call.rs`: the calls and their
//!   outcomes; `group.rs`: the per-target groups; `retry.rs`: which failing
//!   targets a cycle calls again; here: selection (which calls next) and
//!   recording (what a call's outcome means).

mod begin;
mod call;
mod group;
pub mod retry;

pub use begin::{begin, Begun, FireStart, RelayPolicy, WindowQuery};
pub use call::{classify_thrown, CallOutcome, Failure, TargetCall, ThrownBy};
pub(crate) use group::{Group, GroupState};
pub use retry::Failing;
use retry::{Retries, Turn};

use crate::limits::{RelayBudget, BATCH_ROW_FRAMING_BYTES, MAX_BATCH_BYTES, MAX_BATCH_EFFECTS};
use crate::name::Name;
use crate::row::{CorruptRow, QueuedRow, StoredRow};
use group::group_rows;

/// One fire in progress.
#[derive(Debug)]
pub struct Fire {
    pub(crate) begun: Begun,
    /// The decodable prefix of the window, ascending by sequence.
    pub(crate) rows: Vec<QueuedRow>,
    /// The first row that did not decode, which stops the fire.
    pub(crate) corrupt: Option<(u64, CorruptRow)>,
    /// Whether `rows` (plus `corrupt`) are all that remain up to the cycle end.
    pub(crate) exhausted: bool,
    /// Groups in first-sequence order.
    pub(crate) groups: Vec<Group>,
    /// Group index of each row.
    pub(crate) row_group: Vec<u32>,
    /// Delivery status of each row. Invariant: once true, stays true.
    pub(crate) delivered: Vec<bool>,
    /// Whether each row is held by a delay this cycle (past its group's
    /// `due_len`): never sent, passed over by the cursor.
    pub(crate) held: Vec<bool>,
    /// The next group that selection will consider.
    pub(crate) next_group: usize,
    /// Target slots in use. Invariant: `slots_used <= targets_per_fire`.
    pub(crate) slots_used: u32,
    /// Calls handed out. Invariant: `calls_made <= calls_cap`.
    pub(crate) calls_made: u32,
    /// Most calls this fire may make.
    pub(crate) calls_cap: u32,
    /// Rows that targets reported as newly applied.
    pub(crate) rows_applied: u32,
    /// Calls in flight.
    pub(crate) in_flight: u32,
    /// The cycle's retries of failing targets, as this fire spends them.
    pub(crate) retries: Retries,
}

impl Fire {
    /// Builds a fire over the rows the shell read for `begun.window`.
    /// `exhausted` comes from [`WindowQuery::take`].
    ///
    /// Rows after [`Begun::bodies_through`] may come without bodies: this
    /// fire can never send them (their targets are blocked, or past the
    /// first `calls_cap` distinct targets), so it only checks their target.
    pub fn new(begun: Begun, stored: &[StoredRow], exhausted: bool) -> Fire {
        let through = begun.bodies_through(stored.iter().map(|r| (r.seq, r.target.as_str(), r.due_ms)));
        let mut rows = Vec::with_capacity(stored.len());
        let mut corrupt = None;
        for row in stored {
            assert!(
                row.seq > begun.window.after && row.seq <= begun.window.through,
                "row {} outside the window",
                row.seq
            );
            assert!(rows.last().is_none_or(|r: &QueuedRow| r.seq < row.seq), "rows not ascending");
            let decoded = if through.is_some_and(|t| row.seq <= t) {
                QueuedRow::decode(row)
            } else {
                QueuedRow::unsendable(row)
            };
            match decoded {
                Ok(row) => rows.push(row),
                Err(e) => {
                    corrupt = Some((row.seq, e));
                    break;
                }
            }
        }
        let (groups, row_group) = group_rows(&rows, &begun.scan, &begun.start.failing);
        let calls_cap = begun.calls_cap();
        let retries = Retries::new(&begun.scan, &begun.start.budget);
        let delivered = vec![false; rows.len()];
        let mut held = vec![false; rows.len()];
        for group in &groups {
            for &i in &group.rows[group.due_len..] {
                held[i as usize] = true;
            }
        }
        Fire {
            begun,
            rows,
            corrupt,
            exhausted,
            groups,
            row_group,
            delivered,
            held,
            next_group: 0,
            slots_used: 0,
            calls_made: 0,
            calls_cap,
            rows_applied: 0,
            in_flight: 0,
            retries,
        }
    }

    /// The fire's budget.
    pub fn budget(&self) -> &RelayBudget {
        &self.begun.start.budget
    }

    /// The source's name.
    pub fn source(&self) -> &Name {
        &self.begun.start.source
    }

    /// Stops the fire handing out calls: the invocation's CPU gauge said
    /// stop (see [`crate::cpu`]). Calls already recorded stand; settling
    /// checkpoints them as after any fire that ran out of calls, and the
    /// cursor stops before the first row not delivered. Not an error.
    pub fn cut(&mut self) {
        self.calls_cap = self.calls_made;
    }

    /// Calls handed out so far.
    pub fn calls_made(&self) -> u32 {
        self.calls_made
    }

    /// The decoded window rows, ascending.
    pub fn rows(&self) -> &[QueuedRow] {
        &self.rows
    }

    /// The next calls to make, to distinct targets none of which has a call
    /// in flight. Empty when the fire has nothing more to send; the shell
    /// must record every outstanding call before asking again.
    pub fn next_calls(&mut self) -> Vec<TargetCall> {
        assert_eq!(self.in_flight, 0, "next_calls with calls outstanding");
        let mut calls = Vec::new();
        self.continue_active(&mut calls);
        self.select_waiting(&mut calls);
        self.calls_made += calls.len() as u32;
        self.in_flight = calls.len() as u32;
        assert!(self.calls_made <= self.calls_cap);
        assert!(self.slots_used <= self.budget().targets_per_fire);
        calls
    }

    fn has_call_budget(&self, pending: usize) -> bool {
        self.calls_made + (pending as u32) < self.calls_cap
    }

    /// Next batches for selected targets that have rows left.
    fn continue_active(&mut self, calls: &mut Vec<TargetCall>) {
        for g in 0..self.groups.len() {
            let group = &self.groups[g];
            if group.state != GroupState::Active || group.next >= group.due_len {
                continue;
            }
            if group.calls >= self.budget().calls_per_target || !self.has_call_budget(calls.len()) {
                continue;
            }
            if !group.holds_slot {
                if self.slots_used >= self.budget().targets_per_fire {
                    continue;
                }
                self.slots_used += 1;
                self.groups[g].holds_slot = true;
            }
            calls.push(self.batch(g));
        }
    }

    /// Selects groups in first-sequence order while slots and calls last.
    fn select_waiting(&mut self, calls: &mut Vec<TargetCall>) {
        while self.next_group < self.groups.len() {
            let g = self.next_group;
            match self.groups[g].state {
                GroupState::Blocked | GroupState::Held | GroupState::Deferred => {
                    self.next_group += 1;
                    continue;
                }
                GroupState::Waiting => {}
                ref other => panic!("unselected group in state {other:?}"),
            }
            if self.slots_used >= self.budget().targets_per_fire || !self.has_call_budget(calls.len()) {
                return;
            }
            if self.groups[g].retry {
                let turn = self.retries.take(self.group_retry_at(g));
                if turn != Turn::Call {
                    self.groups[g].state =
                        if turn == Turn::Defer { GroupState::Deferred } else { GroupState::Blocked };
                    self.next_group += 1;
                    continue;
                }
            }
            self.slots_used += 1;
            let group = &mut self.groups[g];
            group.holds_slot = true;
            group.state = GroupState::Active;
            calls.push(self.batch(g));
            self.next_group += 1;
        }
    }

    /// When group `g`'s target may be called again by its failure record
    /// (0 for a target with none).
    pub(crate) fn group_retry_at(&self, g: usize) -> u64 {
        self.begun.start.failing.get(&self.groups[g].target).map_or(0, Failing::retry_at_ms)
    }

    /// Cuts group `g`'s next batch at the row, byte and effect limits,
    /// never splitting a row and always taking at least one. An endpoint
    /// gets one row per call unless it takes batches: each call is one
    /// signed request, one subrequest as the budget counts it.
    fn batch(&mut self, g: usize) -> TargetCall {
        let group = &self.groups[g];
        let single = group.target.endpoint().is_some_and(|e| !self.begun.start.batched_endpoints.contains(e));
        let batch_rows = if single { 1 } else { self.budget().batch_rows as usize };
        let (mut bytes, mut effects) = (0u32, 0u32);
        let mut end = group.next;
        while end < group.due_len && end - group.next < batch_rows {
            let row = &self.rows[group.rows[end] as usize];
            assert!(row.sendable, "row {} was read without its body but is being sent", row.seq);
            let row_bytes = row.bytes + BATCH_ROW_FRAMING_BYTES;
            let fits = bytes + row_bytes <= MAX_BATCH_BYTES && effects + row.effects <= MAX_BATCH_EFFECTS;
            if !fits {
                assert!(end > group.next, "row {} cannot fit an empty batch", row.seq);
                break;
            }
            bytes += row_bytes;
            effects += row.effects;
            end += 1;
        }
        let seqs = group.rows[group.next..end].iter().map(|&i| self.rows[i as usize].seq).collect();
        let target = group.target.clone();
        let group = &mut self.groups[g];
        group.calls += 1;
        group.in_flight = Some(end);
        TargetCall { group: g as u32, target, seqs, bytes }
    }

    /// Records how `call` ended.
    pub fn record(&mut self, call: &TargetCall, outcome: CallOutcome) {
        let g = call.group as usize;
        let end = self.groups[g].in_flight.take().expect("record of a call not in flight");
        assert!(self.in_flight > 0);
        self.in_flight -= 1;
        let last = *call.seqs.last().expect("calls are never empty");
        match outcome {
            CallOutcome::Applied { watermark, applied } if watermark >= last => {
                self.mark_delivered_through(g, watermark);
                self.groups[g].applied_once = true;
                debug_assert!(self.groups[g].next >= end);
                // A target's count, not ours: saturate rather than trust it.
                self.rows_applied = self.rows_applied.saturating_add(applied);
                if applied == 0 && self.groups[g].holds_slot {
                    // Duplicate-only: the call is spent, the slot is not.
                    self.groups[g].holds_slot = false;
                    self.slots_used -= 1;
                }
            }
            CallOutcome::Applied { watermark, .. } => {
                // A target must apply a whole batch or none of it.
                self.mark_delivered_through(g, watermark);
                let f = Failure::Permanent(format!(
                    "target answered watermark {watermark} for a batch ending at {last}"
                ));
                self.groups[g].state = self.failed_state(g, f);
            }
            CallOutcome::Failed(Failure::Interrupted(_)) if self.retry_at_once(g) => {
                // The group stays active: its next call re-sends the batch.
                self.groups[g].interrupted = true;
            }
            CallOutcome::Failed(f) => self.groups[g].state = self.failed_state(g, f),
            CallOutcome::Throttled { failure, retry_after_ms } => {
                self.groups[g].retry_after_ms = retry_after_ms.min(crate::limits::MAX_RETRY_AFTER_MS);
                self.groups[g].state = self.failed_state(g, failure);
            }
        }
    }

    /// Whether an interrupted call to group `g` is sent again at once: the
    /// first interruption in this fire, while the target's call budget
    /// lasts. A second one backs off like any failure.
    fn retry_at_once(&self, g: usize) -> bool {
        let group = &self.groups[g];
        !group.interrupted && group.calls < self.budget().calls_per_target
    }

    /// Blocked, or parked: at once for a permanent error, or when a
    /// failure of the target's own completes the policy's run of failed
    /// cycles (an interruption or an overload never parks it). A target
    /// that took a batch in this fire made progress: its run of failed
    /// cycles starts again at this one.
    fn failed_state(&self, g: usize, failure: Failure) -> GroupState {
        match failure {
            Failure::Permanent(m) => GroupState::Parked(format!("permanent error: {m}")),
            f @ (Failure::Interrupted(_) | Failure::Overloaded(_)) => GroupState::Failed(f),
            Failure::Transient(m) => {
                let cycles = self.failed_cycles(&self.groups[g]);
                match self.begun.start.policy.park_after_failed_cycles {
                    Some(n) if cycles >= n => {
                        GroupState::Parked(format!("failed {cycles} consecutive cycles; last error: {m}"))
                    }
                    _ => GroupState::Failed(Failure::Transient(m)),
                }
            }
        }
    }

    /// The consecutive failed cycles a failure of `group`'s in this fire
    /// makes: one more than its record's, or 1 when it took a batch in this
    /// fire first (the cycle made progress; a run of failures starts again).
    pub(crate) fn failed_cycles(&self, group: &Group) -> u32 {
        if group.applied_once {
            return 1;
        }
        let known = self.begun.start.failing.get(&group.target).map_or(0, |f| f.cycles);
        known.saturating_add(1)
    }

    /// Marks every row of group `g` with `seq <= watermark` delivered. The
    /// target's watermark may cover rows this fire never sent (a crash
    /// before cleanup, an overlapping fire); those are done too.
    fn mark_delivered_through(&mut self, g: usize, watermark: u64) {
        let group = &mut self.groups[g];
        while group.next < group.rows.len() {
            let i = group.rows[group.next] as usize;
            if self.rows[i].seq > watermark {
                break;
            }
            self.delivered[i] = true;
            group.next += 1;
        }
    }
}
