//! An in-turn delivery cut off by the platform (its CPU limit, an eviction,
//! an isolate restart) at every boundary it has: before each statement and
//! each alarm operation of the delivery and of the alarms that come while
//! it awaits, and at each moment it awaits its call. Its call is answered
//! at once, answered after seconds, or times out after the default call
//! timeout; the alarm fires whenever it comes due meanwhile. After the cut
//! the object restarts with nothing of the old instance's memory, and the
//! rows still owed must be due by their back-off: 1 s after the moment the
//! delivery last heard anything (its start, or its call's answer or
//! failure), doubling with the time it then awaited, up to
//! [`TARGET_RETRY_BACKOFF_MAX_MS`]; never the safety net's time instead.
//! Then the world settles and every promise of the explorer is checked.

use super::timely::in_time;
use super::*;
use crate::core::{DEFAULT_CALL_TIMEOUT_MS, IN_TURN_ALARM_GRACE_MS, TARGET_RETRY_BACKOFF_MAX_MS};

/// How a story's one call ends.
#[derive(Clone, Copy, Debug)]
enum Fate {
    /// The target applies the row and answers.
    Answered,
    /// The call times out unapplied (it may still arrive: it never does).
    TimedOut,
}

/// One delivery's story: its row's target, how long its call takes, and
/// how it ends.
#[derive(Clone, Copy, Debug)]
struct Story {
    /// The target of its one row: an object, or an endpoint.
    target: &'static str,
    /// How long its call takes, from the delivery's start, ms.
    call_ms: u64,
    /// How its call ends.
    fate: Fate,
}

/// A call answered as fast as a healthy target answers.
const QUICK_CALL_MS: u64 = 50;
/// A call answered after several of the alarm's comings.
const SLOW_CALL_MS: u64 = 12_000;

/// Each fate of a call, quick and slow, to an object and to an endpoint.
fn stories() -> Vec<Story> {
    let mut all = Vec::new();
    for target in ["t1", ENDPOINT] {
        all.push(Story { target, call_ms: QUICK_CALL_MS, fate: Fate::Answered });
        all.push(Story { target, call_ms: SLOW_CALL_MS, fate: Fate::Answered });
        all.push(Story { target, call_ms: DEFAULT_CALL_TIMEOUT_MS, fate: Fate::TimedOut });
    }
    all
}

/// Where the cut falls.
#[derive(Clone, Copy, Debug)]
enum Cut {
    /// Before the delivery's (or a meanwhile alarm's) `n`th effect.
    Effect(u64),
    /// At the `n`th moment the delivery awaits its call.
    Await(u32),
}

/// The back-off a delivery that has awaited `waited_ms` since it last
/// heard anything has earned: the safety net's time, growing with the wait
/// (as a failing target's does with its failures), up to the longest.
fn earned_ms(waited_ms: u64) -> u64 {
    waited_ms.clamp(IN_TURN_ALARM_GRACE_MS, TARGET_RETRY_BACKOFF_MAX_MS)
}

/// Runs `story` with the cut at `cut`: `Ok(None)` when the delivery ended
/// before the cut could fall (no boundary is left), `Ok(Some(script))`
/// when the cut fell and every promise held, the breach when one did not.
fn told(story: Story, cut: Cut) -> Result<Option<String>, String> {
    let scenario =
        DeliveryScenario { name: "cut", enqueues: vec![vec![story.target]], batch_rows: 1, releases: None };
    let mut run = Run::new(&scenario);
    let off = run.source().relay.sql().cut_off().clone();
    let line = run.enqueue();
    run.script.push(format!("enqueue at {}: {line}", run.sim.now_ms()));
    let started = run.sim.now_ms();
    let (mut awaits, mut before_answer) = (0u32, u64::MAX);
    if let Cut::Effect(n) = cut {
        off.after(n);
    }
    run.poll();
    while !off.fallen() {
        let Some(&call) = run.wire.live().first() else { break };
        if matches!(cut, Cut::Await(n) if n == awaits) {
            off.now();
            run.script.push(format!("at {}: cut while the call is awaited", run.sim.now_ms()));
            break;
        }
        awaits += 1;
        let ends = started + story.call_ms;
        match run.sim.alarm_at(SOURCE).filter(|&at| at < ends) {
            Some(at) => {
                run.sim.world.clock.set(at.max(run.sim.now_ms()));
                let line = run.alarm();
                run.script.push(format!("at {at}: {line}"));
            }
            None => {
                run.sim.world.clock.set(ends);
                before_answer = off.effects();
                let line = match story.fate {
                    Fate::Answered => run.answer(call, true),
                    Fate::TimedOut => run.time_out(call),
                };
                run.script.push(format!("at {ends}: {line}"));
            }
        }
        run.poll();
    }
    let now = run.sim.now_ms();
    if !off.fallen() {
        off.disarm();
        return in_time(&run.sim, SOURCE, now, IN_TURN_ALARM_GRACE_MS).map(|()| None);
    }
    // A cut at the first boundary after the answer came back falls as the
    // delivery hears it: it is held to the wait's bound.
    let heard = if off.effects() > before_answer { now } else { started };
    run.restart();
    run.script.push(format!("at {now}: the object restarts; the alarm is at {:?}", run.sim.alarm_at(SOURCE)));
    let script = run.script.join("\n");
    in_time(&run.sim, SOURCE, now, earned_ms(now - heard)).map_err(|e| format!("{e}\n{script}"))?;
    run.settle().map_err(|e| format!("{e}\n{script}"))?;
    Ok(Some(script))
}

/// Every cut of `story`: at each effect, then at each await; how many fell.
fn every_cut(story: Story) -> Result<u32, String> {
    let mut fell = 0;
    for cut in [Cut::Effect as fn(u64) -> Cut, |n| Cut::Await(n as u32)] {
        for n in 0.. {
            let told = told(story, cut(n)).map_err(|e| format!("{story:?}, cut {:?}: {e}", cut(n)))?;
            if told.is_none() {
                break;
            }
            fell += 1;
        }
    }
    Ok(fell)
}

#[test]
fn an_in_turn_delivery_cut_off_at_any_boundary_leaves_its_rows_due_by_their_back_off() {
    let mut breaches = Vec::new();
    for story in stories() {
        match every_cut(story) {
            // A lone answered row's delivery has one boundary left, its
            // call: it reads and writes nothing else.
            Ok(fell) => assert!(fell >= 1, "{story:?}: no cut fell"),
            Err(breach) => breaches.push(breach),
        }
    }
    assert!(
        breaches.is_empty(),
        "{} of {} stories breached:\n\n{}",
        breaches.len(),
        stories().len(),
        breaches.join("\n\n")
    );
}
