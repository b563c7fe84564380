//! `Relay::enqueue_now`, the enqueue with no await that a JavaScript object
//! calls inside its own `transactionSync`: on the shipped SQL (the
//! simulator's SQLite), inside a caller's transaction that commits or rolls
//! back.

use durable_relay_sql::core::{EnqueueRow, Name, RelayBudget};
use durable_relay_sql::sim::Sim;
use durable_relay_sql::{EnqueueFailure, Sql, StoreError};
use futures::executor::block_on;
use serde_json::json;

fn rows(target: &str, n: u64) -> Vec<EnqueueRow> {
    (0..n).map(|i| EnqueueRow::to(Name::new(target).unwrap()).put(format!("k{i}"), json!(i))).collect()
}

#[test]
fn it_is_refused_until_the_relay_knows_its_alarm() {
    let sim = Sim::new(1);
    let now = sim.now_ms();
    let refused = sim.with_relay("s", |r| r.enqueue_now(now, None, &rows("t", 1)));
    assert!(matches!(refused, Err(EnqueueFailure::Store(StoreError::Guard(_)))), "{refused:?}");
    assert_eq!(sim.with_relay("s", |r| r.outbox().state().unwrap().os), 0, "nothing written");
}

#[test]
fn rows_commit_with_the_callers_transaction_and_name_the_alarm_to_set() {
    let mut sim = Sim::new(2);
    let now = sim.now_ms();
    let (done, at) = sim.with_relay("s", |r| {
        block_on(r.ready()).unwrap();
        r.sql()
            .transaction(|| {
                r.enqueue_now(now, Some("k1"), &rows("t", 2)).map_err(|e| StoreError::Sql(format!("{e:?}")))
            })
            .unwrap()
    });
    assert_eq!(done.seqs, vec![1, 2]);
    assert_eq!(at, Some(now), "an idle source needs its alarm now");
    let (dup, again) = sim.with_relay("s", |r| r.enqueue_now(now, Some("k1"), &rows("t", 2)).unwrap());
    assert!(dup.duplicate && again.is_none(), "a duplicate needs no alarm");
    let (_, later) = sim.with_relay("s", |r| r.enqueue_now(now, None, &rows("t", 1)).unwrap());
    assert_eq!(later, None, "the alarm noted as armed is early enough");
    // The simulator's alarm was not set by enqueue_now (the caller sets it): set it as a caller would.
    sim.with_relay("s", |r| block_on(r.recheck_alarm(now))).unwrap();
    let drain = sim.run_until_idle("s", RelayBudget::FREE, 10);
    assert!(drain.drained);
    assert_eq!(sim.applied("t", "s"), vec![1, 2, 3]);
    sim.audit().unwrap();
}

#[test]
fn a_callers_rollback_takes_the_rows_and_their_sequences_back() {
    let sim = Sim::new(3);
    let now = sim.now_ms();
    let rolled: Result<(), StoreError> = sim.with_relay("s", |r| {
        block_on(r.ready()).unwrap();
        r.sql().transaction(|| {
            r.enqueue_now(now, Some("k"), &rows("t", 3)).map_err(|e| StoreError::Sql(format!("{e:?}")))?;
            Err(StoreError::Aborted("the caller's own write failed".into()))
        })
    });
    assert!(rolled.is_err());
    let state = sim.with_relay("s", |r| r.outbox().state().unwrap());
    assert_eq!((state.os, state.queued_rows), (0, 0), "no row, no sequence");
    let (again, _) = sim.with_relay("s", |r| r.enqueue_now(now, Some("k"), &rows("t", 3)).unwrap());
    assert!(!again.duplicate, "the key was rolled back too");
    assert_eq!(again.seqs, vec![1, 2, 3]);
    let (stored, rearmed) = sim.with_relay("s", |r| block_on(r.recheck_alarm(now))).unwrap();
    assert!(stored.is_none() && rearmed, "the recheck arms the alarm the rows need");
    sim.audit().unwrap();
}
