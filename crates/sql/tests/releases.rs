//! Two releases side by side, in the simulator: the shipped relay (driver,
//! outbox and inbox SQL) beside objects of the release before source ids,
//! as every deploy has them for a while and as a target script deployed on
//! its own schedule has them for longer. A source of this release never
//! parks its rows at a target older than ids (it sends them without its
//! id), and a target of this release applies each row once whichever
//! release sends it, before, during and after the claim of a name's
//! watermark, through lost replies that make the other release resend.

use durable_relay_sql::core::{RelayBudget, RelayPolicy, PRE_ID_TARGET_MEMORY_MS};
use durable_relay_sql::sim::{Release, Sim, SourcePolicy};
use serde_json::json;

const BUDGET: RelayBudget = RelayBudget::FREE;

fn drain(sim: &mut Sim, source: &str) {
    let report = sim.run_until_idle(source, BUDGET, 100);
    assert!(report.drained, "seed {}: {source} drained", sim.seed());
}

/// Parks a target after its first failed cycle, so any failure the relay
/// took for the target's would park its rows.
fn park_at_once(sim: &mut Sim, source: &str) {
    let relay = RelayPolicy { park_after_failed_cycles: Some(1) };
    sim.set_policy(source, SourcePolicy { relay, ..SourcePolicy::default() });
}

fn put(sim: &mut Sim, source: &str, target: &str, i: u64) -> u64 {
    sim.put(source, target, &format!("k{i}"), json!(i)).unwrap()
}

#[test]
fn a_source_of_this_release_never_parks_its_rows_at_a_target_older_than_ids() {
    let mut sim = Sim::new(41);
    sim.audit_every_fire(true);
    park_at_once(&mut sim, "s");
    sim.deploy_target("old", Release::BeforeIds);
    for i in 1..=5 {
        put(&mut sim, "s", "old", i);
    }
    drain(&mut sim, "s");
    assert_eq!(sim.applied("old", "s"), vec![1, 2, 3, 4, 5], "each row once, in order");
    assert!(sim.parked_targets("s").is_empty(), "nothing parked");
    assert_eq!(sim.target_calls("old"), 2, "the refused call and the same batch without the id");

    // Remembered: later batches go without the id at once.
    put(&mut sim, "s", "old", 6);
    drain(&mut sim, "s");
    assert_eq!(sim.target_calls("old"), 3);

    // Forgotten after the memory: the id is tried again, once.
    sim.advance(PRE_ID_TARGET_MEMORY_MS);
    put(&mut sim, "s", "old", 7);
    drain(&mut sim, "s");
    assert_eq!(sim.target_calls("old"), 5, "refused once more, then sent without");
    assert_eq!(sim.applied("old", "s"), (1..=7).collect::<Vec<_>>());
    sim.audit().unwrap();
}

/// The target script is deployed while the source has it remembered as
/// older: batches without the id go on applying against the name's
/// watermark until the memory runs out; the first batch with the id then
/// claims that watermark, so no row applies twice, even a batch whose
/// reply was lost across the change and is sent again.
#[test]
fn a_target_upgraded_mid_stream_applies_each_row_once() {
    let mut sim = Sim::new(43);
    sim.audit_every_fire(true);
    sim.deploy_target("t", Release::BeforeIds);
    for i in 1..=3 {
        put(&mut sim, "s", "t", i);
    }
    drain(&mut sim, "s");
    sim.deploy_target("t", Release::Current);
    sim.lose_replies("t", 1);
    put(&mut sim, "s", "t", 4);
    drain(&mut sim, "s");
    sim.advance(PRE_ID_TARGET_MEMORY_MS);
    sim.lose_replies("t", 1);
    put(&mut sim, "s", "t", 5);
    drain(&mut sim, "s");
    assert_eq!(sim.applied("t", "s"), vec![1, 2, 3, 4, 5]);
    let marks = sim.with_target("t", |i| i.watermarks()).unwrap();
    assert_eq!(marks.len(), 1, "one watermark, claimed: {marks:?}");
    assert!(marks[0].source_id.is_some());
    assert!(sim.parked_targets("s").is_empty());
    sim.audit().unwrap();
}

/// A source of the release before ids, upgraded, rolled back and upgraded
/// again while its rows flow, each change between a batch whose reply was
/// lost and its resend by the other release: the claim made by the first
/// batch with the id is followed by every later batch without one.
#[test]
fn upgrade_rollback_upgrade_of_a_source_applies_each_row_once() {
    let mut sim = Sim::new(47);
    sim.audit_every_fire(true);
    sim.deploy_source("s", Release::BeforeIds);
    let mut seq = 0;
    for release in [Release::Current, Release::BeforeIds, Release::Current] {
        sim.lose_replies("t", 1);
        for _ in 0..3 {
            seq += 1;
            put(&mut sim, "s", "t", seq);
        }
        sim.fire("s", BUDGET);
        sim.deploy_source("s", release);
        drain(&mut sim, "s");
    }
    assert_eq!(sim.applied("t", "s"), (1..=seq).collect::<Vec<_>>(), "each row once, in order");
    assert_eq!(sim.value("t", "k9").as_deref(), Some("9"));
    sim.audit().unwrap();
}
