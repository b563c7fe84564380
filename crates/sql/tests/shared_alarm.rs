//! The object's one alarm, shared by the relay and its host: the host keeps
//! its own time through the relay (`Relay::set_host_alarm`), and every path
//! that arms the alarm (an enqueue, an `enqueue_now`, the alarm's own
//! re-arm, its back-off, a status read, a re-arm sweep, a redrive) leaves it
//! at the earlier of the relay's time and the host's. An alarm the host
//! moved behind the relay's back is found and put right. On the shipped SQL
//! and driver (the simulator), through the `AlarmStore` abstraction.

use durable_relay_sql::core::{Delay, EnqueueRow, Name, RelayBudget};
use durable_relay_sql::sim::Sim;
use durable_relay_sql::{Sql, StoreError};
use futures::executor::block_on;
use serde_json::json;

const S: &str = "shop";
/// The host's own alarm, this long after the start.
const HOST_IN_MS: u64 = 5_000;

fn row(target: &str, i: u64) -> EnqueueRow {
    EnqueueRow::to(Name::new(target).unwrap()).put(format!("k{i}"), json!(i))
}

fn set_host(sim: &Sim, at: u64) {
    let now = sim.now_ms();
    sim.with_relay(S, |r| block_on(r.set_host_alarm(at, now))).unwrap();
}

fn host(sim: &Sim) -> Option<u64> {
    sim.with_relay(S, |r| r.host_alarm()).unwrap()
}

#[test]
fn every_arming_path_keeps_the_earlier_of_the_relays_time_and_the_hosts() {
    let mut sim = Sim::new(31);
    let t0 = sim.now_ms();
    let host_at = t0 + HOST_IN_MS;

    // Set: an idle source's alarm is the host's.
    set_host(&sim, host_at);
    assert_eq!(sim.alarm_at(S), Some(host_at));
    assert_eq!(host(&sim), Some(host_at));

    // Enqueue: the rows need the alarm now, earlier than the host's.
    sim.enqueue(S, vec![row("t", 1)]).unwrap();
    assert_eq!(sim.alarm_at(S), Some(t0), "the enqueue brought the alarm forward");

    // The alarm's own re-arm: delivered, the relay needs nothing soon, the host still does.
    let report = sim.run_alarm(S, RelayBudget::FREE);
    let summary = report.summary.unwrap();
    assert!(!summary.host_alarm, "the host's time has not come");
    assert_eq!(sim.applied("t", S), vec![1]);
    assert_eq!(sim.alarm_at(S), Some(host_at), "re-armed at the host's time, not the relay's alone");

    // A failing target: the back-off is earlier than the host's time, and armed.
    sim.fail_target("t");
    sim.enqueue(S, vec![row("t", 2)]).unwrap();
    let failed = sim.run_alarm(S, RelayBudget::FREE);
    let retry = failed.next_alarm_ms.unwrap();
    assert!(retry > sim.now_ms() && retry < host_at, "the relay's retry ({retry}) comes first");
    sim.heal_target("t");
    sim.advance(retry - sim.now_ms());
    sim.run_alarm(S, RelayBudget::FREE);
    assert_eq!(sim.applied("t", S), vec![1, 2]);
    assert_eq!(sim.alarm_at(S), Some(host_at), "after the retry, the host's time again");

    // The host's time comes: reported once, cleared, and not armed again.
    sim.advance(host_at - sim.now_ms());
    let fired = sim.run_alarm(S, RelayBudget::FREE).summary.unwrap();
    assert!(fired.host_alarm, "the host's time has come");
    assert_eq!(host(&sim), None, "cleared, as a fired alarm is");
    assert_ne!(sim.alarm_at(S), Some(host_at));
    let again = sim.run_alarm(S, RelayBudget::FREE).summary.unwrap();
    assert!(!again.host_alarm, "reported once");
    sim.audit().unwrap();
}

#[test]
fn a_later_host_time_keeps_the_relays_earlier_alarm() {
    let mut sim = Sim::new(32);
    let t0 = sim.now_ms();
    // Rows delayed a minute: the relay's alarm is then.
    let delayed = row("t", 1).delayed(Delay::For(60_000));
    sim.enqueue(S, vec![delayed]).unwrap();
    assert_eq!(sim.alarm_at(S), Some(t0 + 60_000));
    // The host wants its alarm an hour on: the relay's minute stands.
    set_host(&sim, t0 + 3_600_000);
    assert_eq!(sim.alarm_at(S), Some(t0 + 60_000), "never moved later than the relay needs");
    // The relay delivers at its time, then re-arms the host's.
    sim.advance(60_000);
    let summary = sim.run_alarm(S, RelayBudget::FREE).summary.unwrap();
    assert!(!summary.host_alarm);
    assert_eq!(sim.applied("t", S), vec![1]);
    assert_eq!(sim.alarm_at(S), Some(t0 + 3_600_000));
}

#[test]
fn deleting_the_hosts_time_leaves_the_relays_alarm() {
    let mut sim = Sim::new(33);
    let t0 = sim.now_ms();
    set_host(&sim, t0 + HOST_IN_MS);
    sim.with_relay(S, |r| r.delete_host_alarm()).unwrap();
    assert_eq!(host(&sim), None);
    // The alarm stays (it may be the relay's); it wakes once and reports nothing.
    assert_eq!(sim.alarm_at(S), Some(t0 + HOST_IN_MS));
    sim.advance(HOST_IN_MS);
    let summary = sim.run_alarm(S, RelayBudget::FREE).summary.unwrap();
    assert!(!summary.host_alarm);
    assert_ne!(sim.alarm_at(S), Some(t0 + HOST_IN_MS), "not armed for a host time that is gone");
}

#[test]
fn the_hosts_time_survives_a_restart() {
    let mut sim = Sim::new(34);
    let t0 = sim.now_ms();
    set_host(&sim, t0 + HOST_IN_MS);
    sim.restart_source(S);
    assert_eq!(host(&sim), Some(t0 + HOST_IN_MS), "read back from the relay's table");
    sim.enqueue(S, vec![row("t", 1)]).unwrap();
    sim.run_alarm(S, RelayBudget::FREE);
    assert_eq!(sim.alarm_at(S), Some(t0 + HOST_IN_MS));
}

#[test]
fn an_alarm_the_host_pushed_back_is_found_and_put_right_by_every_recheck() {
    let mut sim = Sim::new(35);
    let t0 = sim.now_ms();
    let host_at = t0 + HOST_IN_MS;
    set_host(&sim, host_at);

    // Status: the host set the object's alarm itself, an hour on.
    sim.set_alarm_directly(S, Some(t0 + 3_600_000));
    let status = sim.with_relay(S, |r| block_on(r.status(t0))).unwrap();
    assert!(status.rearmed, "the moved alarm was found");
    assert_eq!(status.alarm_at_ms, Some(host_at));
    assert_eq!(sim.alarm_at(S), Some(host_at), "back at the host's own time");

    // The re-arm sweep: the host deleted the object's alarm while rows wait.
    sim.enqueue(S, vec![row("t", 1)]).unwrap();
    sim.set_alarm_directly(S, None);
    let rearmed = sim.with_relay(S, |r| block_on(r.rearm(t0))).unwrap();
    assert!(rearmed.rearmed);
    assert_eq!(sim.alarm_at(S), Some(t0), "the rows' time, earlier than the host's");

    // enqueue_now's recheck: pushed past the rows' time.
    sim.set_alarm_directly(S, Some(t0 + 3_600_000));
    let (_, rearmed) = sim.with_relay(S, |r| block_on(r.recheck_alarm(t0))).unwrap();
    assert!(rearmed);
    assert_eq!(sim.alarm_at(S), Some(t0));

    // Rows whose alarm is due: pushed past now, found at once.
    sim.advance(1_000);
    let now = sim.now_ms();
    sim.set_alarm_directly(S, Some(now + 3_600_000));
    let (_, rearmed) = sim.with_relay(S, |r| block_on(r.recheck_alarm(now))).unwrap();
    assert!(rearmed, "rows owed and the alarm pushed past now");
    assert_eq!(sim.alarm_at(S), Some(now));

    // An alarm earlier than needed is left alone.
    let t0 = now;
    let (_, rearmed) = sim.with_relay(S, |r| block_on(r.recheck_alarm(t0))).unwrap();
    assert!(!rearmed, "nothing moved");
    let drain = sim.run_until_idle(S, RelayBudget::FREE, 10);
    assert_eq!(sim.applied("t", S), vec![1], "the rows arrived: {drain:?}");
}

#[test]
fn an_enqueue_without_awaiting_names_the_hosts_earlier_time() {
    let sim = Sim::new(36);
    let t0 = sim.now_ms();
    set_host(&sim, t0 + HOST_IN_MS);
    // The object's alarm is gone and this instance has forgotten it.
    let mut sim = sim;
    sim.set_alarm_directly(S, None);
    let at = sim.with_relay(S, |r| {
        r.alarm_unknown();
        block_on(r.ready()).unwrap();
        let delayed = [row("t", 1).delayed(Delay::For(60_000))];
        r.sql()
            .transaction(|| r.enqueue_now(t0, None, &delayed).map_err(|e| StoreError::Sql(format!("{e:?}"))))
            .unwrap()
            .1
    });
    assert_eq!(at, Some(t0 + HOST_IN_MS), "the host's time, earlier than the delayed row's");
}

#[test]
fn a_host_time_past_seq_max_is_refused_and_writes_nothing() {
    let sim = Sim::new(37);
    let now = sim.now_ms();
    let max = durable_relay_sql::core::SEQ_MAX;
    sim.with_relay(S, |r| block_on(r.set_host_alarm(max, now))).unwrap();
    assert_eq!(host(&sim), Some(max), "at the edge: accepted");
    let refused = sim.with_relay(S, |r| block_on(r.set_host_alarm(max + 1, now)));
    assert!(matches!(refused, Err(StoreError::Guard(_))), "{refused:?}");
    assert_eq!(host(&sim), Some(max), "past the edge: nothing written");
}
