//! Partitioned sources through the simulator: the shipped router over real
//! partitions (each a `Relay` on the shipped SQL). Per-(logical source,
//! target) order holds under load with failing targets while the partition
//! count grows and shrinks; routers with an older map are fenced; an enqueue
//! spanning partitions is atomic per partition and completed by a keyed
//! retry; the plain layout's edges: a map without it is refused while the
//! plain object remembers a key, and a source back to plain takes plain
//! enqueues a horizon later, answering keys it took routed. A target's hook records the values it applied, in order, and the
//! test compares them with the order in which enqueues were accepted.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::io::Write;
use std::rc::Rc;

use durable_relay_sql::core::{
    home, partition_name, ApplyRow, Delay, Effects, EnqueueRefusal, EnqueueRow, Layout, Name, Part,
    PartitionMap, RelayBudget, RelayHook, RelayPolicy, Sender,
};
use durable_relay_sql::sim::{Sim, SimRng, SourcePolicy};
use durable_relay_sql::store::outbox::Settling;
use serde_json::json;

const L: &str = "orders";

type Applied = Rc<RefCell<BTreeMap<String, Vec<i64>>>>;

/// Records the value of key `n` of every row a target applies.
struct Recorder {
    target: String,
    applied: Applied,
}

impl RelayHook for Recorder {
    fn extra_effects(&self, _: &Sender, rows: &[ApplyRow]) -> Result<Effects, String> {
        let mut applied = self.applied.borrow_mut();
        let list = applied.entry(self.target.clone()).or_default();
        for r in rows {
            for (k, v) in &r.effects.puts {
                if k == "n" {
                    list.push(v.as_str().parse().map_err(|e| format!("{e}"))?);
                }
            }
        }
        Ok(Effects::default())
    }
}

fn row(target: &str, n: i64) -> EnqueueRow {
    EnqueueRow::new(Name::new(target).unwrap(), vec![("n".to_owned(), json!(n))], vec![])
}

fn map(partitions: u32, epoch: u64, from: Option<u32>) -> PartitionMap {
    PartitionMap {
        partitions: Layout::Count(partitions),
        epoch,
        from: from.into_iter().map(Layout::Count).collect(),
    }
}

/// The most partitions any test here uses.
const MAX_PARTITIONS_USED: u32 = 4;

/// A simulated world with `targets` recording what they apply; partitions
/// park a target after 3 failed cycles.
fn world(seed: u64, targets: &[String]) -> (Sim, Applied) {
    let mut sim = Sim::new(seed);
    sim.audit_every_fire(true);
    let parking =
        SourcePolicy { relay: RelayPolicy { park_after_failed_cycles: Some(3) }, ..SourcePolicy::default() };
    for p in 0..MAX_PARTITIONS_USED {
        sim.set_policy(partition_name(&Name::new(L).unwrap(), p).as_str(), parking);
    }
    let applied: Applied = Rc::default();
    for t in targets {
        sim.set_hook(t, Box::new(Recorder { target: t.clone(), applied: applied.clone() }));
    }
    (sim, applied)
}

/// Load: routed enqueues, alarms on random partitions, failing and healing
/// targets, time passing. `expected` gets each accepted row's value, in the
/// order the enqueues were accepted.
struct Load<'a> {
    rng: SimRng,
    targets: &'a [String],
    next: i64,
    expected: BTreeMap<String, Vec<i64>>,
    /// Parked rows an operator brought back.
    redriven: u32,
}

impl Load<'_> {
    fn step(&mut self, sim: &mut Sim, m: &PartitionMap, failures: bool) {
        match self.rng.below(10) {
            0..=4 => {
                let n = 1 + self.rng.below(3);
                let picks: Vec<String> = (0..n)
                    .map(|_| self.targets[self.rng.below(self.targets.len() as u64) as usize].clone())
                    .collect();
                // Some rows wait a while: they hold their target's later
                // rows, in whichever partition they sit.
                let rows: Vec<EnqueueRow> = picks
                    .iter()
                    .enumerate()
                    .map(|(i, t)| {
                        let r = row(t, self.next + i as i64);
                        if self.rng.chance(10) {
                            r.delayed(Delay::For(self.rng.below(5_000)))
                        } else {
                            r
                        }
                    })
                    .collect();
                sim.enqueue_routed(L, m, None, rows).unwrap_or_else(|e| panic!("refused: {:?}", e.error));
                for (i, t) in picks.iter().enumerate() {
                    self.expected.entry(t.clone()).or_default().push(self.next + i as i64);
                }
                self.next += n as i64;
            }
            5..=7 => {
                let parts = m.parts();
                let p = parts[self.rng.below(parts.len() as u64) as usize];
                sim.run_alarm(p.object(&Name::new(L).unwrap()).as_str(), RelayBudget::FREE);
            }
            8 if failures => {
                let t = &self.targets[self.rng.below(self.targets.len() as u64) as usize];
                if self.rng.chance(50) {
                    sim.fail_target(t);
                } else {
                    sim.heal_target(t);
                }
            }
            9 if self.rng.chance(30) => self.redriven += redrive_all(sim, m),
            _ => sim.advance(self.rng.below(2_000)),
        }
    }
}

/// An operator redrives every parked target of every partition; returns
/// the rows that came back.
fn redrive_all(sim: &mut Sim, m: &PartitionMap) -> u32 {
    let mut rows = 0;
    for p in m.parts() {
        let name = p.object(&Name::new(L).unwrap());
        for (t, _, _) in sim.parked_targets(name.as_str()) {
            rows += sim.redrive(name.as_str(), &t);
        }
    }
    rows
}

fn settled(sim: &Sim, m: &PartitionMap) -> bool {
    m.parts().into_iter().all(|p| sim.settling(L, p, m) == Settling::default())
}

fn drain_all(sim: &mut Sim, targets: &[String]) {
    for t in targets {
        sim.heal_target(t);
    }
    let _ = redrive_all(sim, &map(1, 1, Some(MAX_PARTITIONS_USED)));
    let d = sim.run_all_until_idle(RelayBudget::FREE, 100_000);
    assert!(d.drained, "did not drain");
}

fn seed() -> u64 {
    let seed = std::env::var("RELAY_PART_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64
    });
    let _ = writeln!(std::io::stderr(), "partitions: seed {seed} (replay with RELAY_PART_SEED={seed})");
    seed
}

#[test]
fn order_per_target_holds_while_partitions_grow_and_shrink_under_load() {
    let seed = seed();
    let targets: Vec<String> = (0..24).map(|i| format!("t{i:02}")).collect();
    let (mut sim, applied) = world(seed, &targets);
    let mut load =
        Load { rng: SimRng::new(seed), targets: &targets, next: 1, expected: BTreeMap::new(), redriven: 0 };
    // Two partitions; then four, gated while the old homes drain; then
    // three, gated again; each settles before the next change, and every
    // change raises the epoch.
    let plan = [map(2, 1, None), map(4, 2, Some(2)), map(4, 3, None), map(3, 4, Some(4)), map(3, 5, None)];
    for m in &plan {
        for _ in 0..400 {
            load.step(&mut sim, m, true);
        }
        if m.is_settling() {
            // Settle under load (targets healed and parked ones redriven,
            // so their rows can leave).
            for t in &targets {
                sim.heal_target(t);
            }
            load.redriven += redrive_all(&mut sim, m);
            let mut steps = 0;
            while !settled(&sim, m) {
                load.step(&mut sim, m, false);
                steps += 1;
                assert!(steps < 50_000, "resize to {m:?} never settled (seed {seed})");
            }
        }
    }
    drain_all(&mut sim, &targets);
    let moved = targets
        .iter()
        .filter(|t| home(&Name::new(t.as_str()).unwrap(), 2) != home(&Name::new(t.as_str()).unwrap(), 4))
        .count();
    assert!(moved > 0, "some targets moved between 2 and 4 partitions");
    for t in &targets {
        let got = applied.borrow().get(t).cloned().unwrap_or_default();
        assert_eq!(
            &got,
            load.expected.get(t).unwrap_or(&vec![]),
            "target {t}: applied out of order, twice or never (seed {seed})"
        );
    }
    assert!(load.next > 500, "the load enqueued rows");
    assert!(load.redriven > 0, "targets were parked and redriven along the way (seed {seed})");
    sim.audit().unwrap();
}

#[test]
fn a_moving_target_stays_at_its_old_home_while_it_holds_rows_there() {
    let targets: Vec<String> = (0..40).map(|i| format!("m{i:02}")).collect();
    let (mut sim, applied) = world(7, &targets);
    let t = targets.iter().find(|t| {
        let n = Name::new(t.as_str()).unwrap();
        home(&n, 1) != home(&n, 2)
    });
    let t = t.expect("a target that moves from 1 to 2 partitions").clone();
    let one = map(1, 1, None);
    let two = map(2, 2, Some(1));
    sim.fail_target(&t);
    let first = sim.enqueue_routed(L, &one, None, vec![row(&t, 1)]).unwrap();
    assert_eq!(first.positions[0].partition, Part::Index(0));
    sim.run_alarm("orders:0", RelayBudget::FREE);
    // Resized while row 1 is still queued at partition 0: row 2 must follow it there.
    let second = sim.enqueue_routed(L, &two, None, vec![row(&t, 2)]).unwrap();
    assert_eq!(second.positions[0].partition, Part::Index(0), "gated to the old home, behind row 1");
    sim.heal_target(&t);
    drain_all(&mut sim, &targets);
    // Now partition 0 holds nothing for it: it moves, for good.
    let third = sim.enqueue_routed(L, &two, None, vec![row(&t, 3)]).unwrap();
    assert_eq!(third.positions[0].partition, Part::Index(1), "released by the old home: the new home");
    drain_all(&mut sim, &targets);
    assert_eq!(applied.borrow().get(&t).cloned(), Some(vec![1, 2, 3]));
    // A router still running the old map is fenced by both partitions now.
    let stale = sim.enqueue_routed(L, &one, None, vec![row(&t, 4)]).unwrap_err();
    assert!(matches!(stale.error, EnqueueRefusal::StaleEpoch { sent: 1, stored: 2 }), "{:?}", stale.error);
    assert!(stale.committed.is_empty());
}

#[test]
fn a_spanning_enqueue_is_atomic_per_partition_and_a_keyed_retry_completes_it() {
    let targets: Vec<String> = (0..40).map(|i| format!("s{i:02}")).collect();
    let (mut sim, applied) = world(8, &targets);
    let m = map(2, 1, None);
    let on = |p: u32| targets.iter().find(|t| home(&Name::new(t.as_str()).unwrap(), 2) == p).unwrap().clone();
    let (a, b) = (on(0), on(1));
    sim.set_policy("orders:1", SourcePolicy { max_rows: 0, ..SourcePolicy::default() });
    let rows = vec![row(&a, 1), row(&b, 2)];
    let failed = sim.enqueue_routed(L, &m, Some("order-1"), rows.clone()).unwrap_err();
    assert_eq!(failed.error.code(), "outbox_full");
    assert_eq!(failed.committed.len(), 1, "partition 0 committed its row");
    assert_eq!(failed.committed[0].partition, Part::Index(0));
    sim.set_policy("orders:1", SourcePolicy::default());
    let done = sim.enqueue_routed(L, &m, Some("order-1"), rows).unwrap();
    assert_eq!(done.positions[0], failed.committed[0], "partition 0 answered the retry as a duplicate");
    assert!(!done.duplicate, "partition 1 took its row now");
    assert_eq!(done.queued_rows, 2, "the reply counts the sealed partition's rows too");
    assert_eq!(
        sim.admission_counters("orders:0"),
        (1, 0),
        "the retry's answer from partition 0 is a dedup hit"
    );
    assert_eq!(sim.admission_counters("orders:1"), (0, 1), "partition 1 refused once as full");
    drain_all(&mut sim, &targets);
    assert_eq!(applied.borrow().get(&a).cloned(), Some(vec![1]), "once");
    assert_eq!(applied.borrow().get(&b).cloned(), Some(vec![2]));
}

/// A map of `layout` under `epoch`, with `from` listing earlier layouts.
fn layout_map(layout: Layout, epoch: u64, from: &[Layout]) -> PartitionMap {
    PartitionMap { partitions: layout, epoch, from: from.to_vec() }
}

/// The dedup horizon the plain-layout tests give every object, ms.
const SHORT_HORIZON_MS: u64 = 600_000;

fn short_horizon(sim: &mut Sim) {
    let policy = SourcePolicy { dedup_horizon_ms: SHORT_HORIZON_MS, ..SourcePolicy::default() };
    sim.set_policy(L, policy);
    for p in 0..MAX_PARTITIONS_USED {
        sim.set_policy(partition_name(&Name::new(L).unwrap(), p).as_str(), policy);
    }
}

#[test]
fn a_source_back_to_plain_takes_plain_enqueues_a_horizon_after_and_answers_the_keys_it_took_routed() {
    let targets: Vec<String> = (0..4).map(|i| format!("b{i}")).collect();
    let (mut sim, applied) = world(11, &targets);
    short_horizon(&mut sim);
    sim.enqueue_routed(L, &map(2, 1, None), None, vec![row(&targets[0], 1)]).unwrap();
    drain_all(&mut sim, &targets);
    let back = layout_map(Layout::Plain, 2, &[Layout::Count(2)]);
    sim.enqueue_routed(L, &back, None, vec![row(&targets[0], 2)]).unwrap();
    let plain = layout_map(Layout::Plain, 3, &[]);
    sim.enqueue_routed(L, &plain, None, vec![row(&targets[1], 3)]).unwrap();
    let active_ms = sim.now_ms();
    sim.advance(1_000);
    let keyed = vec![row(&targets[2], 4)];
    let routed = sim.enqueue_routed(L, &plain, Some("late"), keyed.clone()).unwrap();
    assert_eq!(routed.positions[0].partition, Part::Plain);

    sim.advance(active_ms + SHORT_HORIZON_MS - 1 - sim.now_ms());
    match sim.enqueue_keyed(L, None, vec![row(&targets[3], 5)]) {
        Err(EnqueueRefusal::PartitionedSource { plain_at_ms, .. }) => {
            assert_eq!(plain_at_ms, Some(active_ms + SHORT_HORIZON_MS), "the refusal says when")
        }
        other => panic!("a plain enqueue a millisecond early: {other:?}"),
    }
    sim.advance(1);
    let retry = sim.enqueue_keyed(L, Some("late"), keyed).unwrap();
    assert!(retry.duplicate, "the key the plain object took routed answers a plain retry");
    assert_eq!(retry.seqs, routed.seqs);
    let other = sim.enqueue_keyed(L, Some("late"), vec![row(&targets[2], 99)]);
    assert!(matches!(other, Err(EnqueueRefusal::Conflict { .. })), "{other:?}");
    sim.enqueue_keyed(L, None, vec![row(&targets[3], 5)]).unwrap();
    drain_all(&mut sim, &targets);
    for (t, want) in targets.iter().zip([vec![1, 2], vec![3], vec![4], vec![5]]) {
        assert_eq!(applied.borrow().get(t).cloned(), Some(want), "{t}: once each, in order");
    }
}

#[test]
fn a_map_without_plain_is_refused_while_the_plain_object_remembers_a_key() {
    let targets: Vec<String> = (0..2).map(|i| format!("k{i}")).collect();
    let (mut sim, applied) = world(12, &targets);
    short_horizon(&mut sim);
    let rows = vec![row(&targets[0], 1)];
    let first_ms = sim.now_ms();
    let first = sim.enqueue_keyed(L, Some("plain-key"), rows.clone()).unwrap();
    sim.advance(1_000);
    // One alarm delivers the row; draining until idle would run the
    // prune alarm a horizon later, when the key is gone.
    sim.run_alarm(L, RelayBudget::FREE);
    let with_plain = layout_map(Layout::Count(2), 1, &[Layout::Plain]);
    let retry = sim.enqueue_routed(L, &with_plain, Some("plain-key"), rows.clone()).unwrap();
    assert!(retry.duplicate, "the plain object answers its own key: {retry:?}");
    assert_eq!(retry.positions[0].partition, Part::Plain);
    assert_eq!(retry.seqs, first.seqs);

    let without = layout_map(Layout::Count(2), 2, &[]);
    let refused = sim.enqueue_routed(L, &without, None, vec![row(&targets[1], 2)]).unwrap_err();
    match refused.error {
        EnqueueRefusal::PlainKeys { keys, until_ms, .. } => {
            assert_eq!(keys, 1);
            assert_eq!(until_ms, first_ms + SHORT_HORIZON_MS, "when the key expires");
        }
        other => panic!("expected the plain keys' refusal, got {other:?}"),
    }
    assert!(refused.committed.is_empty(), "the refusal wrote nothing");
    assert_eq!(refused.error.code(), "unsettled_layout");

    sim.advance(SHORT_HORIZON_MS);
    let taken = sim.enqueue_routed(L, &without, None, vec![row(&targets[1], 2)]).unwrap();
    assert!(matches!(taken.positions[0].partition, Part::Index(_)));
    drain_all(&mut sim, &targets);
    assert_eq!(applied.borrow().get(&targets[0]).cloned(), Some(vec![1]), "once");
    assert_eq!(applied.borrow().get(&targets[1]).cloned(), Some(vec![2]));
}
