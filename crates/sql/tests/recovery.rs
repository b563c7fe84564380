//! Recovery is bounded under every budget: once failing targets answer
//! again, a source drains what it owes within the bound the book states
//! (docs/how-delivery-works.md, "Recovery"), in alarms and in time, for
//! every budget variable at both edges of its documented range; and a plain
//! backlog, with nothing failing, drains within the same bound. While they
//! stay down, the source goes round about once a minute, each failing
//! target in its turn, and an hour of outage costs the alarms the book
//! states.
//!
//! The schedule: 48 targets with three rows each, enqueued in three rounds
//! (so each target's rows are interleaved with the others'); 30 targets
//! refuse every call for 100 fires (and, for a longer outage, 300), run as
//! the platform would, the clock moved to each alarm's due time; then they
//! all heal, and the drain is measured from that moment until the outbox
//! is empty. Every case prints its figures. The simulator's seed is 1
//! (its only choice here is the order of concurrent call completions).

use std::collections::BTreeSet;

use durable_relay_sql::core::{
    retry_backoff_ms, target_retry_backoff_ms, EnqueueRow, Name, RelayBudget, RelayPolicy, MAX_BATCH_ROWS,
    MAX_CALLS_PER_TARGET, MAX_COALESCE_MS, MAX_FIRES_PER_ALARM, MAX_PARK_AFTER_FAILED_CYCLES,
    MAX_ROWS_PER_FIRE, MAX_TARGETS_PER_FIRE, MAX_WORK_PER_ALARM, RETRY_BACKOFF_MAX_MS, RETRY_BACKOFF_MS,
    TARGET_RETRY_BACKOFF_MAX_MS, WINDOW_ROWS_PER_BUDGET_ROW, WORKER_PAID_SUBREQUESTS, WORK_PER_CALL,
    WORK_PER_ROW,
};
use durable_relay_sql::sim::{Sim, SourcePolicy};
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

/// Longest a drain after the heal may wait in all, coalescing aside: one
/// wait of the source's longest idle back-off, armed by the cycle whose
/// retries all failed just before the heal (or by the cycle under way
/// then, which spent its retries before it), and a target's longest
/// back-off: the alarm armed at the heal may be due that late, and every
/// target still backing off is due by then. Each later cycle has seen a
/// retry answer and comes round at once or within a second.
const MAX_RECOVERY_WAIT_MS: u64 = RETRY_BACKOFF_MAX_MS + TARGET_RETRY_BACKOFF_MAX_MS;

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
    // Time: see MAX_RECOVERY_WAIT_MS. Coalescing may add its wait to every
    // alarm.
    let waits = if d.failing == 0 { 0 } else { MAX_RECOVERY_WAIT_MS };
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
        work_per_alarm: 1,
    };
    run(case("all at 1", low));
    let high = RelayBudget {
        rows_per_fire: MAX_ROWS_PER_FIRE,
        targets_per_fire: MAX_TARGETS_PER_FIRE,
        calls_per_target: MAX_CALLS_PER_TARGET,
        fires_per_alarm: MAX_FIRES_PER_ALARM,
        subrequests_per_alarm: WORKER_PAID_SUBREQUESTS,
        batch_rows: MAX_BATCH_ROWS,
        work_per_alarm: MAX_WORK_PER_ALARM,
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

/// Runs `S`'s alarms as they fall due for `ms` of simulated time, each
/// after the clock moves to its due time, and counts them.
fn run_for(sim: &mut Sim, budget: RelayBudget, ms: u64) -> u32 {
    let until = sim.now_ms() + ms;
    let mut alarms = 0;
    while let Some(at) = sim.alarm_at(S).filter(|&at| at < until) {
        sim.advance(at.saturating_sub(sim.now_ms()));
        sim.run_alarm(S, budget);
        alarms += 1;
    }
    alarms
}

/// An hour of simulated time.
const HOUR_MS: u64 = 3_600_000;

/// Alarms the old retry rules (hashed classes of failing targets) made in
/// an hour with 47 of 48 targets failing on the Free preset, measured on
/// the schedule of `an_hour_of_outage_costs_an_alarm_a_minute`.
const OLD_OUTAGE_ALARMS_PER_HOUR: u32 = 135;

/// Alarms a source makes in the hour from its first alarm, when every
/// target fails at that alarm but one, which takes its rows: the first
/// cycle's alarms (one per `targets_per_fire x fires_per_alarm` targets,
/// and one more for the idle fire that ends it), then one per wait, each
/// the back-off `wait(k)` after the k-th wait's cycle, doubling up to its
/// cap, until the hour is out.
fn model_alarms(budget: RelayBudget, targets: u32, wait: impl Fn(u32) -> u64) -> u32 {
    let fires = fires_within_work(budget, u64::from(targets) * ROWS_PER_TARGET as u64);
    let first = targets.div_ceil(budget.targets_per_fire * fires) + 1;
    let (mut at, mut k, mut later) = (wait(1), 1, 0);
    while at < HOUR_MS {
        later += 1;
        k += 1;
        at += wait(k);
    }
    first + later
}

/// Fires one alarm of the first cycle gets through: each reads the whole
/// queue (`rows`) and calls `targets_per_fire` targets, and the alarm starts
/// another only while its work budget is not spent (on Free, one).
fn fires_within_work(budget: RelayBudget, rows: u64) -> u32 {
    let per_fire = rows * WORK_PER_ROW + u64::from(budget.targets_per_fire) * WORK_PER_CALL;
    let fit = u64::from(budget.work_per_alarm).div_ceil(per_fire);
    u32::try_from(fit).unwrap_or(u32::MAX).clamp(1, budget.fires_per_alarm)
}

/// The outage schedule of `source`, every target but the last failing
/// (`failing` of them), run for an hour; the alarms it made.
fn outage_hour(failing: usize) -> (Sim, u32) {
    let mut sim = source(&case("free", RelayBudget::FREE));
    for t in targets().iter().take(failing) {
        sim.fail_target(t);
    }
    let alarms = run_for(&mut sim, RelayBudget::FREE, HOUR_MS);
    (sim, alarms)
}

#[test]
fn an_hour_of_outage_costs_an_alarm_a_minute() {
    // 47 of 48 targets fail for an hour on Free (4 retries a cycle): every
    // cycle's retries fail and leave targets waiting, so the source backs
    // off as an idle one does, 1 s doubling to a minute, and the next
    // cycle retries the 4 that waited longest. Every alarm is a billed
    // request and writes a row (its setAlarm).
    let (sim, alarms) = outage_hour(TARGETS - 1);
    let model = model_alarms(RelayBudget::FREE, TARGETS as u32, retry_backoff_ms);
    println!(
        "47 of 48 failing for an hour: {alarms} alarms (model {model}; the old rules made \
         {OLD_OUTAGE_ALARMS_PER_HOUR}, a 10 s pace about 650)"
    );
    // The pin: no more than the model (the first cycle's 7 alarms, one
    // fire each within Free's work budget, 6 while the back-off doubles,
    // then one a minute: 71), and at least one a minute, so the failing
    // targets' turns keep coming.
    assert!(alarms <= model, "{alarms} alarms, more than the model's {model}");
    assert!(alarms as u64 >= HOUR_MS / RETRY_BACKOFF_MAX_MS, "{alarms} alarms: fewer than one a minute");
    assert!(alarms <= OLD_OUTAGE_ALARMS_PER_HOUR);
    // The turns go round: each failing target is retried once in every
    // ceil(47 / 4) = 12 cycles, so all within one retry of each other.
    let calls: Vec<u64> = targets().iter().take(TARGETS - 1).map(|t| sim.target_calls(t)).collect();
    let (least, most) = (calls.iter().min().unwrap(), calls.iter().max().unwrap());
    println!("calls per failing target: {least} to {most}");
    assert!(most - least <= 1, "uneven turns: {calls:?}");
    assert!(*least >= 4, "{least} retries in an hour");
}

#[test]
fn targets_that_fail_one_by_one_are_still_retried_a_share_at_a_time() {
    // 47 targets start failing one at a time, 1.5 s apart, so no two share
    // a retry time. Each cycle must still take the 4 that waited longest
    // (not only the one that waited longest of all), so that over the hour
    // that follows (59 cycles, a minute apart) the turns go round every
    // ceil(47 / 4) = 12 cycles and each target is retried at least 4 times.
    let budget = RelayBudget::FREE;
    let mut sim = Sim::new(SEED);
    let all = targets();
    let row = |t: &str| EnqueueRow::new(Name::new(t).unwrap(), vec![("k".to_owned(), json!(1))], vec![]);
    sim.enqueue(S, vec![row(&all[TARGETS - 1])]).unwrap();
    for t in all.iter().take(TARGETS - 1) {
        sim.fail_target(t);
        sim.advance(1_500);
        sim.enqueue(S, vec![row(t)]).unwrap();
        run_for(&mut sim, budget, 1);
    }
    let before: Vec<u64> = all.iter().take(TARGETS - 1).map(|t| sim.target_calls(t)).collect();
    let alarms = run_for(&mut sim, budget, HOUR_MS);
    let retries: Vec<u64> =
        all.iter().take(TARGETS - 1).zip(&before).map(|(t, b)| sim.target_calls(t) - b).collect();
    println!("failing one by one, then an hour: {alarms} alarms; retries per target {retries:?}");
    assert!(retries.iter().all(|&r| r >= 4), "{retries:?}");
    sim.audit().unwrap();
}

#[test]
fn an_hour_with_one_target_failing_costs_an_alarm_per_its_back_off() {
    // One failing target never leaves another waiting: the source wakes
    // when its back-off ends, 1 s doubling to 10 s, as the old rules did.
    let (sim, alarms) = outage_hour(1);
    let model = model_alarms(RelayBudget::FREE, TARGETS as u32, target_retry_backoff_ms);
    println!("1 of 48 failing for an hour: {alarms} alarms (model {model})");
    // The pin: no more than the model (7, then 4 while the back-off
    // doubles, then one every 10 s: 369), and at least one every 10 s, as
    // often as the target may be retried.
    assert!(alarms <= model, "{alarms} alarms, more than the model's {model}");
    assert!(alarms as u64 >= HOUR_MS / TARGET_RETRY_BACKOFF_MAX_MS, "{alarms} alarms");
    assert!(sim.target_calls("t00") >= HOUR_MS / TARGET_RETRY_BACKOFF_MAX_MS, "retried every 10 s");
}

/// Cycles and time until `back` (one of `FAILING` failing targets) is
/// delivered after it alone comes back, under `budget`.
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
    // Each cycle retries at most its share of the failing targets, those
    // that waited longest: one that comes back while 29 stay down is
    // retried within a round of ceil(F / share) cycles, plus the cycle under
    // way, each a back-off (at most a minute, as every retry fails) after
    // the last. Every one of them, wherever it stands in the round.
    for tpf in [1, 2, 8] {
        let budget = RelayBudget { targets_per_fire: tpf, ..RelayBudget::FREE };
        let round = (FAILING as u32).div_ceil(budget.retries_per_cycle());
        let (mut worst_cycles, mut worst_ms) = (0, 0);
        for back in targets().iter().take(FAILING) {
            let (cycles, ms) = one_comes_back(budget, back);
            assert!(cycles <= round + 1, "{back}, targets_per_fire {tpf}: {cycles} cycles");
            assert!(ms <= u64::from(round + 1) * RETRY_BACKOFF_MAX_MS, "{back}: {ms} ms");
            (worst_cycles, worst_ms) = (worst_cycles.max(cycles), worst_ms.max(ms));
        }
        println!(
            "targets_per_fire {tpf}: a failing target back alone reached within {worst_cycles} cycles, \
             {worst_ms} ms (a round is {round} cycles)"
        );
    }
}
