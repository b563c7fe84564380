//! A logical source's reads and operator actions through the simulator:
//! the shipped fan-out and merge (`durable_relay_sql::logical`) over real
//! objects. A source that was plain keeps its rows at the plain object
//! until they leave, whatever map it is given: a map that drops the plain
//! layout while rows wait there is refused to every enqueue, and every
//! logical read still shows those rows, and redrive and discard reach them.

use durable_relay_sql::core::{
    Delay, EnqueueRefusal, EnqueueRow, Layout, Name, Part, PartitionMap, RelayBudget,
};
use durable_relay_sql::sim::Sim;
use serde_json::json;

/// The logical source, plain before it is given a map.
const L: &str = "cv";
/// A target that refuses every call for good, so its rows park.
const PARKED: &str = "cv-parked";
/// A target whose one row waits for its delay.
const DELAYED: &str = "cv-late";
/// The delayed row's delay: longer than anything here runs, ms.
const DELAY_MS: u64 = 3_600_000;

fn row(target: &str, n: i64) -> EnqueueRow {
    EnqueueRow::new(Name::new(target).unwrap(), vec![("v".to_owned(), json!(n))], vec![])
}

/// Two partitions under epoch 1, without the plain layout.
fn without_plain() -> PartitionMap {
    PartitionMap { partitions: Layout::Count(2), epoch: 1, from: Vec::new() }
}

/// The plain source with 2 parked rows (of `PARKED`) and 1 delayed row
/// (of `DELAYED`).
fn plain_source_with_waiting_rows() -> Sim {
    let mut sim = Sim::new(31);
    sim.fail_target_permanently(PARKED);
    sim.enqueue_keyed(L, None, vec![row(PARKED, 1), row(PARKED, 2)]).unwrap();
    sim.enqueue_keyed(L, None, vec![row(DELAYED, 3).delayed(Delay::For(DELAY_MS))]).unwrap();
    sim.run_alarm(L, RelayBudget::FREE);
    assert_eq!(sim.parked_rows(L, PARKED), vec![1, 2], "the permanent refusal parked both rows");
    assert_eq!(sim.queued(L), vec![3], "the delayed row waits");
    sim
}

#[test]
fn a_map_without_plain_still_shows_the_plain_objects_rows_and_reaches_them() {
    let mut sim = plain_source_with_waiting_rows();
    let m = without_plain();
    let refused = sim.enqueue_routed(L, &m, None, vec![row(DELAYED, 4)]).unwrap_err();
    assert!(matches!(refused.error, EnqueueRefusal::UnsettledLayout { .. }), "{:?}", refused.error);

    let status = sim.logical_status(L, &m);
    assert_eq!(
        (status.totals.queued_rows, status.totals.parked_rows),
        (1, 2),
        "the logical status counts the plain object's rows: {status:?}"
    );
    let listed: Vec<Part> = status.partitions.iter().map(|p| p.partition).collect();
    assert_eq!(listed, [Part::Plain, Part::Index(0), Part::Index(1)], "the plain object is listed");
    assert_eq!(status.resize_settled, Some(false), "rows wait at an object the map does not list");
    assert!(sim.logical_watermark(L, &m) < sim.now_ms(), "the parked rows hold the watermark back");

    assert!(sim.reaches_plain(L, &m), "a position's delivered-through at the logical name reaches it");
    let page = sim.logical_targets(L, &m, None, 10);
    let parked: Vec<(&str, Part)> =
        page.targets.iter().map(|t| (t.report.target.as_str(), t.partition)).collect();
    assert_eq!(parked, [(PARKED, Part::Plain)], "the parked target is listed at the plain object");

    sim.heal_target(PARKED);
    let redriven = sim.logical_redrive(L, &m, PARKED);
    assert_eq!((redriven.rows, redriven.was_parked), (2, true), "the redrive moves the plain object's rows");
    let rearmed = sim.logical_rearm(L, &m);
    assert_eq!(rearmed.queued_rows, 3, "the plain object's queued rows are counted");

    sim.advance(DELAY_MS);
    assert!(sim.run_all_until_idle(RelayBudget::FREE, 100).drained);
    assert_eq!(sim.applied(PARKED, L), vec![1, 2]);
    assert_eq!(sim.applied(DELAYED, L), vec![3]);
    let status = sim.logical_status(L, &m);
    let listed: Vec<Part> = status.partitions.iter().map(|p| p.partition).collect();
    assert_eq!(listed, [Part::Index(0), Part::Index(1)], "an empty plain object is not listed");
    assert_eq!(status.resize_settled, None);
    assert!(!sim.reaches_plain(L, &m), "an empty plain object is no longer the logical name's own");
    let taken = sim.enqueue_routed(L, &m, None, vec![row(DELAYED, 4)]).unwrap();
    assert!(matches!(taken.positions[0].partition, Part::Index(_)), "the map is taken once plain is empty");
    sim.audit().unwrap();
}

#[test]
fn a_map_without_plain_discards_the_plain_objects_parked_rows() {
    let mut sim = plain_source_with_waiting_rows();
    let m = without_plain();
    let discarded = sim.logical_discard(L, &m, PARKED);
    assert_eq!((discarded.rows, discarded.was_parked), (2, true), "the discard reaches the plain object");
    let status = sim.logical_status(L, &m);
    assert_eq!((status.totals.queued_rows, status.totals.parked_rows), (1, 0));
    assert_eq!(status.totals.discarded_rows, 2);
    sim.advance(DELAY_MS);
    assert!(sim.run_all_until_idle(RelayBudget::FREE, 100).drained);
    assert_eq!(sim.applied(DELAYED, L), vec![3]);
    sim.enqueue_routed(L, &m, None, vec![row(DELAYED, 4)]).unwrap();
    sim.audit().unwrap();
}

/// The calls `read` makes to objects.
fn calls<T>(sim: &mut Sim, read: impl FnOnce(&mut Sim) -> T) -> u64 {
    let before = sim.object_calls();
    let _ = read(sim);
    sim.object_calls() - before
}

#[test]
fn a_logical_read_costs_one_call_per_object_and_one_at_the_plain_object() {
    let mut sim = Sim::new(32);
    let four = PartitionMap { partitions: Layout::Count(4), epoch: 1, from: Vec::new() };
    sim.enqueue_routed(L, &four, None, vec![row(DELAYED, 1)]).unwrap();
    let each = |sim: &mut Sim, m: &PartitionMap| {
        [
            calls(sim, |s| s.logical_status(L, m)),
            calls(sim, |s| s.logical_watermark(L, m)),
            calls(sim, |s| s.logical_targets(L, m, None, 10)),
            calls(sim, |s| s.logical_redrive(L, m, PARKED)),
            calls(sim, |s| s.logical_discard(L, m, PARKED)),
            calls(sim, |s| s.logical_rearm(L, m)),
            calls(sim, |s| s.reaches_plain(L, m)),
        ]
    };
    assert_eq!(each(&mut sim, &four), [5, 5, 5, 5, 5, 5, 1], "4 partitions and the plain object");
    let growing = PartitionMap { partitions: Layout::Count(4), epoch: 2, from: vec![Layout::Count(2)] };
    assert_eq!(each(&mut sim, &growing)[0], 10, "a status while a change settles: two calls per object");
    let from_plain = PartitionMap { partitions: Layout::Count(2), epoch: 3, from: vec![Layout::Plain] };
    assert_eq!(each(&mut sim, &from_plain), [6, 3, 3, 3, 3, 3, 0], "the map lists the plain object");
}
