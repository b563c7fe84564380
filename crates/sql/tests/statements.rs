//! What a lone row costs the source in SQL statements, on the shipped SQL
//! and driver (the simulator's SQLite). Each statement is a call into the
//! runtime, and in workerd that call, not SQLite's work, is most of a
//! statement's CPU; the benchmark's profile (`bench/profile.mjs`) counts the
//! same statements there. These bounds hold the counts it reported, so a
//! change that adds a statement to every row fails here first.

use durable_relay_sql::core::{EnqueueRow, Name, RelayBudget};
use durable_relay_sql::sim::Sim;
use serde_json::json;

/// Statements one single-row enqueue runs on an open source: the state with
/// its tail (which says the source never stored a partition map, so its
/// fence is not read), the targets' parked flags and holds, the newest
/// sequence, and the row's insert (into a recycled tombstone).
const ENQUEUE_STATEMENTS_MAX: u64 = 4;

/// Statements one alarm that delivers a lone row runs at the source: the
/// state (twice: the fire and the summary), the scan, the bodies, the
/// checkpoint's guard, delete and tombstone, the newest sequence, the
/// owed head, and one read that finds nothing to prune and times the idle wake-up.
const DELIVERY_STATEMENTS_MAX: u64 = 10;

fn row(target: &str, i: u64) -> EnqueueRow {
    EnqueueRow::to(Name::new(target).unwrap()).put(format!("k{i}"), json!(i))
}

fn statements(sim: &Sim) -> u64 {
    sim.with_relay("s", |r| r.sql().io().statements)
}

#[test]
fn a_lone_row_costs_the_source_a_bounded_number_of_statements() {
    let mut sim = Sim::new(7);
    // The first row opens and migrates the source; the steady cost follows.
    sim.enqueue("s", vec![row("t", 0)]).unwrap();
    assert!(sim.run_until_idle("s", RelayBudget::FREE, 4).drained);
    for i in 1..=5 {
        sim.advance(1_000);
        let before = statements(&sim);
        sim.enqueue("s", vec![row("t", i)]).unwrap();
        let queued = statements(&sim);
        assert!(sim.run_until_idle("s", RelayBudget::FREE, 4).drained);
        let delivered = statements(&sim);
        let (enqueue, delivery) = (queued - before, delivered - queued);
        println!("row {i}: enqueue {enqueue} statements, delivery {delivery}");
        assert!(enqueue <= ENQUEUE_STATEMENTS_MAX, "enqueue ran {enqueue} statements");
        assert!(delivery <= DELIVERY_STATEMENTS_MAX, "delivery ran {delivery} statements");
    }
    assert_eq!(sim.applied("t", "s"), (1..=6).collect::<Vec<u64>>());
    sim.audit().unwrap();
}
