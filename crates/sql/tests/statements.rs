//! What a row costs in SQL statements, on the shipped SQL and driver (the
//! simulator's SQLite), source and target together. Each statement is a
//! call into the runtime, and in workerd that call, not SQLite's work, is
//! most of a statement's CPU; the benchmark's profile (`bench/profile.mjs`)
//! counts the same statements there. These bounds hold the counts it
//! reported, so a change that adds a statement to a row's path fails here
//! first.

use durable_relay_sql::core::{EnqueueRow, Name, RelayBudget};
use durable_relay_sql::sim::Sim;
use serde_json::json;

/// Statements one single-row enqueue runs on an open source: one read (the
/// state with its tail, the newest slot, the target's records, the key's
/// record) and the row's write (into a recycled tombstone, or over the
/// slot of the row delivered before it).
const ENQUEUE_STATEMENTS_MAX: u64 = 2;

/// Statements the in-turn delivery of a lone row runs at the source: none.
/// The enqueue handed it the row, the source's `os` and `rs` and the
/// target's record; its checkpoint only removes the row, which the next
/// enqueue's write does (or the safety-net alarm, within a second).
const IN_TURN_DELIVERY_STATEMENTS: u64 = 0;

/// Statements a target's apply of a lone row runs: the sender's watermark,
/// the effect, the new watermark.
const APPLY_STATEMENTS_MAX: u64 = 3;

/// Statements the simulator's own check adds to every apply: its hook logs
/// each applied sequence, which no shipped target does.
const SIM_HOOK_STATEMENTS: u64 = 1;

/// A lone row's whole round trip, source and target: what a user is billed
/// calls for.
const LONE_ROW_STATEMENTS_MAX: u64 = 8;

/// Statements one alarm that delivers a lone row runs at the source (the
/// path when in-turn delivery is off): the state, the window and the
/// bodies, the prune horizon, the state, the row's removal (its checkpoint
/// left it to the next reader of the outbox's rows, here the owed head's
/// read) and the owed head.
const ALARM_DELIVERY_STATEMENTS_MAX: u64 = 7;

fn row(target: &str, i: u64) -> EnqueueRow {
    EnqueueRow::to(Name::new(target).unwrap()).put(format!("k{i}"), json!(i))
}

fn source_statements(sim: &Sim) -> u64 {
    sim.with_relay("s", |r| r.sql().io().statements)
}

fn target_statements(sim: &Sim) -> u64 {
    sim.with_target("t", |inbox| inbox.sql().statements())
}

#[test]
fn a_lone_row_delivered_in_turn_costs_source_and_target_at_most_eight_statements() {
    let mut sim = Sim::new(7);
    sim.set_in_turn(true);
    // The first row opens and migrates the source; the steady cost follows.
    sim.enqueue("s", vec![row("t", 0)]).unwrap();
    sim.deliver("s", RelayBudget::FREE);
    for i in 1..=20 {
        sim.advance(20);
        let (source, target) = (source_statements(&sim), target_statements(&sim));
        sim.enqueue("s", vec![row("t", i)]).unwrap();
        let enqueued = source_statements(&sim);
        let runs = sim.deliver("s", RelayBudget::FREE);
        assert_eq!(runs.len(), 1, "row {i}: one in-turn run");
        assert_eq!(runs[0].rows_delivered, 1, "row {i}: delivered in turn");
        let (enqueue, delivery) = (enqueued - source, source_statements(&sim) - enqueued);
        let apply = target_statements(&sim) - target - SIM_HOOK_STATEMENTS;
        println!("row {i}: enqueue {enqueue}, in-turn delivery {delivery}, apply {apply} statements");
        assert!(enqueue <= ENQUEUE_STATEMENTS_MAX, "row {i}: enqueue ran {enqueue} statements");
        assert_eq!(delivery, IN_TURN_DELIVERY_STATEMENTS, "row {i}: the in-turn delivery's statements");
        assert!(apply <= APPLY_STATEMENTS_MAX, "row {i}: apply ran {apply} statements");
        assert!(enqueue + delivery + apply <= LONE_ROW_STATEMENTS_MAX);
    }
    assert_eq!(sim.with_relay("s", |r| r.outbox().state().unwrap().queued_rows), 0, "nothing queued");
    assert_eq!(sim.applied("t", "s"), (0..=20).map(|i| i + 1).collect::<Vec<u64>>());
    // The safety-net alarm finds the last row delivered and removes it.
    assert!(sim.run_until_idle("s", RelayBudget::FREE, 4).drained);
    assert_eq!(sim.applied("t", "s").len(), 21, "nothing sent twice");
    sim.audit().unwrap();
}

#[test]
fn a_lone_row_delivered_by_the_alarm_costs_the_source_a_bounded_number_of_statements() {
    let mut sim = Sim::new(7);
    sim.enqueue("s", vec![row("t", 0)]).unwrap();
    assert!(sim.run_until_idle("s", RelayBudget::FREE, 4).drained);
    for i in 1..=5 {
        sim.advance(1_000);
        let before = source_statements(&sim);
        sim.enqueue("s", vec![row("t", i)]).unwrap();
        let queued = source_statements(&sim);
        assert!(sim.run_until_idle("s", RelayBudget::FREE, 4).drained);
        let delivered = source_statements(&sim);
        let (enqueue, delivery) = (queued - before, delivered - queued);
        println!("row {i}: enqueue {enqueue} statements, alarm delivery {delivery}");
        assert!(enqueue <= ENQUEUE_STATEMENTS_MAX, "enqueue ran {enqueue} statements");
        assert!(delivery <= ALARM_DELIVERY_STATEMENTS_MAX, "delivery ran {delivery} statements");
    }
    assert_eq!(sim.applied("t", "s"), (1..=6).collect::<Vec<u64>>());
    sim.audit().unwrap();
}

/// Source statements per row of one 256-row request over 4 targets,
/// enqueued and delivered (in turn, then by the alarm for what one
/// in-turn fire leaves): the enqueue's read and 16 multi-row inserts, each
/// fire's reads, calls' bookkeeping and checkpoint, spread over the rows.
const BURST_SOURCE_STATEMENTS_PER_ROW_MAX: f64 = 0.25;

#[test]
fn a_burst_costs_the_source_a_fraction_of_a_statement_per_row() {
    let mut sim = Sim::new(8);
    sim.set_in_turn(true);
    sim.enqueue("s", vec![row("t", 0)]).unwrap();
    sim.deliver("s", RelayBudget::FREE);
    let burst: Vec<EnqueueRow> = (1..=256).map(|i| row(&format!("t{}", i % 4), i)).collect();
    let before = source_statements(&sim);
    sim.enqueue("s", burst).unwrap();
    sim.deliver("s", RelayBudget::FREE);
    assert!(sim.run_until_idle("s", RelayBudget::FREE, 20).drained);
    let per_row = (source_statements(&sim) - before) as f64 / 256.0;
    println!("a 256-row request: {per_row:.3} source statements per row");
    assert!(per_row <= BURST_SOURCE_STATEMENTS_PER_ROW_MAX, "{per_row}");
    for t in 0..4 {
        assert_eq!(sim.applied(&format!("t{t}"), "s").len(), 64);
    }
    sim.audit().unwrap();
}

/// Statements a lone row costs the partition objects of its logical
/// source, its enqueue and its in-turn delivery: the fence's read comes on
/// top of a plain source's enqueue (the simulator's own read of the `os`
/// before each routed enqueue is counted apart).
const ROUTED_LONE_ROW_STATEMENTS_MAX: u64 = 3;

/// Statements the simulator's partition sink runs per routed enqueue to
/// check the sequences it is told (`os` before), which no shipped router does.
const SIM_ROUTED_CHECK_STATEMENTS: u64 = 1;

#[test]
fn a_lone_row_routed_to_a_partition_costs_it_a_bounded_number_of_statements() {
    use durable_relay_sql::core::{Layout, PartitionMap};
    let mut sim = Sim::new(9);
    sim.set_in_turn(true);
    let map = PartitionMap { partitions: Layout::Count(2), epoch: 1, from: vec![] };
    let objects = ["orders:0", "orders:1"];
    let statements =
        |sim: &Sim| objects.iter().map(|o| sim.with_relay(o, |r| r.sql().io().statements)).sum::<u64>();
    let mut delivered = 0;
    for i in 0..=10 {
        sim.advance(20);
        let before = statements(&sim);
        sim.enqueue_routed("orders", &map, None, vec![row("t", i)]).unwrap();
        for o in objects {
            delivered += sim.deliver(o, RelayBudget::FREE).iter().map(|r| r.rows_delivered).sum::<u32>();
        }
        let spent = statements(&sim) - before - SIM_ROUTED_CHECK_STATEMENTS;
        println!("row {i}: {spent} statements at its partitions");
        if i > 0 {
            assert!(spent <= ROUTED_LONE_ROW_STATEMENTS_MAX, "row {i}: {spent}");
        }
    }
    assert_eq!(delivered, 11, "every row delivered in turn");
    sim.audit().unwrap();
}

/// Statements a lone row to an HTTPS endpoint costs its source, enqueue and
/// in-turn delivery: as a lone row to an object (the receiver keeps no
/// watermark here, so there is no target side to count).
const ENDPOINT_LONE_ROW_SOURCE_STATEMENTS_MAX: u64 = ENQUEUE_STATEMENTS_MAX + IN_TURN_DELIVERY_STATEMENTS;

#[test]
fn a_lone_row_to_an_endpoint_costs_its_source_as_a_lone_row_to_an_object() {
    let mut sim = Sim::new(10);
    sim.set_in_turn(true);
    sim.enqueue("s", vec![row("t", 0)]).unwrap();
    sim.deliver("s", RelayBudget::FREE);
    sim.with_relay("s", |r| r.set_endpoints(["e1".to_owned()].into(), Default::default()));
    for i in 1..=10 {
        sim.advance(20);
        let before = source_statements(&sim);
        sim.enqueue("s", vec![row("endpoint:e1", i)]).unwrap();
        let runs = sim.deliver("s", RelayBudget::FREE);
        assert_eq!(runs.iter().map(|r| r.rows_delivered).sum::<u32>(), 1, "row {i}: delivered in turn");
        let spent = source_statements(&sim) - before;
        println!("row {i}: {spent} source statements to an endpoint");
        assert!(spent <= ENDPOINT_LONE_ROW_SOURCE_STATEMENTS_MAX, "row {i}: {spent}");
    }
    sim.audit().unwrap();
}
