//! The merge of a logical source's pages of parked targets.

use super::*;
use crate::core::MAX_PAGE_BYTES;
use durable_relay_protocol::wire::TargetReport;

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
    let one = json_bytes(&big(0, "a"));
    let (page, next) = merge_pages(vec![big(0, "a"), big(1, "b"), big(0, "c")], 10, None);
    assert_eq!(names(&page), [(0, "a"), (1, "b")], "two of about 400 KiB fit, three do not");
    assert!(2 * one < u64::from(MAX_PAGE_BYTES));
    assert_eq!(next.as_deref(), Some("b"));
    let (page, next) = merge_pages(vec![big(0, "a"), big(1, "a"), big(2, "a"), big(0, "b")], 10, None);
    assert_eq!(names(&page), [(0, "a"), (1, "a"), (2, "a")], "one name's records alone, though over");
    assert_eq!(next.as_deref(), Some("a"));
    let (page, next) = merge_pages(vec![big(0, "a"), big(1, "b")], 10, None);
    assert_eq!((page.len(), next), (2, None), "the last page: next is null");
}
