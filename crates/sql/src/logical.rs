//! A partitioned logical source read and acted on as one source, written
//! once over an [`Objects`] sink: its status, watermark and parked targets
//! gathered from every object that may hold its rows ([`objects`]), and
//! redrive, discard and rearm done at each, the replies merged; a
//! target's queued rows read where they are ([`queued`]). The
//! library's `PartitionedClient` (and through it the reference Worker's
//! front door) reaches the objects through Durable Object stubs, the
//! simulator through its sources. The replies are the protocol's
//! ([`durable_relay_protocol::wire::logical`]).
//!
//! A read asks the objects of every layout its map lists, and the plain
//! object (the one named after the logical source) even when no layout is
//! plain. A source that was plain keeps its rows there until they leave,
//! and a map that drops the plain layout while rows (queued, parked or
//! delayed) or keys wait there is refused to every enqueue
//! (`unsettled_layout`: adoption asks the plain object, which refuses it),
//! so the rows stay put; a read that skipped the object would report a
//! source with rows waiting as empty, and no redrive or discard would reach
//! them. Once the plain object has taken a map without the plain layout it
//! holds nothing and takes nothing more, but a read cannot tell that from
//! the other objects' replies (none carries the map an object adopted), so
//! it asks the plain object itself, at once with the others: one call more
//! per object-wide read (two for a status while a change settles), no
//! longer wait. An empty plain object adds nothing to the merge: its
//! watermark is its clock, its pages are empty, its actions move no row,
//! and the status lists it only while it holds something ([`status`]).

#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]
#![deny(clippy::unreachable, clippy::todo, clippy::unimplemented)]

use futures::future::join_all;

use crate::core::{json_bytes, Layout, Name, PageBuilder, Part, PartitionMap};
use durable_relay_protocol::wire::{
    ActionOutcome, LogicalStatus, LogicalTargetPage, PartitionStatus, PartitionTarget, QueuedPage, Rearmed,
    Settling, SourceStatus, TargetPage, Totals,
};

#[cfg(test)]
mod tests;

/// The reads and actions a logical read makes at one object of its logical
/// source, each one call to that object.
#[allow(async_fn_in_trait)]
pub trait Objects {
    /// An object's refusal or failure.
    type Error;

    /// Object `part`'s own status.
    async fn status(&self, part: Part) -> Result<SourceStatus, Self::Error>;

    /// What keeps object `part` from settling, the source being routed by
    /// `layout` now.
    async fn settling(&self, part: Part, layout: Layout) -> Result<Settling, Self::Error>;

    /// Object `part`'s commit-time lower bound of the rows it owes, ms.
    async fn relay_watermark(&self, part: Part) -> Result<u64, Self::Error>;

    /// A page of object `part`'s parked and failing targets after `after`.
    async fn targets(&self, part: Part, after: Option<&Name>, limit: u32) -> Result<TargetPage, Self::Error>;

    /// Puts `target`'s parked rows back at object `part`.
    async fn redrive(&self, part: Part, target: &Name) -> Result<ActionOutcome, Self::Error>;

    /// Drops `target`'s parked rows at object `part`.
    async fn discard(&self, part: Part, target: &Name) -> Result<ActionOutcome, Self::Error>;

    /// Re-arms object `part` if it holds rows and no alarm.
    async fn rearm(&self, part: Part) -> Result<Rearmed, Self::Error>;

    /// A page of the rows still queued for `target` at object `part`.
    async fn queued(
        &self,
        part: Part,
        target: &Name,
        after: u64,
        limit: u32,
    ) -> Result<QueuedPage, Self::Error>;
}

/// Every object a logical read asks: the plain object first, whether the
/// map lists it or not (see the module doc), then the partitions of the
/// map's layouts in index order.
pub fn objects(map: &PartitionMap) -> Vec<Part> {
    let mut parts = map.parts();
    if !map.has_plain() {
        parts.insert(0, Part::Plain);
    }
    parts
}

/// Whether an object holds anything a map must keep reaching: queued or
/// parked rows (delayed rows are queued), or, by its `settling`, keys or
/// rows of targets homed elsewhere.
fn holds(status: &SourceStatus, settling: Option<&Settling>) -> bool {
    status.queued_rows > 0 || status.parked_rows > 0 || settling.is_some_and(|s| *s != Settling::default())
}

/// Whether the logical name's own per-object routes (a position's
/// `delivered-through`, a parked target's rows, the alarm history) reach
/// the plain object: while the map lists it (no call), and while a map that
/// does not list it leaves rows there (one status call to learn that).
pub async fn reaches_plain<O: Objects>(map: &PartitionMap, sink: &O) -> Result<bool, O::Error> {
    if map.has_plain() {
        return Ok(true);
    }
    Ok(holds(&sink.status(Part::Plain).await?, None))
}

/// The logical source's status, from every object's (and, while a change
/// settles, what keeps each from settling). The plain object of a map that
/// does not list it is summed and listed only while it holds rows (or, while
/// a change settles, keys); the change from it has not settled then, so
/// `resize_settled` is false even without `from`.
pub async fn status<O: Objects>(
    logical: &Name,
    map: &PartitionMap,
    sink: &O,
) -> Result<LogicalStatus, O::Error> {
    let parts = objects(map);
    let statuses = join_all(parts.iter().map(|&p| sink.status(p))).await;
    let settling = settling(map, sink, &parts).await?;
    let settled = |s: &Option<Settling>| s.is_some_and(|s| s.foreign_targets == 0 && s.plain_keys == 0);
    let settles_at_ms = settling.iter().flatten().map(|s| s.plain_keys_until_ms).max().filter(|at| *at > 0);
    let mut out = LogicalStatus {
        source: logical.to_string(),
        map: map.clone(),
        totals: Totals::default(),
        oldest_row_age_ms: None,
        lag_exceeded: false,
        relay_watermark: u64::MAX,
        resize_settled: map.is_settling().then(|| settling.iter().all(settled)),
        settles_at_ms,
        partitions: Vec::new(),
    };
    for ((&partition, s), settling) in parts.iter().zip(statuses).zip(settling) {
        let s = s?;
        if partition == Part::Plain && !map.has_plain() {
            if !holds(&s, settling.as_ref()) {
                continue;
            }
            out.resize_settled = Some(false);
        }
        out.totals.add(&s);
        out.oldest_row_age_ms = out.oldest_row_age_ms.max(s.oldest_row_age_ms);
        out.lag_exceeded |= s.lag_exceeded;
        out.relay_watermark = out.relay_watermark.min(s.relay_watermark);
        out.partitions.push(PartitionStatus { partition, source: s.source.clone(), settling, status: s });
    }
    Ok(out)
}

/// While the map's last change settles, what keeps each object of `parts`
/// from settling; otherwise none.
async fn settling<O: Objects>(
    map: &PartitionMap,
    sink: &O,
    parts: &[Part],
) -> Result<Vec<Option<Settling>>, O::Error> {
    if !map.is_settling() {
        return Ok(vec![None; parts.len()]);
    }
    let each = join_all(parts.iter().map(|&p| sink.settling(p, map.partitions))).await;
    each.into_iter().map(|s| s.map(Some)).collect()
}

/// The least of the objects' watermarks: a commit-time lower bound of the
/// rows the logical source still owes, ms.
pub async fn relay_watermark<O: Objects>(map: &PartitionMap, sink: &O) -> Result<u64, O::Error> {
    let marks = join_all(objects(map).into_iter().map(|p| sink.relay_watermark(p))).await;
    marks.into_iter().try_fold(u64::MAX, |m, w| w.map(|w| m.min(w)))
}

/// A page of the parked and failing targets, every object's page merged
/// ([`merge_pages`]).
pub async fn targets<O: Objects>(
    map: &PartitionMap,
    sink: &O,
    after: Option<&Name>,
    limit: u32,
) -> Result<LogicalTargetPage, O::Error> {
    let parts = objects(map);
    let pages = join_all(parts.iter().map(|&p| sink.targets(p, after, limit))).await;
    let mut targets = Vec::new();
    let mut bound: Option<String> = None;
    for (&partition, page) in parts.iter().zip(pages) {
        let page = page?;
        if let Some(next) = page.next {
            bound = Some(bound.map_or(next.clone(), |b| b.min(next)));
        }
        targets.extend(page.targets.into_iter().map(|report| PartitionTarget { partition, report }));
    }
    let (targets, next) = merge_pages(targets, limit, bound.as_deref());
    Ok(LogicalTargetPage { targets, next })
}

/// A page of the rows still queued for `target`: from the first object
/// that holds any, in the order its rows are delivered in (the plain
/// object, then the target's old homes while a change settles, then its
/// home); the home's empty page when none does. A target's rows are queued
/// at one object at a time (an old home takes its new rows until it holds
/// none), so the page is that object's, named in its `source`, and its
/// `next` is a sequence there: a caller pages on at that object.
pub async fn queued<O: Objects>(
    map: &PartitionMap,
    sink: &O,
    target: &Name,
    after: u64,
    limit: u32,
) -> Result<QueuedPage, O::Error> {
    let mut chain = vec![Part::Plain];
    chain.extend(map.route(target).chain());
    chain.dedup();
    let mut page = None;
    for part in chain {
        let here = sink.queued(part, target, after, limit).await?;
        if !here.rows.is_empty() {
            return Ok(here);
        }
        page = Some(here);
    }
    Ok(page.unwrap_or_else(|| QueuedPage {
        source: String::new(),
        target: target.to_string(),
        rows: Vec::new(),
        next: None,
    }))
}

/// Puts `target`'s parked rows back at every object; the outcomes summed.
pub async fn redrive<O: Objects>(
    map: &PartitionMap,
    sink: &O,
    target: &Name,
) -> Result<ActionOutcome, O::Error> {
    sum_outcomes(join_all(objects(map).into_iter().map(|p| sink.redrive(p, target))).await)
}

/// Drops `target`'s parked rows at every object; the outcomes summed.
pub async fn discard<O: Objects>(
    map: &PartitionMap,
    sink: &O,
    target: &Name,
) -> Result<ActionOutcome, O::Error> {
    sum_outcomes(join_all(objects(map).into_iter().map(|p| sink.discard(p, target))).await)
}

/// Re-arms every object that holds rows and no alarm: re-armed if any was,
/// the rows summed, the soonest alarm.
pub async fn rearm<O: Objects>(map: &PartitionMap, sink: &O) -> Result<Rearmed, O::Error> {
    let each = join_all(objects(map).into_iter().map(|p| sink.rearm(p))).await;
    let mut sum = Rearmed { rearmed: false, alarm_at_ms: None, queued_rows: 0 };
    for r in each {
        let r = r?;
        sum.rearmed |= r.rearmed;
        sum.queued_rows += r.queued_rows;
        sum.alarm_at_ms = match (sum.alarm_at_ms, r.alarm_at_ms) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
    }
    Ok(sum)
}

/// The objects' outcomes of one action on a target, summed.
fn sum_outcomes<E>(outcomes: Vec<Result<ActionOutcome, E>>) -> Result<ActionOutcome, E> {
    let mut sum = ActionOutcome { rows: 0, was_parked: false };
    for o in outcomes {
        let o = o?;
        sum.rows += o.rows;
        sum.was_parked |= o.was_parked;
    }
    Ok(sum)
}

/// The first `limit` target names of the objects' pages merged, at most
/// [`MAX_PAGE_BYTES`](crate::core::MAX_PAGE_BYTES) of records (a name's
/// records larger than that alone), with every object's record of each
/// name kept together (a target can be held by two objects while a resize
/// settles), and the `after` of the next page when anything follows.
/// `bound` is the least `next` of the objects that had more: past it an
/// object has names it has not listed yet, so the page stops there and no
/// name is skipped.
pub fn merge_pages(
    mut targets: Vec<PartitionTarget>,
    limit: u32,
    bound: Option<&str>,
) -> (Vec<PartitionTarget>, Option<String>) {
    targets.sort_by(|a, b| (&a.report.target, a.partition).cmp(&(&b.report.target, b.partition)));
    let mut page = PageBuilder::new(limit);
    let mut kept = 0usize;
    while let Some(first) = targets.get(kept) {
        let name = &first.report.target;
        if bound.is_some_and(|b| name.as_str() > b) {
            break;
        }
        let group = targets.iter().skip(kept).take_while(|t| &t.report.target == name);
        let (count, bytes) =
            group.fold((0usize, 0u64), |(n, b), t| (n + 1, b + json_bytes(t) + u64::from(n > 0)));
        if !page.offer(bytes) {
            break;
        }
        kept += count;
    }
    let cut = kept < targets.len();
    targets.truncate(kept);
    let next = if cut || bound.is_some() { targets.last().map(|t| t.report.target.clone()) } else { None };
    (targets, next)
}
