//! The platform's transient failures of a target call, by name, through the
//! simulator: each fails the call with the platform's own message, which
//! the shipped classifier sorts (interrupted: sent again at once; overloaded:
//! backed off, never parked for it; a timeout after the apply: an ordinary
//! failure whose redelivery the watermark makes harmless). Whatever mix a
//! seed injects, nothing is lost, nothing is applied twice, order is kept.

use durable_relay_sql::core::{EnqueueRow, Name, RelayBudget, RelayPolicy};
use durable_relay_sql::sim::{PlatformFault, Sim, SimRng, SourcePolicy};
use serde_json::json;

const S: &str = "src";

fn row(target: &str, i: u64) -> EnqueueRow {
    EnqueueRow::new(Name::new(target).unwrap(), vec![(format!("k{i}"), json!(i))], vec![])
}

fn parking(after: u32) -> SourcePolicy {
    SourcePolicy { relay: RelayPolicy { park_after_failed_cycles: Some(after) }, ..Default::default() }
}

const KINDS: [PlatformFault; 6] = [
    PlatformFault::CodeUpdated { applied: false },
    PlatformFault::CodeUpdated { applied: true },
    PlatformFault::NetworkLost { applied: false },
    PlatformFault::NetworkLost { applied: true },
    PlatformFault::Overloaded,
    PlatformFault::TimeoutAfterApply,
];

/// Drains `S`, redriving any target a run of timeouts parked, until
/// nothing is queued or parked.
fn drain(sim: &mut Sim) {
    for _ in 0..20 {
        sim.run_until_idle(S, RelayBudget::FREE, 500);
        let parked: Vec<String> = sim.parked_targets(S).into_iter().map(|(t, ..)| t).collect();
        for t in &parked {
            sim.redrive(S, t);
        }
        if parked.is_empty() && sim.queued(S).is_empty() {
            return;
        }
    }
    panic!("seed {}: not drained", sim.seed());
}

#[test]
fn every_named_platform_failure_loses_nothing_and_applies_nothing_twice() {
    let base = std::env::var("RELAY_FAULT_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(7);
    for seed in base..base + 40 {
        println!("platform faults seed {seed} (replay: RELAY_FAULT_SEED={seed})");
        let mut sim = Sim::new(seed);
        let mut rng = SimRng::new(seed);
        sim.set_policy(S, parking(3));
        let targets: Vec<String> = (0..8).map(|i| format!("t{i}")).collect();
        for t in &targets {
            let faults: Vec<PlatformFault> =
                (0..rng.below(6)).map(|_| KINDS[rng.below(6) as usize]).collect();
            sim.platform_faults(t, &faults);
        }
        for i in 1..=120u64 {
            sim.enqueue(S, vec![row(&targets[(i * 7 % 8) as usize], i)]).unwrap();
            if i % 40 == 0 {
                sim.run_alarm(S, RelayBudget::FREE);
            }
        }
        drain(&mut sim);
        sim.audit().unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        for (i, t) in targets.iter().enumerate() {
            let sent: Vec<u64> = (1..=120u64).filter(|n| (n * 7 % 8) as usize == i).collect();
            assert_eq!(sim.applied(t, S), sent, "seed {seed}: {t} applied each row once, in order");
        }
    }
}

#[test]
fn an_interrupted_call_is_sent_again_in_the_same_alarm_and_leaves_no_failure() {
    for fault in [PlatformFault::CodeUpdated { applied: true }, PlatformFault::NetworkLost { applied: false }]
    {
        let mut sim = Sim::new(1);
        sim.platform_faults("t", &[fault]);
        sim.enqueue(S, vec![row("t", 1), row("t", 2)]).unwrap();
        sim.run_alarm(S, RelayBudget::FREE);
        assert_eq!(sim.applied("t", S), vec![1, 2], "{fault:?}: delivered by the first alarm");
        assert_eq!(sim.target_calls("t"), 2, "{fault:?}: the batch went twice");
        assert!(sim.target_record(S, "t").is_none(), "{fault:?}: no failure recorded");
    }
}

#[test]
fn an_overloaded_target_backs_off_and_is_never_parked_for_it() {
    let mut sim = Sim::new(1);
    sim.set_policy(S, parking(1));
    sim.platform_faults("busy", &[PlatformFault::Overloaded; 4]);
    sim.enqueue(S, vec![row("busy", 1)]).unwrap();
    let first = sim.now_ms();
    sim.run_until_idle(S, RelayBudget::FREE, 50);
    assert!(sim.parked_targets(S).is_empty(), "overload alone never parks");
    assert_eq!(sim.applied("busy", S), vec![1]);
    assert_eq!(sim.target_calls("busy"), 5, "one call per back-off, never a second at once");
    assert!(sim.now_ms() - first >= 1_000 + 2_000 + 4_000, "the back-off doubled between calls");
}

#[test]
fn a_target_that_times_out_after_applying_is_not_applied_twice() {
    let mut sim = Sim::new(1);
    sim.platform_faults("slow", &[PlatformFault::TimeoutAfterApply]);
    sim.enqueue(S, vec![row("slow", 1), row("slow", 2)]).unwrap();
    sim.run_alarm(S, RelayBudget::FREE);
    assert_eq!(sim.target_record(S, "slow").map(|r| r.failed_cycles), Some(1), "counted as a failure");
    sim.run_until_idle(S, RelayBudget::FREE, 20);
    assert_eq!(sim.applied("slow", S), vec![1, 2], "applied once: the retry was duplicate-only");
    sim.audit().unwrap();
}
