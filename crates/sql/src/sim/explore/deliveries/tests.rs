//! The in-turn delivery's own rules, on the explorer's world: a second
//! run for an enqueue that came while one ran, the bound on runs in a row,
//! no run for rows not yet due, and one delivery at a time beside the
//! alarm.

use super::*;
use crate::core::{IN_TURN_ALARM_GRACE_MS, IN_TURN_DEFER_MAX_MS, IN_TURN_RUNS_MAX};

fn stream(enqueues: usize) -> DeliveryScenario {
    DeliveryScenario { name: "stream", enqueues: vec![vec!["t1"]; enqueues], batch_rows: 1, releases: None }
}

/// Enqueues once while the running delivery awaits its call, then
/// answers that call: the delivery runs again, `n` times.
fn feed(run: &mut Run<'_>, n: u32) {
    run.apply(&Action::Enqueue, false);
    for _ in 0..n {
        run.apply(&Action::Enqueue, true);
        let call = run.wire.live()[0];
        run.apply(&Action::Answer(call), false);
    }
}

#[test]
fn an_enqueue_while_a_delivery_runs_makes_it_run_again_and_arms_no_alarm() {
    let scenario = stream(3);
    let mut run = Run::new(&scenario);
    let armed = run.sim.now_ms() + 1 + IN_TURN_ALARM_GRACE_MS;
    feed(&mut run, 2);
    let call = run.wire.live()[0];
    run.apply(&Action::Answer(call), false);
    assert!(run.deliveries.is_empty(), "{}", run.script.join("\n"));
    assert!(
        run.script.iter().any(|l| l.contains("delivery 0 ends: in-turn: 3 runs")),
        "{}",
        run.script.join("\n")
    );
    assert_eq!(run.sim.alarm_at(SOURCE), Some(armed), "the first enqueue's safety net, never moved");
    assert_eq!(run.source().relay.outbox().state().map(|s| s.alarms).unwrap_or(1), 0, "no alarm ran");
    run.settle().unwrap();
}

#[test]
fn a_delivery_runs_at_most_the_bound_in_a_row_then_leaves_the_rest_to_an_alarm_armed_now() {
    let scenario = stream(IN_TURN_RUNS_MAX as usize + 2);
    let mut run = Run::new(&scenario);
    feed(&mut run, IN_TURN_RUNS_MAX - 1);
    assert_eq!(run.deliveries.len(), 1, "still one delivery, on its last run");
    run.apply(&Action::Enqueue, true);
    let call = run.wire.live()[0];
    run.apply(&Action::Answer(call), false);
    let ended = format!("delivery 0 ends: in-turn: {IN_TURN_RUNS_MAX} runs");
    assert!(run.script.iter().any(|l| l.contains(&ended)), "{}", run.script.join("\n"));
    assert_eq!(run.sim.alarm_at(SOURCE), Some(run.sim.now_ms()), "the row left is the alarm's, now");
    run.settle().unwrap();
}

#[test]
fn a_delayed_row_starts_no_delivery() {
    let scenario = stream(1);
    let run = Run::new(&scenario);
    let row =
        EnqueueRow::to(name("t1")).put("v", serde_json::json!(1)).delayed(crate::core::Delay::For(5_000));
    let mut sim = run.sim;
    sim.enqueue(SOURCE, vec![row]).unwrap();
    let src = sim.world.source(&name(SOURCE));
    let now = sim.now_ms();
    let runs = futures::executor::block_on(src.relay.deliver(&NoTargets, &|| now, &NoObserver)).unwrap();
    assert!(runs.is_empty(), "nothing is due: no run");
    assert_eq!(sim.alarm_at(SOURCE), Some(now + 5_000), "the alarm waits for the row");
}

#[test]
fn an_alarm_that_comes_while_a_delivery_runs_defers_to_it_and_rearms_the_safety_net() {
    let scenario = stream(1);
    let mut run = Run::new(&scenario);
    run.apply(&Action::Enqueue, false);
    assert_eq!(run.wire.live().len(), 1, "the in-turn delivery awaits its call");
    run.apply(&Action::Alarm, true);
    assert_eq!(run.wire.live().len(), 1, "the alarm made no call beside it");
    assert!(run.script.iter().any(|l| l.contains("alarm: 0 rows delivered")), "{}", run.script.join("\n"));
    let rearmed = run.sim.now_ms() + IN_TURN_ALARM_GRACE_MS;
    assert_eq!(run.sim.alarm_at(SOURCE), Some(rearmed), "the safety net, armed again");
    let call = run.wire.live()[0];
    run.apply(&Action::Answer(call), false);
    assert!(run.deliveries.is_empty(), "{}", run.script.join("\n"));
    run.settle().unwrap();
}

/// An enqueue whose delivery awaits its call, then the alarm, `waited_ms`
/// after that delivery's run began: how many calls are then awaited.
fn alarm_after(waited_ms: u64) -> (usize, Run<'static>) {
    let scenario = Box::leak(Box::new(stream(1)));
    let mut run = Run::new(scenario);
    run.apply(&Action::Enqueue, false);
    // The run began as the enqueue's action ended; the alarm's action adds 1 ms.
    let began = run.sim.now_ms();
    run.sim.world.clock.set(began + waited_ms - 1);
    run.apply(&Action::Alarm, true);
    (run.wire.live().len(), run)
}

#[test]
fn an_alarm_defers_to_a_delivery_until_its_run_has_lasted_the_bound_then_delivers_beside_it() {
    let (calls, mut run) = alarm_after(IN_TURN_DEFER_MAX_MS - 1);
    assert_eq!(calls, 1, "just within the bound: the alarm defers\n{}", run.script.join("\n"));
    run.settle().unwrap();
    let (calls, mut run) = alarm_after(IN_TURN_DEFER_MAX_MS);
    assert_eq!(calls, 2, "at the bound: the delivery is taken for stuck\n{}", run.script.join("\n"));
    let breach = run.settle().unwrap_err();
    assert!(breach.contains("still waited for its answer"), "the overlap is the price, and seen: {breach}");
    assert_eq!(run.applied.borrow()["t1"].len(), 1, "the row applied once");
}

#[test]
fn an_enqueue_while_the_alarm_runs_leaves_its_rows_to_the_next_alarm_armed_now() {
    let scenario = stream(2);
    let mut run = Run::new(&scenario);
    run.apply(&Action::Enqueue, false);
    let call = run.wire.live()[0];
    run.apply(&Action::TimeOut(call), true);
    // The row waits for its back-off; the alarm comes for it.
    run.sim.world.clock.set(run.sim.alarm_at(SOURCE).unwrap_or(0).max(run.sim.now_ms() + 60_000));
    run.apply(&Action::Alarm, true);
    let alarm_call = *run.wire.live().first().expect("the alarm calls t1");
    run.apply(&Action::Enqueue, true);
    assert_eq!(run.wire.live(), vec![alarm_call], "the enqueue started no call beside the alarm's");
    let enqueued_at = run.sim.now_ms();
    assert_eq!(run.sim.alarm_at(SOURCE), Some(enqueued_at), "the enqueue armed the next alarm now");
    run.apply(&Action::Answer(alarm_call), false);
    assert!(run.deliveries.is_empty(), "{}", run.script.join("\n"));
    assert_eq!(run.sim.queued(SOURCE).len(), 1, "the second row waits");
    assert_eq!(run.sim.alarm_at(SOURCE), Some(enqueued_at), "for the next alarm, due already");
    run.settle().unwrap();
}

/// Targets no delivery may call.
struct NoTargets;

impl crate::driver::Targets for NoTargets {
    async fn apply(&self, target: &crate::core::Name, _: String) -> CallOutcome {
        panic!("{target} was called");
    }
}

#[test]
fn a_lone_row_delivered_in_turn_costs_three_writes_and_its_safety_net_then_finds_it_gone_and_writes_none() {
    let scenario = stream(1);
    let mut run = Run::new(&scenario);
    let written = |run: &Run<'_>| run.source().relay.outbox().state().map_or(0, |s| s.sql_rows_written);
    let before = written(&run);
    run.apply(&Action::Enqueue, false);
    let net = run.sim.now_ms() + IN_TURN_ALARM_GRACE_MS;
    assert_eq!(run.sim.alarm_at(SOURCE), Some(net), "the safety net, the first back-off on");
    let call = run.wire.live()[0];
    run.apply(&Action::Answer(call), false);
    assert!(run.deliveries.is_empty(), "{}", run.script.join("\n"));
    assert_eq!(run.sim.alarm_at(SOURCE), Some(net), "left where it was");
    assert_eq!(written(&run) - before, 3, "the insert, the setAlarm, the tombstone");
    run.sim.world.clock.set(net);
    let report = run.sim.run_alarm(SOURCE, run.budget());
    assert_eq!((report.totals.fires, report.totals.rows_delivered), (1, 0), "it finds the row delivered");
    assert_eq!(written(&run) - before, 3, "and writes nothing");
    assert_eq!(run.sim.alarm_at(SOURCE), None, "nor arms another");
    run.settle().unwrap();
}
