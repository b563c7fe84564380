//! Routing a logical source's enqueues to its partitions (see
//! [`crate::core::partition`] for the map, the hash and the gate). One
//! router, written once over a [`Partitions`] sink: the front door, the RPC
//! entrypoint and the Rust client send to Durable Object stubs, the
//! simulator to its sources.
//!
//! An enqueue is routed in this order, and nothing is written before the
//! first step that writes:
//!
//! 1. the whole request is checked as a plain source checks it
//!    ([`check`]): a refusal names the row by its index in the request and
//!    writes nothing anywhere;
//! 2. with an idempotency key, the key's home partition records which
//!    content the key names (older layouts' homes are consulted first
//!    while a resize settles): a key reused for other content is refused
//!    here, before any partition writes a row;
//! 3. the rows go out, one call per partition, one chain of gated calls
//!    per moving target, concurrently.
//!
//! A partition refuses a router whose map it has not adopted; the router
//! then adopts its map at every partition ([`adopt_all`]), each of which
//! refuses it if a router running it could no longer reach rows it holds,
//! and tries again.
//!
//! An enqueue whose rows all route to one partition is that partition's
//! atomic enqueue. One whose rows span partitions is atomic per partition,
//! not across them: if one partition refuses (a full outbox), the others
//! may have committed; the failure names what committed
//! ([`RouteFailure::committed`]), and a retry with the same key completes
//! the enqueue (committed partitions answer it as a duplicate). Without a
//! key such a retry would enqueue those rows again; spanning enqueues
//! should carry one.

#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]
#![deny(clippy::unreachable, clippy::todo, clippy::unimplemented)]

use std::collections::{BTreeMap, BTreeSet};

use futures::future::join_all;
use serde::{Deserialize, Serialize};

use crate::core::{check, partition_name, EnqueueRefusal, EnqueueRow, Fence, Name, PartitionMap};
use crate::store::outbox::Enqueued;

/// Where routed enqueues go.
#[allow(async_fn_in_trait)]
pub trait Partitions {
    /// A partition's refusal or failure.
    type Error: Clone;
    /// Enqueues `rows` at partition `index` (the source object
    /// `partition_name(logical, index)`) under `fence`; `Ok(None)` when a
    /// gated enqueue found the target moved.
    /// `call` is the moving target whose chain this call belongs to
    /// (`None` for the rows homed at `index`): a partition records a key
    /// per call, since one request may reach it in more than one.
    async fn enqueue(
        &self,
        index: u32,
        key: Option<&str>,
        call: Option<&Name>,
        rows: &[EnqueueRow],
        fence: Fence,
    ) -> Result<Option<Enqueued>, Self::Error>;

    /// As the home of idempotency `key` (or, with `probe`, an older home
    /// consulted): records that the key names content `digest`; refuses
    /// with `idempotency_conflict` when it names other content.
    async fn claim(
        &self,
        index: u32,
        key: &str,
        digest: &str,
        probe: bool,
        fence: Fence,
    ) -> Result<(), Self::Error>;

    /// Adopts `map` at partition `index`; answers the map it adopted
    /// before, if any.
    async fn adopt(&self, index: u32, map: &PartitionMap) -> Result<Option<PartitionMap>, Self::Error>;

    /// A refusal the router itself makes, as a partition's error.
    fn refused(&self, refusal: EnqueueRefusal) -> Self::Error;

    /// Whether `error` is a partition's `epoch_not_adopted`.
    fn unadopted(&self, error: &Self::Error) -> bool;

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
    /// Rows in the outboxes of the partitions this enqueue reached, afterwards.
    pub queued_rows: u64,
    /// Rows parked at the partitions this enqueue reached, afterwards.
    #[serde(default)]
    pub parked_rows: u64,
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

impl<E> RouteFailure<E> {
    fn nothing(error: E) -> RouteFailure<E> {
        RouteFailure { error, committed: Vec::new() }
    }
}

/// One chain of partition calls for some rows (request indices): offered
/// to each of `chain` in turn, gated but for the last, until one takes them.
struct Call {
    chain: Vec<u32>,
    rows: Vec<usize>,
    /// The moving target a gated chain carries (`None`: rows homed at the
    /// one partition of the chain).
    moving: Option<Name>,
}

/// Plans the calls of an enqueue: one direct call per partition, one gated
/// chain per moving target.
fn plan(map: &PartitionMap, rows: &[EnqueueRow]) -> Vec<Call> {
    let mut direct: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
    let mut gated: BTreeMap<&Name, Call> = BTreeMap::new();
    for (i, row) in rows.iter().enumerate() {
        let route = map.route(&row.target);
        if route.gates.is_empty() {
            direct.entry(route.home).or_default().push(i);
        } else {
            let chain = route.gates.iter().copied().chain([route.home]).collect();
            let moving = Some(row.target.clone());
            gated.entry(&row.target).or_insert(Call { chain, rows: Vec::new(), moving }).rows.push(i);
        }
    }
    let mut calls: Vec<Call> =
        direct.into_iter().map(|(index, rows)| Call { chain: vec![index], rows, moving: None }).collect();
    calls.extend(gated.into_values());
    calls
}

/// Routes one enqueue of `rows` (with an optional idempotency `key`) by
/// `map` to `sink`, at `now_ms` (for the delays' check). See the module doc.
pub async fn enqueue<P: Partitions>(
    map: &PartitionMap,
    sink: &P,
    key: Option<&str>,
    rows: &[EnqueueRow],
    now_ms: u64,
) -> Result<RoutedEnqueue, RouteFailure<P::Error>> {
    let checked = check(rows, key, now_ms).map_err(|r| RouteFailure::nothing(sink.refused(r)))?;
    let fence = Fence::of(map);
    if let (Some(key), Some(digest)) = (key, checked.digest.as_deref()) {
        let claimed = match claim_key(map, sink, key, digest, fence).await {
            Err(e) if sink.unadopted(&e) => match adopt_all(map, sink).await {
                Ok(()) => claim_key(map, sink, key, digest, fence).await,
                Err(e) => Err(e),
            },
            other => other,
        };
        claimed.map_err(RouteFailure::nothing)?;
    }
    let calls = plan(map, rows);
    let mut results = join_all(calls.iter().map(|call| run(sink, call, key, rows, fence))).await;
    if results.iter().any(|r| r.as_ref().is_err_and(|e| sink.unadopted(e))) {
        let adopted = adopt_all(map, sink).await;
        for (call, result) in calls.iter().zip(results.iter_mut()) {
            if result.as_ref().is_err_and(|e| sink.unadopted(e)) {
                *result = match &adopted {
                    Ok(()) => run(sink, call, key, rows, fence).await,
                    // The adoption's refusal explains this call's.
                    Err(e) => Err(e.clone()),
                };
            }
        }
    }
    merge(&calls, results, rows.len())
}

/// Gathers the calls' results into the reply, or the first failure with
/// what committed.
fn merge<E>(
    calls: &[Call],
    results: Vec<Result<(u32, Enqueued), E>>,
    rows: usize,
) -> Result<RoutedEnqueue, RouteFailure<E>> {
    let mut positions = vec![Position { partition: 0, seq: 0 }; rows];
    let mut due = vec![0u64; rows];
    let (mut duplicate, mut queued_rows, mut parked_rows, mut at_ms) = (true, 0u64, 0u64, 0u64);
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
                parked_rows += done.parked_rows;
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
    Ok(RoutedEnqueue { seqs, positions, duplicate, queued_rows, parked_rows, at_ms, due_ms })
}

/// Records `key` at its home, after consulting its older homes.
async fn claim_key<P: Partitions>(
    map: &PartitionMap,
    sink: &P,
    key: &str,
    digest: &str,
    fence: Fence,
) -> Result<(), P::Error> {
    let route = map.key_route(key);
    for old in route.gates {
        sink.claim(old, key, digest, true, fence).await?;
    }
    sink.claim(route.home, key, digest, false, fence).await
}

/// Adopts `map` at every partition that may hold rows: those of its
/// layouts, and those of the layouts the partitions adopted before (a
/// shrink that dropped `from` too early must still ask the partitions past
/// the new count). The first refusal is the error.
pub async fn adopt_all<P: Partitions>(map: &PartitionMap, sink: &P) -> Result<(), P::Error> {
    let mut asked: BTreeSet<u32> = BTreeSet::new();
    let mut next: BTreeSet<u32> = (0..map.all_partitions()).collect();
    let mut error = None;
    while !next.is_empty() {
        let round: Vec<u32> = std::mem::take(&mut next).into_iter().collect();
        asked.extend(round.iter().copied());
        let replies = join_all(round.iter().map(|&i| sink.adopt(i, map))).await;
        for reply in replies {
            match reply {
                Ok(Some(before)) => {
                    next.extend((0..before.all_partitions()).filter(|i| !asked.contains(i)));
                }
                Ok(None) => {}
                Err(e) => error = error.or(Some(e)),
            }
        }
    }
    error.map_or(Ok(()), Err)
}

/// Makes one planned call: offers its rows down its chain until a partition
/// takes them. Returns the partition that took them.
async fn run<P: Partitions>(
    sink: &P,
    call: &Call,
    key: Option<&str>,
    rows: &[EnqueueRow],
    fence: Fence,
) -> Result<(u32, Enqueued), P::Error> {
    let mine: Vec<EnqueueRow> = call.rows.iter().filter_map(|&i| rows.get(i).cloned()).collect();
    let last = call.chain.len().saturating_sub(1);
    for (step, &index) in call.chain.iter().enumerate() {
        let fence = Fence { gate: step < last, ..fence };
        if let Some(done) = sink.enqueue(index, key, call.moving.as_ref(), &mine, fence).await? {
            return Ok((index, done));
        }
        if step == last {
            return Err(sink.moved_on_direct(index));
        }
    }
    Err(sink.moved_on_direct(call.chain.last().copied().unwrap_or(0)))
}

/// The source object names of every partition that may hold rows.
pub fn partition_names(logical: &Name, map: &PartitionMap) -> Vec<Name> {
    (0..map.all_partitions()).map(|i| partition_name(logical, i)).collect()
}
