//! The front door for partitioned logical sources (`RELAY_PARTITIONS`):
//! enqueues go through the library's router to the objects (the
//! partitions `logical:index`, and the logical source's own object while
//! the map lists the plain layout); status, the watermark and the parked
//! targets are gathered from every object; per-object reads (positions,
//! parked rows, alarm history) are addressed to the partition itself,
//! `/v1/sources/{logical}:{index}/...`, or, while the map lists the plain
//! layout, at the logical name to its own object.

#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

use durable_relay::core::ErrorCode;
use futures::future::join_all;
use serde::Serialize;
use worker::{Env, Request, Response};

use durable_relay::core::{decode_enqueue, Name, Part, PartitionMap};
use durable_relay::durable::source::traceparent;
use durable_relay::http::{json, read_body, HttpError};
use durable_relay::partition::Position;
use durable_relay::routes::SourceOp;

use crate::routes::SourceRoute;
use durable_relay::store::outbox::Settling;
use durable_relay::{
    ActionOutcome, Rearmed, RelayClient, RelayError, SourceClient, SourceStatus, TargetReport,
};

use crate::SOURCE_BINDING;

/// A partition's error as the front door's: the same status and code.
fn http(e: RelayError) -> HttpError {
    HttpError::from(e)
}

/// Serves `op` on the logical source `logical`.
pub async fn serve(
    env: &Env,
    req: &mut Request,
    logical: &Name,
    map: &PartitionMap,
    route: SourceRoute,
) -> Result<Response, HttpError> {
    let client = RelayClient::from_env(env, SOURCE_BINDING).map_err(http)?;
    let routed = client.partitioned(logical, map.clone()).map_err(http)?;
    let listed = routed.parts().map_err(http)?;
    let parts: Vec<&SourceClient> = listed.iter().map(|(_, c)| c).collect();
    let SourceRoute::Relay(op) = route else {
        return Err(per_partition(logical, &route.path()));
    };
    match op {
        SourceOp::Enqueue => {
            let trace = traceparent(req)?;
            let body = decode_enqueue(&read_body(req).await?)?;
            match routed.enqueue(body.idempotency_key.as_deref(), &body.rows, trace.as_ref()).await {
                Ok(done) => json(&done).map_err(HttpError::from),
                Err(failure) => partial(failure.error, &failure.committed),
            }
        }
        SourceOp::Status => json(&status(logical, map, &listed).await?).map_err(HttpError::from),
        SourceOp::Watermark => {
            let marks = join_all(parts.iter().map(|p| p.relay_watermark())).await;
            let min = marks.into_iter().try_fold(u64::MAX, |m, w| w.map(|w| m.min(w))).map_err(http)?;
            json(&serde_json::json!({ "relay_watermark": min, "now_ms": durable_relay::durable::now_ms() }))
                .map_err(HttpError::from)
        }
        SourceOp::ParkedTargets { after, limit } => parked_targets(&listed, after.as_ref(), limit).await,
        SourceOp::Redrive(t) => act(&parts, &t, Action::Redrive).await,
        SourceOp::Discard(t) => act(&parts, &t, Action::Discard).await,
        SourceOp::Rearm => rearm(&parts).await,
        op if map.has_plain() => {
            let plain = routed.part(Part::Plain).map_err(http)?;
            let body = match op {
                SourceOp::Enqueue => Some(read_body(req).await?),
                _ => None,
            };
            let reply: serde_json::Value = plain.call(op, body).await.map_err(http)?;
            json(&reply).map_err(HttpError::from)
        }
        op => Err(per_partition(logical, &op.path())),
    }
}

/// `GET /parked`: every object's page of parked and failing targets,
/// merged into one ([`merge_pages`]).
async fn parked_targets(
    listed: &[(Part, SourceClient)],
    after: Option<&Name>,
    limit: u32,
) -> Result<Response, HttpError> {
    let pages = join_all(listed.iter().map(|(_, p)| p.targets(after, limit))).await;
    let mut targets = Vec::new();
    let mut bound: Option<String> = None;
    for (&(partition, _), page) in listed.iter().zip(pages) {
        let page = page.map_err(http)?;
        if let Some(next) = page.next {
            bound = Some(bound.map_or(next.clone(), |b| b.min(next)));
        }
        targets.extend(page.targets.into_iter().map(|report| PartitionTarget { partition, report }));
    }
    let (targets, next) = merge_pages(targets, limit, bound.as_deref());
    json(&serde_json::json!({ "targets": targets, "next": next })).map_err(HttpError::from)
}

/// What an operator does to a parked target on every object.
#[derive(Clone, Copy)]
enum Action {
    /// `POST /parked/{target}/redrive`.
    Redrive,
    /// `POST /parked/{target}/discard`.
    Discard,
}

/// `action` on target `target` at every object, the outcomes summed.
async fn act(parts: &[&SourceClient], target: &Name, action: Action) -> Result<Response, HttpError> {
    let outcomes = join_all(parts.iter().map(|p| async move {
        match action {
            Action::Redrive => p.redrive(target).await,
            Action::Discard => p.discard(target).await,
        }
    }))
    .await;
    let mut sum = ActionOutcome { rows: 0, was_parked: false };
    for o in outcomes {
        let o = o.map_err(http)?;
        sum.rows += o.rows;
        sum.was_parked |= o.was_parked;
    }
    json(&sum).map_err(HttpError::from)
}

/// `POST /rearm` at every object: re-armed if any was, the rows summed,
/// the soonest alarm.
async fn rearm(parts: &[&SourceClient]) -> Result<Response, HttpError> {
    let each = join_all(parts.iter().map(|p| p.rearm())).await;
    let mut sum = Rearmed { rearmed: false, alarm_at_ms: None, queued_rows: 0 };
    for r in each {
        let r = r.map_err(http)?;
        sum.rearmed |= r.rearmed;
        sum.queued_rows += r.queued_rows;
        // The soonest alarm any partition holds.
        sum.alarm_at_ms = match (sum.alarm_at_ms, r.alarm_at_ms) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
    }
    json(&sum).map_err(HttpError::from)
}

/// The refusal of a per-partition operation at the logical source.
fn per_partition(logical: &Name, path: &str) -> HttpError {
    HttpError::bad_request(
        ErrorCode::PartitionedSource,
        format!(
            "{logical} is partitioned: address one partition, /v1/sources/{logical}:<index>/{}",
            path.trim_start_matches('/')
        ),
    )
}

/// A refusal that may leave some partitions committed: the partition's
/// status and code, plus the positions that did commit.
fn partial(error: RelayError, committed: &[Position]) -> Result<Response, HttpError> {
    let e = http(error);
    let body =
        serde_json::json!({ "error": { "code": e.code, "message": e.message, "committed": committed } });
    // The refusal's own response (status, content type, Retry-After), with this body.
    let response = e.response().map_err(|x| HttpError::internal(x.to_string()))?;
    let headers = response.headers().clone();
    Response::ok(body.to_string())
        .map(|r| r.with_status(e.status).with_headers(headers))
        .map_err(|x| HttpError::internal(x.to_string()))
}

/// A parked or failing target of one object.
#[derive(Serialize)]
struct PartitionTarget {
    partition: Part,
    #[serde(flatten)]
    report: TargetReport,
}

/// The first `limit` target names of the partitions' pages merged, at
/// most [`MAX_PAGE_BYTES`](durable_relay::core::MAX_PAGE_BYTES) of records
/// (a name's records larger than that alone), with every partition's record
/// of each name kept together (a target can be held by two partitions while
/// a resize settles), and the `after` of the next page when anything follows.
/// `bound` is the least `next` of the partitions that had more: past it a
/// partition has names it has not listed yet, so the page stops there and no
/// name is skipped.
fn merge_pages(
    mut targets: Vec<PartitionTarget>,
    limit: u32,
    bound: Option<&str>,
) -> (Vec<PartitionTarget>, Option<String>) {
    targets.sort_by(|a, b| (&a.report.target, a.partition).cmp(&(&b.report.target, b.partition)));
    let mut page = durable_relay::core::PageBuilder::new(limit);
    let mut kept = 0usize;
    while let Some(first) = targets.get(kept) {
        let name = &first.report.target;
        if bound.is_some_and(|b| name.as_str() > b) {
            break;
        }
        let group = targets.iter().skip(kept).take_while(|t| &t.report.target == name);
        let (count, bytes) = group.fold((0usize, 0u64), |(n, b), t| {
            (n + 1, b + durable_relay::core::json_bytes(t) + u64::from(n > 0))
        });
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

/// One object's status in the logical source's.
#[derive(Serialize)]
struct PartitionStatus {
    partition: Part,
    source: String,
    /// What keeps the last change from settling here (only while one
    /// settles): targets it holds rows for whose home is another object,
    /// and at the plain object the keys its plain enqueues recorded.
    #[serde(skip_serializing_if = "Option::is_none")]
    settling: Option<Settling>,
    status: SourceStatus,
}

/// A logical source's status: sums and extremes over its partitions.
#[derive(Serialize)]
struct LogicalStatus {
    source: String,
    map: PartitionMap,
    #[serde(flatten)]
    totals: Totals,
    oldest_row_age_ms: Option<u64>,
    lag_exceeded: bool,
    /// The minimum over the partitions.
    relay_watermark: u64,
    /// While a change settles (`map.from` set): whether no object still
    /// holds rows for a target whose home moved, nor (the plain object)
    /// keys a retry must find, so `from` may be dropped under a new epoch.
    #[serde(skip_serializing_if = "Option::is_none")]
    resize_settled: Option<bool>,
    /// While a change settles: the earliest time it can have settled, ms
    /// (when the plain object's last key expires), if that is later than now.
    #[serde(skip_serializing_if = "Option::is_none")]
    settles_at_ms: Option<u64>,
    partitions: Vec<PartitionStatus>,
}

/// The counters a logical source's status sums over its partitions: every
/// counter a partition's status has, under the same name.
#[derive(Default, Serialize)]
struct Totals {
    queued_rows: u64,
    queued_bytes: u64,
    parked_rows: u64,
    parked_bytes: u64,
    enqueued_rows: u64,
    delivered_rows: u64,
    alarms: u64,
    fires: u64,
    subrequests: u64,
    conflicts: u64,
    dedup_hits: u64,
    rejected_full: u64,
    lag_breaches: u64,
    sql_rows_written: u64,
    rows_written_today: u64,
    rows_written_projected_today: u64,
    dedup_records: u64,
    discarded_rows: u64,
}

impl Totals {
    fn add(&mut self, s: &SourceStatus) {
        self.queued_rows += s.queued_rows;
        self.queued_bytes += s.queued_bytes;
        self.parked_rows += s.parked_rows;
        self.parked_bytes += s.parked_bytes;
        self.enqueued_rows += s.enqueued_rows;
        self.delivered_rows += s.delivered_rows;
        self.alarms += s.alarms;
        self.fires += s.fires;
        self.subrequests += s.subrequests;
        self.conflicts += s.conflicts;
        self.dedup_hits += s.dedup_hits;
        self.rejected_full += s.rejected_full;
        self.lag_breaches += s.lag_breaches;
        self.sql_rows_written += s.sql_rows_written;
        self.rows_written_today += s.rows_written_today;
        self.rows_written_projected_today += s.rows_written_projected_today;
        self.dedup_records += s.dedup_records;
        self.discarded_rows += s.discarded_rows;
    }
}

async fn status(
    logical: &Name,
    map: &PartitionMap,
    parts: &[(Part, SourceClient)],
) -> Result<LogicalStatus, HttpError> {
    let statuses = join_all(parts.iter().map(|(_, p)| p.status())).await;
    let settling = if map.is_settling() {
        let op = SourceOp::Settling(map.partitions);
        let asks = parts.iter().map(|(_, p)| p.call::<Settling>(op.clone(), None));
        let each = join_all(asks).await.into_iter().collect::<Result<Vec<_>, _>>().map_err(http)?;
        each.into_iter().map(Some).collect()
    } else {
        vec![None; parts.len()]
    };
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
    for ((&(partition, _), s), settling) in parts.iter().zip(statuses).zip(settling) {
        let s = s.map_err(http)?;
        out.totals.add(&s);
        out.oldest_row_age_ms = out.oldest_row_age_ms.max(s.oldest_row_age_ms);
        out.lag_exceeded |= s.lag_exceeded;
        out.relay_watermark = out.relay_watermark.min(s.relay_watermark);
        out.partitions.push(PartitionStatus { partition, source: s.source.clone(), settling, status: s });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(partition: u32, target: &str) -> PartitionTarget {
        let partition = Part::Index(partition);
        let report = TargetReport {
            target: target.into(),
            failed_cycles: 1,
            parked: false,
            reason: None,
            first_failure_ms: None,
            last_failure_ms: None,
            last_error: None,
            rows: 0,
            retry_at_ms: None,
        };
        PartitionTarget { partition, report }
    }

    fn names(page: &[PartitionTarget]) -> Vec<(u32, &str)> {
        let index = |p: Part| match p {
            Part::Index(i) => i,
            Part::Plain => u32::MAX,
        };
        page.iter().map(|t| (index(t.partition), t.report.target.as_str())).collect()
    }

    #[test]
    fn merged_pages_keep_a_target_held_by_two_partitions_on_one_page() {
        let (page, next) = merge_pages(vec![at(1, "b"), at(0, "a"), at(0, "b"), at(1, "c")], 2, None);
        assert_eq!(names(&page), [(0, "a"), (0, "b"), (1, "b")], "both records of b, then cut");
        assert_eq!(next.as_deref(), Some("b"));
        let (page, next) = merge_pages(vec![at(1, "c")], 2, None);
        assert_eq!((names(&page), next), (vec![(1, "c")], None), "the last page");
        let (_, next) = merge_pages(vec![at(1, "c")], 2, Some("c"));
        assert_eq!(next.as_deref(), Some("c"), "a partition with more means another page");
    }

    #[test]
    fn merged_pages_skip_nothing_a_partition_has_not_listed() {
        // Partition 0 stopped at "b" (more follow); partition 1 listed "a".."d".
        let listed = vec![at(0, "a"), at(0, "b"), at(1, "a"), at(1, "c"), at(1, "d")];
        let (page, next) = merge_pages(listed, 10, Some("b"));
        assert_eq!(names(&page), [(0, "a"), (1, "a"), (0, "b")], "nothing past partition 0's last");
        assert_eq!(next.as_deref(), Some("b"), "partition 0's names after b come next");
    }

    #[test]
    fn merged_pages_stay_within_the_byte_budget() {
        let big = |partition: u32, target: &str| {
            let mut t = at(partition, target);
            t.report.last_error = Some("x".repeat(400 * 1024));
            t
        };
        let one = durable_relay::core::json_bytes(&big(0, "a"));
        let (page, next) = merge_pages(vec![big(0, "a"), big(1, "b"), big(0, "c")], 10, None);
        assert_eq!(names(&page), [(0, "a"), (1, "b")], "two of about 400 KiB fit, three do not");
        assert!(2 * one < u64::from(durable_relay::core::MAX_PAGE_BYTES));
        assert_eq!(next.as_deref(), Some("b"));
        let (page, next) = merge_pages(vec![big(0, "a"), big(1, "a"), big(2, "a"), big(0, "b")], 10, None);
        assert_eq!(names(&page), [(0, "a"), (1, "a"), (2, "a")], "one name's records alone, though over");
        assert_eq!(next.as_deref(), Some("a"));
        let (page, next) = merge_pages(vec![big(0, "a"), big(1, "b")], 10, None);
        assert_eq!((page.len(), next), (2, None), "the last page: next is null");
    }
}
