//! Delayed rows, through the simulator (the shipped SQL and driver): a row
//! is never sent before the time it asked for; it holds back the later rows
//! of its target and no others; the alarm waits for the earliest due row
//! when nothing else is due; a held row is not late before it is due; a
//! delay past the limit is refused and writes nothing. The simulator's
//! audit also checks every call against the time each row asked for,
//! worked out from the request apart from the relay's bookkeeping.

use durable_relay_sql::core::{
    Delay, EnqueueRefusal, EnqueueRow, Name, RelayBudget, MAX_DELAY_MS, RELAY_LAG_BOUND_MS,
};
use durable_relay_sql::sim::Sim;
use serde_json::json;

const S: &str = "src";

fn row(target: &str, key: &str, value: i64) -> EnqueueRow {
    EnqueueRow::new(Name::new(target).unwrap(), vec![(key.to_owned(), json!(value))], vec![])
}

fn status(sim: &Sim) -> durable_relay_sql::SourceStatus {
    let now = sim.now_ms();
    sim.with_relay(S, |r| futures::executor::block_on(r.status(now))).unwrap()
}

#[test]
fn a_delayed_row_is_not_sent_before_its_time_and_the_alarm_is_armed_for_it() {
    let mut sim = Sim::new(31);
    sim.audit_every_fire(true);
    let t0 = sim.now_ms();
    let done = sim.enqueue_keyed(S, None, vec![row("a", "k", 1).delayed(Delay::For(10_000))]).unwrap();
    assert_eq!(done.due_ms, vec![t0 + 10_000]);
    assert_eq!(sim.alarm_at(S), Some(t0 + 10_000), "nothing else is due: the alarm waits for the row");
    // An alarm run early (as a dropped-and-rearmed one would) sends nothing.
    let early = sim.run_alarm(S, RelayBudget::FREE);
    assert_eq!(early.totals.calls, 0);
    assert_eq!(sim.alarm_at(S), Some(t0 + 10_000), "and arms for the row again");
    let drain = sim.run_until_idle(S, RelayBudget::FREE, 10);
    assert!(drain.drained);
    assert_eq!(sim.now_ms(), t0 + 10_000, "delivered by the alarm at its time");
    assert_eq!(sim.applied("a", S), vec![1]);
    sim.audit().unwrap();
}

#[test]
fn a_held_row_holds_back_later_rows_of_its_target_and_never_other_targets() {
    let mut sim = Sim::new(32);
    sim.audit_every_fire(true);
    let t0 = sim.now_ms();
    let rows = vec![
        row("a", "k", 1).delayed(Delay::NotBefore(t0 + 5_000)),
        row("a", "k", 2),
        row("b", "k", 3),
        row("a", "k", 4).delayed(Delay::For(1_000)),
    ];
    let done = sim.enqueue_keyed(S, None, rows).unwrap();
    assert_eq!(done.due_ms, vec![t0 + 5_000, t0 + 5_000, 0, t0 + 5_000], "a's later rows inherit its time");
    assert_eq!(sim.alarm_at(S), Some(t0), "b is due now");
    let first = sim.run_alarm(S, RelayBudget::FREE);
    assert_eq!(sim.applied("b", S), vec![3], "another target is not held back");
    assert!(sim.applied("a", S).is_empty());
    assert_eq!(first.next_alarm_ms, Some(t0 + 5_000), "then the alarm waits for a's row");
    // More rows for a while it waits also wait, and keep their order.
    sim.advance(2_000);
    sim.enqueue(S, vec![row("a", "k", 5), row("c", "k", 6)]).unwrap();
    sim.run_until_idle(S, RelayBudget::FREE, 20);
    assert_eq!(sim.applied("a", S), vec![1, 2, 4, 5]);
    assert_eq!(sim.applied("c", S), vec![6]);
    sim.audit().unwrap();
}

#[test]
fn a_held_row_is_not_late_before_it_is_due_but_is_after() {
    let mut sim = Sim::new(33);
    let wait = 2 * RELAY_LAG_BOUND_MS;
    sim.enqueue(S, vec![row("a", "k", 1).delayed(Delay::For(wait))]).unwrap();
    sim.advance(RELAY_LAG_BOUND_MS + 1_000);
    let a = sim.run_alarm(S, RelayBudget::FREE);
    assert!(!a.totals.lag_exceeded, "older than the lag bound, but not due yet");
    assert!(!status(&sim).lag_exceeded);
    sim.fail_target("a");
    sim.advance(wait);
    let a = sim.run_alarm(S, RelayBudget::FREE);
    assert!(a.totals.lag_exceeded, "due for longer than the lag bound and not delivered: late");
    assert!(status(&sim).lag_exceeded);
    sim.heal_target("a");
    assert!(sim.run_until_idle(S, RelayBudget::FREE, 20).drained);
}

#[test]
fn a_delay_at_the_limit_is_accepted_and_past_it_or_with_both_fields_refused_writing_nothing() {
    let mut sim = Sim::new(34);
    let now = sim.now_ms();
    let code = |r: Result<_, EnqueueRefusal>| r.map(|_| ()).map_err(|e| e.code().as_str().to_owned());
    let mut both = row("a", "k", 1).delayed(Delay::For(1));
    both.not_before_ms = Some(now + 1);
    assert_eq!(code(sim.enqueue_keyed(S, None, vec![both])), Err("conflicting_delay".to_owned()));
    let past = vec![row("a", "k", 1).delayed(Delay::For(MAX_DELAY_MS + 1))];
    assert_eq!(code(sim.enqueue_keyed(S, None, past)), Err("delay_too_long".to_owned()));
    let past = vec![row("a", "k", 1).delayed(Delay::NotBefore(now + MAX_DELAY_MS + 1))];
    assert_eq!(code(sim.enqueue_keyed(S, None, past)), Err("delay_too_long".to_owned()));
    assert_eq!(sim.os(S), 0, "nothing written");
    let at_limit = vec![row("a", "k", 1).delayed(Delay::NotBefore(now + MAX_DELAY_MS))];
    assert_eq!(code(sim.enqueue_keyed(S, None, at_limit)), Ok(()));
    assert_eq!(sim.alarm_at(S), Some(now + MAX_DELAY_MS));
    let d = sim.run_until_idle(S, RelayBudget::FREE, 10);
    assert!(d.drained);
    assert_eq!(sim.applied("a", S), vec![1]);
}

#[test]
fn a_delayed_row_keeps_its_time_through_parking_and_redrive() {
    let mut sim = Sim::new(35);
    sim.audit_every_fire(true);
    sim.fail_target_permanently("a");
    sim.enqueue(S, vec![row("a", "k", 1), row("a", "k", 2).delayed(Delay::For(30_000))]).unwrap();
    sim.run_alarm(S, RelayBudget::FREE);
    assert_eq!(sim.parked_rows(S, "a"), vec![1, 2], "parked with its delayed row");
    sim.heal_target("a");
    assert_eq!(sim.redrive(S, "a"), 2);
    sim.run_until_idle(S, RelayBudget::FREE, 20);
    assert_eq!(sim.applied("a", S), vec![1, 2], "the audit saw row 2 wait for its time");
    sim.audit().unwrap();
}

#[test]
fn a_discarded_delayed_row_no_longer_holds_its_target() {
    let mut sim = Sim::new(36);
    sim.audit_every_fire(true);
    sim.fail_target_permanently("p");
    sim.enqueue(S, vec![row("p", "k", 1)]).unwrap();
    sim.run_alarm(S, RelayBudget::FREE);
    assert_eq!(sim.parked_targets(S).len(), 1, "a permanent error parks it");
    let t0 = sim.now_ms();
    let held = sim.enqueue_keyed(S, None, vec![row("p", "k", 2).delayed(Delay::For(MAX_DELAY_MS))]).unwrap();
    assert_eq!(held.due_ms, vec![t0 + MAX_DELAY_MS], "parked behind, holding p for 24 h");
    assert_eq!(sim.discard(S, "p"), 2);
    sim.heal_target("p");
    // Nothing of p's is owed any more: a new row waits for nothing discarded.
    let next = sim.enqueue_keyed(S, None, vec![row("p", "k", 3)]).unwrap();
    assert!(next.due_ms.is_empty(), "due at once, not in 24 h: {:?}", next.due_ms);
    assert!(sim.run_until_idle(S, RelayBudget::FREE, 10).drained);
    assert_eq!(sim.applied("p", S), vec![3]);
    sim.audit().unwrap();
}

#[test]
fn a_duplicate_answers_the_due_times_the_original_answered() {
    let mut sim = Sim::new(37);
    let t0 = sim.now_ms();
    let rows = vec![row("a", "k", 1).delayed(Delay::For(5_000)), row("a", "k", 2), row("b", "k", 3)];
    let first = sim.enqueue_keyed(S, Some("order-1"), rows.clone()).unwrap();
    assert_eq!(first.due_ms, vec![t0 + 5_000, t0 + 5_000, 0]);
    sim.advance(1_000);
    let again = sim.enqueue_keyed(S, Some("order-1"), rows).unwrap();
    assert!(again.duplicate);
    assert_eq!(again.due_ms, first.due_ms, "the same answer, not an empty one");
}
