//! Property test: random schedules through the simulator, checked after
//! every fire (per-target order, nothing lost, nothing applied twice, no
//! watermark past an undelivered older row, the `rs` invariant), with
//! keyed enqueues, delayed rows (never sent before their time), parking
//! (by policy and by permanent errors), redrives
//! and discards at random points; then: healthy targets complete while
//! fewer than 32 targets fail, and everything not discarded drains once the
//! failing targets heal and parked targets are redriven.
//!
//! Seeds: `RELAY_SIM_SEED` fixes the base seed (default: from the clock,
//! printed); `RELAY_SIM_CASES` sets the number of cases (default 1,000).
//! Case `i` uses seed `base + i`; a failure prints the replay command.

use std::collections::BTreeSet;
use std::io::Write;
use std::panic::{catch_unwind, AssertUnwindSafe};

use std::collections::BTreeMap;

use durable_relay_sql::core::{
    Delay, EnqueueRefusal, EnqueueRow, Name, RelayBudget, RelayPolicy, MAX_BLOCKED_TARGETS,
};
use durable_relay_sql::sim::{Sim, SimRng, SourcePolicy};
use serde_json::json;

/// The shape of one random schedule.
struct Case {
    sources: Vec<String>,
    targets: Vec<String>,
    failing: BTreeSet<String>,
    rows: u32,
    budget: RelayBudget,
    policy: SourcePolicy,
}

fn random_case(rng: &mut SimRng) -> Case {
    let sources = (0..1 + rng.below(3)).map(|i| format!("s{i}")).collect();
    let n_targets = 5 + rng.below(44) as usize;
    let targets: Vec<String> = (0..n_targets).map(|i| format!("t{i:02}")).collect();
    // Mostly fewer than 32 failing; sometimes more: any number of failing
    // targets must not hold back the healthy ones.
    let fail_max = if rng.chance(85) { (MAX_BLOCKED_TARGETS - 1).min(n_targets - 1) } else { n_targets - 1 };
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
        work_per_alarm: RelayBudget::PAID.work_per_alarm,
    };
    let park_after = rng.chance(50).then(|| 1 + rng.below(4) as u32);
    let policy =
        SourcePolicy { relay: RelayPolicy { park_after_failed_cycles: park_after }, ..Default::default() };
    Case { sources, targets, failing, rows: 100 + rng.below(500) as u32, budget, policy }
}

fn pick<'a>(rng: &mut SimRng, items: &'a [String]) -> &'a str {
    &items[rng.below(items.len() as u64) as usize]
}

fn random_rows(rng: &mut SimRng, case: &Case, n: u32, now_ms: u64) -> Vec<EnqueueRow> {
    (0..n)
        .map(|i| {
            let target = Name::new(pick(rng, &case.targets)).unwrap();
            let key = format!("k{}", rng.below(8));
            let row = if rng.chance(15) {
                EnqueueRow::new(target, vec![], vec![key])
            } else {
                EnqueueRow::new(target, vec![(key, json!(i))], vec![])
            };
            // Some rows wait: for a while, until a time, or until a time
            // already past (due at once).
            match rng.below(20) {
                0 => row.delayed(Delay::For(rng.below(20_000))),
                1 => row.delayed(Delay::NotBefore(now_ms + rng.below(20_000))),
                2 => row.delayed(Delay::NotBefore(now_ms.saturating_sub(rng.below(5_000)))),
                _ => row,
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
            let rows = random_rows(rng, case, n, sim.now_ms());
            sim.append_during_next_fire(&source, rows);
        }
        _ => {
            let target = pick(rng, &case.targets).to_owned();
            sim.lose_replies(&target, 1 + rng.below(2) as u32);
        }
    }
}

/// Keyed enqueues made so far: key -> (source, rows, sequences).
type Keys = BTreeMap<String, (String, Vec<EnqueueRow>, Vec<u64>)>;

/// A keyed enqueue: a new key, or a reused one with the same rows (must be
/// a duplicate answering the same sequences) or other rows (a conflict).
fn keyed(sim: &mut Sim, rng: &mut SimRng, case: &Case, keys: &mut Keys, n: u32) -> u32 {
    if !keys.is_empty() && rng.chance(40) {
        let i = rng.below(keys.len() as u64) as usize;
        let (key, (source, rows, seqs)) = keys.iter().nth(i).map(|(k, v)| (k.clone(), v.clone())).unwrap();
        if rng.chance(50) {
            let again = sim.enqueue_keyed(&source, Some(&key), rows).unwrap();
            assert!(
                again.duplicate && again.seqs == seqs,
                "a repeated keyed enqueue must answer its sequences"
            );
        } else {
            let mut other = rows;
            other.extend(random_rows(rng, case, 1, sim.now_ms()));
            let refused = sim.enqueue_keyed(&source, Some(&key), other).unwrap_err();
            assert!(matches!(refused, EnqueueRefusal::Conflict { .. }));
        }
        return 0;
    }
    let source = pick(rng, &case.sources).to_owned();
    let key = format!("key-{}", keys.len());
    let rows = random_rows(rng, case, n, sim.now_ms());
    let done = sim.enqueue_keyed(&source, Some(&key), rows.clone()).unwrap();
    keys.insert(key, (source, rows, done.seqs));
    n
}

/// An operator action: redrive (usually) or discard a parked target.
fn operate(sim: &mut Sim, rng: &mut SimRng, case: &Case) {
    let source = pick(rng, &case.sources).to_owned();
    let parked = sim.parked_targets(&source);
    if parked.is_empty() {
        return;
    }
    let target = parked[rng.below(parked.len() as u64) as usize].0.clone();
    if rng.chance(85) {
        sim.redrive(&source, &target);
    } else {
        sim.discard(&source, &target);
    }
}

/// Phase 1: enqueues, fires, alarms, faults and operator actions at random.
fn churn(sim: &mut Sim, rng: &mut SimRng, case: &Case) {
    let mut left = case.rows;
    let mut keys = Keys::new();
    let mut steps = 0;
    while left > 0 && steps < 5_000 {
        steps += 1;
        let source = pick(rng, &case.sources).to_owned();
        match rng.below(12) {
            0..=2 => {
                let n = (1 + rng.below(12) as u32).min(left);
                left -= n;
                let rows = random_rows(rng, case, n, sim.now_ms());
                sim.enqueue(&source, rows).unwrap();
            }
            3 => {
                let n = (1 + rng.below(6) as u32).min(left);
                left -= keyed(sim, rng, case, &mut keys, n);
            }
            4..=5 => {
                sim.fire(&source, case.budget);
            }
            6..=7 => {
                sim.run_alarm(&source, case.budget);
            }
            8 => random_fault(sim, rng, case),
            9 => operate(sim, rng, case),
            10 => {
                let t = pick(rng, &case.targets).to_owned();
                if rng.chance(20) && !case.failing.contains(&t) {
                    sim.fail_target_permanently(&t);
                    sim.run_alarm(&source, case.budget);
                    sim.heal_target(&t);
                }
            }
            _ => sim.advance(rng.below(3_000)),
        }
    }
}

/// Redrives every parked target that is not meant to be failing.
fn redrive_healthy(sim: &mut Sim, case: &Case) {
    for s in &case.sources {
        for (t, _, _) in sim.parked_targets(s) {
            if !case.failing.contains(&t) {
                sim.redrive(s, &t);
            }
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
    // Half the cases (of each parity) store multi-row enqueues as packs.
    Sim::set_pack_rows(seed & 2 != 0);
    let mut rng = SimRng::new(seed ^ 0x5EED);
    let case = random_case(&mut rng);
    let mut sim = Sim::new(seed);
    sim.audit_every_fire(true);
    for s in &case.sources {
        sim.set_policy(s, case.policy);
    }
    for t in &case.failing {
        sim.fail_target(t);
    }
    churn(&mut sim, &mut rng, &case);
    // Phase 2: no new faults; failing targets stay down, however many.
    let mut alarms = 0;
    while !healthy_done(&sim, &case) {
        redrive_healthy(&mut sim, &case);
        sim.run_all_until_idle(case.budget, 1);
        alarms += 1;
        assert!(alarms < 20_000, "healthy targets starved behind {} failing", case.failing.len());
    }
    // Phase 3: heal everything; all drains.
    for t in &case.failing {
        sim.heal_target(t);
    }
    for s in &case.sources {
        for (t, _, _) in sim.parked_targets(s) {
            sim.redrive(s, &t);
        }
    }
    let drain = sim.run_all_until_idle(case.budget, 50_000);
    assert!(drain.drained, "did not drain after healing");
    for s in &case.sources {
        assert!(sim.queued(s).is_empty(), "rows left at {s}");
    }
    sim.audit().unwrap();
}

/// The base seed (from `RELAY_SIM_SEED`, or the clock) and the case count
/// (`RELAY_SIM_CASES`, default 1,000), printed once past the harness's
/// capture so every run shows how to replay it.
fn plan() -> (u64, u64) {
    static PLAN: std::sync::OnceLock<(u64, u64)> = std::sync::OnceLock::new();
    *PLAN.get_or_init(|| {
        let base: u64 = std::env::var("RELAY_SIM_SEED")
            .ok()
            .map(|s| s.parse().expect("RELAY_SIM_SEED must be a u64"))
            .unwrap_or_else(|| {
                let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap();
                t.as_nanos() as u64
            });
        let cases: u64 = std::env::var("RELAY_SIM_CASES").ok().map_or(1_000, |s| s.parse().unwrap());
        let _ = writeln!(
            std::io::stderr(),
            "simulation: base seed {base}, {cases} cases (RELAY_SIM_SEED={base})"
        );
        (base, cases)
    })
}

/// Runs every `stride`-th case from `first`: two tests split the cases so
/// the harness runs them on two threads.
fn run_share(first: u64, stride: u64) {
    let (base, cases) = plan();
    for i in (first..cases).step_by(stride as usize) {
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

#[test]
fn random_schedules_keep_order_lose_nothing_and_apply_each_row_once_even_cases() {
    run_share(0, 2);
}

#[test]
fn random_schedules_keep_order_lose_nothing_and_apply_each_row_once_odd_cases() {
    run_share(1, 2);
}

/// A case the random schedules once drew: 29 of 35 targets failing, a
/// share of 7 retries a cycle over several fires, and a healthy target
/// that had failed once, far along the outbox. Each fire reckoned the next
/// cycle's bound on its own, so more targets than a share were let in and
/// those early in the outbox took every turn: the healthy one waited out
/// 20,000 alarms.
#[test]
fn a_target_far_along_the_outbox_that_waited_longest_gets_its_turn() {
    run_case(1_796_224_392_820_059_040);
}
