//! Routing a logical source's enqueues to its partitions (see
//! [`crate::core::partition`] for the map, the hash and the gate). One
//! router, written once over a [`Partitions`] sink: the front door and the
//! Rust client send to Durable Object stubs, the simulator to its sources.
//!
//! An enqueue whose rows all route to one partition is that partition's
//! atomic enqueue. One whose rows span partitions is split: each partition
//! takes its rows atomically, concurrently with the others, under the same
//! idempotency key. If one refuses, the others may have committed; the
//! failure names what committed ([`RouteFailure::committed`]), and a retry
//! with the same key completes the enqueue (committed partitions answer it
//! as a duplicate). Without a key such a retry would enqueue those rows
//! again; spanning enqueues should carry one.

use std::collections::BTreeMap;

use futures::future::join_all;
use serde::{Deserialize, Serialize};

use crate::core::{partition_name, EnqueueRow, Fence, Name, PartitionMap, Route};
use crate::store::outbox::Enqueued;

/// Where routed enqueues go.
#[allow(async_fn_in_trait)]
pub trait Partitions {
    /// A partition's refusal or failure.
    type Error;
    /// Enqueues `rows` at partition `index` (the source object
    /// `partition_name(logical, index)`) under `fence`; `Ok(None)` when a
    /// gated enqueue found the target moved.
    async fn enqueue(
        &self,
        index: u32,
        key: Option<&str>,
        rows: &[EnqueueRow],
        fence: Fence,
    ) -> Result<Option<Enqueued>, Self::Error>;

    /// The error for a direct enqueue answered "moved", which only a gated
    /// one may be: a partition that does so is broken.
    fn moved_on_direct(&self, index: u32) -> Self::Error;
}

/// Where one row went: its partition and its sequence there.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Position {
    /// The partition's index.
    pub partition: u32,
    /// The row's sequence in that partition.
    pub seq: u64,
}

/// What a routed enqueue did.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RoutedEnqueue {
    /// Each row's sequence in its partition, in request order (the
    /// `seqs` of an unpartitioned reply; `positions` says where).
    pub seqs: Vec<u64>,
    /// Each row's position, in request order.
    pub positions: Vec<Position>,
    /// Whether every partition answered a duplicate (nothing written).
    pub duplicate: bool,
    /// Rows waiting afterwards in the partitions this enqueue reached.
    pub queued_rows: u64,
    /// The latest commit time among the partitions, ms since the epoch.
    pub at_ms: u64,
    /// Each row's effective due time, in request order (empty when none is delayed).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub due_ms: Vec<u64>,
}

/// A routed enqueue that did not complete.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RouteFailure<E> {
    /// The first refusal or failure.
    pub error: E,
    /// Partitions that committed their rows anyway, with the positions.
    pub committed: Vec<Position>,
}

/// One partition call: its rows (request indices) and its fence.
struct Call {
    index: u32,
    rows: Vec<usize>,
    fence: Fence,
    /// For a gated call: the new home to go to when the target has moved.
    then: Option<u32>,
}

/// Plans the calls of an enqueue: one direct call per partition, one gated
/// call per moving target.
fn plan(map: &PartitionMap, rows: &[EnqueueRow]) -> Vec<Call> {
    let mut direct: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
    let mut gated: BTreeMap<&Name, (u32, u32, Vec<usize>)> = BTreeMap::new();
    for (i, row) in rows.iter().enumerate() {
        match map.route(&row.target) {
            Route::Direct(p) => direct.entry(p).or_default().push(i),
            Route::Gate { old, new } => gated.entry(&row.target).or_insert((old, new, Vec::new())).2.push(i),
        }
    }
    let fence = Fence { epoch: map.epoch, gate: false };
    let mut calls: Vec<Call> =
        direct.into_iter().map(|(index, rows)| Call { index, rows, fence, then: None }).collect();
    for (_, (old, new, rows)) in gated {
        calls.push(Call { index: old, rows, fence: Fence { gate: true, ..fence }, then: Some(new) });
    }
    calls
}

/// Routes one enqueue of `rows` (with an optional idempotency `key`) by
/// `map` to `sink`. See the module doc for what a spanning enqueue means.
pub async fn enqueue<P: Partitions>(
    map: &PartitionMap,
    sink: &P,
    key: Option<&str>,
    rows: &[EnqueueRow],
) -> Result<RoutedEnqueue, RouteFailure<P::Error>> {
    let calls = plan(map, rows);
    let results = join_all(calls.iter().map(|call| run(sink, call, key, rows))).await;
    let mut positions = vec![Position { partition: 0, seq: 0 }; rows.len()];
    let mut due = vec![0u64; rows.len()];
    let (mut duplicate, mut queued_rows, mut at_ms) = (true, 0u64, 0u64);
    let mut committed = Vec::new();
    let mut error = None;
    for (call, result) in calls.iter().zip(results) {
        match result {
            Ok((index, done)) => {
                for (k, &i) in call.rows.iter().enumerate() {
                    let p = Position { partition: index, seq: done.seqs.get(k).copied().unwrap_or(0) };
                    committed.push(p);
                    if let Some(slot) = positions.get_mut(i) {
                        *slot = p;
                    }
                    if let (Some(slot), Some(&d)) = (due.get_mut(i), done.due_ms.get(k)) {
                        *slot = d;
                    }
                }
                duplicate &= done.duplicate;
                queued_rows += done.queued_rows;
                at_ms = at_ms.max(done.at_ms);
            }
            Err(e) => error = error.or(Some(e)),
        }
    }
    if let Some(error) = error {
        return Err(RouteFailure { error, committed });
    }
    let due_ms = if due.iter().any(|&d| d > 0) { due } else { Vec::new() };
    let seqs = positions.iter().map(|p| p.seq).collect();
    Ok(RoutedEnqueue { seqs, positions, duplicate, queued_rows, at_ms, due_ms })
}

/// Makes one planned call (and, for a moved target, the call to its new
/// home). Returns the partition that took the rows.
async fn run<P: Partitions>(
    sink: &P,
    call: &Call,
    key: Option<&str>,
    rows: &[EnqueueRow],
) -> Result<(u32, Enqueued), P::Error> {
    let mine: Vec<EnqueueRow> = call.rows.iter().filter_map(|&i| rows.get(i).cloned()).collect();
    if let Some(done) = sink.enqueue(call.index, key, &mine, call.fence).await? {
        return Ok((call.index, done));
    }
    let new = call.then.unwrap_or(call.index);
    let fence = Fence { gate: false, ..call.fence };
    match sink.enqueue(new, key, &mine, fence).await? {
        Some(done) => Ok((new, done)),
        None => Err(sink.moved_on_direct(new)),
    }
}

/// The source object names of every partition that may hold rows.
pub fn partition_names(logical: &Name, map: &PartitionMap) -> Vec<Name> {
    (0..map.all_partitions()).map(|i| partition_name(logical, i)).collect()
}
