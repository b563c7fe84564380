//! The rows still queued for one target, as an operator pages through
//! them (`GET /queued`), through the simulator on the shipped SQL: only
//! that target's rows, in the order it receives them, never a delivered
//! or parked row, cut by count and by bytes; and at a partitioned source,
//! read where the target's rows are.

use durable_relay_sql::core::{
    json_bytes, Delay, EnqueueRow, Layout, Name, PartitionMap, RelayBudget, MAX_PAGE_BYTES,
    MAX_QUEUED_ROWS_PER_PAGE, MAX_ROWS_PER_ENQUEUE,
};
use durable_relay_sql::sim::Sim;
use durable_relay_sql::QueuedPage;
use serde_json::json;

fn n(s: &str) -> Name {
    Name::new(s).unwrap()
}

fn row(target: &str, v: i64) -> EnqueueRow {
    EnqueueRow::new(n(target), vec![("v".to_owned(), json!(v))], vec![])
}

fn page(sim: &Sim, source: &str, target: &str, after: u64, limit: u32) -> QueuedPage {
    sim.with_relay(source, |r| r.queued_page(&n(target), after, limit)).unwrap()
}

fn seqs(page: &QueuedPage) -> Vec<u64> {
    page.rows.iter().map(|r| r.seq).collect()
}

#[test]
fn only_the_targets_rows_are_listed_in_order_with_their_due_time() {
    let mut sim = Sim::new(41);
    let late = row("t", 3).delayed(Delay::For(60_000));
    sim.enqueue("s", vec![row("t", 1), row("u", 2), late, row("u", 4), row("t", 5)]).unwrap();
    let listed = page(&sim, "s", "t", 0, 10);
    assert_eq!((listed.source.as_str(), listed.target.as_str()), ("s", "t"));
    assert_eq!(seqs(&listed), [1, 3, 5], "t's rows only, ascending");
    assert_eq!(listed.next, None, "nothing follows");
    let due: Vec<u64> = listed.rows.iter().map(|r| r.due_ms - r.at_ms).collect();
    // A row never overtakes an older one of its target: row 5 waits for row 3.
    assert_eq!(due, [0, 60_000, 60_000], "each row shows when it is due");
    assert_eq!(listed.rows[0].effects, r#"{"puts":[["v",1]],"deletes":[]}"#, "effects verbatim");
    assert_eq!(seqs(&page(&sim, "s", "t", 1, 10)), [3, 5], "after is exclusive");
    assert!(page(&sim, "s", "nobody", 0, 10).rows.is_empty());
}

#[test]
fn delivered_and_parked_rows_are_not_queued() {
    let mut sim = Sim::new(42);
    sim.fail_target_permanently("p");
    sim.set_in_turn(true);
    sim.enqueue("s", vec![row("t", 1), row("p", 2)]).unwrap();
    sim.deliver("s", RelayBudget::FREE);
    assert_eq!(sim.parked_rows("s", "p"), [2], "p's row parked");
    assert!(page(&sim, "s", "p", 0, 10).rows.is_empty(), "a parked row is listed as parked, not queued");
    // A lone row delivered in turn may be kept for the next enqueue's slot.
    sim.enqueue("s", vec![row("t", 3)]).unwrap();
    sim.deliver("s", RelayBudget::FREE);
    assert_eq!(sim.applied("t", "s"), [1, 3]);
    assert!(page(&sim, "s", "t", 0, 10).rows.is_empty(), "a delivered row is never listed");
}

#[test]
fn a_page_holds_at_most_the_limit_and_the_next_page_starts_after_it() {
    let mut sim = Sim::new(43);
    let total = MAX_QUEUED_ROWS_PER_PAGE + 1;
    let mut sent = 0;
    while sent < total {
        let take = (total - sent).min(MAX_ROWS_PER_ENQUEUE);
        sim.enqueue("s", (sent..sent + take).map(|i| row("t", i64::from(i))).collect()).unwrap();
        sent += take;
    }
    let first = page(&sim, "s", "t", 0, MAX_QUEUED_ROWS_PER_PAGE);
    assert_eq!(first.rows.len() as u32, MAX_QUEUED_ROWS_PER_PAGE, "a full page at the limit");
    assert_eq!(first.next, Some(u64::from(MAX_QUEUED_ROWS_PER_PAGE)));
    let rest = page(&sim, "s", "t", first.next.unwrap(), MAX_QUEUED_ROWS_PER_PAGE);
    assert_eq!(seqs(&rest), [u64::from(total)], "the one row past the limit");
    assert_eq!(rest.next, None);
    let over = page(&sim, "s", "t", 0, MAX_QUEUED_ROWS_PER_PAGE + 1);
    assert_eq!(over.rows.len() as u32, MAX_QUEUED_ROWS_PER_PAGE, "a larger limit is held to the page's");
    let one = page(&sim, "s", "t", 0, 1);
    assert_eq!((seqs(&one), one.next), (vec![1], Some(1)), "the smallest page");
}

#[test]
fn a_page_is_cut_at_its_bytes() {
    let mut sim = Sim::new(44);
    // Five puts of 60 KB: a row of about 300 KB.
    let big = || {
        let puts = (0..5).map(|k| (format!("k{k}"), json!("x".repeat(60_000)))).collect();
        EnqueueRow::new(n("t"), puts, vec![])
    };
    // Five such rows: three fit in a page of 1 MiB, the fourth does not.
    for _ in 0..5 {
        sim.enqueue("s", vec![big()]).unwrap();
    }
    let first = page(&sim, "s", "t", 0, MAX_QUEUED_ROWS_PER_PAGE);
    assert_eq!(seqs(&first), [1, 2, 3]);
    assert!(json_bytes(&first.rows) <= u64::from(MAX_PAGE_BYTES), "within the page's bytes");
    assert_eq!(first.next, Some(3));
    let second = page(&sim, "s", "t", 3, MAX_QUEUED_ROWS_PER_PAGE);
    assert_eq!((seqs(&second), second.next), (vec![4, 5], None));
}

#[test]
fn at_a_partitioned_source_the_page_is_read_where_the_targets_rows_are() {
    let mut sim = Sim::new(45);
    let two = PartitionMap { partitions: Layout::Count(2), epoch: 1, from: Vec::new() };
    sim.fail_target("t");
    sim.enqueue_routed("lg", &two, None, vec![row("t", 1), row("t", 2), row("u", 3)]).unwrap();
    let at = sim.logical_queued("lg", &two, "t", 0, 10);
    let home = two.route(&n("t")).home.object(&n("lg"));
    assert_eq!(at.source, home.as_str(), "named after the partition that holds them");
    assert_eq!(seqs(&at), seqs(&page(&sim, home.as_str(), "t", 0, 10)), "that partition's own page");
    assert_eq!(at.rows.len(), 2);
    // Four partitions now: while the old home still holds t's rows, its
    // new rows go there too, and the page is still read there.
    let four = PartitionMap { partitions: Layout::Count(4), epoch: 2, from: vec![Layout::Count(2)] };
    sim.enqueue_routed("lg", &four, None, vec![row("t", 4)]).unwrap();
    let moving = sim.logical_queued("lg", &four, "t", 0, 10);
    assert_eq!((moving.source.as_str(), moving.rows.len()), (home.as_str(), 3), "gated at the old home");
    sim.heal_target("t");
    assert!(sim.run_all_until_idle(RelayBudget::FREE, 100).drained);
    let empty = sim.logical_queued("lg", &four, "t", 0, 10);
    assert!(empty.rows.is_empty() && empty.next.is_none(), "nothing queued anywhere: {empty:?}");
}
