//! Delivery schedules run through the simulator, pinning fire and alarm
//! counts and the contract's behaviour under faults. Each test is named for
//! the behaviour it pins.

use durable_relay_sql::core::{
    ApplyRow, Effects, EnqueueRow, JsonValue, Name, RelayBudget, RelayHook, RelayPolicy, Sender, Wake,
    RETRY_BACKOFF_MS, WORK_PER_ROW,
};
use durable_relay_sql::sim::{Commit, Sim, SourcePolicy};
use serde_json::json;

const S: &str = "src";

fn row(target: &str, key: &str, value: serde_json::Value) -> EnqueueRow {
    EnqueueRow::new(Name::new(target).unwrap(), vec![(key.to_owned(), value)], vec![])
}

/// Enqueues one row per target in `targets`, in order, in requests of up to 256.
fn one_each(sim: &mut Sim, targets: &[String]) {
    for chunk in targets.chunks(256) {
        let rows = chunk.iter().map(|t| row(t, "k", json!(t))).collect();
        sim.enqueue(S, rows).unwrap();
    }
}

/// Rows one Free fire reads: its window, cut to what the alarm's work
/// budget can read. On Free the work budget is the smaller, so a Free alarm
/// passes over this many rows at most.
fn free_window() -> usize {
    let b = RelayBudget::FREE;
    let by_work = u64::from(b.work_per_alarm) / WORK_PER_ROW;
    usize::try_from(by_work.min(u64::from(b.window_rows()))).unwrap()
}

/// Enqueues `n` rows to `target`, each putting `k{i}`.
fn many(sim: &mut Sim, target: &str, n: usize) {
    let rows: Vec<_> = (0..n).map(|i| row(target, &format!("k{i}"), json!(i))).collect();
    for chunk in rows.chunks(256) {
        sim.enqueue(S, chunk.to_vec()).unwrap();
    }
}

fn targets(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}{i:04}")).collect()
}

fn drain_distinct(budget: RelayBudget) -> durable_relay_sql::sim::DrainReport {
    let mut sim = Sim::new(1);
    one_each(&mut sim, &targets("t", 4096));
    let drain = sim.run_until_idle(S, budget, 10_000);
    assert!(drain.drained);
    assert!(sim.queued(S).is_empty());
    sim.audit().unwrap();
    let cap = budget.targets_per_fire * budget.fires_per_alarm * budget.calls_per_target;
    assert!(drain.max_calls_per_alarm <= cap.min(budget.subrequests_per_alarm));
    drain
}

#[test]
fn free_preset_drains_4096_distinct_targets_in_one_fire_of_8_calls_per_alarm() {
    // A Free fire reads its whole work-cut window (200 rows) to call its 8
    // targets, which spends the alarm's work: the alarm settles after one
    // fire and the next runs at once. The last few alarms, with fewer rows
    // left to read, fit a second fire.
    let d = drain_distinct(RelayBudget::FREE);
    println!("free: {d:?}");
    assert_eq!((d.alarms, d.fires, d.calls), (504, 512, 4096));
    assert_eq!(d.max_calls_per_alarm, 16);
    assert_eq!(d.idle_fires, 0);
}

#[test]
fn free_preset_with_paid_work_drains_4096_distinct_targets_in_256_alarms_of_16_calls() {
    // The same drain with the work budget out of the way: the row, target and
    // subrequest budgets alone make two fires of 8 calls per alarm.
    let budget = RelayBudget { work_per_alarm: RelayBudget::PAID.work_per_alarm, ..RelayBudget::FREE };
    let d = drain_distinct(budget);
    assert_eq!((d.alarms, d.fires, d.calls), (256, 512, 4096));
    assert_eq!(d.max_calls_per_alarm, 16);
}

#[test]
fn paid_preset_drains_4096_distinct_targets_in_16_alarms_of_at_most_256_calls() {
    let d = drain_distinct(RelayBudget::PAID);
    println!("paid: {d:?}");
    assert_eq!((d.alarms, d.fires, d.calls), (16, 128, 4096));
    assert_eq!(d.max_calls_per_alarm, 256);
    assert_eq!(d.idle_fires, 0);
}

#[test]
fn every_fire_makes_progress_across_512_distinct_healthy_targets() {
    let mut sim = Sim::new(2);
    one_each(&mut sim, &targets("t", 512));
    let mut fires = 0;
    while sim.alarm_at(S).is_some() {
        let alarm = sim.run_alarm(S, RelayBudget::default());
        for f in &alarm.fires {
            fires += 1;
            assert!(f.report.rows_delivered > 0, "fire {fires} delivered nothing");
            assert_eq!(f.report.rows_delivered, f.report.targets_called);
        }
        sim.audit().unwrap();
    }
    assert_eq!(fires, 512 / 16);
}

#[test]
fn a_1000_row_backlog_to_one_target_does_not_hide_a_row_to_another() {
    let mut sim = Sim::new(3);
    many(&mut sim, "big", 1000);
    sim.put(S, "small", "k", json!(1)).unwrap();
    // Free's rows and calls, with the work budget of Paid: one window (1,024
    // rows) reaches past the backlog.
    let budget = RelayBudget { work_per_alarm: RelayBudget::PAID.work_per_alarm, ..RelayBudget::FREE };
    let f = sim.fire(S, budget);
    assert_eq!(sim.applied("small", S), vec![1001], "the other target's row arrives in the first fire");
    assert_eq!(sim.applied("big", S).len(), 1000);
    assert_eq!(f.report.calls, 3, "two 512-row batches to big, one to small");
    assert!(sim.queued(S).is_empty());
    sim.audit().unwrap();
}

#[test]
fn a_backlog_longer_than_the_window_delays_another_target_by_whole_windows_only() {
    let mut sim = Sim::new(4);
    many(&mut sim, "big", 5000);
    sim.put(S, "small", "k", json!(1)).unwrap();
    let mut fires = 0;
    while sim.applied("small", S).is_empty() {
        let f = sim.fire(S, RelayBudget::FREE);
        assert!(f.report.rows_delivered > 0);
        fires += 1;
    }
    assert_eq!(fires, 5_001usize.div_ceil(free_window()), "5,001 rows at one work-cut window per fire");
    assert_eq!(fires, 26);
    sim.audit().unwrap();
}

#[test]
fn one_target_call_carries_a_whole_work_cut_window_of_a_long_backlog() {
    let mut sim = Sim::new(5);
    many(&mut sim, "one", 10_000);
    let d = sim.run_until_idle(S, RelayBudget::FREE, 1_000);
    assert!(d.drained);
    println!("10,000 rows to one target: {d:?}");
    assert_eq!(d.calls as usize, 10_000usize.div_ceil(free_window()), "one call per work-cut window");
    assert_eq!(d.calls, 50);
    sim.audit().unwrap();
}

#[test]
fn thirty_one_failing_targets_do_not_hide_the_healthy_ones_after_them() {
    let mut sim = Sim::new(6);
    let bad = targets("bad", 31);
    for _ in 0..40 {
        one_each(&mut sim, &bad);
    }
    let good = targets("good", 10);
    one_each(&mut sim, &good);
    for t in &bad {
        sim.fail_target(t);
    }
    let mut fires = Vec::new();
    while good.iter().any(|t| sim.applied(t, S).is_empty()) {
        let f = sim.fire(S, RelayBudget::default());
        match f.wake {
            Wake::After { delay_ms } => {
                assert_eq!(f.report.rows_delivered, 0);
                assert!(delay_ms >= RETRY_BACKOFF_MS, "a fire that delivers nothing backs off");
                sim.advance(delay_ms);
            }
            _ => assert!(f.report.rows_delivered > 0 || !f.scan.is_complete()),
        }
        fires.push(f);
        assert!(fires.len() < 20, "healthy targets starved");
    }
    let shape: Vec<(u32, u32, bool)> =
        fires.iter().map(|f| (f.report.calls, f.report.rows_delivered, f.scan.is_complete())).collect();
    println!("(calls, delivered, cycle complete) per fire: {shape:?}");
    // 16 targets per fire: the first fire calls 16 of the 31 (pausing
    // before the 17th), the second the other 15 and passes the rest of its
    // 1,024-row window, the third passes the last failing rows without a
    // call and delivers the 10 healthy rows. No fire waits between.
    assert_eq!(shape, vec![(16, 0, false), (15, 0, false), (10, 10, true)]);
    assert!(fires.iter().all(|f| f.wake == Wake::Now || f.report.rows_delivered > 0));
    sim.audit().unwrap();
    for t in &bad {
        sim.heal_target(t);
    }
    let d = sim.run_until_idle(S, RelayBudget::default(), 1_000);
    assert!(d.drained);
    sim.audit().unwrap();
    for t in &bad {
        assert_eq!(sim.applied(t, S).len(), 40);
    }
}

/// Alarms until `target`'s row from `S` is applied, at most `max`.
fn alarms_until_applied(sim: &mut Sim, target: &str, budget: RelayBudget, max: u32) -> u32 {
    for alarms in 1..=max {
        let due = sim.alarm_at(S).expect("an alarm is armed while rows wait");
        sim.advance(due.saturating_sub(sim.now_ms()));
        let alarm = sim.run_alarm(S, budget);
        assert!(alarm.totals.calls <= budget.calls_per_alarm());
        if !sim.applied(target, S).is_empty() {
            return alarms;
        }
    }
    panic!("{target} not applied in {max} alarms");
}

/// `failing` targets fail, each with one row; every one has failed once
/// (its record passes it over); then one row for a healthy target arrives.
/// Returns the alarms the healthy row took, and the alarms the failures
/// took to be found.
fn healthy_behind_known_failures(failing: usize) -> (u32, u32) {
    let mut sim = Sim::new(7);
    let bad = targets("bad", failing);
    one_each(&mut sim, &bad);
    for t in &bad {
        sim.fail_target(t);
    }
    let mut found = 0;
    while bad.iter().any(|t| sim.target_record(S, t).is_none()) {
        let due = sim.alarm_at(S).expect("armed");
        sim.advance(due.saturating_sub(sim.now_ms()));
        sim.run_alarm(S, RelayBudget::FREE);
        found += 1;
        assert!(found < 1_000, "failures never found");
    }
    sim.put(S, "healthy", "k", json!(1)).unwrap();
    let alarms = alarms_until_applied(&mut sim, "healthy", RelayBudget::FREE, 20);
    sim.audit().unwrap();
    for t in &bad {
        sim.heal_target(t);
    }
    let d = sim.run_until_idle(S, RelayBudget::FREE, 10_000);
    assert!(d.drained, "every failing target was retried and drained once healed");
    for t in &bad {
        assert_eq!(sim.applied(t, S).len(), 1, "{t}");
    }
    sim.audit().unwrap();
    (alarms, found)
}

#[test]
fn a_healthy_row_behind_failing_targets_waits_one_alarm_per_window_of_failing_rows() {
    let (behind_3, found_3) = healthy_behind_known_failures(3);
    let (behind_1000, found_1000) = healthy_behind_known_failures(1_000);
    println!("free: 3 failing: found in {found_3} alarms, healthy row in {behind_3}");
    println!("free: 1,000 failing: found in {found_1000} alarms, healthy row in {behind_1000}");
    assert_eq!(behind_3, 1);
    // The healthy row is the 1,001st: one alarm per work-cut window up to it.
    assert_eq!(behind_1000, 1_001usize.div_ceil(free_window()) as u32);
    // Each failing target costs one call: 8 per Free alarm (one fire) while
    // the backlog fills the work-cut window, 16 (two fires) once it does not.
    assert!(found_1000 > 1_000 / 16 && found_1000 <= 1_000 / 8 + 1, "{found_1000}");
    assert_eq!(found_1000, 117);
}

#[test]
fn new_failures_past_thirty_two_in_one_cycle_neither_end_it_nor_stop_the_rows_behind_them() {
    let mut sim = Sim::new(7);
    let bad = targets("bad", 40);
    one_each(&mut sim, &bad);
    sim.put(S, "healthy", "k", json!(1)).unwrap();
    for t in &bad {
        sim.fail_target(t);
    }
    // A cycle that could remember only 32 failures ended at the 33rd and started over
    // from the head, so the healthy row never arrived.
    let alarms = alarms_until_applied(&mut sim, "healthy", RelayBudget::FREE, 10);
    assert_eq!(alarms, 3, "40 failing targets at 16 calls per Free alarm, then the healthy one");
    sim.audit().unwrap();
}

#[test]
fn a_crash_after_the_target_apply_never_applies_a_row_twice_and_the_next_fire_only_cleans_up() {
    let mut sim = Sim::new(8);
    one_each(&mut sim, &targets("t", 6));
    sim.crash_next_checkpoint(S);
    let alarm = sim.run_alarm(S, RelayBudget::FREE);
    assert_eq!(alarm.fires[0].commit, Commit::Crashed);
    assert_eq!(sim.queued(S).len(), 6, "nothing left the outbox");
    assert_eq!(sim.applied("t0000", S), vec![1], "the target applied before the crash");
    let next = sim.alarm_at(S).expect("the platform retries a throwing alarm");
    sim.advance(next - sim.now_ms());
    let alarm = sim.run_alarm(S, RelayBudget::FREE);
    let f = &alarm.fires[0];
    assert_eq!(f.report.rows_applied, 0, "every row was a duplicate");
    assert_eq!(f.report.rows_delivered, 6);
    assert!(sim.queued(S).is_empty());
    for t in targets("t", 6) {
        assert_eq!(sim.applied(&t, S).len(), 1);
    }
    sim.audit().unwrap();
}

#[test]
fn duplicate_only_groups_cost_a_call_but_no_target_slot() {
    let mut sim = Sim::new(9);
    one_each(&mut sim, &targets("t", 12));
    let budget = RelayBudget { targets_per_fire: 4, ..RelayBudget::FREE };
    sim.crash_next_checkpoint(S);
    sim.fire(S, budget);
    assert_eq!(sim.queued(S).len(), 12);
    let f = sim.fire(S, budget);
    assert_eq!(f.report.rows_applied, 4, "four new targets got slots");
    assert_eq!(f.report.rows_delivered, 8, "the four duplicates were cleaned up as well");
    assert_eq!(f.report.calls, 8);
    sim.audit().unwrap();
}

#[test]
fn a_lost_reply_blocks_the_target_and_its_rows_arrive_once_next_cycle() {
    let mut sim = Sim::new(10);
    many(&mut sim, "flaky", 3);
    sim.put(S, "ok", "k", json!(1)).unwrap();
    sim.lose_replies("flaky", 1);
    sim.fire(S, RelayBudget::default());
    assert_eq!(sim.target_record(S, "flaky").map(|r| r.failed_cycles), Some(1), "passed over from now");
    assert_eq!(sim.applied("flaky", S), vec![1, 2, 3]);
    assert_eq!(sim.queued(S), vec![1, 2, 3]);
    let f = sim.fire(S, RelayBudget::default());
    assert_eq!(f.report.calls, 0, "not called again before its back-off passed");
    sim.advance(RETRY_BACKOFF_MS);
    let f = sim.fire(S, RelayBudget::default());
    assert_eq!(f.report.rows_applied, 0);
    assert!(sim.queued(S).is_empty());
    sim.audit().unwrap();
}

#[test]
fn rows_appended_mid_cycle_wait_for_the_next_cycle() {
    let mut sim = Sim::new(11);
    one_each(&mut sim, &targets("t", 20));
    let budget = RelayBudget { targets_per_fire: 8, ..RelayBudget::default() };
    sim.fire(S, budget);
    sim.put(S, "late", "k", json!(1)).unwrap();
    let f = sim.fire(S, budget);
    assert!(!f.report.new_cycle);
    assert!(sim.applied("late", S).is_empty(), "t0008..t0015 first");
    let f = sim.fire(S, budget);
    assert!(f.scan.is_complete());
    assert!(sim.applied("late", S).is_empty(), "the cycle ends at the os it started with");
    let f = sim.fire(S, budget);
    assert!(f.report.new_cycle);
    assert_eq!(sim.applied("late", S), vec![21]);
    sim.audit().unwrap();
}

#[test]
fn a_row_appended_during_the_last_fire_keeps_the_alarm_armed() {
    let mut sim = Sim::new(12);
    sim.put(S, "a", "k", json!(1)).unwrap();
    sim.append_during_next_fire(S, vec![row("b", "k", json!(2))]);
    let alarm = sim.run_alarm(S, RelayBudget::FREE);
    assert!(alarm.next_alarm_ms.is_some());
    let d = sim.run_until_idle(S, RelayBudget::FREE, 10);
    assert!(d.drained);
    assert_eq!(sim.applied("b", S), vec![2]);
    sim.audit().unwrap();
}

#[test]
fn an_rs_guard_conflict_discards_the_checkpoint_and_redelivery_is_harmless() {
    let mut sim = Sim::new(13);
    one_each(&mut sim, &targets("t", 5));
    sim.conflict_next_checkpoint(S);
    let f = sim.fire(S, RelayBudget::default());
    assert_eq!(f.commit, Commit::Conflict);
    assert_eq!(sim.queued(S).len(), 5);
    let f = sim.fire(S, RelayBudget::default());
    assert_eq!(f.commit, Commit::Committed);
    assert_eq!(f.report.rows_applied, 0);
    assert!(sim.queued(S).is_empty());
    sim.audit().unwrap();
}

#[test]
fn overlapping_fires_on_one_source_apply_each_row_once() {
    for seed in 0..20 {
        let mut sim = Sim::new(seed);
        for _ in 0..3 {
            one_each(&mut sim, &targets("t", 10));
        }
        sim.overlap_next_fire(S);
        sim.fire(S, RelayBudget::default());
        sim.audit().unwrap();
        let d = sim.run_until_idle(S, RelayBudget::default(), 50);
        assert!(d.drained, "seed {seed}");
        sim.audit().unwrap();
    }
}

#[test]
fn a_corrupt_row_stops_delivery_and_is_never_skipped() {
    let mut sim = Sim::new(14);
    many(&mut sim, "t", 5);
    sim.corrupt_row(S, 3, "{broken");
    let d = sim.run_until_idle(S, RelayBudget::default(), 5);
    assert!(!d.drained, "a corrupt row keeps the source retrying, never skipping");
    assert_eq!(sim.applied("t", S), vec![1, 2]);
    assert_eq!(sim.queued(S), vec![3, 4, 5]);
}

#[test]
fn corrupt_rs_restarts_the_cycle_from_the_head() {
    let mut sim = Sim::new(15);
    many(&mut sim, "t", 4);
    sim.corrupt_rs(S, "{\"v\":1,");
    let f = sim.fire(S, RelayBudget::default());
    assert!(f.report.corrupt_rs && f.report.new_cycle);
    assert_eq!(f.commit, Commit::Committed);
    assert!(sim.queued(S).is_empty());
    assert!(sim.rs(S).is_some());
    sim.audit().unwrap();
}

#[test]
fn an_empty_outbox_leaves_no_alarm() {
    let mut sim = Sim::new(16);
    sim.put(S, "t", "k", json!(1)).unwrap();
    let alarm = sim.run_alarm(S, RelayBudget::FREE);
    assert_eq!(alarm.next_alarm_ms, None);
    assert_eq!(sim.value("t", "k").as_deref(), Some("1"));
}

/// Writes an audit key per applied batch; refuses batches for "vetoed".
struct AuditHook;

impl RelayHook for AuditHook {
    fn extra_effects(&self, source: &Sender, rows: &[ApplyRow]) -> Result<Effects, String> {
        let source = &source.name;
        if rows.iter().any(|r| r.effects.puts.iter().any(|(k, _)| k == "vetoed")) {
            return Err("vetoed".into());
        }
        let last = rows.last().map_or(0, |r| r.seq);
        Ok(Effects {
            puts: vec![(format!("audit:{source}"), JsonValue::from_value(&json!(last)))],
            deletes: vec![],
            trace: None,
        })
    }
}

#[test]
fn a_hook_adds_effects_atomically_and_its_error_rejects_only_that_target() {
    let mut sim = Sim::new(17);
    sim.set_hook("a", Box::new(AuditHook));
    sim.set_hook("b", Box::new(AuditHook));
    sim.put(S, "a", "x", json!(1)).unwrap();
    sim.put(S, "b", "vetoed", json!(1)).unwrap();
    sim.put(S, "a", "y", json!(2)).unwrap();
    let f = sim.fire(S, RelayBudget::default());
    assert_eq!(sim.value("a", "audit:src").as_deref(), Some("3"));
    assert_eq!(sim.applied("b", S), Vec::<u64>::new());
    assert_eq!(sim.value("b", "vetoed"), None, "nothing of the refused batch applied");
    assert!(f.report.failed.iter().any(|(t, _)| t.as_str() == "b"), "b's batch failed");
    assert_eq!(sim.queued(S), vec![2]);
    sim.audit().unwrap();
}

#[test]
fn an_enqueue_after_the_platform_dropped_the_alarm_unseen_sets_it_again() {
    let mut sim = Sim::new(1);
    sim.fail_target("down");
    sim.enqueue(S, vec![row("down", "k", json!(1))]).unwrap();
    sim.run_alarm(S, RelayBudget::FREE);
    let backoff = sim.alarm_at(S).expect("a failing target's retry keeps an alarm");
    // The platform drops it without running alarm(): the instance still
    // remembers it, and its time passes.
    sim.drop_alarm(S);
    sim.advance(backoff.saturating_sub(sim.now_ms()) + 1_000);
    sim.heal_target("down");
    sim.enqueue(S, vec![row("down", "k", json!(2))]).unwrap();
    let at = sim.alarm_at(S).expect("the enqueue set the alarm again");
    assert!(at <= sim.now_ms() + 1_000, "due now, not at the forgotten time: {at}");
    sim.run_until_idle(S, RelayBudget::FREE, 10);
    assert_eq!(sim.queued(S).len(), 0);
    sim.audit().unwrap();
}

/// Refuses each row the first two times it is sent and takes it the
/// third: a receiver that fails two cycles in a row, then makes progress in
/// the next before failing again.
#[derive(Default)]
struct ThirdTryTakes {
    tries: std::cell::RefCell<std::collections::BTreeMap<u64, u32>>,
}

impl RelayHook for ThirdTryTakes {
    fn extra_effects(&self, _: &Sender, rows: &[ApplyRow]) -> Result<Effects, String> {
        let first = rows.first().map_or(0, |r| r.seq);
        let mut tries = self.tries.borrow_mut();
        let tried = tries.entry(first).or_default();
        *tried += 1;
        if *tried <= 2 {
            return Err(format!("row {first}: try {tried} refused"));
        }
        Ok(Effects::default())
    }
}

/// A target that takes a row in a cycle did not fail that cycle, though a
/// later call in it failed: with parking after 3 failed cycles, and two
/// failed cycles before each row it takes, it is never parked, and its
/// back-off starts again at 1 s after each row it takes rather than
/// doubling across them.
#[test]
fn a_target_that_takes_a_row_in_a_cycle_is_not_parked_and_its_back_off_starts_again() {
    let mut sim = Sim::new(29);
    sim.audit_every_fire(true);
    let relay = RelayPolicy { park_after_failed_cycles: Some(3) };
    sim.set_policy("s", SourcePolicy { relay, ..SourcePolicy::default() });
    sim.set_hook("t", Box::new(ThirdTryTakes::default()));
    for i in 1..=8u64 {
        sim.put("s", "t", &format!("k{i}"), json!(i)).unwrap();
    }
    let budget = RelayBudget { batch_rows: 1, ..RelayBudget::FREE };
    let mut restarted = 0;
    for _ in 0..200 {
        if sim.queued("s").is_empty() {
            break;
        }
        let at = sim.alarm_at("s").expect("an alarm while rows wait");
        sim.advance(at.saturating_sub(sim.now_ms()));
        let before = sim.applied("t", "s").len();
        sim.run_alarm("s", budget);
        let progressed = sim.applied("t", "s").len() > before;
        assert!(sim.parked_targets("s").is_empty(), "seed {}: parked though it takes rows", sim.seed());
        let Some(record) = sim.target_record("s", "t") else { continue };
        assert!(record.failed_cycles <= 2, "never a third failed cycle in a row: {record:?}");
        if progressed {
            assert_eq!(record.failed_cycles, 1, "the run starts again after progress: {record:?}");
            let retry_in = sim.alarm_at("s").zip(record.last_failure_ms).map(|(a, f)| a.saturating_sub(f));
            assert!(
                retry_in.is_some_and(|ms| ms <= RETRY_BACKOFF_MS),
                "tried again within 1 s: {retry_in:?}"
            );
            restarted += 1;
        }
    }
    assert_eq!(sim.applied("t", "s"), (1..=8).collect::<Vec<_>>(), "every row, in order, once");
    assert!(restarted >= 7, "each row but the last was taken in a cycle that then failed: {restarted}");
}
