//! CPU per invocation, through the simulator: the runtime's near-limit
//! signal raised after K work units, and the invocation killed after K work
//! units, for every K from 0 to the work of the whole uncut drain. Either
//! way the source drains, in order, nothing applied twice, within a bounded
//! number of alarms; a signalled fire cuts and settles, and a killed
//! alarm's retry runs a smaller fire.

use durable_relay_sql::core::{EnqueueRow, Name, RelayBudget};
use durable_relay_sql::sim::{AlarmReport, CpuFault, Sim};
use serde_json::json;

const S: &str = "src";
const TARGETS: [&str; 3] = ["t-a", "t-b", "t-c"];
const ROWS: u64 = 36;
/// Most alarms a drain may take under any fault: every alarm delivers at
/// least one batch (of one row at the smallest), plus the retries and
/// back-offs of a kill.
const MAX_ALARMS: u32 = 2 * ROWS as u32 + 16;

/// A small Free-like budget, so the drain takes several fires and alarms.
fn budget() -> RelayBudget {
    RelayBudget {
        rows_per_fire: 8,
        targets_per_fire: 2,
        batch_rows: 4,
        fires_per_alarm: 2,
        ..RelayBudget::FREE
    }
}

/// A world with `ROWS` rows round-robin over the targets, bodies of a few
/// hundred bytes so KiB count too.
fn world() -> Sim {
    let mut sim = Sim::new(7);
    sim.audit_every_fire(true);
    for i in 0..ROWS {
        let target = Name::new(TARGETS[(i % 3) as usize]).unwrap();
        let row = EnqueueRow::new(
            target,
            vec![(format!("k{i}"), json!("x".repeat(300 + 40 * i as usize)))],
            vec![],
        );
        sim.enqueue(S, vec![row]).unwrap();
    }
    sim
}

/// Runs `S`'s alarms as they fall due until none is armed; panics past
/// `MAX_ALARMS` (a livelock).
fn drain(sim: &mut Sim, what: &str) -> Vec<AlarmReport> {
    let mut alarms = Vec::new();
    while let Some(at) = sim.alarm_at(S) {
        assert!((alarms.len() as u32) < MAX_ALARMS, "{what}: no drain within {MAX_ALARMS} alarms");
        sim.advance(at.saturating_sub(sim.now_ms()));
        alarms.push(sim.run_alarm(S, budget()));
    }
    sim.audit().unwrap_or_else(|e| panic!("{what}: {e}"));
    for t in TARGETS {
        let applied = sim.applied(t, S);
        let expected: Vec<u64> = (1..=ROWS)
            .filter(|s| (s - 1) % 3 == TARGETS.iter().position(|x| *x == t).unwrap() as u64)
            .collect();
        assert_eq!(applied, expected, "{what}: {t} got every row once, in order");
    }
    alarms
}

fn full_work() -> u64 {
    let mut sim = world();
    let alarms = drain(&mut sim, "uncut");
    assert!(alarms.iter().all(|a| !a.summary.as_ref().unwrap().cpu_cut), "no fault, no cut");
    sim.work()
}

#[test]
fn the_uncut_drain_counts_its_work() {
    let work = full_work();
    println!("uncut drain: {work} work units");
    assert!(work > 0);
}

#[test]
fn a_signal_after_any_number_of_work_units_cuts_the_fire_and_the_source_still_drains() {
    let work = full_work();
    for k in 0..=work {
        let mut sim = world();
        sim.cpu_fault(Some(CpuFault::Signal(k)));
        let alarms = drain(&mut sim, &format!("signal at {k}"));
        let cut = alarms.iter().filter(|a| a.summary.as_ref().is_some_and(|s| s.cpu_cut)).count();
        if k < work {
            assert!(cut > 0, "signal at {k} of {work}: some fire must have cut");
        }
    }
}

#[test]
fn a_kill_after_any_number_of_work_units_is_retried_smaller_and_the_source_still_drains() {
    let work = full_work();
    let full = budget();
    for k in 0..=work {
        let mut sim = world();
        sim.cpu_fault(Some(CpuFault::Kill(k)));
        let alarms = drain(&mut sim, &format!("kill at {k}"));
        let failed = alarms.iter().position(|a| a.summary.is_none());
        if k < work {
            let failed = failed.unwrap_or_else(|| panic!("kill at {k} of {work}: no invocation died"));
            let retry = &alarms[failed + 1];
            let summary = retry.summary.as_ref().expect("the retry succeeds");
            assert_eq!(summary.retry_count, 1, "kill at {k}");
            let half = full.for_retry(1).window_rows();
            assert!(half < full.window_rows());
            for f in &retry.fires {
                assert!(
                    f.report.window_rows <= half,
                    "kill at {k}: the retry runs a smaller fire ({} rows read, at most {half})",
                    f.report.window_rows
                );
            }
        }
    }
}

/// A source whose full alarm does not fit the per-invocation limit: rows
/// enough for many alarms, and a limit above a halved alarm's work but
/// below a full one's.
fn long_world(rows: u64) -> Sim {
    let mut sim = Sim::new(11);
    for i in 0..rows {
        let target = Name::new(TARGETS[(i % 3) as usize]).unwrap();
        sim.enqueue(
            S,
            vec![EnqueueRow::new(target, vec![(format!("k{i}"), json!("x".repeat(600)))], vec![])],
        )
        .unwrap();
    }
    sim
}

/// Runs `S`'s alarms as they fall due until none is armed; returns the
/// alarms that ran.
fn drain_long(sim: &mut Sim, max: u32) -> Vec<AlarmReport> {
    let mut alarms = Vec::new();
    while let Some(at) = sim.alarm_at(S) {
        assert!((alarms.len() as u32) < max, "no drain within {max} alarms");
        sim.advance(at.saturating_sub(sim.now_ms()));
        alarms.push(sim.run_alarm(S, budget()));
    }
    sim.audit().unwrap();
    alarms
}

#[test]
fn a_source_whose_full_alarm_the_limit_kills_keeps_the_size_that_fitted() {
    const ROWS_LONG: u64 = 600;
    let mut free = long_world(ROWS_LONG);
    let uncut = drain_long(&mut free, 1_000);
    let full_alarm = uncut.iter().filter_map(|a| a.summary.as_ref()).map(|s| s.work).max().unwrap();
    // Kills a full alarm; a halved one fits.
    let limit = full_alarm * 3 / 4;
    let mut sim = long_world(ROWS_LONG);
    sim.cpu_fault(Some(CpuFault::Limit(limit)));
    let alarms = drain_long(&mut sim, 10_000);
    let ran = alarms.iter().filter(|a| a.summary.is_some()).count() as u32;
    let kills = sim.limit_kills();
    println!(
        "{ROWS_LONG} rows, full alarm {full_alarm} units, limit {limit}: {} alarms uncut; \
         under the limit {ran} alarms ran, {kills} killed (seed 11)",
        uncut.len()
    );
    for t in TARGETS {
        let applied = sim.applied(t, S);
        assert_eq!(applied.len() as u64, ROWS_LONG / 3, "{t}: every row once");
        assert!(applied.windows(2).all(|w| w[0] < w[1]), "{t}: in order");
    }
    assert!(kills >= 1, "the limit killed the first full alarm");
    // One kill per trial of the full size, each after RETRY_HALVING_KEPT_ALARMS
    // alarms at the size that fitted: never one kill per two or three alarms.
    let bound = 1 + ran / durable_relay_sql::core::RETRY_HALVING_KEPT_ALARMS;
    assert!(kills <= bound, "{kills} kills in {ran} alarms; at most {bound}");
}
