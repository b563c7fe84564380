//! Unit tests for fire planning and settling, driving the engine directly
//! with hand-made windows and call outcomes.

use super::*;

const NOW: u64 = 1_000_000;

fn n(s: &str) -> Name {
    Name::new(s).unwrap()
}

fn stored(seq: u64, target: &str) -> StoredRow {
    StoredRow {
        seq,
        target: target.into(),
        at_ms: NOW,
        due_ms: 0,
        body: format!(r#"{{"puts":[["k{seq}",{seq}]],"deletes":[]}}"#),
    }
}

fn budget(targets: u32, calls: u32) -> RelayBudget {
    RelayBudget { targets_per_fire: targets, calls_per_target: calls, ..RelayBudget::default() }
}

fn start(os: u64, rs: Option<&ScanState>, b: RelayBudget) -> FireStart {
    FireStart {
        source: n("src"),
        os,
        rs_text: rs.map(|s| s.encode()),
        now_ms: NOW,
        budget: b,
        calls_left: b.calls_per_fire(),
        policy: RelayPolicy::default(),
        failing: Default::default(),
        batched_endpoints: Default::default(),
    }
}

/// A fire over `rows` (all of the cycle), from a fresh cycle at `os`.
fn fire(rows: &[StoredRow], b: RelayBudget) -> Fire {
    let os = rows.last().map_or(0, |r| r.seq);
    fire_from(rows, os, None, b)
}

fn fire_from(rows: &[StoredRow], os: u64, rs: Option<&ScanState>, b: RelayBudget) -> Fire {
    let begun = begin(start(os, rs, b)).unwrap();
    let in_window: Vec<StoredRow> = rows
        .iter()
        .filter(|r| r.seq > begun.window.after && r.seq <= begun.window.through)
        .cloned()
        .collect();
    let sizes: Vec<(u64, u32)> = in_window
        .iter()
        .take(begun.window.probe_rows() as usize)
        .map(|r| (r.seq, r.body.len() as u32))
        .collect();
    let (take, exhausted) = begun.window.take(&sizes);
    Fire::new(begun, &in_window[..take], exhausted)
}

fn ok(call: &TargetCall) -> CallOutcome {
    CallOutcome::Applied { watermark: *call.seqs.last().unwrap(), applied: call.seqs.len() as u32 }
}

fn failed() -> CallOutcome {
    CallOutcome::Failed(Failure::Transient("down".into()))
}

/// Fails calls to `bad`, answers the rest.
fn fail_only(bad: &str) -> impl FnMut(&TargetCall) -> CallOutcome + '_ {
    move |c| {
        if c.target.as_str() == bad {
            failed()
        } else {
            ok(c)
        }
    }
}

/// Runs every round, answering each call with `answer`.
fn drive(f: &mut Fire, mut answer: impl FnMut(&TargetCall) -> CallOutcome) -> Vec<TargetCall> {
    let mut all = Vec::new();
    loop {
        let calls = f.next_calls();
        if calls.is_empty() {
            return all;
        }
        for c in &calls {
            let o = answer(c);
            f.record(c, o);
        }
        all.extend(calls);
    }
}

fn deleted(s: &Settlement) -> Vec<u64> {
    s.checkpoint.deletes.iter().flat_map(|r| r.first..=r.last).collect()
}

#[test]
fn absent_rs_starts_a_cycle_at_os() {
    let b = begin(start(7, None, RelayBudget::default())).unwrap();
    assert!(b.new_cycle);
    assert_eq!((b.scan.cursor, b.scan.cycle_end), (0, 7));
    assert_eq!((b.window.after, b.window.through), (0, 7));
    assert_eq!(b.window.rows_max, 4 * DEFAULT_ROWS_PER_FIRE);
}

#[test]
fn active_rs_continues_and_complete_rs_restarts() {
    let mut active = ScanState::new_cycle(7, None);
    active.cursor = 3;
    active.blocked = vec![n("t")];
    let b = begin(start(9, Some(&active), RelayBudget::default())).unwrap();
    assert!(!b.new_cycle);
    assert_eq!((b.window.after, b.window.through), (3, 7));
    let mut done = active.clone();
    done.cursor = 7;
    let b = begin(start(9, Some(&done), RelayBudget::default())).unwrap();
    assert!(b.new_cycle);
    assert_eq!((b.scan.cursor, b.scan.cycle_end), (0, 9));
    assert!(b.scan.blocked.is_empty());
}

#[test]
fn corrupt_rs_restarts_the_cycle_and_is_replaced_under_a_guard() {
    let mut st = start(4, None, RelayBudget::default());
    st.rs_text = Some("garbage".into());
    let b = begin(st).unwrap();
    assert!(b.new_cycle && b.corrupt_rs.is_some());
    let rows: Vec<_> = (1..=4).map(|s| stored(s, "t")).collect();
    let mut f = Fire::new(b, &rows, true);
    drive(&mut f, ok);
    let s = f.settle();
    assert_eq!(s.checkpoint.rs_expected.as_deref(), Some("garbage"));
    assert!(s.report.corrupt_rs);
    assert_eq!(deleted(&s), vec![1, 2, 3, 4]);
}

#[test]
fn window_is_cut_by_rows_and_bytes_but_always_takes_one_row() {
    let q = WindowQuery { after: 0, through: 100, rows_max: 3, bytes_max: 10 };
    assert_eq!(q.probe_rows(), 4);
    assert_eq!(q.take(&[(1, 2), (2, 2), (3, 2), (4, 2)]), (3, false));
    assert_eq!(q.take(&[(1, 2), (2, 2)]), (2, true));
    assert_eq!(q.take(&[(1, 50), (2, 1)]), (1, false));
    assert_eq!(q.take(&[(1, 4), (2, 6), (3, 1)]), (2, false));
    assert_eq!(q.take(&[(1, 4), (2, 7)]), (1, false));
    assert_eq!(q.take(&[]), (0, true));
}

#[test]
fn a_window_within_work_reads_what_the_work_left_allows_and_always_one_row() {
    let q = WindowQuery { after: 0, through: 100, rows_max: 8, bytes_max: 10 };
    assert_eq!(q.within_work(8 * crate::cpu::WORK_PER_ROW).rows_max, 8, "at the edge");
    assert_eq!(q.within_work(3 * crate::cpu::WORK_PER_ROW).rows_max, 3, "under it");
    assert_eq!(q.within_work(u64::MAX).rows_max, 8, "never more than the budget");
    assert_eq!(q.within_work(0).rows_max, 1, "spent: one row still");
}

#[test]
fn a_cut_fire_makes_no_more_calls_and_settles_what_its_calls_did() {
    let rows = [stored(1, "a"), stored(2, "b"), stored(3, "a"), stored(4, "c")];
    let b = RelayBudget { batch_rows: 1, ..budget(1, 2) };
    let mut f = fire(&rows, b);
    let first = f.next_calls();
    assert_eq!(first.len(), 1);
    f.record(&first[0], ok(&first[0]));
    f.cut();
    assert!(f.next_calls().is_empty(), "no call after the cut");
    let s = f.settle();
    assert_eq!(deleted(&s), vec![1], "the call made before the cut is settled");
    assert_eq!(s.scan.cursor, 1);
    assert_eq!(s.wake, Wake::Now, "re-armed at once");
}

#[test]
fn targets_are_called_in_first_sequence_order_with_their_rows_ascending() {
    let rows = [stored(1, "b"), stored(2, "a"), stored(3, "b"), stored(4, "c"), stored(5, "a")];
    let mut f = fire(&rows, RelayBudget::default());
    let calls = f.next_calls();
    let got: Vec<(&str, Vec<u64>)> = calls.iter().map(|c| (c.target.as_str(), c.seqs.clone())).collect();
    assert_eq!(got, vec![("b", vec![1, 3]), ("a", vec![2, 5]), ("c", vec![4])]);
}

#[test]
fn a_delivered_cycle_deletes_everything_completes_and_idles() {
    let rows: Vec<_> = (1..=5).map(|s| stored(s, if s % 2 == 0 { "a" } else { "b" })).collect();
    let mut f = fire(&rows, RelayBudget::default());
    drive(&mut f, ok);
    let s = f.settle();
    assert_eq!(deleted(&s), vec![1, 2, 3, 4, 5]);
    assert_eq!(s.checkpoint.deletes.len(), 1, "one range for a fully delivered window");
    assert!(s.scan.is_complete());
    assert_eq!(s.wake, Wake::Idle { os_read: 5 });
    assert_eq!(s.wake.delay_ms(5), None);
    assert_eq!(s.wake.delay_ms(6), Some(0), "a row appended since the read keeps the alarm");
    assert_eq!(s.report.rows_delivered, 5);
    assert_eq!(s.report.rows_applied, 5);
}

#[test]
fn reaching_the_target_budget_pauses_before_the_next_target_without_blocking_it() {
    let rows = [stored(1, "a"), stored(2, "b"), stored(3, "a"), stored(4, "c")];
    let mut f = fire(&rows, budget(1, 2));
    let calls = drive(&mut f, ok);
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].target.as_str(), "a");
    let s = f.settle();
    assert_eq!(s.scan.cursor, 1, "cursor stops before b's first row");
    assert!(s.scan.blocked.is_empty(), "b is paused, not blocked");
    assert_eq!(deleted(&s), vec![1, 3], "a's row past the pause is delivered and deleted");
    assert_eq!(s.wake, Wake::Now);
}

#[test]
fn a_failed_target_is_blocked_and_passed_while_others_deliver() {
    let rows = [stored(1, "bad"), stored(2, "good"), stored(3, "bad"), stored(4, "good")];
    let mut f = fire(&rows, RelayBudget::default());
    drive(&mut f, fail_only("bad"));
    let s = f.settle();
    assert!(s.scan.blocked.is_empty(), "its failure record, written by this checkpoint, passes it over");
    assert_eq!(s.report.target_changes().failed, vec![(n("bad"), "down".to_owned())]);
    assert_eq!(deleted(&s), vec![2, 4]);
    assert!(s.scan.is_complete());
    assert_eq!(s.report.failed.len(), 1);
    assert_eq!(s.wake, Wake::Now, "delivered rows: go again (a new cycle retries bad)");
}

#[test]
fn blocked_targets_are_skipped_for_the_rest_of_the_cycle() {
    let mut rs = ScanState::new_cycle(4, None);
    rs.cursor = 1;
    rs.blocked = vec![n("bad")];
    let rows = [stored(1, "bad"), stored(2, "bad"), stored(3, "good"), stored(4, "bad")];
    let mut f = fire_from(&rows, 4, Some(&rs), RelayBudget::default());
    let calls = drive(&mut f, ok);
    assert_eq!(calls.iter().map(|c| c.target.as_str()).collect::<Vec<_>>(), vec!["good"]);
    let s = f.settle();
    assert_eq!(deleted(&s), vec![3]);
    assert!(s.scan.is_complete());
    assert_eq!(s.scan.blocked, vec![n("bad")]);
    assert!(matches!(s.wake, Wake::Now));
}

/// Settles a fire over `failing` rows to distinct failing targets followed
/// by one row to a healthy target.
fn failures_then_healthy(failing: u64) -> Settlement {
    let mut rows: Vec<_> = (1..=failing).map(|s| stored(s, &format!("t{s:02}"))).collect();
    rows.push(stored(failing + 1, "healthy"));
    let mut f = fire(&rows, budget(64, 1));
    drive(&mut f, |c| if c.target.as_str() == "healthy" { ok(c) } else { failed() });
    f.settle()
}

#[test]
fn any_number_of_new_failures_in_one_fire_neither_end_the_cycle_nor_hold_back_the_healthy_row() {
    for failing in [32, 33, 63] {
        let s = failures_then_healthy(failing);
        assert!(s.scan.is_complete(), "{failing}: the cursor passed every failed row");
        assert!(s.scan.blocked.is_empty());
        assert_eq!(s.report.failed.len(), failing as usize);
        assert_eq!(
            deleted(&s),
            vec![failing + 1],
            "{failing}: the healthy row is delivered, the failed ones stay"
        );
    }
}

/// A fire from a fresh cycle at `NOW` over `rows`, knowing `failing` records.
fn fire_knowing(
    rows: &[StoredRow],
    b: RelayBudget,
    failing: &[(&str, Failing)],
    rs: Option<&ScanState>,
) -> Fire {
    let os = rows.last().map_or(0, |r| r.seq).max(rs.map_or(0, |s| s.cycle_end));
    let mut st = start(os, rs, b);
    st.failing = failing.iter().map(|(t, f)| (n(t), *f)).collect();
    let begun = begin(st).unwrap();
    let in_window: Vec<StoredRow> = rows
        .iter()
        .filter(|r| r.seq > begun.window.after && r.seq <= begun.window.through)
        .cloned()
        .collect();
    Fire::new(begun, &in_window, true)
}

#[test]
fn failing_targets_whose_back_off_has_not_passed_are_passed_over_without_a_call() {
    let mut rows: Vec<_> = (1..=1_000).map(|s| stored(s, &format!("f{s:04}"))).collect();
    rows.push(stored(1_001, "healthy"));
    let names: Vec<String> = (1..=1_000).map(|s| format!("f{s:04}")).collect();
    let just_failed = Failing { cycles: 1, last_failure_ms: NOW, retry_after_ms: 0 };
    let failing: Vec<(&str, Failing)> = names.iter().map(|t| (t.as_str(), just_failed)).collect();
    let mut f = fire_knowing(&rows, RelayBudget::FREE, &failing, None);
    let calls = drive(&mut f, ok);
    assert_eq!(calls.iter().map(|c| c.target.as_str()).collect::<Vec<_>>(), vec!["healthy"]);
    let s = f.settle();
    assert_eq!(deleted(&s), vec![1_001]);
    assert!(s.scan.is_complete());
    assert_eq!(s.report.retries, 0);
}

#[test]
fn a_cycle_that_passed_over_a_failing_row_in_an_earlier_fire_never_ends_idle() {
    let rows = [stored(1, "bad"), stored(2, "good"), stored(3, "good")];
    let b = RelayBudget { rows_per_fire: 1, ..RelayBudget::default() };
    let mut st = start(3, None, b);
    st.failing.insert(n("bad"), Failing { cycles: 1, last_failure_ms: NOW, retry_after_ms: 0 });
    let mut f = Fire::new(begin(st).unwrap(), &rows[..1], false);
    drive(&mut f, ok);
    let first = f.settle();
    assert!(first.scan.passed_failing && !first.scan.is_complete());
    // The next fire of the cycle delivers everything in its window.
    let begun = begin(FireStart { rs_text: Some(first.scan.encode()), ..start(3, None, b) }).unwrap();
    let mut f = Fire::new(begun, &rows[1..], true);
    drive(&mut f, ok);
    let s = f.settle();
    assert_eq!(deleted(&s), vec![2, 3]);
    assert!(s.scan.is_complete());
    assert!(
        matches!(s.wake, Wake::Now | Wake::After { .. }),
        "bad's row is still owed: the source must wake again, not idle ({:?})",
        s.wake
    );
}

/// Ten failing targets `f01`..`f10` with one row each, then `healthy`.
fn ten_failing_then_healthy() -> (Vec<StoredRow>, Vec<String>) {
    let mut rows: Vec<_> = (1..=10).map(|s| stored(s, &format!("f{s:02}"))).collect();
    rows.push(stored(11, "healthy"));
    (rows, (1..=10).map(|s| format!("f{s:02}")).collect())
}

#[test]
fn a_cycle_retries_its_share_of_due_failing_targets_and_the_next_one_the_most_overdue() {
    let (rows, names) = ten_failing_then_healthy();
    let due = Failing { cycles: 1, last_failure_ms: NOW - 1_000, retry_after_ms: 0 };
    let mut failing: Vec<(&str, Failing)> = names.iter().map(|t| (t.as_str(), due)).collect();
    let mut f = fire_knowing(&rows, RelayBudget::FREE, &failing, None);
    let calls = drive(&mut f, |c| if c.target.as_str() == "healthy" { ok(c) } else { failed() });
    let called: Vec<&str> = calls.iter().map(|c| c.target.as_str()).collect();
    assert_eq!(
        called,
        vec!["f01", "f02", "f03", "f04", "healthy"],
        "four retries on Free, then the healthy one"
    );
    let s = f.settle();
    assert_eq!(deleted(&s), vec![11]);
    assert_eq!(s.scan.retries, 4, "all four failed");
    assert_eq!(s.scan.waiting_retry_ms, Some(NOW), "f05 on were passed over for want of retries");
    assert!(s.scan.is_complete(), "no retry is left to give back: the cursor need not wait");
    // The four retried failed again: the next cycle goes to the ones left waiting.
    let again = Failing { cycles: 2, last_failure_ms: NOW - 1_000, retry_after_ms: 0 };
    for (_, f) in failing.iter_mut().take(4) {
        *f = again;
    }
    let mut f = fire_knowing(&rows[..10], RelayBudget::FREE, &failing, Some(&s.scan));
    assert_eq!(f.begun.scan.retry_through_ms, Some(NOW));
    let calls = drive(&mut f, |_| failed());
    let called: Vec<&str> = calls.iter().map(|c| c.target.as_str()).collect();
    assert_eq!(called, vec!["f05", "f06", "f07", "f08"], "the most overdue, in sequence order");
    let s = f.settle();
    assert_eq!(s.scan.waiting_retry_ms, Some(NOW), "f09 and f10 are next");
}

#[test]
fn targets_passed_over_for_more_overdue_ones_wait_their_turn_and_go_next() {
    let (rows, names) = ten_failing_then_healthy();
    // f05..f08 have waited longest; f01..f04 and f09, f10 are due too.
    let oldest = Failing { cycles: 5, last_failure_ms: NOW - 40_000, retry_after_ms: 0 };
    let older = Failing { cycles: 5, last_failure_ms: NOW - 30_000, retry_after_ms: 0 };
    let recent = Failing { cycles: 5, last_failure_ms: NOW - 20_000, retry_after_ms: 0 };
    let record = |i: usize| match i {
        4..=7 => oldest,
        8 | 9 => older,
        _ => recent,
    };
    let failing: Vec<(&str, Failing)> =
        names.iter().enumerate().map(|(i, t)| (t.as_str(), record(i))).collect();
    let mut rs = ScanState::new_cycle(0, None);
    rs.waiting_retry_ms = Some(oldest.retry_at_ms());
    let mut f = fire_knowing(&rows, RelayBudget::FREE, &failing, Some(&rs));
    assert_eq!(f.begun.scan.retry_through_ms, Some(oldest.retry_at_ms()));
    let calls = drive(&mut f, |c| if c.target.as_str() == "healthy" { ok(c) } else { failed() });
    let called: Vec<&str> = calls.iter().map(|c| c.target.as_str()).collect();
    assert_eq!(called, vec!["f05", "f06", "f07", "f08", "healthy"], "the most overdue only");
    let s = f.settle();
    // Six wait, passed over for older ones: the
    // next cycle takes the share's worth that waited longest. f09 and f10,
    // then f01..f04 would be six: f09 and f10 go alone, f01..f04 after.
    assert_eq!(s.scan.waiting_retry_ms, Some(older.retry_at_ms()));
    let next = ScanState::new_cycle(11, Some(&s.scan));
    assert_eq!(next.retry_through_ms, Some(older.retry_at_ms()));
}

#[test]
fn retries_that_answer_cost_nothing_and_the_next_fire_retries_the_deferred() {
    let (rows, names) = ten_failing_then_healthy();
    let due = Failing { cycles: 3, last_failure_ms: NOW - 4_000, retry_after_ms: 0 };
    let failing: Vec<(&str, Failing)> = names.iter().map(|t| (t.as_str(), due)).collect();
    // Every failing target came back. One fire may retry four.
    let mut f = fire_knowing(&rows, RelayBudget::FREE, &failing, None);
    let calls = drive(&mut f, ok);
    let called: Vec<&str> = calls.iter().map(|c| c.target.as_str()).collect();
    assert_eq!(called, vec!["f01", "f02", "f03", "f04", "healthy"], "f05 on deferred, healthy goes on");
    let s = f.settle();
    assert_eq!(deleted(&s), vec![1, 2, 3, 4, 11]);
    assert_eq!(s.report.retries, 4);
    assert_eq!((s.scan.retries, s.scan.waiting_retry_ms), (0, None), "they answered: nothing spent");
    assert_eq!(s.scan.cursor, 4, "stopped before the first deferred target");
    assert_eq!(s.report.recovered.len(), 4);
    assert_eq!(s.wake, Wake::Now);
    // The next fire of the cycle retries the next four, and so on.
    let recovered: Vec<(&str, Failing)> = failing[4..].to_vec();
    let mut f = fire_knowing(&rows[..10], RelayBudget::FREE, &recovered, Some(&s.scan));
    let calls = drive(&mut f, ok);
    let called: Vec<&str> = calls.iter().map(|c| c.target.as_str()).collect();
    assert_eq!(called, vec!["f05", "f06", "f07", "f08"]);
    assert_eq!(f.settle().scan.cursor, 8);
}

#[test]
fn a_deferred_target_is_passed_over_once_its_fires_retries_all_failed() {
    let (rows, names) = ten_failing_then_healthy();
    let due = Failing { cycles: 3, last_failure_ms: NOW - 4_000, retry_after_ms: 0 };
    let failing: Vec<(&str, Failing)> = names.iter().map(|t| (t.as_str(), due)).collect();
    // f01 answers, f02..f04 fail: one retry comes back for the next fire.
    let mut f = fire_knowing(&rows, RelayBudget::FREE, &failing, None);
    drive(&mut f, |c| if ["f01", "healthy"].contains(&c.target.as_str()) { ok(c) } else { failed() });
    let s = f.settle();
    assert_eq!((s.scan.retries, s.scan.cursor), (3, 4), "three failed; f05 waits for the next fire");
    let mut f = fire_knowing(&rows[..10], RelayBudget::FREE, &failing[4..], Some(&s.scan));
    let calls = drive(&mut f, |_| failed());
    assert_eq!(calls.iter().map(|c| c.target.as_str()).collect::<Vec<_>>(), vec!["f05"]);
    let s = f.settle();
    assert_eq!(s.scan.retries, 4);
    assert!(s.scan.is_complete(), "f06 on: passed over, and the cycle ends");
    assert_eq!(s.scan.waiting_retry_ms, Some(NOW));
    assert!(matches!(s.wake, Wake::After { .. }), "nothing delivered: back off");
}

#[test]
fn a_cycle_that_left_targets_waiting_backs_off_when_its_retries_all_failed() {
    let rows = [stored(1, "a"), stored(2, "b")];
    let due = Failing { cycles: 1, last_failure_ms: NOW - 1_000, retry_after_ms: 0 };
    // Due now, and 8 s after failing again.
    let a = Failing { cycles: 3, last_failure_ms: NOW - 4_000, retry_after_ms: 0 };
    let one = RelayBudget { targets_per_fire: 2, ..RelayBudget::FREE };
    assert_eq!(one.retries_per_cycle(), 1);
    let mut rs = ScanState::new_cycle(0, None);
    rs.idle_fires = 6;
    // b is due but a took the only retry, and a failed: an outage. After a
    // long streak the source backs off its longest, b's turn notwithstanding.
    let mut f = fire_knowing(&rows, one, &[("a", a), ("b", due)], Some(&rs));
    drive(&mut f, |_| failed());
    let s = f.settle();
    assert_eq!((s.scan.waiting_retry_ms, s.scan.recovered), (Some(NOW), 0));
    assert_eq!(s.wake, Wake::After { delay_ms: RETRY_BACKOFF_MAX_MS });
    // Early in the streak, the streak's own back-off is shorter.
    let mut short = rs.clone();
    short.idle_fires = 0;
    let mut f = fire_knowing(&rows, one, &[("a", a), ("b", due)], Some(&short));
    drive(&mut f, |_| failed());
    assert_eq!(f.settle().wake, Wake::After { delay_ms: RETRY_BACKOFF_MS });
    // b's back-off has 3 s to run and nothing waits for a retry: wake for b.
    let later = Failing { cycles: 3, last_failure_ms: NOW - 1_000, retry_after_ms: 0 };
    let mut f = fire_knowing(&rows, one, &[("a", a), ("b", later)], Some(&rs));
    drive(&mut f, |_| failed());
    let s = f.settle();
    assert_eq!(s.scan.waiting_retry_ms, None);
    assert_eq!(s.wake, Wake::After { delay_ms: 3_000 });
    // The targets that were to go first are gone (discarded, say): b waits
    // behind them without a retry made, so no retry failed either, and the
    // next cycle, which will try b, comes within a target's back-off.
    let mut gone = rs.clone();
    gone.waiting_retry_ms = Some(NOW - 5_000);
    let mut f = fire_knowing(&rows[1..], one, &[("b", due)], Some(&gone));
    assert!(drive(&mut f, |_| failed()).is_empty());
    let s = f.settle();
    assert_eq!((s.scan.retries, s.scan.waiting_retry_ms), (0, Some(NOW)));
    assert_eq!(s.wake, Wake::After { delay_ms: TARGET_RETRY_BACKOFF_MAX_MS });
}

#[test]
fn a_cycle_that_left_targets_waiting_after_one_answered_comes_round_within_a_targets_back_off() {
    let rows = [stored(1, "back"), stored(2, "a"), stored(3, "b")];
    let due = Failing { cycles: 1, last_failure_ms: NOW - 1_000, retry_after_ms: 0 };
    let failing = [("back", due), ("a", due), ("b", due)];
    let one = RelayBudget { targets_per_fire: 2, ..RelayBudget::FREE };
    // The first fire of the cycle retries `back`, which answers: its retry
    // is given back, and the cursor waits before a, deferred.
    let mut f = fire_knowing(&rows, one, &failing, None);
    drive(&mut f, |c| if c.target.as_str() == "back" { ok(c) } else { failed() });
    let s = f.settle();
    assert_eq!((s.scan.recovered, s.scan.retries, s.scan.cursor), (1, 0, 1));
    assert_eq!(s.wake, Wake::Now);
    // The next retries a, which fails; b waits for want of retries. Even
    // after a long streak, the source comes round within a target's
    // longest back-off: a target came back, so more may have.
    let mut rs = s.scan.clone();
    rs.idle_fires = 6;
    let mut f = fire_knowing(&rows[1..], one, &failing[1..], Some(&rs));
    let calls = drive(&mut f, |_| failed());
    assert_eq!(calls.iter().map(|c| c.target.as_str()).collect::<Vec<_>>(), vec!["a"]);
    let s = f.settle();
    assert!(s.scan.is_complete());
    assert_eq!((s.scan.recovered, s.scan.waiting_retry_ms), (1, Some(NOW)));
    assert_eq!(s.wake, Wake::After { delay_ms: TARGET_RETRY_BACKOFF_MAX_MS });
    // And the next cycle retries every due target, not only the most
    // overdue: those that came back cost nothing.
    let next = ScanState::new_cycle(3, Some(&s.scan));
    assert_eq!((next.retry_through_ms, next.recovered), (None, 0));
}

#[test]
fn batches_are_cut_at_the_row_limit_and_the_second_call_continues() {
    let rows: Vec<_> = (1..=5).map(|s| stored(s, "a")).collect();
    let b = RelayBudget { batch_rows: 2, ..budget(4, 2) };
    let mut f = fire(&rows, b);
    let calls = drive(&mut f, ok);
    assert_eq!(calls.iter().map(|c| c.seqs.clone()).collect::<Vec<_>>(), vec![vec![1, 2], vec![3, 4]]);
    let s = f.settle();
    assert_eq!(s.scan.cursor, 4, "cursor stops at a's first unattempted row");
    assert!(!s.scan.is_complete());
    assert_eq!(deleted(&s), vec![1, 2, 3, 4]);
    assert_eq!(s.wake, Wake::Now);
}

#[test]
fn an_endpoint_gets_one_row_per_call_in_order_while_an_object_gets_batches() {
    let rows: Vec<_> = (1..=6).map(|s| stored(s, if s % 2 == 0 { "endpoint:hook" } else { "a" })).collect();
    let mut f = fire(&rows, budget(4, 2));
    let calls = drive(&mut f, ok);
    let got: Vec<(&str, Vec<u64>)> = calls.iter().map(|c| (c.target.as_str(), c.seqs.clone())).collect();
    assert_eq!(got, vec![("a", vec![1, 3, 5]), ("endpoint:hook", vec![2]), ("endpoint:hook", vec![4])]);
    let s = f.settle();
    assert_eq!(deleted(&s), vec![1, 2, 3, 4, 5], "the endpoint's third row waits for its next call");
    // An endpoint configured to take batches gets them as an object does.
    let mut st = start(6, None, budget(4, 2));
    st.batched_endpoints.insert("hook".into());
    let mut f = Fire::new(begin(st).unwrap(), &rows, true);
    let calls = drive(&mut f, ok);
    let got: Vec<(&str, Vec<u64>)> = calls.iter().map(|c| (c.target.as_str(), c.seqs.clone())).collect();
    assert_eq!(got, vec![("a", vec![1, 3, 5]), ("endpoint:hook", vec![2, 4, 6])]);
}

#[test]
fn batches_are_cut_at_the_byte_limit_without_splitting_a_row() {
    // Nine 60 KB values: a row just over half a batch.
    let value = format!("{:?}", "x".repeat(60_000));
    let puts: Vec<String> = (0..9).map(|i| format!("[\"k{i}\",{value}]")).collect();
    let body = format!(r#"{{"puts":[{}],"deletes":[]}}"#, puts.join(","));
    assert!(body.len() > MAX_BATCH_BYTES as usize / 2);
    let mk = |seq| StoredRow { seq, target: "a".into(), at_ms: NOW, due_ms: 0, body: body.clone() };
    let rows = [mk(1), mk(2), mk(3)];
    let mut f = fire(&rows, budget(4, 3));
    let calls = drive(&mut f, ok);
    let sizes: Vec<usize> = calls.iter().map(|c| c.seqs.len()).collect();
    assert_eq!(sizes, vec![1, 1, 1], "two half-limit rows plus framing exceed one batch");
    assert!(calls.iter().all(|c| c.bytes <= MAX_BATCH_BYTES));
}

#[test]
fn batches_are_cut_at_the_effect_limit() {
    let keys: Vec<String> = (0..64).map(|i| format!("[\"k{i}\",1]")).collect();
    let body = format!(r#"{{"puts":[{}],"deletes":[]}}"#, keys.join(","));
    let rows: Vec<_> = (1..=65)
        .map(|seq| StoredRow { seq, target: "a".into(), at_ms: NOW, due_ms: 0, body: body.clone() })
        .collect();
    let mut f = fire(&rows, budget(4, 2));
    let calls = drive(&mut f, ok);
    assert_eq!(calls[0].seqs.len() as u32, MAX_BATCH_EFFECTS / 64);
    assert_eq!(calls[1].seqs.len(), 1);
}

#[test]
fn a_duplicate_only_group_costs_a_call_but_no_target_slot() {
    let rows = [stored(1, "dup"), stored(2, "a"), stored(3, "b")];
    let mut f = fire(&rows, budget(1, 2));
    let first = f.next_calls();
    assert_eq!(first.len(), 1);
    assert_eq!(first[0].target.as_str(), "dup");
    f.record(&first[0], CallOutcome::Applied { watermark: 1, applied: 0 });
    let second = f.next_calls();
    assert_eq!(second.iter().map(|c| c.target.as_str()).collect::<Vec<_>>(), vec!["a"]);
    f.record(&second[0], ok(&second[0]));
    assert!(f.next_calls().is_empty(), "a holds the only slot now");
    let s = f.settle();
    assert_eq!(deleted(&s), vec![1, 2]);
    assert_eq!(s.scan.cursor, 2, "paused before b");
    assert_eq!(s.report.calls, 2);
}

#[test]
fn a_watermark_past_the_batch_delivers_rows_never_sent() {
    let rows: Vec<_> = (1..=4).map(|s| stored(s, "a")).collect();
    let b = RelayBudget { batch_rows: 1, ..budget(4, 1) };
    let mut f = fire(&rows, b);
    let calls = f.next_calls();
    assert_eq!(calls[0].seqs, vec![1]);
    f.record(&calls[0], CallOutcome::Applied { watermark: 3, applied: 0 });
    assert!(f.next_calls().is_empty());
    let s = f.settle();
    assert_eq!(deleted(&s), vec![1, 2, 3]);
    assert_eq!(s.scan.cursor, 3);
}

#[test]
fn a_watermark_short_of_the_batch_parks_the_target() {
    let rows: Vec<_> = (1..=3).map(|s| stored(s, "a")).collect();
    let mut f = fire(&rows, RelayBudget::default());
    let calls = f.next_calls();
    f.record(&calls[0], CallOutcome::Applied { watermark: 1, applied: 1 });
    let s = f.settle();
    assert_eq!(deleted(&s), vec![1]);
    assert!(s.scan.blocked.is_empty(), "parked, not blocked");
    assert_eq!(s.report.parked.len(), 1);
    assert_eq!(s.report.rows_parked, 2);
    assert!(s.scan.is_complete());
}

/// A fire over one row each for "bad" and "good", where "bad" fails with
/// `failure` after `failed_before` failed cycles under `policy`.
fn park_case(failure: Failure, failed_before: u32, policy: RelayPolicy) -> Settlement {
    let rows = [stored(1, "bad"), stored(2, "good"), stored(3, "bad")];
    let mut st = start(3, None, RelayBudget::default());
    st.policy = policy;
    if failed_before > 0 {
        st.failing.insert(n("bad"), Failing { cycles: failed_before, last_failure_ms: 0, retry_after_ms: 0 });
    }
    let mut f = Fire::new(begin(st).unwrap(), &rows, true);
    drive(&mut f, |c| if c.target.as_str() == "bad" { CallOutcome::Failed(failure.clone()) } else { ok(c) });
    f.settle()
}

#[test]
fn a_permanent_error_parks_the_target_at_once() {
    let s = park_case(Failure::Permanent("invalid".into()), 0, RelayPolicy::default());
    assert_eq!(s.report.parked.iter().map(|(t, _)| t.as_str()).collect::<Vec<_>>(), vec!["bad"]);
    assert!(s.report.parked[0].1.contains("invalid"));
    assert_eq!(s.report.rows_parked, 2);
    assert!(s.scan.blocked.is_empty());
    assert!(s.scan.is_complete());
    assert_eq!(s.wake, Wake::Idle { os_read: 3 }, "every window row left: delivered or parked");
}

#[test]
fn transient_failures_park_only_after_the_policy_run_of_failed_cycles() {
    let policy = RelayPolicy { park_after_failed_cycles: Some(3) };
    let s = park_case(Failure::Transient("down".into()), 1, policy);
    assert!(s.report.parked.is_empty(), "second failed cycle of three");
    assert_eq!(
        s.report.target_changes().failed,
        vec![(n("bad"), "down".to_owned())],
        "one more failed cycle"
    );
    let s = park_case(Failure::Transient("down".into()), 2, policy);
    assert_eq!(s.report.parked.len(), 1, "third failed cycle parks");
    assert!(s.report.parked[0].1.contains("3 consecutive cycles"));
    let s = park_case(Failure::Transient("down".into()), 50, RelayPolicy::default());
    assert!(s.report.parked.is_empty(), "the default never parks for transient failures");
}

#[test]
fn a_target_that_takes_a_batch_again_is_reported_recovered() {
    let rows = [stored(1, "was-bad")];
    let mut st = start(1, None, RelayBudget::default());
    st.failing.insert(n("was-bad"), Failing { cycles: 2, last_failure_ms: 0, retry_after_ms: 0 });
    let mut f = Fire::new(begin(st).unwrap(), &rows, true);
    drive(&mut f, ok);
    assert_eq!(f.settle().report.recovered, vec![n("was-bad")]);
}

#[test]
fn a_corrupt_row_stops_the_fire_after_the_decodable_prefix() {
    let mut rows: Vec<_> = (1..=4).map(|s| stored(s, "a")).collect();
    rows[2].body = "{not json".into();
    let mut f = fire(&rows, RelayBudget::default());
    let calls = drive(&mut f, ok);
    assert_eq!(calls[0].seqs, vec![1, 2]);
    let s = f.settle();
    assert_eq!(deleted(&s), vec![1, 2]);
    assert_eq!(s.scan.cursor, 2);
    assert!(!s.scan.is_complete());
    assert_eq!(s.report.corrupt.as_ref().map(|c| c.0), Some(3));
    // The next fire sees the corrupt row first, delivers nothing and backs off.
    let rs = s.scan.clone();
    let mut f = fire_from(&rows[2..], 4, Some(&rs), RelayBudget::default());
    assert!(drive(&mut f, ok).is_empty());
    let s = f.settle();
    assert!(deleted(&s).is_empty());
    assert_eq!(s.scan.cursor, 2);
    assert!(matches!(s.wake, Wake::After { .. }));
}

#[test]
fn a_fire_that_delivers_nothing_backs_off_and_the_streak_doubles_but_never_past_a_retry() {
    let rows = [stored(1, "bad"), stored(2, "held")];
    let mut rows = rows.to_vec();
    rows[1].due_ms = NOW + 1_000_000;
    let mut rs: Option<ScanState> = None;
    let mut delays = Vec::new();
    for _ in 0..4 {
        // "bad" is passed over (its record says it failed just now), "held" waits far ahead.
        let mut st = start(2, rs.as_ref(), RelayBudget::default());
        st.failing.insert(n("bad"), Failing { cycles: 5, last_failure_ms: NOW + 100_000, retry_after_ms: 0 });
        let begun = begin(st).unwrap();
        let mut f = Fire::new(begun, &rows, true);
        assert!(drive(&mut f, ok).is_empty());
        let s = f.settle();
        let Wake::After { delay_ms } = s.wake else { panic!("expected back-off, got {:?}", s.wake) };
        delays.push(delay_ms);
        rs = Some(s.scan);
    }
    assert_eq!(delays, vec![1_000, 2_000, 4_000, 8_000], "the idle streak doubles");
    let mut st = start(2, rs.as_ref(), RelayBudget::default());
    st.failing.insert(n("bad"), Failing { cycles: 5, last_failure_ms: NOW - 6_000, retry_after_ms: 0 });
    let mut f = Fire::new(begin(st).unwrap(), &rows, true);
    assert!(drive(&mut f, ok).is_empty(), "not due yet: passed over");
    let s = f.settle();
    assert_eq!(s.wake, Wake::After { delay_ms: 4_000 }, "16 s of streak, but bad is due in 4 s");
    let mut f = fire_from(&rows[..1], 1, Some(&s.scan), RelayBudget::default());
    drive(&mut f, ok);
    let s = f.settle();
    assert_eq!(s.scan.idle_fires, 0, "a delivering fire resets the streak");
}

#[test]
fn scanning_past_failed_rows_mid_cycle_goes_on_at_once() {
    let rows: Vec<_> = (1..=10).map(|s| stored(s, &format!("bad{}", s % 2))).collect();
    let b = RelayBudget { rows_per_fire: 1, ..RelayBudget::default() };
    let mut f = fire(&rows, b);
    drive(&mut f, |_| failed());
    let s = f.settle();
    assert_eq!(s.scan.cursor, 4, "window of four rows");
    assert_eq!(s.wake, Wake::Now, "the failed targets are passed over from now on: scan on");
    assert_eq!(s.scan.idle_fires, 0);
}

#[test]
fn every_checkpoint_is_guarded_by_the_rs_it_read_and_bumps_the_generation() {
    let mut rs = ScanState::new_cycle(2, None);
    rs.generation = 41;
    rs.cursor = 2;
    let rows = [stored(1, "a"), stored(2, "a"), stored(3, "a")];
    let mut f = fire_from(&rows, 3, Some(&rs), RelayBudget::default());
    drive(&mut f, ok);
    let s = f.settle();
    assert_eq!(s.checkpoint.rs_expected, Some(rs.encode()));
    assert_eq!(s.scan.generation, 42);
    assert_eq!(ScanState::decode(&s.checkpoint.rs_new).unwrap(), s.scan);
}

#[test]
fn delete_ranges_never_span_an_undelivered_row() {
    let rows = [stored(1, "a"), stored(2, "bad"), stored(3, "a"), stored(4, "a")];
    let mut f = fire(&rows, RelayBudget::default());
    drive(&mut f, fail_only("bad"));
    let s = f.settle();
    assert_eq!(
        s.checkpoint.deletes,
        vec![
            DeleteRange { first: 1, last: 1, rows: 1, bytes: 32 },
            DeleteRange { first: 3, last: 4, rows: 2, bytes: 64 }
        ]
    );
}

#[test]
fn calls_never_exceed_the_alarm_allowance() {
    let rows: Vec<_> = (1..=20).map(|s| stored(s, &format!("t{s}"))).collect();
    let mut st = start(20, None, budget(16, 2));
    st.calls_left = 5;
    let begun = begin(st).unwrap();
    let mut f = Fire::new(begun, &rows, true);
    let calls = drive(&mut f, ok);
    assert_eq!(calls.len(), 5);
    let s = f.settle();
    assert_eq!(s.scan.cursor, 5);
    assert_eq!(s.report.calls, 5);
}

#[test]
fn an_alarm_stops_when_a_fire_waits_or_its_budget_is_spent() {
    let mut run = AlarmRun::new(RelayBudget::FREE).unwrap();
    assert_eq!(run.next_fire(), Some(32));
    let report = FireReport { calls: 16, ..FireReport::default() };
    run.committed(&report, Wake::Now);
    assert_eq!(run.next_fire(), Some(16));
    run.committed(&report, Wake::Now);
    assert_eq!(run.next_fire(), None, "two fires on Free");
    let mut run = AlarmRun::new(RelayBudget::PAID).unwrap();
    run.committed(&FireReport::default(), Wake::After { delay_ms: 5 });
    assert_eq!(run.next_fire(), None);
    assert_eq!(run.final_wake(), Wake::After { delay_ms: 5 });
}

#[test]
fn rows_no_call_can_reach_need_no_body() {
    let mut rows: Vec<_> = (1..=40).map(|s| stored(s, &format!("t{s:02}"))).collect();
    rows.push(stored(41, "t01"));
    let b = budget(8, 2); // 16 calls: at most 16 distinct targets
    let begun = begin(start(41, None, b)).unwrap();
    let through = begun.bodies_through(rows.iter().map(|r| (r.seq, r.target.as_str(), r.due_ms)));
    assert_eq!(through, Some(41), "a later row of a selectable target still needs its body");
    let without_41 = begun.bodies_through(rows[..40].iter().map(|r| (r.seq, r.target.as_str(), r.due_ms)));
    assert_eq!(without_41, Some(16));
    // The shell may drop bodies past that point; the fire still delivers.
    let hollow: Vec<_> = rows[..40]
        .iter()
        .map(|r| if r.seq > 16 { StoredRow { body: String::new(), ..r.clone() } } else { r.clone() })
        .collect();
    let mut f = Fire::new(begun, &hollow, true);
    let calls = drive(&mut f, ok);
    assert_eq!(calls.len(), 8);
    let s = f.settle();
    assert_eq!(deleted(&s), (1..=8).collect::<Vec<_>>());
    assert!(s.report.corrupt.is_none(), "missing bodies past the point are not corruption");
}

#[test]
fn blocked_targets_need_no_body() {
    let mut rs = ScanState::new_cycle(3, None);
    rs.blocked = vec![n("bad")];
    let rows = [stored(1, "bad"), stored(2, "good"), stored(3, "bad")];
    let begun = begin(start(3, Some(&rs), RelayBudget::default())).unwrap();
    assert_eq!(begun.bodies_through(rows.iter().map(|r| (r.seq, r.target.as_str(), r.due_ms))), Some(2));
}

// ---- delayed rows ---------------------------------------------------------------

fn held(seq: u64, target: &str, due_ms: u64) -> StoredRow {
    StoredRow { due_ms, ..stored(seq, target) }
}

#[test]
fn a_held_row_holds_back_its_targets_later_rows_and_no_other_target() {
    // a:1 due, a:2 held, a:3 (held by a:2), b:4 due, c:5 held.
    let rows = [
        stored(1, "a"),
        held(2, "a", NOW + 500),
        held(3, "a", NOW + 500),
        stored(4, "b"),
        held(5, "c", NOW + 900),
    ];
    let mut f = fire(&rows, RelayBudget::default());
    let calls = drive(&mut f, ok);
    let sent: Vec<(String, Vec<u64>)> =
        calls.iter().map(|c| (c.target.to_string(), c.seqs.clone())).collect();
    assert_eq!(sent, vec![("a".into(), vec![1]), ("b".into(), vec![4])], "held rows are never sent");
    let s = f.settle();
    assert_eq!(deleted(&s), vec![1, 4]);
    assert!(s.report.cycle_complete, "the cursor passes held rows");
    assert_eq!(s.scan.next_due_ms, Some(NOW + 500), "the earliest held row");
    assert!(s.scan.blocked.is_empty(), "a held target is not a failing one");
    assert_eq!(s.wake, Wake::Until { os_read: 5, delay_ms: 500 });
    assert_eq!(s.wake.delay_ms(5), Some(500));
    assert_eq!(s.wake.delay_ms(6), Some(0), "a row appended since wakes it at once");
    assert_eq!(s.scan.idle_fires, 0, "waiting for a due time is not a failure");
}

#[test]
fn a_cycle_judges_due_times_by_its_own_clock_so_a_passed_row_cannot_be_overtaken() {
    // A cycle that began at NOW - 1000 passed over a:1 (due NOW - 10). A later
    // fire of the same cycle, at NOW, must not send a:2 (due NOW - 10 too).
    let mut rs = ScanState::new_cycle(3, None);
    rs.clock_ms = NOW - 1_000;
    rs.cursor = 1;
    rs.next_due_ms = Some(NOW - 10);
    let rows = [held(1, "a", NOW - 10), held(2, "a", NOW - 10), stored(3, "b")];
    let mut f = fire_from(&rows, 3, Some(&rs), RelayBudget::default());
    let calls = drive(&mut f, ok);
    assert_eq!(calls.iter().map(|c| c.target.as_str()).collect::<Vec<_>>(), vec!["b"]);
    let s = f.settle();
    assert_eq!(s.wake, Wake::Until { os_read: 3, delay_ms: 0 }, "overdue: the next cycle at once");
    // The next cycle's clock is NOW: both rows of a go, in order.
    let mut f = fire_from(&rows[..2], 3, Some(&s.scan), RelayBudget::default());
    let calls = drive(&mut f, ok);
    assert_eq!(calls.iter().map(|c| c.seqs.clone()).collect::<Vec<_>>(), vec![vec![1, 2]]);
    assert_eq!(f.settle().wake, Wake::Idle { os_read: 3 });
}

#[test]
fn a_back_off_never_outlasts_a_held_rows_due_time_and_held_rows_are_not_late() {
    let mut late = stored(2, "b");
    late.at_ms = NOW - RELAY_LAG_BOUND_MS - 1;
    let mut long_held = held(3, "c", NOW + 200);
    long_held.at_ms = NOW - RELAY_LAG_BOUND_MS - 1_000;
    let rows = [stored(1, "a"), long_held.clone()];
    let mut f = fire(&rows, RelayBudget::default());
    drive(&mut f, |_| failed());
    let s = f.settle();
    assert_eq!(s.wake, Wake::After { delay_ms: 200 }, "the back-off is cut to the due time");
    assert!(!s.report.lag_exceeded, "a row committed long ago but held until later is not late");
    let mut f = fire(&[late], RelayBudget::default());
    drive(&mut f, |_| failed());
    assert!(f.settle().report.lag_exceeded, "an old row that is due is late");
}

#[test]
fn bodies_are_read_for_every_row_of_a_selectable_target_and_none_of_a_held_one() {
    // a is held whole (its first row is not due); b is selectable, and its
    // held row 3 is read too: b's watermark may cover it already.
    let rows = [held(1, "a", NOW + 5), stored(2, "b"), held(3, "b", NOW + 5), held(4, "c", NOW + 5)];
    let begun = begin(start(4, None, RelayBudget::default())).unwrap();
    assert_eq!(begun.bodies_through(rows.iter().map(|r| (r.seq, r.target.as_str(), r.due_ms))), Some(3));
}

#[test]
fn a_held_row_a_target_already_applied_leaves_with_its_size() {
    // b applied rows 2 and 3 before (a checkpoint was lost); row 3 is held
    // in this cycle but covered by b's watermark: it leaves, with its bytes.
    let rows = [stored(2, "b"), held(3, "b", NOW + 5)];
    let mut f = fire(&rows, RelayBudget::default());
    drive(&mut f, |_| CallOutcome::Applied { watermark: 3, applied: 0 });
    let s = f.settle();
    assert_eq!(deleted(&s), vec![2, 3]);
    let bytes: u64 = rows.iter().map(|r| r.body.len() as u64).sum();
    assert_eq!(s.checkpoint.deletes.iter().map(|d| d.bytes).sum::<u64>(), bytes);
}

#[test]
fn an_interrupted_or_overloaded_target_backs_off_but_is_never_parked_for_it() {
    let policy = RelayPolicy { park_after_failed_cycles: Some(1) };
    for failure in
        [Failure::Interrupted("Network connection lost.".into()), Failure::Overloaded("busy".into())]
    {
        let s = park_case(failure.clone(), 5, policy);
        assert!(s.report.parked.is_empty(), "{failure:?} parked a target");
        assert_eq!(s.report.target_changes().failed.len(), 1, "{failure:?}: a failed cycle, so it backs off");
        assert_eq!(s.report.rows_delivered, 1, "the healthy row is delivered");
    }
    let s = park_case(Failure::Transient("down".into()), 0, policy);
    assert_eq!(s.report.parked.len(), 1, "a failure of the target's own still parks it");
}

#[test]
fn an_interrupted_call_is_sent_again_at_once_and_a_second_interruption_backs_off() {
    let rows = [stored(1, "t"), stored(2, "t")];
    let interrupted =
        || CallOutcome::Failed(Failure::Interrupted("reset because its code was updated".into()));
    // Interrupted once: the same batch goes again in the same fire, and lands.
    let mut f = fire(&rows, budget(4, 2));
    let mut first = true;
    let calls = drive(&mut f, |c| if std::mem::take(&mut first) { interrupted() } else { ok(c) });
    assert_eq!(calls.iter().map(|c| c.seqs.clone()).collect::<Vec<_>>(), vec![vec![1, 2], vec![1, 2]]);
    let s = f.settle();
    assert_eq!(deleted(&s), vec![1, 2]);
    assert!(s.report.target_changes().failed.is_empty(), "no failure recorded");
    // Interrupted twice: no third call, a failed cycle.
    let mut f = fire(&rows, budget(4, 4));
    let calls = drive(&mut f, |_| interrupted());
    assert_eq!(calls.len(), 2, "one retry at once, no more");
    assert_eq!(f.settle().report.target_changes().failed.len(), 1);
    // With one call per target there is no retry at once.
    let mut f = fire(&rows, budget(4, 1));
    assert_eq!(drive(&mut f, |_| interrupted()).len(), 1);
}

#[test]
fn an_overloaded_target_gets_no_second_call_in_the_fire() {
    let rows = [stored(1, "busy"), stored(2, "ok")];
    let mut f = fire(&rows, budget(4, 4));
    let calls = drive(&mut f, |c| {
        if c.target.as_str() == "busy" {
            CallOutcome::Failed(Failure::Overloaded("Durable Object is overloaded.".into()))
        } else {
            ok(c)
        }
    });
    assert_eq!(calls.iter().filter(|c| c.target.as_str() == "busy").count(), 1);
}

#[test]
fn a_target_that_asks_for_a_pause_is_recorded_with_it_and_not_called_before_it_ends() {
    let rows = [stored(1, "hook"), stored(2, "other")];
    let mut f = fire(&rows, RelayBudget::default());
    drive(&mut f, |c| match c.target.as_str() {
        "hook" => CallOutcome::Throttled {
            failure: Failure::Overloaded("429".into()),
            retry_after_ms: crate::limits::MAX_RETRY_AFTER_MS + 1,
        },
        _ => ok(c),
    });
    let s = f.settle();
    assert_eq!(deleted(&s), vec![2], "the other target is not held up");
    let pause = crate::limits::MAX_RETRY_AFTER_MS;
    assert_eq!(s.report.throttled, vec![(n("hook"), pause)], "the pause, cut to the bound");
    let changes = s.report.target_changes();
    assert_eq!(changes.failed.iter().map(|(t, _)| t.as_str()).collect::<Vec<_>>(), vec!["hook"]);
    assert_eq!(changes.throttled, vec![(n("hook"), pause)]);
    // Its record keeps it from calls until the pause, long past the back-off, is over.
    let asked = |ago: u64| Failing { cycles: 1, last_failure_ms: NOW - ago, retry_after_ms: 30_000 };
    assert_eq!(asked(0).retry_at_ms(), NOW + 30_000);
    let calls = |ago| {
        let mut f = fire_knowing(&rows[..1], RelayBudget::default(), &[("hook", asked(ago))], None);
        drive(&mut f, ok).len()
    };
    assert_eq!(calls(20_000), 0, "20 s into a 30 s pause: passed over, though the 1 s back-off is long over");
    assert_eq!(calls(30_000), 1, "called once the pause is over");
    // A pause shorter than the back-off leaves the back-off in force.
    let short = Failing { cycles: 4, last_failure_ms: NOW, retry_after_ms: 1_000 };
    assert_eq!(short.retry_at_ms(), NOW + crate::limits::target_retry_backoff_ms(4));
}
