//! Operating the relay, through the simulator: idempotent enqueue, horizon
//! pruning, parked targets with redrive and discard, and backpressure.

use durable_relay::core::{
    EnqueueError, EnqueueRefusal, EnqueueRow, Name, RelayBudget, RelayPolicy, DEFAULT_MAX_QUEUED_ROWS,
};
use durable_relay::http::RelayError;
use durable_relay::sim::{Sim, SourcePolicy};
use serde_json::json;

const S: &str = "src";

fn row(target: &str, key: &str, value: serde_json::Value) -> EnqueueRow {
    EnqueueRow::new(Name::new(target).unwrap(), vec![(key.to_owned(), value)], vec![])
}

fn parking(after: u32) -> SourcePolicy {
    SourcePolicy { relay: RelayPolicy { park_after_failed_cycles: Some(after) }, ..Default::default() }
}

#[test]
fn the_same_key_and_content_returns_the_original_sequences_and_writes_nothing() {
    let mut sim = Sim::new(1);
    let rows = vec![row("t", "a", json!(1)), row("u", "b", json!(2))];
    let first = sim.enqueue_keyed(S, Some("order-17"), rows.clone()).unwrap();
    assert_eq!((first.seqs.clone(), first.duplicate), (vec![1, 2], false));
    let again = sim.enqueue_keyed(S, Some("order-17"), rows).unwrap();
    assert_eq!((again.seqs, again.duplicate), (vec![1, 2], true));
    assert_eq!(sim.os(S), 2, "nothing written");
    assert_eq!(sim.admission_counters(S).0, 1, "one dedup hit");
}

#[test]
fn the_same_key_with_different_content_is_a_conflict_and_writes_nothing() {
    let mut sim = Sim::new(2);
    sim.enqueue_keyed(S, Some("k"), vec![row("t", "a", json!(1))]).unwrap();
    let err = sim.enqueue_keyed(S, Some("k"), vec![row("t", "a", json!(2))]).unwrap_err();
    assert_eq!(err, EnqueueRefusal::Conflict { key: "k".into() });
    assert_eq!((RelayError::from(err.clone()).status, err.code().as_str()), (409, "idempotency_conflict"));
    assert_eq!(sim.os(S), 1);
    let bad = sim.enqueue_keyed(S, Some(""), vec![row("t", "a", json!(1))]).unwrap_err();
    assert_eq!((RelayError::from(bad.clone()).status, bad.code().as_str()), (400, "invalid_idempotency_key"));
}

#[test]
fn keys_are_pruned_by_the_alarm_after_their_horizon_and_an_idle_source_wakes_once_to_prune() {
    let mut sim = Sim::new(3);
    let horizon = 60_000;
    sim.set_policy(S, SourcePolicy { dedup_horizon_ms: horizon, ..Default::default() });
    sim.enqueue_keyed(S, Some("k"), vec![row("t", "a", json!(1))]).unwrap();
    let d = sim.run_until_idle(S, RelayBudget::FREE, 1);
    assert_eq!(d.alarms, 1);
    assert_eq!(sim.dedup_records(S), 1, "not yet expired");
    let prune_at = sim.alarm_at(S).expect("one alarm to prune the key later");
    assert!(prune_at >= sim.now_ms() + horizon - 1_000, "not before the key expires");
    let d = sim.run_until_idle(S, RelayBudget::FREE, 10);
    assert_eq!(d.alarms, 1, "exactly one prune alarm, then idle");
    assert!(d.drained);
    assert_eq!(sim.dedup_records(S), 0);
    // After the horizon the key is free again.
    let again = sim.enqueue_keyed(S, Some("k"), vec![row("t", "a", json!(9))]).unwrap();
    assert!(!again.duplicate);
}

#[test]
fn a_target_is_parked_after_the_configured_failed_cycles_with_all_its_rows() {
    let mut sim = Sim::new(4);
    sim.set_policy(S, parking(3));
    for i in 0..4 {
        sim.put(S, "down", "k", json!(i)).unwrap();
        sim.put(S, "up", "k", json!(i)).unwrap();
    }
    sim.fail_target("down");
    let mut cycles = 0;
    while sim.parked_targets(S).is_empty() {
        let f = sim.fire(S, RelayBudget::default());
        if f.report.new_cycle {
            cycles += 1;
        }
        sim.advance(60_000);
        assert!(cycles <= 3, "parked too late");
    }
    assert_eq!(cycles, 3);
    let parked = sim.parked_targets(S);
    assert_eq!(parked[0].0, "down");
    assert_eq!(parked[0].2, 4, "all four rows moved");
    assert!(parked[0].1.parked.as_deref().unwrap().contains("3 consecutive cycles"));
    assert_eq!(sim.parked_rows(S, "down"), vec![1, 3, 5, 7]);
    assert!(sim.queued(S).is_empty());
    // A later row for the parked target is parked behind the others.
    let late = sim.put(S, "down", "k", json!(99)).unwrap();
    assert_eq!(sim.parked_rows(S, "down"), vec![1, 3, 5, 7, late]);
    assert_eq!(sim.applied("up", S), vec![2, 4, 6, 8]);
    sim.audit().unwrap();
}

#[test]
fn a_permanent_error_parks_at_once_and_redrive_delivers_in_the_original_order() {
    let mut sim = Sim::new(5);
    sim.put(S, "strict", "a", json!(1)).unwrap();
    sim.put(S, "other", "a", json!(1)).unwrap();
    sim.put(S, "strict", "b", json!(2)).unwrap();
    sim.fail_target_permanently("strict");
    let f = sim.fire(S, RelayBudget::default());
    assert_eq!(f.report.parked.len(), 1, "parked on the first failure");
    assert_eq!(sim.parked_rows(S, "strict"), vec![1, 3]);
    sim.put(S, "strict", "c", json!(3)).unwrap();
    sim.heal_target("strict");
    assert_eq!(sim.redrive(S, "strict"), 3);
    assert_eq!(sim.redrive(S, "strict"), 0, "redrive is idempotent");
    sim.put(S, "strict", "d", json!(4)).unwrap();
    let d = sim.run_until_idle(S, RelayBudget::default(), 20);
    assert!(d.drained);
    assert_eq!(sim.applied("strict", S), vec![1, 3, 4, 5], "original order, then the newer row");
    sim.audit().unwrap();
}

#[test]
fn discard_drops_parked_rows_unparks_the_target_and_is_pruned_after_its_horizon() {
    let mut sim = Sim::new(6);
    sim.set_policy(S, SourcePolicy { discard_horizon_ms: 120_000, ..Default::default() });
    sim.put(S, "gone", "a", json!(1)).unwrap();
    sim.fail_target_permanently("gone");
    sim.fire(S, RelayBudget::default());
    assert_eq!(sim.discard(S, "gone"), 1);
    assert_eq!(sim.discard(S, "gone"), 0, "discard is idempotent");
    assert!(sim.parked_targets(S).is_empty());
    assert_eq!(sim.discarded_rows(S), 1);
    sim.heal_target("gone");
    sim.put(S, "gone", "b", json!(2)).unwrap();
    sim.run_until_idle(S, RelayBudget::default(), 20);
    assert_eq!(sim.applied("gone", S), vec![2], "the discarded row never arrives");
    sim.audit().unwrap();
    sim.advance(120_000);
    sim.run_until_idle(S, RelayBudget::default(), 5);
    assert_eq!(sim.discarded_rows(S), 0, "pruned after its horizon");
}

#[test]
fn backpressure_refuses_at_the_bound_and_accepts_just_below_writing_nothing() {
    let mut sim = Sim::new(7);
    sim.set_policy(S, SourcePolicy { max_rows: 10, ..Default::default() });
    sim.fail_target("t");
    let rows = |n: usize| (0..n).map(|i| row("t", &format!("k{i}"), json!(i))).collect::<Vec<_>>();
    sim.enqueue(S, rows(9)).unwrap();
    let err = sim.enqueue(S, rows(2)).unwrap_err();
    assert!(matches!(err, EnqueueError::OutboxFull { rows: 11, .. }));
    let http = RelayError::from(EnqueueRefusal::Invalid(err));
    assert_eq!((http.status, http.retry_after_s), (429, Some(5)));
    assert_eq!(sim.os(S), 9, "nothing written");
    sim.enqueue(S, rows(1)).unwrap();
    assert_eq!(sim.admission_counters(S).1, 1, "one refusal counted");
    assert_eq!(DEFAULT_MAX_QUEUED_ROWS, 100_000);
}

#[test]
fn parked_rows_count_toward_backpressure() {
    let mut sim = Sim::new(8);
    sim.set_policy(S, SourcePolicy { max_rows: 3, ..Default::default() });
    sim.put(S, "p", "a", json!(1)).unwrap();
    sim.put(S, "p", "b", json!(1)).unwrap();
    sim.fail_target_permanently("p");
    sim.fire(S, RelayBudget::default());
    assert_eq!(sim.parked_rows(S, "p").len(), 2);
    sim.put(S, "q", "a", json!(1)).unwrap();
    assert!(sim.put(S, "q", "b", json!(1)).is_err(), "two parked plus two queued pass the bound of three");
}

#[test]
fn a_trace_stays_with_its_rows_through_parking_and_redrive_and_a_retry_with_another_is_a_duplicate() {
    use durable_relay::core::Traceparent;
    let t1 = Traceparent::parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01").unwrap();
    let t2 = Traceparent::parse("00-4bf92f3577b34da6a3ce929d0e0e4736-11f067aa0ba902b7-01").unwrap();
    let mut sim = Sim::new(21);
    sim.fail_target_permanently("strict");
    let rows = vec![row("strict", "a", json!(1)).with_trace(Some(t1.clone())), row("ok", "a", json!(1))];
    let first = sim.enqueue_keyed(S, Some("order-1"), rows.clone()).unwrap();
    let retried = rows.into_iter().map(|r| r.with_trace(Some(t2.clone()))).collect::<Vec<_>>();
    let again = sim.enqueue_keyed(S, Some("order-1"), retried).unwrap();
    assert!(again.duplicate, "a new trace is not new content");
    assert_eq!(again.seqs, first.seqs);
    let f = sim.fire(S, RelayBudget::default());
    assert!(
        f.traces.is_empty(),
        "the untraced row carried none and the traced one was refused: {:?}",
        f.traces
    );
    assert_eq!(sim.parked_rows(S, "strict"), vec![first.seqs[0]]);
    sim.heal_target("strict");
    assert_eq!(sim.redrive(S, "strict"), 1);
    let f = sim.fire(S, RelayBudget::default());
    assert_eq!(f.traces, vec![t1.to_string()], "the parked row kept its trace");
    sim.audit().unwrap();
}

#[test]
fn an_enqueue_counts_queued_and_parked_rows_as_status_does() {
    let mut sim = Sim::new(28);
    sim.fail_target_permanently("p");
    sim.enqueue(S, vec![EnqueueRow::new(Name::new("p").unwrap(), vec![("k".into(), json!(1))], vec![])])
        .unwrap();
    sim.run_alarm(S, RelayBudget::FREE);
    let now = sim.now_ms();
    let rows = [
        EnqueueRow::new(Name::new("p").unwrap(), vec![("k".into(), json!(2))], vec![]),
        EnqueueRow::new(Name::new("q").unwrap(), vec![("k".into(), json!(3))], vec![]),
    ];
    let done = sim.with_relay(S, |r| futures::executor::block_on(r.enqueue(now, None, &rows))).unwrap();
    let status = sim.with_relay(S, |r| futures::executor::block_on(r.status(now))).unwrap();
    assert_eq!((done.queued_rows, done.parked_rows), (1, 2), "q's row queued; p's two parked");
    assert_eq!((done.queued_rows, done.parked_rows), (status.queued_rows, status.parked_rows));
}

/// Every target record, read page by page with `limit`.
fn every_page(sim: &Sim, limit: u32) -> (Vec<String>, u32) {
    let (mut names, mut pages, mut after) = (Vec::new(), 0, String::new());
    loop {
        let page = sim.with_relay(S, |r| r.targets(&after, limit)).unwrap();
        assert!(page.targets.len() <= limit as usize, "a page holds at most its limit");
        pages += 1;
        names.extend(page.targets.into_iter().map(|t| t.target));
        match page.next {
            Some(next) => after = next,
            None => return (names, pages),
        }
    }
}

#[test]
fn thousands_of_target_records_are_listed_a_bounded_page_at_a_time() {
    use durable_relay::core::{MAX_TARGETS_PER_PAGE, STATUS_TARGETS};
    let mut sim = Sim::new(1);
    sim.enqueue(S, vec![row("t", "k", json!(1))]).unwrap();
    let now = sim.now_ms();
    sim.with_relay(S, |r| durable_relay::testing::seed_target_records(r.sql(), 1_500, 300, now)).unwrap();
    let (names, pages) = every_page(&sim, MAX_TARGETS_PER_PAGE);
    assert_eq!(names.len(), 1_800, "every record once");
    assert!(names.windows(2).all(|w| w[0] < w[1]), "in name order, none twice");
    assert_eq!(pages, 9, "1,800 records in pages of {MAX_TARGETS_PER_PAGE}");
    assert_eq!(every_page(&sim, 1).0, names, "a page of one walks the same list");
    let over = sim.with_relay(S, |r| r.targets("", MAX_TARGETS_PER_PAGE + 1)).unwrap();
    assert_eq!(over.targets.len(), MAX_TARGETS_PER_PAGE as usize, "a limit past the bound is clamped");

    let status = sim.with_relay(S, |r| futures::executor::block_on(r.status(now))).unwrap();
    assert_eq!(status.parked_targets.len(), STATUS_TARGETS as usize);
    assert_eq!(status.failing_targets.len(), STATUS_TARGETS as usize);
    assert!(
        status.parked_targets.keys().all(|t| t.starts_with("seeded-p")),
        "parked ones, however many fail"
    );
    assert!(status.targets_truncated);
    assert!(status.blocked_targets.len() <= STATUS_TARGETS as usize);
}

#[test]
fn a_status_of_a_few_target_records_lists_them_all() {
    let mut sim = Sim::new(1);
    sim.enqueue(S, vec![row("t", "k", json!(1))]).unwrap();
    let now = sim.now_ms();
    sim.with_relay(S, |r| durable_relay::testing::seed_target_records(r.sql(), 50, 50, now)).unwrap();
    let status = sim.with_relay(S, |r| futures::executor::block_on(r.status(now))).unwrap();
    assert_eq!((status.parked_targets.len(), status.failing_targets.len()), (50, 50));
    assert!(!status.targets_truncated, "exactly a page of each is not cut");
    sim.with_relay(S, |r| durable_relay::testing::seed_target_records(r.sql(), 51, 0, now)).unwrap();
    let status = sim.with_relay(S, |r| futures::executor::block_on(r.status(now))).unwrap();
    assert!(status.targets_truncated, "one past the page is");
}

#[test]
fn status_counts_dedup_records_up_to_its_bound() {
    use durable_relay::core::STATUS_COUNT_MAX;
    let mut sim = Sim::new(1);
    let dedup = |sim: &Sim| {
        let now = sim.now_ms();
        sim.with_relay(S, |r| futures::executor::block_on(r.status(now))).unwrap().dedup_records
    };
    for i in 0..STATUS_COUNT_MAX - 1 {
        sim.enqueue_keyed(S, Some(&format!("key-{i}")), vec![row("t", "k", json!(i))]).unwrap();
    }
    assert_eq!(dedup(&sim), u64::from(STATUS_COUNT_MAX) - 1, "below the bound: the count");
    sim.enqueue_keyed(S, Some("key-at"), vec![row("t", "k", json!(0))]).unwrap();
    assert_eq!(dedup(&sim), u64::from(STATUS_COUNT_MAX), "at the bound");
    sim.enqueue_keyed(S, Some("key-past"), vec![row("t", "k", json!(0))]).unwrap();
    assert_eq!(dedup(&sim), u64::from(STATUS_COUNT_MAX), "past it: the bound, meaning at least");
    let kept = sim.with_relay(S, |r| {
        use durable_relay::store::Sql;
        r.sql().first("SELECT COUNT(*) FROM relay_dedup", vec![]).unwrap().unwrap().u64(0).unwrap()
    });
    assert_eq!(kept, u64::from(STATUS_COUNT_MAX) + 1, "every record is kept");
}

#[test]
fn seeded_target_records_are_bounded_and_a_refused_seed_writes_nothing() {
    use durable_relay::testing::{seed_target_records, MAX_SEEDED_TARGETS};
    let mut sim = Sim::new(1);
    sim.enqueue(S, vec![row("t", "k", json!(1))]).unwrap();
    let now = sim.now_ms();
    sim.with_relay(S, |r| seed_target_records(r.sql(), MAX_SEEDED_TARGETS, 0, now)).unwrap();
    let refused = sim.with_relay(S, |r| seed_target_records(r.sql(), 0, MAX_SEEDED_TARGETS + 1, now));
    assert!(refused.is_err(), "one past the bound");
    let page = sim.with_relay(S, |r| r.targets("seeded-o", 1)).unwrap();
    assert!(page.targets.is_empty(), "no parked record was written");
}

#[test]
fn a_target_fault_throws_at_most_its_bounded_number_of_times() {
    use durable_relay::testing::{TargetFaultsBody, MAX_THROW_TIMES};
    let body = |times: u32| {
        serde_json::from_value::<TargetFaultsBody>(json!({"throw": "overloaded", "times": times})).unwrap()
    };
    assert_eq!(body(MAX_THROW_TIMES).faults().unwrap().throw_times, MAX_THROW_TIMES);
    assert!(body(MAX_THROW_TIMES + 1).faults().is_err());
    let once = serde_json::from_value::<TargetFaultsBody>(json!({"throw": "network_lost"})).unwrap();
    assert_eq!(once.faults().unwrap().throw_times, 1, "one throw unless told");
}

#[test]
fn notable_alarm_logging_keeps_every_alarm_worth_a_look_and_drops_the_routine_ones() {
    use durable_relay::embed::alarm_is_logged;
    use durable_relay::{AlarmLog, AlarmSummary};
    let routine =
        AlarmSummary { subrequests: 1, rows_applied: 1, rows_delivered: 1, ..AlarmSummary::default() };
    assert!(alarm_is_logged(&routine, AlarmLog::Every), "every alarm logs by default");
    assert!(!alarm_is_logged(&routine, AlarmLog::Notable), "a routine delivery is not notable");
    assert!(!alarm_is_logged(&AlarmSummary::default(), AlarmLog::Notable), "nor an idle prune");
    let notable = [
        AlarmSummary { conflicts: 1, ..routine.clone() },
        AlarmSummary { lag_exceeded: true, ..routine.clone() },
        AlarmSummary { traced_rows: 1, ..routine.clone() },
        AlarmSummary { rows_delivered: 0, ..routine.clone() },
        AlarmSummary {
            parked: vec![(durable_relay::core::Name::new("t").unwrap(), 2, "422".into())],
            ..routine.clone()
        },
    ];
    for (i, summary) in notable.iter().enumerate() {
        assert!(alarm_is_logged(summary, AlarmLog::Notable), "case {i} is notable: {summary:?}");
    }
}
