//! Behaviour the simulator once got wrong because it re-implemented the
//! Worker's steps (it now runs the shipped store, driver and alarm keeper),
//! and the contract for rows that are parked rather than delivered. Each
//! test fails on the old behaviour it names.

use durable_relay_sql::core::{
    BudgetError, EnqueueRow, Name, RelayBudget, PRUNE_BATCH_ROWS, PRUNE_INTERVAL_MS, PRUNE_STEPS_PER_ALARM,
};
use durable_relay_sql::sim::{Commit, Sim, SourcePolicy};
use durable_relay_sql::AlarmError;
use serde_json::json;

const S: &str = "src";

fn row(target: &str, key: &str, value: serde_json::Value) -> EnqueueRow {
    EnqueueRow::new(Name::new(target).unwrap(), vec![(key.to_owned(), value)], vec![])
}

#[test]
fn an_idle_source_wakes_to_prune_when_its_first_key_expires_not_an_hour_later() {
    let mut sim = Sim::new(1);
    let horizon = 60_000;
    sim.set_policy(S, SourcePolicy { dedup_horizon_ms: horizon, ..Default::default() });
    sim.enqueue_keyed(S, Some("k"), vec![row("t", "a", json!(1))]).unwrap();
    let enqueued_at = sim.now_ms();
    let d = sim.run_until_idle(S, RelayBudget::FREE, 1);
    assert_eq!(d.alarms, 1);
    // The delivering alarm found nothing to prune, so it recorded no prune
    // time: the next wake is the key's expiry. (The old simulator recorded a
    // prune anyway and slept for PRUNE_INTERVAL_MS, an hour.)
    let wake = sim.alarm_at(S).expect("a prune alarm");
    assert_eq!(wake, enqueued_at + horizon);
    assert!(wake - sim.now_ms() < PRUNE_INTERVAL_MS);
    let d = sim.run_until_idle(S, RelayBudget::FREE, 10);
    assert_eq!((d.alarms, d.drained), (1, true));
    assert_eq!(sim.dedup_records(S), 0);
}

#[test]
fn one_alarm_prunes_up_to_four_batches_of_expired_keys() {
    let mut sim = Sim::new(2);
    sim.set_policy(S, SourcePolicy { dedup_horizon_ms: 1_000, ..Default::default() });
    let keys = (PRUNE_BATCH_ROWS * 2 + 200) as usize;
    for i in 0..keys {
        sim.enqueue_keyed(S, Some(&format!("key-{i}")), vec![row("t", "a", json!(i))]).unwrap();
    }
    sim.run_until_idle(S, RelayBudget::PAID, 100);
    assert!(sim.queued(S).is_empty());
    sim.advance(2_000);
    sim.put(S, "t", "b", json!(0)).unwrap();
    sim.run_alarm(S, RelayBudget::PAID);
    // 1,200 expired keys, 500 per step, 4 steps per alarm: all gone in one
    // alarm. (The old simulator pruned one batch per alarm.)
    assert!(keys as u32 <= PRUNE_BATCH_ROWS * PRUNE_STEPS_PER_ALARM);
    assert_eq!(sim.dedup_records(S), 0);
}

#[test]
fn an_enqueue_during_a_back_off_brings_the_alarm_forward_to_now() {
    let mut sim = Sim::new(3);
    sim.put(S, "down", "k", json!(1)).unwrap();
    sim.fail_target("down");
    // Fires that deliver nothing back off, doubling: 1 s, 2 s, 4 s, 8 s, then
    // the failing target's own retry, 10 s on.
    for _ in 0..5 {
        let at = sim.alarm_at(S).unwrap();
        sim.advance(at.saturating_sub(sim.now_ms()));
        sim.run_alarm(S, RelayBudget::FREE);
    }
    let backoff = sim.alarm_at(S).unwrap() - sim.now_ms();
    assert_eq!(backoff, durable_relay_sql::core::TARGET_RETRY_BACKOFF_MAX_MS, "backed off {backoff} ms");
    sim.put(S, "up", "k", json!(2)).unwrap();
    // The old simulator kept the later alarm (10 s away); the keeper brings it
    // forward, so the healthy row does not wait behind the failing one.
    assert_eq!(sim.alarm_at(S), Some(sim.now_ms()));
    sim.run_alarm(S, RelayBudget::FREE);
    assert_eq!(sim.applied("up", S), vec![2]);
}

#[test]
fn a_parked_row_is_not_delivered_and_holds_the_watermark_back() {
    let mut sim = Sim::new(4);
    sim.put(S, "ok", "k", json!(1)).unwrap();
    sim.advance(10);
    let parked_at = sim.now_ms();
    sim.put(S, "strict", "k", json!(2)).unwrap();
    sim.advance(10);
    sim.put(S, "ok", "k", json!(3)).unwrap();
    sim.fail_target_permanently("strict");
    sim.run_until_idle(S, RelayBudget::default(), 10);
    assert_eq!(sim.parked_rows(S, "strict"), vec![2]);
    assert!(sim.queued(S).is_empty(), "nothing queued: the outbox alone would call everything delivered");
    assert!(sim.delivered_through(S, 1));
    assert!(!sim.delivered_through(S, 2), "a parked row never reached its target");
    assert!(!sim.delivered_through(S, 3));
    sim.advance(60_000);
    assert_eq!(sim.relay_watermark(S), parked_at - 1, "not now: the parked row is still owed");
    // A redrive does not move the watermark back: the row was owed all along.
    sim.heal_target("strict");
    assert_eq!(sim.redrive(S, "strict"), 1);
    assert_eq!(sim.relay_watermark(S), parked_at - 1);
    sim.run_until_idle(S, RelayBudget::default(), 10);
    assert!(sim.delivered_through(S, 3));
    assert_eq!(sim.relay_watermark(S), sim.now_ms(), "nothing owed");
    sim.audit().unwrap();
}

#[test]
fn a_discarded_row_is_settled_by_the_operator_and_releases_the_watermark() {
    let mut sim = Sim::new(5);
    sim.put(S, "gone", "k", json!(1)).unwrap();
    sim.put(S, "ok", "k", json!(2)).unwrap();
    sim.fail_target_permanently("gone");
    sim.run_until_idle(S, RelayBudget::default(), 10);
    assert!(!sim.delivered_through(S, 2));
    assert_eq!(sim.discard(S, "gone"), 1);
    assert!(sim.delivered_through(S, 2), "discarded: an operator settled it");
    assert_eq!(sim.relay_watermark(S), sim.now_ms());
    sim.audit().unwrap();
}

#[test]
fn an_invalid_budget_is_refused_with_an_error_not_a_panic() {
    let mut sim = Sim::new(6);
    sim.put(S, "t", "k", json!(1)).unwrap();
    let bad = RelayBudget { rows_per_fire: 0, ..RelayBudget::FREE };
    let fire = sim.try_fire(S, bad).unwrap_err();
    assert!(matches!(fire, AlarmError::Budget(BudgetError { field: "rows_per_fire", .. })), "{fire:?}");
    let alarm = sim.try_run_alarm(S, RelayBudget { batch_rows: 0, ..RelayBudget::FREE }).unwrap_err();
    assert!(matches!(alarm, AlarmError::Budget(BudgetError { field: "batch_rows", .. })), "{alarm:?}");
    assert_eq!(sim.queued(S), vec![1], "nothing happened");
    sim.run_until_idle(S, RelayBudget::FREE, 5);
    assert_eq!(sim.applied("t", S), vec![1]);
}

#[test]
fn a_target_watermark_fixture_turns_rows_into_duplicates_and_each_fire_shows_its_checkpoint() {
    let mut sim = Sim::new(7);
    for i in 1..=3 {
        sim.put(S, "t", &format!("k{i}"), json!(i)).unwrap();
    }
    sim.set_watermark("t", S, 2);
    let f = sim.fire(S, RelayBudget::default());
    assert_eq!(f.commit, Commit::Committed);
    assert_eq!(f.report.rows_applied, 1, "rows 1 and 2 were duplicates");
    assert_eq!(sim.applied("t", S), vec![3]);
    let cp = f.checkpoint.expect("the fire's checkpoint");
    assert_eq!(cp.deletes.iter().map(|r| (r.first, r.last, r.rows)).collect::<Vec<_>>(), vec![(1, 3, 3)]);
    assert_eq!(cp.rs_expected, None, "the first checkpoint of a source expects no rs");
    assert_eq!(sim.total_calls(), 1);
    assert_eq!(sim.target_calls("t"), 1);
}
