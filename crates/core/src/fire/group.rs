//! A fire's groups: one per target in the window, in first-sequence order,
//! each with where it stands in the fire.

use crate::fire::Failure;
use crate::name::Name;
use crate::row::QueuedRow;
use crate::scan::ScanState;

/// Where a group stands in this fire.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum GroupState {
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
pub(crate) struct Group {
    /// The target partition.
    pub(crate) target: Name,
    /// Indices into `Fire::rows`, ascending.
    pub(crate) rows: Vec<u32>,
    /// Current state.
    pub(crate) state: GroupState,
    /// Position in `rows` of the first row not known to be delivered.
    /// Invariant: every row before it is delivered.
    pub(crate) next: usize,
    /// Calls made to this target in this fire.
    /// Invariant: `calls <= budget.calls_per_target`.
    pub(crate) calls: u32,
    /// Whether the group currently holds one of the fire's target slots.
    pub(crate) holds_slot: bool,
    /// The batch in flight, as an end position in `rows`.
    pub(crate) in_flight: Option<usize>,
    /// Whether a call to it succeeded in this fire.
    pub(crate) applied_once: bool,
}

pub(crate) fn group_rows(rows: &[QueuedRow], scan: &ScanState) -> (Vec<Group>, Vec<u32>) {
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
