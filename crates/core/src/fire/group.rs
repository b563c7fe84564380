//! A fire's groups: one per target in the window, in first-sequence order,
//! each with where it stands in the fire.

use std::collections::BTreeMap;

use crate::fire::retry::{standing, Failing, Standing};
use crate::fire::Failure;
use crate::name::Name;
use crate::row::QueuedRow;
use crate::scan::ScanState;

/// Where a group stands in this fire.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum GroupState {
    /// Failing and not retried this cycle (see [`crate::fire::retry`]):
    /// skipped, and its rows passed over.
    Blocked,
    /// Its first row in the window is held by a delay this cycle (see
    /// [`crate::delay`]): skipped, and so are its later rows.
    Held,
    /// Not selected (yet).
    Waiting,
    /// Failing and due for a retry, met after this fire's retries were
    /// spent while one of them may still answer (see
    /// [`crate::fire::retry`]): not called, and the cursor stops before its
    /// first row, so the next fire decides.
    Deferred,
    /// Selected; more calls may follow.
    Active,
    /// A call to it failed: its record (written with the checkpoint) has it
    /// passed over until its back-off ends.
    Failed(Failure),
    /// A call to it failed for good (or once too often): all its queued
    /// rows move to the parked list. Carries the reason.
    Parked(String),
}

/// One target's rows in the window.
#[derive(Clone, Debug)]
pub(crate) struct Group {
    /// The target: the name of the Durable Object the row is delivered to.
    pub(crate) target: Name,
    /// Indices into `Fire::rows`, ascending.
    pub(crate) rows: Vec<u32>,
    /// How many of `rows` are due this cycle: a prefix, since a target's
    /// due times never decrease; the rest are held and never sent.
    /// Invariant: `due_len <= rows.len()`.
    pub(crate) due_len: usize,
    /// Current state.
    pub(crate) state: GroupState,
    /// Position in `rows` of the first row not known to be delivered.
    /// Invariant: every row before it is delivered.
    pub(crate) next: usize,
    /// Calls made to this target in this fire.
    /// Invariant: `calls <= budget.calls_per_target`.
    pub(crate) calls: u32,
    /// Whether a call to it was interrupted in this fire (and sent again at
    /// once); a second interruption backs off.
    pub(crate) interrupted: bool,
    /// Whether the group currently holds one of the fire's target slots.
    pub(crate) holds_slot: bool,
    /// The batch in flight, as an end position in `rows`.
    pub(crate) in_flight: Option<usize>,
    /// Whether a call to it succeeded in this fire: the target holds every
    /// row the call carried (an interrupted call sent again is not one).
    pub(crate) applied_once: bool,
    /// Whether it is a failing target due for a retry: selected only while
    /// the cycle has retries left.
    pub(crate) retry: bool,
    /// How long the target asked not to be called after its failure in
    /// this fire, ms (0: it did not ask). Invariant: at most
    /// [`MAX_RETRY_AFTER_MS`](crate::limits::MAX_RETRY_AFTER_MS).
    pub(crate) retry_after_ms: u64,
}

pub(crate) fn group_rows(
    rows: &[QueuedRow],
    scan: &ScanState,
    failing: &BTreeMap<Name, Failing>,
) -> (Vec<Group>, Vec<u32>) {
    let mut groups: Vec<Group> = Vec::new();
    let mut index = std::collections::HashMap::new();
    let mut row_group = Vec::with_capacity(rows.len());
    for (i, row) in rows.iter().enumerate() {
        let g = *index.entry(row.target.clone()).or_insert_with(|| {
            let standing = standing(scan, failing, &row.target);
            let state = if standing == Standing::Passed {
                GroupState::Blocked
            } else if !scan.is_due(row.due_ms) {
                GroupState::Held
            } else {
                GroupState::Waiting
            };
            groups.push(Group {
                target: row.target.clone(),
                rows: Vec::new(),
                due_len: 0,
                state,
                next: 0,
                calls: 0,
                interrupted: false,
                holds_slot: false,
                in_flight: None,
                applied_once: false,
                retry: standing == Standing::Retry,
                retry_after_ms: 0,
            });
            groups.len() - 1
        });
        let group = &mut groups[g];
        if group.due_len == group.rows.len() && scan.is_due(row.due_ms) {
            group.due_len += 1;
        }
        group.rows.push(i as u32);
        row_group.push(g as u32);
    }
    (groups, row_group)
}
