//! A partitioned logical source read and acted on as one source: its
//! status, watermark and parked targets gathered from every object that may
//! hold its rows (the partitions, and the plain object while the map lists
//! the plain layout), and redrive, discard and rearm done at each, the
//! replies merged. What is read per object (positions, parked rows, the
//! alarm history) is asked of that object through
//! [`PartitionedClient::part`]. The reference Worker's front door serves
//! these for a source named in `RELAY_PARTITIONS`; a Worker of your own can
//! call them the same way. The replies are the protocol's
//! ([`crate::protocol::wire::logical`]).

#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

use futures::future::join_all;

use crate::client::{PartitionedClient, RelayError, SourceClient};
use crate::core::{json_bytes, Name, PageBuilder, Part};
use crate::protocol::wire::{
    ActionOutcome, LogicalStatus, LogicalTargetPage, PartitionStatus, PartitionTarget, Rearmed, Settling,
    Totals,
};
use crate::routes::SourceOp;

#[cfg(test)]
mod tests;

impl PartitionedClient<'_> {
    /// The logical source's status, from every object's (and, while a
    /// change settles, what keeps each from settling).
    pub async fn status(&self) -> Result<LogicalStatus, RelayError> {
        let parts = self.parts()?;
        let statuses = join_all(parts.iter().map(|(_, p)| p.status())).await;
        let settling = self.settling(&parts).await?;
        let settled = |s: &Option<Settling>| s.is_some_and(|s| s.foreign_targets == 0 && s.plain_keys == 0);
        let settles_at_ms =
            settling.iter().flatten().map(|s| s.plain_keys_until_ms).max().filter(|at| *at > 0);
        let mut out = LogicalStatus {
            source: self.logical().to_string(),
            map: self.map().clone(),
            totals: Totals::default(),
            oldest_row_age_ms: None,
            lag_exceeded: false,
            relay_watermark: u64::MAX,
            resize_settled: self.map().is_settling().then(|| settling.iter().all(settled)),
            settles_at_ms,
            partitions: Vec::new(),
        };
        for ((&(partition, _), s), settling) in parts.iter().zip(statuses).zip(settling) {
            let s = s?;
            out.totals.add(&s);
            out.oldest_row_age_ms = out.oldest_row_age_ms.max(s.oldest_row_age_ms);
            out.lag_exceeded |= s.lag_exceeded;
            out.relay_watermark = out.relay_watermark.min(s.relay_watermark);
            out.partitions.push(PartitionStatus { partition, source: s.source.clone(), settling, status: s });
        }
        Ok(out)
    }

    /// While the map's last change settles, what keeps each object from
    /// settling; otherwise none.
    async fn settling(&self, parts: &[(Part, SourceClient)]) -> Result<Vec<Option<Settling>>, RelayError> {
        if !self.map().is_settling() {
            return Ok(vec![None; parts.len()]);
        }
        let op = SourceOp::Settling(self.map().partitions);
        let asks = parts.iter().map(|(_, p)| p.call::<Settling>(op.clone(), None));
        let each = join_all(asks).await.into_iter().collect::<Result<Vec<_>, _>>()?;
        Ok(each.into_iter().map(Some).collect())
    }

    /// The least of the objects' watermarks: a commit-time lower bound of
    /// the rows the logical source still owes, ms.
    pub async fn relay_watermark(&self) -> Result<u64, RelayError> {
        let parts = self.parts()?;
        let marks = join_all(parts.iter().map(|(_, p)| p.relay_watermark())).await;
        marks.into_iter().try_fold(u64::MAX, |m, w| w.map(|w| m.min(w)))
    }

    /// A page of the parked and failing targets, every object's page
    /// merged ([`merge_pages`]).
    pub async fn targets(&self, after: Option<&Name>, limit: u32) -> Result<LogicalTargetPage, RelayError> {
        let parts = self.parts()?;
        let pages = join_all(parts.iter().map(|(_, p)| p.targets(after, limit))).await;
        let mut targets = Vec::new();
        let mut bound: Option<String> = None;
        for (&(partition, _), page) in parts.iter().zip(pages) {
            let page = page?;
            if let Some(next) = page.next {
                bound = Some(bound.map_or(next.clone(), |b| b.min(next)));
            }
            targets.extend(page.targets.into_iter().map(|report| PartitionTarget { partition, report }));
        }
        let (targets, next) = merge_pages(targets, limit, bound.as_deref());
        Ok(LogicalTargetPage { targets, next })
    }

    /// Puts `target`'s parked rows back at every object; the outcomes summed.
    pub async fn redrive(&self, target: &Name) -> Result<ActionOutcome, RelayError> {
        let parts = self.parts()?;
        sum_outcomes(join_all(parts.iter().map(|(_, p)| p.redrive(target))).await)
    }

    /// Drops `target`'s parked rows at every object; the outcomes summed.
    pub async fn discard(&self, target: &Name) -> Result<ActionOutcome, RelayError> {
        let parts = self.parts()?;
        sum_outcomes(join_all(parts.iter().map(|(_, p)| p.discard(target))).await)
    }

    /// Re-arms every object that holds rows and no alarm: re-armed if any
    /// was, the rows summed, the soonest alarm.
    pub async fn rearm(&self) -> Result<Rearmed, RelayError> {
        let parts = self.parts()?;
        let each = join_all(parts.iter().map(|(_, p)| p.rearm())).await;
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
}

/// The objects' outcomes of one action on a target, summed.
fn sum_outcomes(outcomes: Vec<Result<ActionOutcome, RelayError>>) -> Result<ActionOutcome, RelayError> {
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
