//! The in-turn delivery's own rules, on the explorer's world: a second
//! run for an enqueue that came while one ran, the bound on runs in a row,
//! and no run for rows not yet due.

use super::*;
use crate::core::{IN_TURN_ALARM_GRACE_MS, IN_TURN_RUNS_MAX};

fn stream(enqueues: usize) -> DeliveryScenario {
    DeliveryScenario { name: "stream", enqueues: vec![vec!["t1"]; enqueues], batch_rows: 1 }
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

/// Targets no delivery may call.
struct NoTargets;

impl crate::driver::Targets for NoTargets {
    async fn apply(&self, target: &crate::core::Name, _: String) -> CallOutcome {
        panic!("{target} was called");
    }
}
