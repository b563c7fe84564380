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
//! Rows are grouped by target in first-sequence order. Blocked targets are
//! skipped. A group needs a target slot to apply; reaching the target budget
//! pauses the cursor before the next group without blocking it. A group
//! whose call turns out to be duplicate-only gives its slot back.

use std::collections::BTreeMap;

use crate::limits::{
    BudgetError, RelayBudget, BATCH_ROW_FRAMING_BYTES, MAX_BATCH_BYTES, MAX_BATCH_EFFECTS, MAX_FIRE_BYTES,
};
use crate::name::Name;
use crate::row::{CorruptRow, QueuedRow, StoredRow};
use crate::scan::{CorruptScan, ScanState};

/// What the shell read before a fire, and the fire's limits.
#[derive(Clone, Debug)]
pub struct FireStart {
    /// This source's name; sent to targets so they key their watermark.
    pub source: Name,
    /// The source's last allocated sequence, as read.
    pub os: u64,
    /// The stored `rs` text exactly as read (`None` if absent). The
    /// checkpoint is guarded on it.
    pub rs_text: Option<String>,
    /// Clock reading for lag checks, ms since the epoch.
    pub now_ms: u64,
    /// Per-fire limits.
    pub budget: RelayBudget,
    /// Target calls the enclosing alarm still allows.
    pub calls_left: u32,
    /// When to park a failing target.
    pub policy: RelayPolicy,
    /// Consecutive failed cycles so far, for targets with at least one.
    pub failing: BTreeMap<Name, u32>,
}

/// What the relay does with targets that keep failing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RelayPolicy {
    /// Park a target after this many consecutive cycles in which its
    /// delivery failed. `None` (the default) retries every cycle forever,
    /// as the relay always did. A permanent error parks a target at once either way.
    pub park_after_failed_cycles: Option<u32>,
}

/// The effective scan state for a fire and the rows it should read.
#[derive(Clone, Debug)]
pub struct Begun {
    /// What the shell read.
    pub start: FireStart,
    /// The cycle this fire continues or starts.
    pub scan: ScanState,
    /// Whether this fire starts a new cycle.
    pub new_cycle: bool,
    /// Set when the stored `rs` did not decode; the fire restarts the cycle.
    pub corrupt_rs: Option<CorruptScan>,
    /// Which rows to read.
    pub window: WindowQuery,
}

impl Begun {
    /// Most target calls this fire may make.
    pub fn calls_cap(&self) -> u32 {
        self.start.budget.calls_per_fire().min(self.start.calls_left)
    }

    /// Of window rows given as `(seq, target)` ascending, the last one whose
    /// body this fire needs: a row of one of the first [`calls_cap`] distinct
    /// targets that are not blocked. No other row can be sent by this fire
    /// (selection is in first-sequence order and costs a call), so a shell
    /// may read the rows after it without their bodies.
    ///
    /// [`calls_cap`]: Begun::calls_cap
    pub fn bodies_through<'a>(&self, rows: impl Iterator<Item = (u64, &'a str)>) -> Option<u64> {
        let cap = self.calls_cap() as usize;
        let mut selectable: Vec<&str> = Vec::new();
        let mut last = None;
        for (seq, target) in rows {
            if selectable.contains(&target) {
                last = Some(seq);
                continue;
            }
            let blocked = Name::new(target).is_ok_and(|n| self.scan.is_blocked(&n));
            if !blocked && selectable.len() < cap {
                selectable.push(target);
                last = Some(seq);
            }
        }
        last
    }
}

/// Starts a fire: decides the cycle and the window to read. A budget
/// outside its ranges (a caller's configuration) is refused, not trusted.
pub fn begin(start: FireStart) -> Result<Begun, BudgetError> {
    start.budget.validate()?;
    let (stored, corrupt_rs) = match start.rs_text.as_deref().map(ScanState::decode) {
        None => (None, None),
        Some(Ok(scan)) => (Some(scan), None),
        Some(Err(e)) => (None, Some(e)),
    };
    let (scan, new_cycle) = match stored {
        Some(scan) if !scan.is_complete() => (scan, false),
        previous => (ScanState::new_cycle(start.os, previous.as_ref()), true),
    };
    assert!(scan.cycle_end <= start.os, "rs cycle_end {} is past os {}", scan.cycle_end, start.os);
    let window = WindowQuery {
        after: scan.cursor,
        through: scan.cycle_end,
        rows_max: start.budget.window_rows(),
        bytes_max: MAX_FIRE_BYTES,
    };
    Ok(Begun { start, scan, new_cycle, corrupt_rs, window })
}

/// The slice of the outbox one fire reads: rows with
/// `after < seq <= through`, ascending, bounded in count and bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WindowQuery {
    /// Exclusive lower bound: the cursor.
    pub after: u64,
    /// Inclusive upper bound: the cycle end.
    pub through: u64,
    /// Most rows to inspect.
    pub rows_max: u32,
    /// Most body bytes to read (the first row is always read).
    pub bytes_max: u32,
}

impl WindowQuery {
    /// How many size entries a shell should read: one past `rows_max`, so
    /// that [`take`](Self::take) can tell whether the window is exhausted.
    pub fn probe_rows(&self) -> u32 {
        self.rows_max.saturating_add(1)
    }

    /// Given `(seq, bytes)` of the first [`probe_rows`](Self::probe_rows)
    /// rows in range (ascending), how many to read and whether they are
    /// all the rows left in the range.
    pub fn take(&self, sizes: &[(u64, u32)]) -> (usize, bool) {
        let mut total: u64 = 0;
        for (i, (seq, bytes)) in sizes.iter().enumerate() {
            assert!(*seq > self.after && *seq <= self.through, "row {seq} outside the window");
            if i > 0 {
                assert!(sizes[i - 1].0 < *seq, "window sizes are not ascending");
            }
            if i == self.rows_max as usize {
                return (i, false);
            }
            if i > 0 && total + u64::from(*bytes) > u64::from(self.bytes_max) {
                return (i, false);
            }
            total += u64::from(*bytes);
        }
        (sizes.len(), true)
    }
}

/// How a target call ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CallOutcome {
    /// The target holds every row through `watermark` for this source;
    /// `applied` of the sent rows were new to it.
    Applied {
        /// The target's watermark for this source after the call.
        watermark: u64,
        /// Rows the call applied (the rest were duplicates).
        applied: u32,
    },
    /// The call failed; nothing can be assumed about the target.
    Failed(Failure),
}

/// Why a target call failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Failure {
    /// Network, overload, a thrown exception: worth retrying.
    Transient(String),
    /// The target rejected the batch as invalid: retrying will not help.
    Permanent(String),
}

impl Failure {
    /// The message carried by either kind.
    pub fn message(&self) -> &str {
        match self {
            Failure::Transient(m) | Failure::Permanent(m) => m,
        }
    }
}

/// One call to one target: a batch of that target's rows, ascending.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TargetCall {
    /// Which group (target) this is, for [`Fire::record`].
    pub group: u32,
    /// The target partition.
    pub target: Name,
    /// Sequences in the batch, ascending.
    pub seqs: Vec<u64>,
    /// Body bytes plus framing in the batch.
    pub bytes: u32,
}

/// Where a group stands in this fire.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum GroupState {
    /// Blocked by an earlier failure this cycle: skipped.
    Blocked,
    /// Not selected (yet).
    Waiting,
    /// Selected; more calls may follow.
    Active,
    /// A call to it failed; it joins `blocked`.
    Failed(Failure),
    /// A call to it failed for good (or once too often): all its queued
    /// rows move to the parked list. Carries the reason.
    Parked(String),
}

/// One target's rows in the window.
#[derive(Clone, Debug)]
pub(super) struct Group {
    /// The target partition.
    pub(super) target: Name,
    /// Indices into `Fire::rows`, ascending.
    pub(super) rows: Vec<u32>,
    /// Current state.
    pub(super) state: GroupState,
    /// Position in `rows` of the first row not known to be delivered.
    /// Invariant: every row before it is delivered.
    pub(super) next: usize,
    /// Calls made to this target in this fire.
    /// Invariant: `calls <= budget.calls_per_target`.
    pub(super) calls: u32,
    /// Whether the group currently holds one of the fire's target slots.
    pub(super) holds_slot: bool,
    /// The batch in flight, as an end position in `rows`.
    pub(super) in_flight: Option<usize>,
    /// Whether a call to it succeeded in this fire.
    pub(super) applied_once: bool,
}

/// One fire in progress.
#[derive(Debug)]
pub struct Fire {
    pub(super) begun: Begun,
    /// The decodable prefix of the window, ascending by sequence.
    pub(super) rows: Vec<QueuedRow>,
    /// The first row that did not decode, which stops the fire.
    pub(super) corrupt: Option<(u64, CorruptRow)>,
    /// Whether `rows` (plus `corrupt`) are all that remain up to the cycle end.
    pub(super) exhausted: bool,
    /// Groups in first-sequence order.
    pub(super) groups: Vec<Group>,
    /// Group index of each row.
    pub(super) row_group: Vec<u32>,
    /// Delivery status of each row. Invariant: once true, stays true.
    pub(super) delivered: Vec<bool>,
    /// The next group that selection will consider.
    pub(super) next_group: usize,
    /// Target slots in use. Invariant: `slots_used <= targets_per_fire`.
    pub(super) slots_used: u32,
    /// Calls handed out. Invariant: `calls_made <= calls_cap`.
    pub(super) calls_made: u32,
    /// Most calls this fire may make.
    pub(super) calls_cap: u32,
    /// Rows that targets reported as newly applied.
    pub(super) rows_applied: u32,
    /// Calls in flight.
    pub(super) in_flight: u32,
}

impl Fire {
    /// Builds a fire over the rows the shell read for `begun.window`.
    /// `exhausted` comes from [`WindowQuery::take`].
    ///
    /// Rows after [`Begun::bodies_through`] may come without bodies: this
    /// fire can never send them (their targets are blocked, or past the
    /// first `calls_cap` distinct targets), so it only checks their target.
    pub fn new(begun: Begun, stored: &[StoredRow], exhausted: bool) -> Fire {
        let through = begun.bodies_through(stored.iter().map(|r| (r.seq, r.target.as_str())));
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
        let (groups, row_group) = group_rows(&rows, &begun.scan);
        let calls_cap = begun.calls_cap();
        let delivered = vec![false; rows.len()];
        Fire {
            begun,
            rows,
            corrupt,
            exhausted,
            groups,
            row_group,
            delivered,
            next_group: 0,
            slots_used: 0,
            calls_made: 0,
            calls_cap,
            rows_applied: 0,
            in_flight: 0,
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
            if group.state != GroupState::Active || group.next == group.rows.len() {
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
                GroupState::Blocked => {
                    self.next_group += 1;
                    continue;
                }
                GroupState::Waiting => {}
                ref other => panic!("unselected group in state {other:?}"),
            }
            if self.slots_used >= self.budget().targets_per_fire || !self.has_call_budget(calls.len()) {
                return;
            }
            self.slots_used += 1;
            let group = &mut self.groups[g];
            group.holds_slot = true;
            group.state = GroupState::Active;
            calls.push(self.batch(g));
            self.next_group += 1;
        }
    }

    /// Cuts group `g`'s next batch at the row, byte and effect limits,
    /// never splitting a row and always taking at least one.
    fn batch(&mut self, g: usize) -> TargetCall {
        let batch_rows = self.budget().batch_rows as usize;
        let group = &self.groups[g];
        let (mut bytes, mut effects) = (0u32, 0u32);
        let mut end = group.next;
        while end < group.rows.len() && end - group.next < batch_rows {
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
            CallOutcome::Failed(f) => self.groups[g].state = self.failed_state(g, f),
        }
        if self.groups[g].calls > 0 && matches!(self.groups[g].state, GroupState::Active) {
            self.groups[g].applied_once = true;
        }
    }

    /// Blocked, or parked: at once for a permanent error, or when this
    /// failure completes the policy's run of failed cycles.
    fn failed_state(&self, g: usize, failure: Failure) -> GroupState {
        let target = &self.groups[g].target;
        match failure {
            Failure::Permanent(m) => GroupState::Parked(format!("permanent error: {m}")),
            Failure::Transient(m) => {
                let cycles = self.begun.start.failing.get(target).copied().unwrap_or(0) + 1;
                match self.begun.start.policy.park_after_failed_cycles {
                    Some(n) if cycles >= n => {
                        GroupState::Parked(format!("failed {cycles} consecutive cycles; last error: {m}"))
                    }
                    _ => GroupState::Failed(Failure::Transient(m)),
                }
            }
        }
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

fn group_rows(rows: &[QueuedRow], scan: &ScanState) -> (Vec<Group>, Vec<u32>) {
    let mut groups: Vec<Group> = Vec::new();
    let mut index = std::collections::HashMap::new();
    let mut row_group = Vec::with_capacity(rows.len());
    for (i, row) in rows.iter().enumerate() {
        let g = *index.entry(row.target.clone()).or_insert_with(|| {
            let state = if scan.is_blocked(&row.target) { GroupState::Blocked } else { GroupState::Waiting };
            groups.push(Group {
                target: row.target.clone(),
                rows: Vec::new(),
                state,
                next: 0,
                calls: 0,
                holds_slot: false,
                in_flight: None,
                applied_once: false,
            });
            groups.len() - 1
        });
        groups[g].rows.push(i as u32);
        row_group.push(g as u32);
    }
    (groups, row_group)
}
