//! Packed rows (`SourceConfig::pack_rows`): a multi-row enqueue stored as
//! one outbox row, through the simulator on the shipped SQL. What a packed
//! burst costs in rows written, and that every promise holds per row:
//! order per target, each row applied once, parking and redrive, delayed
//! rows, the queued listing and the gauges, and that a build before packs
//! refuses storage holding one.

use durable_relay_sql::core::{Delay, EnqueueRow, Name, RelayBudget};
use durable_relay_sql::sim::{Sim, SourcePolicy};
use durable_relay_sql::testing::upgrade::{migrate_to, Component};
use serde_json::json;

fn row(target: &str, v: u64) -> EnqueueRow {
    EnqueueRow::new(Name::new(target).unwrap(), vec![("v".to_owned(), json!(v))], vec![])
}

fn written(sim: &Sim, source: &str) -> u64 {
    sim.with_relay(source, |r| r.outbox().state().unwrap().sql_rows_written)
}

/// A 256-row request over 64 targets (four rows each, interleaved), the
/// benchmark's burst.
fn burst(from: u64) -> Vec<EnqueueRow> {
    (from..from + 256).map(|i| row(&format!("t{}", i % 64), i)).collect()
}

/// Source rows written per row of `requests` bursts delivered under
/// `budget`.
fn burst_cost(packed: bool, requests: u64, budget: RelayBudget) -> f64 {
    Sim::set_pack_rows(packed);
    let mut sim = Sim::new(61);
    sim.audit_every_fire(true);
    let before = written(&sim, "s");
    for r in 0..requests {
        sim.enqueue("s", burst(r * 256)).unwrap();
    }
    let drain = sim.run_until_idle("s", budget, 200);
    assert!(drain.drained);
    for t in 0..64u64 {
        let applied = sim.applied(&format!("t{t}"), "s");
        assert_eq!(applied.len() as u64, requests * 4, "t{t}: every row once");
        assert!(applied.windows(2).all(|w| w[0] < w[1]), "t{t}: in order");
    }
    sim.audit().unwrap();
    (written(&sim, "s") - before) as f64 / (requests * 256) as f64
}

/// Source rows written per row of packed 256-row bursts on Paid (32
/// targets a fire): the pack and its index entry, a rewrite per fire that
/// delivers from it, its removal, the alarms and the state writes, shared
/// by 256 rows.
const PACKED_BURST_ROWS_WRITTEN_PER_ROW_MAX_PAID: f64 = 0.05;

/// The same on Free, 8 targets a fire: each of the 8 fires a burst over 64
/// targets takes rewrites every pack in its window.
const PACKED_BURST_ROWS_WRITTEN_PER_ROW_MAX_FREE: f64 = 0.12;

#[test]
fn a_packed_burst_costs_the_source_a_small_fraction_of_a_row_written_per_row() {
    let plain = burst_cost(false, 5, RelayBudget::FREE);
    let free = burst_cost(true, 5, RelayBudget::FREE);
    let paid = burst_cost(true, 5, RelayBudget::PAID);
    println!(
        "source rows written per row, 256-row bursts over 64 targets: {plain:.3} plain, \
         {free:.3} packed on Free, {paid:.3} packed on Paid"
    );
    assert!(free <= PACKED_BURST_ROWS_WRITTEN_PER_ROW_MAX_FREE, "{free}");
    assert!(paid <= PACKED_BURST_ROWS_WRITTEN_PER_ROW_MAX_PAID, "{paid}");
    assert!(plain >= 2.0, "each plain row is written and removed: {plain}");
}

#[test]
fn packed_rows_reach_each_target_once_in_order_through_parking_and_redrive() {
    Sim::set_pack_rows(true);
    let mut sim = Sim::new(62);
    sim.audit_every_fire(true);
    let mut policy = SourcePolicy::default();
    policy.relay.park_after_failed_cycles = Some(2);
    sim.set_policy("s", policy);
    sim.fail_target("down");
    for r in 0..6u64 {
        let rows = (0..8).map(|i| row(if i % 3 == 0 { "down" } else { "up" }, r * 8 + i)).collect();
        sim.enqueue("s", rows).unwrap();
        sim.run_until_idle("s", RelayBudget::FREE, 20);
    }
    let parked = sim.parked_rows("s", "down");
    assert_eq!(parked.len(), 18, "every row of the failing target parked, out of its packs");
    assert_eq!(sim.applied("up", "s").len(), 30, "the healthy target's rows pass the parked ones");
    sim.heal_target("down");
    sim.redrive("s", "down");
    assert!(sim.run_until_idle("s", RelayBudget::FREE, 20).drained);
    assert_eq!(sim.applied("down", "s"), parked, "redriven, in order, once");
    assert!(sim.queued("s").is_empty());
    sim.audit().unwrap();
}

#[test]
fn packed_rows_are_listed_counted_and_delayed_row_by_row() {
    Sim::set_pack_rows(true);
    let mut sim = Sim::new(63);
    let late = row("t", 2).delayed(Delay::For(60_000));
    sim.enqueue("s", vec![row("t", 1), late, row("u", 3), row("t", 4)]).unwrap();
    let page = sim.with_relay("s", |r| r.queued_page(&Name::new("t").unwrap(), 0, 10)).unwrap();
    let seqs: Vec<u64> = page.rows.iter().map(|r| r.seq).collect();
    assert_eq!(seqs, [1, 2, 4], "t's rows out of the pack, in order");
    assert_eq!(page.rows[0].effects, r#"{"puts":[["v",1]],"deletes":[]}"#, "effects verbatim");
    let state = sim.with_relay("s", |r| r.outbox().state().unwrap());
    assert_eq!((state.queued_rows, state.os), (4, 4), "the gauges count rows, not packs");
    sim.run_alarm("s", RelayBudget::FREE);
    assert_eq!(sim.applied("t", "s"), [1], "row 2 waits, and row 4 behind it");
    assert_eq!(sim.applied("u", "s"), [3]);
    assert_eq!(sim.queued("s"), [2, 4]);
    let waiting = sim.with_relay("s", |r| r.outbox().state().unwrap());
    assert_eq!((waiting.queued_rows, waiting.queued_bytes > 0), (2, true), "what the pack still holds");
    // The clock moves to each alarm: the delayed rows go at their time.
    assert!(sim.run_until_idle("s", RelayBudget::FREE, 5).drained);
    assert_eq!(sim.applied("t", "s"), [1, 2, 4]);
    sim.audit().unwrap();
}

#[test]
fn a_build_before_packs_refuses_storage_that_holds_one() {
    Sim::set_pack_rows(true);
    let mut sim = Sim::new(64);
    sim.enqueue("s", vec![row("t", 1), row("u", 2)]).unwrap();
    // The build before packs knew the source's schema up to version 12.
    let refused = sim.with_relay("s", |r| migrate_to(r.sql(), Component::Source, 12));
    let message = refused.unwrap_err().to_string();
    assert!(message.contains("version 13"), "{message}");
    Sim::set_pack_rows(false);
    let mut plain = Sim::new(65);
    plain.enqueue("s", vec![row("t", 1), row("u", 2)]).unwrap();
    assert!(
        plain.with_relay("s", |r| migrate_to(r.sql(), Component::Source, 12)).is_ok(),
        "a source that never packed runs under the build before"
    );
}
