//! Recovery is bounded under every budget: once failing targets answer
//! again, a source drains what it owes within the bound the book states
//! (docs/how-delivery-works.md, "Recovery"), in alarms and in time, for
//! every budget variable at both edges of its documented range; and a plain
//! backlog, with nothing failing, drains within the same bound.
//!
//! The schedule: 48 targets with three rows each, enqueued in three rounds
//! (so each target's rows are interleaved with the others'); 30 targets
//! refuse every call for 100 fires (and, for a longer outage, 300), run as
//! the platform would, the clock moved to each alarm's due time; then they
//! all heal, and the drain is measured from that moment until the outbox
//! is empty. Every case prints its figures. The simulator's seed is 1
//! (its only choice here is the order of concurrent call completions).

use std::collections::BTreeSet;

use durable_relay::core::{
    EnqueueRow, Name, RelayBudget, RelayPolicy, Wake, MAX_BATCH_ROWS, MAX_CALLS_PER_TARGET, MAX_COALESCE_MS,
    MAX_FIRES_PER_ALARM, MAX_PARK_AFTER_FAILED_CYCLES, MAX_ROWS_PER_FIRE, MAX_TARGETS_PER_FIRE,
    RETRY_BACKOFF_MS, TARGET_RETRY_BACKOFF_MAX_MS, WINDOW_ROWS_PER_BUDGET_ROW, WORKER_PAID_SUBREQUESTS,
};
use durable_relay::sim::{Sim, SourcePolicy};
use serde_json::json;

const S: &str = "src";
const SEED: u64 = 1;
const TARGETS: usize = 48;
const FAILING: usize = 30;
const ROWS_PER_TARGET: usize = 3;

/// Every target of the schedule; the first `FAILING` are the ones that fail.
fn targets() -> Vec<String> {
    (0..TARGETS).map(|i| format!("t{i:02}")).collect()
}

/// One budget to run the schedule under, with the source's other settings.
#[derive(Clone, Debug)]
struct Case {
    label: String,
    budget: RelayBudget,
    /// `RELAY_COALESCE_MS`.
    coalesce_ms: u64,
    /// `RELAY_PARK_AFTER_FAILED_CYCLES`; parked targets are redriven when they heal.
    park_after: Option<u32>,
}

/// `budget` with the source's default settings.
fn case(label: impl Into<String>, budget: RelayBudget) -> Case {
    Case { label: label.into(), budget, coalesce_ms: 0, park_after: None }
}

/// What a drain did, from its start until the outbox was empty, and what
/// it started from.
#[derive(Clone, Copy, Debug, Default)]
struct Drain {
    /// Rows queued at the start (N).
    rows: u64,
    /// Distinct targets of those rows (T).
    targets: u64,
    /// Those targets with a failure record at the start (F).
    failing: u64,
    alarms: u32,
    /// Alarms that delivered no row.
    idle_alarms: u32,
    fires: u32,
    /// Fires that delivered no row.
    idle_fires: u32,
    /// Scan cycles begun (K).
    cycles: u32,
    /// Target calls made (L).
    calls: u32,
    /// Simulated time until the alarm that emptied the outbox ended.
    elapsed_ms: u64,
}

/// Runs `S`'s alarms as they fall due until its outbox is empty.
fn drain(sim: &mut Sim, budget: RelayBudget) -> Drain {
    let queued = sim.queued_rows(S);
    let owed: BTreeSet<String> = queued.iter().map(|r| r.target.clone()).collect();
    let failing =
        owed.iter().filter(|t| sim.target_record(S, t).is_some_and(|r| r.failed_cycles > 0)).count();
    let mut d = Drain {
        rows: queued.len() as u64,
        targets: owed.len() as u64,
        failing: failing as u64,
        ..Drain::default()
    };
    let started = sim.now_ms();
    while !sim.queued(S).is_empty() {
        let at = sim.alarm_at(S).expect("an alarm is armed while rows are owed");
        sim.advance(at.saturating_sub(sim.now_ms()));
        let alarm = sim.run_alarm(S, budget);
        d.alarms += 1;
        d.idle_alarms += u32::from(alarm.totals.rows_delivered == 0);
        d.calls += alarm.totals.calls;
        for f in &alarm.fires {
            d.fires += 1;
            d.idle_fires += u32::from(f.report.rows_delivered == 0);
            d.cycles += u32::from(f.report.new_cycle);
        }
        assert!(d.alarms <= 100_000, "{budget:?}: no end in sight");
    }
    d.elapsed_ms = sim.now_ms() - started;
    d
}

/// A source with the schedule's rows, under `c`'s settings.
fn source(c: &Case) -> Sim {
    let mut sim = Sim::new(SEED);
    if let Some(n) = c.park_after {
        let relay = RelayPolicy { park_after_failed_cycles: Some(n) };
        sim.set_policy(S, SourcePolicy { relay, ..SourcePolicy::default() });
    }
    sim.set_coalesce(S, c.coalesce_ms);
    let all = targets();
    for round in 0..ROWS_PER_TARGET {
        let rows = all
            .iter()
            .map(|t| {
                EnqueueRow::new(
                    Name::new(t.as_str()).unwrap(),
                    vec![(format!("k{round}"), json!(round))],
                    vec![],
                )
            })
            .collect();
        sim.enqueue(S, rows).unwrap();
    }
    sim
}

/// The plain backlog: every row drained, nothing failing.
fn plain(c: &Case) -> Drain {
    let mut sim = source(c);
    let d = drain(&mut sim, c.budget);
    finish(&sim);
    d
}

/// The outage: `FAILING` targets refuse calls for `outage_fires` fires,
/// then heal (and are redriven, if they were parked); the drain from then.
fn fail_then_heal(c: &Case, outage_fires: u32) -> Drain {
    let mut sim = source(c);
    let bad: Vec<String> = targets().into_iter().take(FAILING).collect();
    for t in &bad {
        sim.fail_target(t);
    }
    let mut fires = 0;
    while fires < outage_fires {
        let Some(at) = sim.alarm_at(S) else { break };
        sim.advance(at.saturating_sub(sim.now_ms()));
        fires += sim.run_alarm(S, c.budget).fires.len() as u32;
    }
    for t in &bad {
        sim.heal_target(t);
        if sim.target_record(S, t).is_some_and(|r| r.parked.is_some()) {
            sim.redrive(S, t);
        }
    }
    let d = drain(&mut sim, c.budget);
    finish(&sim);
    d
}

/// Every row arrived once, in order, and nothing is left.
fn finish(sim: &Sim) {
    sim.audit().unwrap();
    for t in targets() {
        assert_eq!(sim.applied(&t, S).len(), ROWS_PER_TARGET, "{t}");
    }
    assert!(sim.parked_targets(S).is_empty());
}

/// Scan cycles a drain after the heal begins at most: up to four at the
/// first alarm (one in progress, one for the most overdue, one for every
/// due target, one that finds nothing due), then two at each later wake-up,
/// which come at least `RETRY_BACKOFF_MS` apart until the last target's own
/// back-off (at most `TARGET_RETRY_BACKOFF_MAX_MS`) ends.
const MAX_RECOVERY_CYCLES: u64 = 4 + 2 * TARGET_RETRY_BACKOFF_MAX_MS.div_ceil(RETRY_BACKOFF_MS);

/// The bound of docs/how-delivery-works.md, as figures of one drain.
#[derive(Debug)]
struct Bound {
    cycles: u64,
    calls: u64,
    fires: u64,
    alarms: u64,
    time_ms: u64,
}

/// The bound for a drain that started from `d`'s rows, targets and failing
/// targets under `c`. Each term is stated on the figure it bounds, so a
/// drain is checked link by link: cycles and calls against the schedule,
/// fires given the cycles and calls it took, alarms given its fires.
fn bound(c: &Case, d: &Drain) -> Bound {
    let b = c.budget;
    let n = d.rows;
    let window = u64::from(b.rows_per_fire * WINDOW_ROWS_PER_BUDGET_ROW);
    let per_stop = u64::from(b.targets_per_fire.min(b.calls_per_target));
    let per_alarm = u64::from(b.calls_per_alarm());
    let (k, l) = (u64::from(d.cycles), u64::from(d.calls));
    // Cycles: one for a backlog; after failures, see MAX_RECOVERY_CYCLES.
    let cycles = if d.failing == 0 { 1 } else { MAX_RECOVERY_CYCLES };
    // Calls: no call fails once every target answers, so each delivers a row.
    let calls = n;
    // Fires: each cycle walks the rows at most once, a window a fire, and
    // ends with one more; every other fire stops at a target budget (having
    // made `per_stop` calls), at a failing target deferred for want of
    // retries (having brought back at least one), or at the alarm's last
    // call.
    let fires = k * (n.div_ceil(window) + 1) + l.div_ceil(per_stop) + d.failing + l.div_ceil(per_alarm);
    // Alarms: each runs `fires_per_alarm` fires unless its calls run out,
    // or a fire waits (once a cycle at most), or the outbox is empty.
    let alarms = u64::from(d.fires).div_ceil(u64::from(b.fires_per_alarm)) + l.div_ceil(per_alarm) + k + 1;
    // Time: the first alarm comes within a target's longest back-off; if
    // its cycle had spent its retries, the next within another; a target
    // still backing off is retried when its own back-off ends. Coalescing
    // may add its wait to every alarm.
    let waits = if d.failing == 0 { 0 } else { 2 * TARGET_RETRY_BACKOFF_MAX_MS };
    let time_ms = waits + u64::from(d.alarms) * c.coalesce_ms;
    Bound { cycles, calls, fires, alarms, time_ms }
}

/// Prints `d` and checks it against its bound.
fn check(c: &Case, what: &str, d: &Drain) {
    let bd = bound(c, d);
    println!(
        "{:<22} {what:<12} N {:>3} T {:>2} F {:>2}: {:>4} alarms ({:>3} idle), {:>4} fires ({:>3} idle), \
         {:>2} cycles, {:>3} calls, {:>6} ms | bound: {} alarms, {} fires, {} cycles, {} calls, {} ms",
        c.label,
        d.rows,
        d.targets,
        d.failing,
        d.alarms,
        d.idle_alarms,
        d.fires,
        d.idle_fires,
        d.cycles,
        d.calls,
        d.elapsed_ms,
        bd.alarms,
        bd.fires,
        bd.cycles,
        bd.calls,
        bd.time_ms,
    );
    let at = format!("{} ({what}): {d:?} against {bd:?}", c.label);
    assert!(u64::from(d.cycles) <= bd.cycles, "cycles: {at}");
    assert!(u64::from(d.calls) <= bd.calls, "calls: {at}");
    assert!(u64::from(d.fires) <= bd.fires, "fires: {at}");
    assert!(u64::from(d.alarms) <= bd.alarms, "alarms: {at}");
    assert!(d.elapsed_ms <= bd.time_ms, "time: {at}");
}

/// Runs the plain backlog and both outages under `c`, checking each.
fn run(c: Case) {
    check(&c, "backlog", &plain(&c));
    for outage in [100, 300] {
        let d = fail_then_heal(&c, outage);
        if c.park_after.is_none() {
            assert_eq!(d.failing as usize, FAILING, "{}: the healed targets were still failing", c.label);
        }
        check(&c, &format!("outage {outage}"), &d);
    }
}

/// The Free preset with `f` applied.
fn with(label: impl Into<String>, f: impl FnOnce(&mut RelayBudget)) -> Case {
    let mut budget = RelayBudget::FREE;
    f(&mut budget);
    budget.validate().unwrap();
    case(label, budget)
}

#[test]
fn targets_per_fire_recovers_in_bounded_alarms_and_time_across_its_range() {
    println!("seed {SEED}");
    for tpf in [1, 2, 3, 4, 8, MAX_TARGETS_PER_FIRE] {
        run(with(format!("targets_per_fire {tpf}"), |b| b.targets_per_fire = tpf));
    }
}

#[test]
fn fires_per_alarm_recovers_in_bounded_alarms_and_time_at_its_edges() {
    run(with("fires_per_alarm 1", |b| b.fires_per_alarm = 1));
    run(with("fires_per_alarm 64", |b| b.fires_per_alarm = MAX_FIRES_PER_ALARM));
}

#[test]
fn calls_per_target_recovers_in_bounded_alarms_and_time_at_its_edges() {
    run(with("calls_per_target 1", |b| b.calls_per_target = 1));
    run(with("calls_per_target 16", |b| b.calls_per_target = MAX_CALLS_PER_TARGET));
}

#[test]
fn rows_per_fire_recovers_in_bounded_alarms_and_time_at_its_edges() {
    run(with("rows_per_fire 1", |b| b.rows_per_fire = 1));
    run(with("rows_per_fire 4096", |b| b.rows_per_fire = MAX_ROWS_PER_FIRE));
}

#[test]
fn batch_rows_recovers_in_bounded_alarms_and_time_at_its_edges() {
    run(with("batch_rows 1", |b| b.batch_rows = 1));
    run(with("batch_rows 512", |b| b.batch_rows = MAX_BATCH_ROWS));
}

#[test]
fn subrequests_per_alarm_recovers_in_bounded_alarms_and_time_at_its_edges() {
    run(with("subrequests 1", |b| b.subrequests_per_alarm = 1));
    run(with("subrequests 10000", |b| b.subrequests_per_alarm = WORKER_PAID_SUBREQUESTS));
}

#[test]
fn every_budget_at_its_lower_or_upper_edge_at_once_recovers_within_the_bound() {
    run(with("targets 1, rows 1", |b| (b.targets_per_fire, b.rows_per_fire) = (1, 1)));
    let low = RelayBudget {
        rows_per_fire: 1,
        targets_per_fire: 1,
        calls_per_target: 1,
        fires_per_alarm: 1,
        subrequests_per_alarm: 1,
        batch_rows: 1,
    };
    run(case("all at 1", low));
    let high = RelayBudget {
        rows_per_fire: MAX_ROWS_PER_FIRE,
        targets_per_fire: MAX_TARGETS_PER_FIRE,
        calls_per_target: MAX_CALLS_PER_TARGET,
        fires_per_alarm: MAX_FIRES_PER_ALARM,
        subrequests_per_alarm: WORKER_PAID_SUBREQUESTS,
        batch_rows: MAX_BATCH_ROWS,
    };
    run(case("all at their maximum", high));
    run(case("paid", RelayBudget::PAID));
    run(case("free", RelayBudget::FREE));
}

#[test]
fn coalescing_and_parking_recover_within_the_bound_at_their_edges() {
    for coalesce_ms in [0, MAX_COALESCE_MS] {
        run(Case { coalesce_ms, ..with(format!("coalesce {coalesce_ms}"), |_| {}) });
        let low = RelayBudget { targets_per_fire: 1, rows_per_fire: 1, ..RelayBudget::FREE };
        run(Case { coalesce_ms, ..case(format!("coalesce {coalesce_ms}, low"), low) });
    }
    for park_after in [1, MAX_PARK_AFTER_FAILED_CYCLES] {
        run(Case { park_after: Some(park_after), ..with(format!("park after {park_after}"), |_| {}) });
    }
}

#[test]
fn a_source_whose_retries_are_spent_wakes_within_a_targets_longest_back_off() {
    // Fewer retries per cycle than failing targets: every cycle leaves some
    // waiting. The source must still come round within 10 s, not back off
    // to a minute, so a target that comes back is found that soon.
    let c = with("targets_per_fire 1", |b| b.targets_per_fire = 1);
    let mut sim = source(&c);
    for t in targets().iter().take(FAILING) {
        sim.fail_target(t);
    }
    let mut waits = Vec::new();
    for _ in 0..200 {
        let at = sim.alarm_at(S).expect("armed");
        sim.advance(at.saturating_sub(sim.now_ms()));
        let alarm = sim.run_alarm(S, c.budget);
        if let Some(Wake::After { delay_ms }) = alarm.fires.last().map(|f| f.wake) {
            waits.push(delay_ms);
        }
    }
    let longest = waits.iter().copied().max().unwrap();
    println!("longest wait with 30 failing targets and one retry a cycle: {longest} ms");
    assert_eq!(longest, TARGET_RETRY_BACKOFF_MAX_MS);
}

/// Cycles and time until `back` (one of `FAILING` failing targets, the
/// last in sequence order) is delivered after it alone comes back, under
/// `budget`.
fn one_comes_back(budget: RelayBudget, back: &str) -> (u32, u64) {
    let c = case("one comes back", budget);
    let mut sim = source(&c);
    let bad: Vec<String> = targets().into_iter().take(FAILING).collect();
    for t in &bad {
        sim.fail_target(t);
    }
    for _ in 0..100 {
        let at = sim.alarm_at(S).expect("armed");
        sim.advance(at.saturating_sub(sim.now_ms()));
        sim.run_alarm(S, budget);
    }
    sim.heal_target(back);
    let healed = sim.now_ms();
    let mut cycles = 0;
    while sim.applied(back, S).len() < ROWS_PER_TARGET {
        let at = sim.alarm_at(S).expect("armed");
        sim.advance(at.saturating_sub(sim.now_ms()));
        cycles += sim.run_alarm(S, budget).fires.iter().filter(|f| f.report.new_cycle).count() as u32;
        assert!(cycles < 10_000, "{back} never reached");
    }
    sim.audit().unwrap();
    (cycles, sim.now_ms() - healed)
}

#[test]
fn a_target_that_comes_back_while_the_others_stay_down_is_reached_in_its_turn() {
    // Each cycle retries at most its share of the failing targets, the most
    // overdue first: one that comes back behind 29 that stay down is
    // retried within a round of ceil(F / R) cycles (plus the cycle under way
    // and one whose retries the others' back-off leaves unspent), each
    // within a target's longest back-off of the last.
    for tpf in [1, 2, 8] {
        let budget = RelayBudget { targets_per_fire: tpf, ..RelayBudget::FREE };
        let round = (FAILING as u32).div_ceil(budget.retries_per_cycle());
        let (cycles, ms) = one_comes_back(budget, &format!("t{:02}", FAILING - 1));
        println!("targets_per_fire {tpf}: the last failing target, back alone, reached after {cycles} cycles, {ms} ms");
        assert!(cycles <= 2 * round + 2, "{cycles} cycles");
        assert!(ms <= u64::from(2 * round + 2) * TARGET_RETRY_BACKOFF_MAX_MS, "{ms} ms");
    }
}
