//! Workers Free's daily allowance of rows written, through the simulator:
//! the store refuses every write with the platform's own message (the test
//! store's fault, through the shipped classifier) until a time T, as the
//! platform does until 00:00 UTC. An enqueue is refused as
//! `daily_write_limit` and changes nothing; an alarm sleeps until the next
//! UTC day instead of retrying into the refusal; once writes come back
//! every row is delivered, once, in order. And the counts a source keeps in
//! memory survive a restart once read, and are lost for at most
//! `UNWRITTEN_COUNTS_MAX_AGE_MS` when unread.

use durable_relay::core::{
    next_utc_day_ms, utc_date, utc_day, EnqueueRow, ErrorCode, Name, RelayBudget, DAY_MS,
    UNWRITTEN_COUNTS_MAX_AGE_MS, WORKER_FREE_ROWS_WRITTEN_PER_DAY,
};
use durable_relay::http::RelayError;
use durable_relay::sim::{Sim, SimRng};
use durable_relay::store::outbox::EnqueueFailure;
use durable_relay::store::StoreError;
use durable_relay::SourceStatus;
use serde_json::json;

const S: &str = "src";

fn row(target: &str, i: u64) -> EnqueueRow {
    EnqueueRow::new(Name::new(target).unwrap(), vec![(format!("k{i}"), json!(i))], vec![])
}

fn status(sim: &Sim) -> SourceStatus {
    let now = sim.now_ms();
    sim.with_relay(S, |r| futures::executor::block_on(r.status(now)).unwrap())
}

/// Enqueues `rows` at `S` as a caller would, answering the failure.
fn try_enqueue(sim: &Sim, rows: &[EnqueueRow]) -> Result<Vec<u64>, EnqueueFailure> {
    let now = sim.now_ms();
    sim.with_relay(S, |r| futures::executor::block_on(r.enqueue(now, None, rows)).map(|d| d.seqs))
}

#[test]
fn an_enqueue_past_the_daily_allowance_is_a_named_503_until_midnight_and_writes_nothing() {
    let mut sim = Sim::new(1);
    for i in 1..=3 {
        sim.put(S, "t", &format!("k{i}"), json!(i)).unwrap();
    }
    let before = status(&sim);
    let (queued, applied) = (sim.queued(S), sim.applied("t", S));
    sim.refuse_writes(S, true);
    let refused = try_enqueue(&sim, &[row("t", 4), row("u", 5)]).unwrap_err();
    let EnqueueFailure::Store(e) = &refused else { panic!("{refused:?}") };
    assert!(matches!(e, StoreError::WriteLimit(_)), "{e:?}");
    let http = RelayError::write_limit(e, sim.now_ms());
    assert_eq!((http.status, http.code.clone()), (503, ErrorCode::DailyWriteLimit));
    let wait = u64::from(http.retry_after_s.unwrap()) * 1_000;
    assert!(sim.now_ms() + wait >= next_utc_day_ms(sim.now_ms()), "not before midnight");
    assert!(wait <= DAY_MS, "and not later than a day");
    assert_eq!(RelayError::from(refused).code, ErrorCode::DailyWriteLimit, "what the HTTP API answers");
    // Nothing changed: the same rows, the same sequence, the same gauges.
    let after = status(&sim);
    assert_eq!(sim.queued(S), queued);
    assert_eq!((after.last_seq, after.queued_rows, after.queued_bytes), (3, 3, before.queued_bytes));
    assert_eq!(sim.applied("t", S), applied);
    sim.refuse_writes(S, false);
    assert_eq!(try_enqueue(&sim, &[row("t", 4)]).unwrap(), vec![4], "the next sequence, as if never refused");
    sim.audit().unwrap();
}

#[test]
fn an_alarm_past_the_daily_allowance_sleeps_until_midnight_utc_and_then_delivers_everything_once_in_order() {
    let base = std::env::var("RELAY_WRITE_LIMIT_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(11);
    for seed in base..base + 20 {
        println!("write limit seed {seed} (replay: RELAY_WRITE_LIMIT_SEED={seed})");
        let mut sim = Sim::new(seed);
        let mut rng = SimRng::new(seed);
        sim.audit_every_fire(true);
        // More targets than a Free alarm reaches (8 a fire, 2 fires), so rows remain.
        let targets: Vec<String> = (0..30).map(|i| format!("t{i}")).collect();
        let mut sent: Vec<(String, u64)> = Vec::new();
        for i in 0..150 {
            let t = &targets[rng.below(targets.len() as u64) as usize];
            let seqs = sim.enqueue(S, vec![row(t, i)]).unwrap();
            sent.push((t.clone(), seqs[0]));
        }
        // Perhaps an alarm delivers; then the day's allowance runs out.
        for _ in 0..rng.below(2) {
            sim.run_alarm(S, RelayBudget::FREE);
        }
        sim.refuse_writes(S, true);
        let midnight = next_utc_day_ms(sim.now_ms());
        let report = sim.run_alarm(S, RelayBudget::FREE);
        let summary = report.summary.expect("the alarm returns: no throw, so no platform retry");
        assert!(summary.write_limited, "seed {seed}");
        assert_eq!(sim.alarm_at(S), Some(midnight), "seed {seed}: the next alarm at 00:00 UTC, not before");
        assert!(try_enqueue(&sim, &[row("a", 999)]).is_err(), "seed {seed}: refused meanwhile");
        // Writes come back at T = midnight; the alarm that was armed for it runs.
        sim.advance(midnight - sim.now_ms());
        sim.refuse_writes(S, false);
        let drain = sim.run_until_idle(S, RelayBudget::FREE, 500);
        assert!(drain.drained, "seed {seed}");
        for t in &targets {
            let want: Vec<u64> = sent.iter().filter(|(to, _)| to == t).map(|(_, s)| *s).collect();
            assert_eq!(sim.applied(t, S), want, "seed {seed}: {t} got every row once, in order");
        }
        sim.audit().unwrap();
    }
}

#[test]
fn when_the_alarm_itself_is_refused_the_first_read_after_midnight_arms_it_and_nothing_is_lost() {
    // The platform bills a setAlarm as a row written, so past the allowance
    // it may refuse the alarm's own re-arm too. The alarm then throws (the
    // platform retries it, into the same refusal) and, once the retries run
    // out, the object has no alarm until a request arrives.
    let mut sim = Sim::new(29);
    let targets: Vec<String> = (0..20).map(|i| format!("t{i}")).collect();
    for (i, t) in targets.iter().cycle().take(60).enumerate() {
        sim.enqueue(S, vec![row(t, i as u64)]).unwrap();
    }
    sim.refuse_writes(S, true);
    sim.refuse_alarm_sets(S, true);
    let report = sim.run_alarm(S, RelayBudget::FREE);
    assert!(report.summary.is_none(), "the alarm throws when it cannot arm its sleep until 00:00 UTC");
    // The platform's retries fail the same way, then it stops retrying.
    sim.set_alarm_directly(S, None);
    let midnight = next_utc_day_ms(sim.now_ms());
    sim.advance(midnight - sim.now_ms());
    sim.refuse_writes(S, false);
    sim.refuse_alarm_sets(S, false);
    assert_eq!(sim.alarm_at(S), None, "nothing wakes the source by itself");
    // The first read of its status finds rows waiting without an alarm and arms one.
    let st = status(&sim);
    assert_eq!(st.queued_rows, 60, "every row still queued");
    assert!(sim.alarm_at(S).is_some(), "the status read armed the alarm");
    let drain = sim.run_until_idle(S, RelayBudget::FREE, 100);
    assert!(drain.drained);
    for (n, t) in targets.iter().enumerate() {
        let want: Vec<u64> = (0..3).map(|k| (n + 20 * k) as u64 + 1).collect();
        assert_eq!(sim.applied(t, S), want, "{t} got every row once, in order");
    }
    sim.audit().unwrap();
}

#[test]
fn a_status_tells_the_rows_written_today_and_what_they_project_for_the_day() {
    let mut sim = Sim::new(3);
    let day = utc_day(sim.now_ms());
    for i in 0..10 {
        sim.put(S, "t", "k", json!(i)).unwrap();
        sim.run_until_idle(S, RelayBudget::FREE, 5);
    }
    let s = status(&sim);
    assert_eq!(s.rows_written_day, utc_date(day));
    assert_eq!(s.rows_written_today, s.sql_rows_written, "a source new today: every row it wrote");
    assert_eq!(s.rows_written_free_limit, WORKER_FREE_ROWS_WRITTEN_PER_DAY);
    assert!(s.rows_written_projected_today >= s.rows_written_today);
    // The next UTC day starts from zero; the total goes on.
    sim.advance(next_utc_day_ms(sim.now_ms()) + 1_000 - sim.now_ms());
    let total_before = s.sql_rows_written;
    sim.put(S, "t", "k", json!(99)).unwrap();
    sim.run_until_idle(S, RelayBudget::FREE, 5);
    let next = status(&sim);
    assert_eq!(next.rows_written_day, utc_date(day + 1));
    assert_eq!(next.rows_written_today, next.sql_rows_written - total_before, "only the new day's writes");
    assert!(next.rows_written_today > 0 && next.rows_written_today < s.rows_written_today);
    sim.restart_source(S);
    let restarted = status(&sim);
    assert_eq!(restarted.rows_written_today, next.rows_written_today, "stored: a restart keeps it");
}

#[test]
fn counts_once_read_never_go_back_across_a_restart() {
    let mut sim = Sim::new(4);
    for i in 0..6 {
        sim.put(S, &format!("t{i}"), "k", json!(i)).unwrap();
        sim.run_until_idle(S, RelayBudget::FREE, 5);
        sim.advance(1_000);
    }
    let read = status(&sim);
    assert!(read.alarms >= 6 && read.subrequests >= 6, "{read:?}");
    sim.restart_source(S);
    let again = status(&sim);
    let figures =
        |s: &SourceStatus| [s.alarms, s.fires, s.subrequests, s.sql_rows_written, s.rows_written_today];
    assert_eq!(figures(&again), figures(&read), "nothing read was lost, and the read wrote nothing more");
    assert_eq!(again.delivered_rows, 6);
}

#[test]
fn unread_counts_are_written_by_an_alarm_once_older_than_the_bound_so_a_restart_loses_at_most_that() {
    let mut sim = Sim::new(5);
    let counted = |sim: &Sim| sim.with_relay(S, |r| r.outbox().state().unwrap());
    let unwritten_alarms = |sim: &Sim| sim.with_relay(S, |r| r.outbox().unwritten().alarms);
    sim.put(S, "t", "k", json!(0)).unwrap();
    sim.run_until_idle(S, RelayBudget::FREE, 5);
    status(&sim);
    assert_eq!(unwritten_alarms(&sim), 0, "a status read wrote them");
    // Within the bound, alarms leave their counts in memory: no extra write.
    sim.advance(1_000);
    sim.put(S, "t", "k", json!(1)).unwrap();
    sim.run_until_idle(S, RelayBudget::FREE, 5);
    // The oldest unwritten count is that enqueue's, one bound ago less 1 ms.
    sim.advance(UNWRITTEN_COUNTS_MAX_AGE_MS - 1);
    sim.put(S, "t", "k", json!(2)).unwrap();
    sim.run_until_idle(S, RelayBudget::FREE, 5);
    assert_eq!(unwritten_alarms(&sim), 2, "young counts wait");
    // Past it, the next alarm writes them all (one row).
    sim.advance(1);
    sim.put(S, "t", "k", json!(3)).unwrap();
    sim.run_until_idle(S, RelayBudget::FREE, 5);
    assert_eq!(unwritten_alarms(&sim), 0, "written");
    let kept = counted(&sim);
    sim.restart_source(S);
    let after = counted(&sim);
    assert_eq!((after.alarms, after.fires, after.calls), (kept.alarms, kept.fires, kept.calls));
    assert_eq!(after.sql_rows_written, kept.sql_rows_written);
}
