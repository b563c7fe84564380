//! Property test: random schedules through the simulator, checked after
//! every fire (per-target order, nothing lost, nothing applied twice, no
//! watermark past an undelivered older row, the `rs` invariant), then:
//! healthy targets complete while fewer than 32 targets fail, and
//! everything drains once the failing targets heal.
//!
//! Seeds: `RELAY_SIM_SEED` fixes the base seed (default: from the clock,
//! printed); `RELAY_SIM_CASES` sets the number of cases (default 1,000).
//! Case `i` uses seed `base + i`; a failure prints the replay command.

use std::collections::BTreeSet;
use std::panic::{catch_unwind, AssertUnwindSafe};

use durable_relay::core::{EnqueueRow, Name, RelayBudget, MAX_BLOCKED_TARGETS};
use durable_relay::sim::{Sim, SimRng};
use serde_json::json;

/// The shape of one random schedule.
struct Case {
    sources: Vec<String>,
    targets: Vec<String>,
    failing: BTreeSet<String>,
    rows: u32,
    budget: RelayBudget,
}

fn random_case(rng: &mut SimRng) -> Case {
    let sources = (0..1 + rng.below(3)).map(|i| format!("s{i}")).collect();
    let n_targets = 5 + rng.below(44) as usize;
    let targets: Vec<String> = (0..n_targets).map(|i| format!("t{i:02}")).collect();
    // Mostly fewer than 32 failing; sometimes more, past the blocked cap.
    let fail_max = if rng.chance(85) {
        (MAX_BLOCKED_TARGETS - 1).min(n_targets - 1)
    } else {
        n_targets - 1
    };
    let n_failing = rng.below(fail_max as u64 + 1) as usize;
    let mut shuffled = targets.clone();
    rng.shuffle(&mut shuffled);
    let failing = shuffled.into_iter().take(n_failing).collect();
    let budget = RelayBudget {
        rows_per_fire: 1 + rng.below(64) as u32,
        targets_per_fire: 1 + rng.below(40) as u32,
        calls_per_target: 1 + rng.below(3) as u32,
        fires_per_alarm: 1 + rng.below(8) as u32,
        subrequests_per_alarm: 1 + rng.below(300) as u32,
        batch_rows: 1 + rng.below(64) as u32,
    };
    Case {
        sources,
        targets,
        failing,
        rows: 100 + rng.below(500) as u32,
        budget,
    }
}

fn pick<'a>(rng: &mut SimRng, items: &'a [String]) -> &'a str {
    &items[rng.below(items.len() as u64) as usize]
}

fn random_rows(rng: &mut SimRng, case: &Case, n: u32) -> Vec<EnqueueRow> {
    (0..n)
        .map(|i| {
            let target = Name::new(pick(rng, &case.targets)).unwrap();
            let key = format!("k{}", rng.below(8));
            if rng.chance(15) {
                EnqueueRow::new(target, vec![], vec![key])
            } else {
                EnqueueRow::new(target, vec![(key, json!(i))], vec![])
            }
        })
        .collect()
}

/// One random fault, armed on a random source or target.
fn random_fault(sim: &mut Sim, rng: &mut SimRng, case: &Case) {
    let source = pick(rng, &case.sources).to_owned();
    match rng.below(5) {
        0 => sim.crash_next_checkpoint(&source),
        1 => sim.conflict_next_checkpoint(&source),
        2 => sim.overlap_next_fire(&source),
        3 => {
            let n = 1 + rng.below(4) as u32;
            let rows = random_rows(rng, case, n);
            sim.append_during_next_fire(&source, rows);
        }
        _ => {
            let target = pick(rng, &case.targets).to_owned();
            sim.lose_replies(&target, 1 + rng.below(2) as u32);
        }
    }
}

/// Phase 1: enqueues, fires, alarms and faults interleaved at random.
fn churn(sim: &mut Sim, rng: &mut SimRng, case: &Case) {
    let mut left = case.rows;
    let mut steps = 0;
    while left > 0 && steps < 5_000 {
        steps += 1;
        let source = pick(rng, &case.sources).to_owned();
        match rng.below(10) {
            0..=3 => {
                let n = (1 + rng.below(12) as u32).min(left);
                left -= n;
                let rows = random_rows(rng, case, n);
                sim.enqueue(&source, rows).unwrap();
            }
            4..=5 => {
                sim.fire(&source, case.budget);
            }
            6..=7 => {
                sim.run_alarm(&source, case.budget);
            }
            8 => random_fault(sim, rng, case),
            _ => sim.advance(rng.below(3_000)),
        }
    }
}

/// Whether every row for a healthy target has been applied.
fn healthy_done(sim: &Sim, case: &Case) -> bool {
    case.sources.iter().all(|s| {
        sim.queued_rows(s).iter().all(|r| {
            case.failing.contains(&r.target) || {
                let applied = sim.applied(&r.target, s);
                applied.binary_search(&r.seq).is_ok()
            }
        })
    })
}

fn run_case(seed: u64) {
    let mut rng = SimRng::new(seed ^ 0x5EED);
    let case = random_case(&mut rng);
    let mut sim = Sim::new(seed);
    sim.audit_every_fire(true);
    for t in &case.failing {
        sim.fail_target(t);
    }
    churn(&mut sim, &mut rng, &case);
    // Phase 2: no new faults; failing targets stay down.
    if case.failing.len() < MAX_BLOCKED_TARGETS {
        let mut alarms = 0;
        while !healthy_done(&sim, &case) {
            sim.run_all_until_idle(case.budget, 1);
            alarms += 1;
            assert!(
                alarms < 20_000,
                "healthy targets starved behind {} failing",
                case.failing.len()
            );
        }
    }
    // Phase 3: heal everything; all drains.
    for t in &case.failing {
        sim.heal_target(t);
    }
    let drain = sim.run_all_until_idle(case.budget, 50_000);
    assert!(drain.drained, "did not drain after healing");
    for s in &case.sources {
        assert!(sim.queued(s).is_empty(), "rows left at {s}");
    }
    sim.audit().unwrap();
}

#[test]
fn random_schedules_keep_order_lose_nothing_and_apply_each_row_once() {
    let base: u64 = std::env::var("RELAY_SIM_SEED")
        .ok()
        .map(|s| s.parse().expect("RELAY_SIM_SEED must be a u64"))
        .unwrap_or_else(|| {
            let t = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap();
            t.as_nanos() as u64
        });
    let cases: u64 = std::env::var("RELAY_SIM_CASES")
        .ok()
        .map_or(1_000, |s| s.parse().unwrap());
    println!("simulation: base seed {base}, {cases} cases");
    for i in 0..cases {
        let seed = base.wrapping_add(i);
        if let Err(e) = catch_unwind(AssertUnwindSafe(|| run_case(seed))) {
            let msg = e
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            panic!("case seed {seed} failed: {msg}\nreplay: RELAY_SIM_SEED={seed} RELAY_SIM_CASES=1 cargo test --test simulation");
        }
    }
}
