//! Routing a logical source's enqueues to its objects (see
//! [`crate::core::partition`] for the map, the hash and the gate,
//! [`crate::core::adoption`] for how objects take a new map and
//! [`crate::core::keys`] for keyed requests). One router, written once over
//! a [`Partitions`] sink: the front door, the RPC entrypoint and the Rust
//! client send to Durable Object stubs, the simulator to its sources, the
//! sequence explorer to its network of messages.
//!
//! An enqueue is routed in this order, and nothing is written before the
//! first step that writes:
//!
//! 1. the whole request is checked as a plain source checks it
//!    ([`check`], and [`unknown_endpoint`] when the sink knows the
//!    endpoints): a refusal names the row (by its index in the request, or
//!    its target) and writes nothing anywhere;
//! 2. with an idempotency key: while the map lists the plain layout, the
//!    plain object answers keys its own plain enqueues recorded; then the
//!    key's home records this attempt ([`Partitions::record_key`]): other
//!    content under the key is refused here; a retry first seals every
//!    object an earlier attempt may have sent rows to
//!    ([`Partitions::seal`]) and keeps the targets they took;
//! 3. the rest of the rows go out, one call per object, one chain of gated
//!    calls per moving target, concurrently.
//!
//! An object refuses a router whose map it has not activated; the router
//! then adopts its map at every object in two phases ([`adopt_all`]) and
//! tries again, once.
//!
//! An enqueue whose rows all route to one object is that object's atomic
//! enqueue. One whose rows span objects is atomic per object, not across
//! them: if one refuses (a full outbox), the others may have committed; the
//! failure names what committed ([`RouteFailure::committed`]), and a retry
//! with the same key completes the enqueue and answers what committed
//! before. Without a key such a retry would enqueue those rows again;
//! spanning enqueues should carry one.

#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]
#![deny(clippy::unreachable, clippy::todo, clippy::unimplemented)]

use std::collections::{BTreeMap, BTreeSet};

use futures::future::join_all;

use crate::core::{
    check, key_home, unknown_endpoint, EnqueueRefusal, EnqueueRow, Fence, KeyVerdict, Name, Part,
    PartitionMap, Taken, Ticket,
};
use crate::store::outbox::{Enqueued, RoutedKey, Sealed};
/// A routed enqueue's reply, at the path it had before the protocol crate
/// owned it.
pub use durable_relay_protocol::wire::{Position, RoutedEnqueue};

/// Where routed requests go: the objects of one logical source.
#[allow(async_fn_in_trait)]
pub trait Partitions {
    /// An object's refusal or failure.
    type Error: Clone;

    /// The endpoints the objects take rows for, when the router knows
    /// them: a row to any other is then refused before anything is sent,
    /// so a request spanning objects writes nothing. `None` leaves the
    /// check to each object, which refuses only its own share.
    fn endpoints(&self) -> Option<&std::collections::BTreeSet<String>> {
        None
    }

    /// Enqueues `rows` at `part` under `fence` (and, keyed, under attempt
    /// `key`); `Ok(None)` when a gated enqueue found the target moved.
    async fn enqueue(
        &self,
        part: Part,
        key: Option<RoutedKey<'_>>,
        rows: &[EnqueueRow],
        fence: Fence,
    ) -> Result<Option<Enqueued>, Self::Error>;

    /// At partition `home`, the home of `key`: records an attempt for
    /// content `digest` that may send rows to `reach`.
    async fn record_key(
        &self,
        home: u32,
        key: &str,
        digest: &str,
        reach: &[Part],
    ) -> Result<KeyVerdict, Self::Error>;

    /// Seals `key` at `part` for attempt `ticket`: answers what the object
    /// took for it, and refuses older attempts from then on.
    async fn seal(&self, part: Part, key: &str, digest: &str, ticket: Ticket) -> Result<Sealed, Self::Error>;

    /// At the plain object, under `fence`: the enqueue its plain enqueues
    /// recorded under `key`, as a duplicate, if any.
    async fn probe_plain(
        &self,
        key: &str,
        digest: &str,
        fence: Fence,
    ) -> Result<Option<Enqueued>, Self::Error>;

    /// The first phase of adoption at `part`; answers every object it knows
    /// the logical source has had.
    async fn prepare(&self, part: Part, map: &PartitionMap) -> Result<Vec<Part>, Self::Error>;

    /// The second phase of adoption at `part`.
    async fn activate(&self, part: Part, map: &PartitionMap) -> Result<(), Self::Error>;

    /// A refusal the router itself makes, as an object's error.
    fn refused(&self, refusal: EnqueueRefusal) -> Self::Error;

    /// Whether `error` is an object's `epoch_not_adopted`.
    fn unadopted(&self, error: &Self::Error) -> bool;

    /// The error for a direct enqueue answered "moved", which only a gated
    /// one may be: an object that does so is broken.
    fn moved_on_direct(&self, part: Part) -> Self::Error;
}

/// A routed enqueue that did not complete.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RouteFailure<E> {
    /// The first refusal or failure.
    pub error: E,
    /// Rows committed anyway (by this attempt or an earlier one of the
    /// same key), with their positions.
    pub committed: Vec<Position>,
}

impl<E> RouteFailure<E> {
    fn nothing(error: E) -> RouteFailure<E> {
        RouteFailure { error, committed: Vec::new() }
    }
}

/// One chain of object calls for some rows (request indices): offered to
/// each of `chain` in turn, gated but for the last, until one takes them.
#[derive(Clone, Debug)]
struct Call {
    chain: Vec<Part>,
    rows: Vec<usize>,
}

/// Plans the calls of an enqueue: one direct call per object, one gated
/// chain per moving target.
fn plan(map: &PartitionMap, rows: &[EnqueueRow]) -> Vec<Call> {
    let mut direct: BTreeMap<Part, Vec<usize>> = BTreeMap::new();
    let mut gated: BTreeMap<&Name, Call> = BTreeMap::new();
    for (i, row) in rows.iter().enumerate() {
        let route = map.route(&row.target);
        if route.gates.is_empty() {
            direct.entry(route.home).or_default().push(i);
        } else {
            gated.entry(&row.target).or_insert(Call { chain: route.chain(), rows: Vec::new() }).rows.push(i);
        }
    }
    let mut calls: Vec<Call> =
        direct.into_iter().map(|(part, rows)| Call { chain: vec![part], rows }).collect();
    calls.extend(gated.into_values());
    calls
}

/// Every object a plan may send rows to.
fn reach_of(calls: &[Call]) -> Vec<Part> {
    let all: BTreeSet<Part> = calls.iter().flat_map(|c| c.chain.iter().copied()).collect();
    all.into_iter().collect()
}

/// What the seals of a retry found.
#[derive(Default)]
struct Found {
    /// What earlier attempts of the key committed, by target: where, and
    /// which rows.
    by_target: BTreeMap<String, (Part, Taken)>,
    /// Each sealed object's queued and parked rows, for the reply's counts.
    counts: BTreeMap<Part, (u64, u64)>,
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
    if let Some(refusal) = sink.endpoints().and_then(|known| unknown_endpoint(rows, known)) {
        return Err(RouteFailure::nothing(sink.refused(refusal)));
    }
    let fence = Fence::of(map);
    let calls = plan(map, rows);
    let (routed, found) = match (key, checked.digest.as_deref()) {
        (Some(key), Some(digest)) => {
            if map.has_plain() {
                let probe = adopted(map, sink, || sink.probe_plain(key, digest, fence)).await;
                if let Some(done) = probe.map_err(RouteFailure::nothing)? {
                    return Ok(plain_duplicate(done));
                }
            }
            let (ticket, found) = attempt(sink, key, digest, &reach_of(&calls)).await?;
            (Some(RoutedKey { key, digest, ticket }), found)
        }
        _ => (None, Found::default()),
    };
    let calls = without_found(calls, rows, &found);
    let mut results = join_all(calls.iter().map(|call| run(sink, call, routed, rows, fence))).await;
    if results.iter().any(|r| r.as_ref().is_err_and(|e| sink.unadopted(e))) {
        let adoption = adopt_all(map, sink).await;
        for (call, result) in calls.iter().zip(results.iter_mut()) {
            if result.as_ref().is_err_and(|e| sink.unadopted(e)) {
                *result = match &adoption {
                    Ok(()) => run(sink, call, routed, rows, fence).await,
                    // The adoption's refusal explains this call's.
                    Err(e) => Err(e.clone()),
                };
            }
        }
    }
    merge(&calls, results, rows, &found)
}

/// Records this attempt at the key's home; a retry seals what earlier
/// attempts reached and answers what they committed.
async fn attempt<P: Partitions>(
    sink: &P,
    key: &str,
    digest: &str,
    reach: &[Part],
) -> Result<(Ticket, Found), RouteFailure<P::Error>> {
    let verdict = sink.record_key(key_home(key), key, digest, reach).await.map_err(RouteFailure::nothing)?;
    let (ticket, earlier) = match verdict {
        KeyVerdict::Fresh(ticket) => return Ok((ticket, Found::default())),
        KeyVerdict::Retry { ticket, reach } => (ticket, reach),
    };
    let seals = join_all(earlier.iter().map(|&p| sink.seal(p, key, digest, ticket))).await;
    let mut found = Found::default();
    let mut error = None;
    for (&part, sealed) in earlier.iter().zip(seals) {
        match sealed {
            Ok(s) => {
                found.counts.insert(part, (s.queued_rows, s.parked_rows));
                for (target, taken) in s.taken {
                    found.by_target.entry(target).or_insert((part, taken));
                }
            }
            Err(e) => error = error.or(Some(e)),
        }
    }
    match error {
        // What the seals found is committed; the rest waits for the next retry.
        Some(error) => Err(RouteFailure { error, committed: found_positions(&found) }),
        None => Ok((ticket, found)),
    }
}

fn found_positions(found: &Found) -> Vec<Position> {
    found
        .by_target
        .values()
        .flat_map(|(part, taken)| taken.seqs.iter().map(|&seq| Position { partition: *part, seq }))
        .collect()
}

/// The plain object's own record of the key, as the routed reply.
fn plain_duplicate(done: Enqueued) -> RoutedEnqueue {
    let positions = done.seqs.iter().map(|&seq| Position { partition: Part::Plain, seq }).collect();
    RoutedEnqueue {
        seqs: done.seqs,
        positions,
        duplicate: true,
        queued_rows: done.queued_rows,
        parked_rows: done.parked_rows,
        at_ms: done.at_ms,
        due_ms: done.due_ms,
    }
}

/// The calls left once the targets earlier attempts committed are taken out.
fn without_found(calls: Vec<Call>, rows: &[EnqueueRow], found: &Found) -> Vec<Call> {
    let left = |i: &usize| rows.get(*i).is_some_and(|r| !found.by_target.contains_key(r.target.as_str()));
    calls
        .into_iter()
        .map(|c| Call { rows: c.rows.into_iter().filter(left).collect(), chain: c.chain })
        .filter(|c| !c.rows.is_empty())
        .collect()
}

/// Runs `op`; when the object has not adopted the map, adopts it at every
/// object and runs it again, once.
async fn adopted<P: Partitions, T, F: std::future::Future<Output = Result<T, P::Error>>>(
    map: &PartitionMap,
    sink: &P,
    op: impl Fn() -> F,
) -> Result<T, P::Error> {
    match op().await {
        Err(e) if sink.unadopted(&e) => {
            adopt_all(map, sink).await?;
            op().await
        }
        other => other,
    }
}

/// Gathers the calls' results and what earlier attempts committed into the
/// reply, or the first failure with what committed.
fn merge<E>(
    calls: &[Call],
    results: Vec<Result<(Part, Enqueued), E>>,
    rows: &[EnqueueRow],
    found: &Found,
) -> Result<RoutedEnqueue, RouteFailure<E>> {
    let mut positions = vec![None; rows.len()];
    let mut due = vec![0u64; rows.len()];
    let (mut duplicate, mut queued_rows, mut parked_rows, mut at_ms) = (true, 0u64, 0u64, 0u64);
    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
    for (i, row) in rows.iter().enumerate() {
        let Some((part, taken)) = found.by_target.get(row.target.as_str()) else { continue };
        let k = seen.entry(row.target.as_str()).or_insert(0);
        if let (Some(slot), Some(&seq)) = (positions.get_mut(i), taken.seqs.get(*k)) {
            *slot = Some(Position { partition: *part, seq });
        }
        if let (Some(slot), Some(&d)) = (due.get_mut(i), taken.due_ms.get(*k)) {
            *slot = d;
        }
        at_ms = at_ms.max(taken.at_ms);
        *k += 1;
    }
    let mut error = None;
    let mut counted: BTreeSet<Part> = BTreeSet::new();
    for (call, result) in calls.iter().zip(results) {
        match result {
            Ok((part, done)) => {
                counted.insert(part);
                for (k, &i) in call.rows.iter().enumerate() {
                    if let (Some(slot), Some(&seq)) = (positions.get_mut(i), done.seqs.get(k)) {
                        *slot = Some(Position { partition: part, seq });
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
        return Err(RouteFailure { error, committed: positions.into_iter().flatten().collect() });
    }
    // An object that only answered a seal still counts in the reply's totals.
    for (part, (queued, parked)) in &found.counts {
        if !counted.contains(part) {
            queued_rows += queued;
            parked_rows += parked;
        }
    }
    let positions: Vec<Position> =
        positions.into_iter().map(|p| p.unwrap_or(Position { partition: Part::Plain, seq: 0 })).collect();
    let due_ms = if due.iter().any(|&d| d > 0) { due } else { Vec::new() };
    let seqs = positions.iter().map(|p| p.seq).collect();
    Ok(RoutedEnqueue { seqs, positions, duplicate, queued_rows, parked_rows, at_ms, due_ms })
}

/// Adopts `map` at every object that may hold rows, in two phases (see
/// [`crate::core::adoption`]): prepares it at the objects of its layouts,
/// at the plain object, and at every object those know the logical source
/// has had (a shrink must still ask the partitions past the new count, even
/// after a round that failed), then, once every one prepared it, activates
/// it at all of them. The first refusal is the error, and nothing is
/// activated.
pub async fn adopt_all<P: Partitions>(map: &PartitionMap, sink: &P) -> Result<(), P::Error> {
    let mut asked: BTreeSet<Part> = BTreeSet::new();
    let mut next: BTreeSet<Part> = map.parts().into_iter().chain([Part::Plain]).collect();
    let mut error = None;
    while !next.is_empty() {
        let round: Vec<Part> = std::mem::take(&mut next).into_iter().collect();
        asked.extend(round.iter().copied());
        let replies = join_all(round.iter().map(|&p| sink.prepare(p, map))).await;
        for reply in replies {
            match reply {
                Ok(known) => next.extend(known.into_iter().filter(|p| !asked.contains(p))),
                Err(e) => error = error.or(Some(e)),
            }
        }
    }
    if let Some(e) = error {
        return Err(e);
    }
    let activated = join_all(asked.iter().map(|&p| sink.activate(p, map))).await;
    activated.into_iter().collect::<Result<Vec<()>, _>>().map(|_| ())
}

/// Makes one planned call: offers its rows down its chain until an object
/// takes them. Returns the object that took them.
async fn run<P: Partitions>(
    sink: &P,
    call: &Call,
    key: Option<RoutedKey<'_>>,
    rows: &[EnqueueRow],
    fence: Fence,
) -> Result<(Part, Enqueued), P::Error> {
    let mine: Vec<EnqueueRow> = call.rows.iter().filter_map(|&i| rows.get(i).cloned()).collect();
    let last = call.chain.len().saturating_sub(1);
    for (step, &part) in call.chain.iter().enumerate() {
        let fence = Fence { gate: step < last, ..fence };
        if let Some(done) = sink.enqueue(part, key, &mine, fence).await? {
            return Ok((part, done));
        }
        if step == last {
            return Err(sink.moved_on_direct(part));
        }
    }
    Err(sink.moved_on_direct(call.chain.last().copied().unwrap_or(Part::Plain)))
}

/// The source object names of every object that may hold rows.
pub fn partition_names(logical: &Name, map: &PartitionMap) -> Vec<Name> {
    map.parts().into_iter().map(|p| p.object(logical)).collect()
}
