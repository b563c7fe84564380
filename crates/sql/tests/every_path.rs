//! A partitioned source keeps every promise a plain source makes, through
//! the shipped router over real partitions (each a `Relay` on the shipped
//! SQL): a refused request writes nothing anywhere and names its row as a
//! plain source would; per-request limits hold across partitions; a key
//! reused for other rows is refused before any partition writes; only the
//! router writes into a partition, and only rows of targets it is a home
//! of; a map that would strand rows is refused, and a chain of unsettled
//! layouts keeps each target's order through a second resize. The last test
//! sends the same generated requests to a plain source and to partitioned
//! ones and requires the same verdicts and the same rows written.

use std::collections::BTreeMap;
use std::io::Write;

use durable_relay_sql::core::{
    decode_enqueue, home, partition_name, EnqueueRefusal, EnqueueRow, Fence, Layout, Name, Part,
    PartitionMap, RelayBudget, MAX_DELAY_MS, MAX_ROWS_PER_ENQUEUE,
};
use durable_relay_sql::sim::{Sim, SimRng};
use durable_relay_sql::EnqueueFailure;
use serde_json::json;

const L: &str = "orders";

fn map(partitions: u32, epoch: u64, from: &[u32]) -> PartitionMap {
    PartitionMap {
        partitions: Layout::Count(partitions),
        epoch,
        from: from.iter().map(|c| Layout::Count(*c)).collect(),
    }
}

fn name(s: &str) -> Name {
    Name::new(s).unwrap()
}

fn row(target: &str, n: i64) -> EnqueueRow {
    EnqueueRow::new(name(target), vec![("n".to_owned(), json!(n))], vec![])
}

/// Rows from the wire form, so hostile values arrive as a caller sends them.
fn rows(json: &str) -> Vec<EnqueueRow> {
    decode_enqueue(&format!(r#"{{"rows":{json}}}"#)).unwrap().rows
}

/// A target whose home among `partitions` is `p`.
fn homed(p: u32, partitions: u32, prefix: &str) -> String {
    (0..).map(|i| format!("{prefix}{i}")).find(|t| home(&name(t), partitions) == p).unwrap()
}

/// Every row written at the partitions of `logical` (queued and parked), by `m`.
fn written(sim: &Sim, m: &PartitionMap) -> usize {
    m.parts().into_iter().map(|p| sim.os(p.object(&name(L)).as_str()) as usize).sum()
}

#[test]
fn a_request_a_plain_source_refuses_is_refused_whole_at_a_partitioned_one_and_writes_nothing() {
    let m = map(2, 1, &[]);
    let (c0, c1) = (homed(0, 2, "c"), homed(1, 2, "c"));
    let long_key = "k".repeat(513);
    let bad_rows = [
        (r#"{"target":"C1","puts":[["",1]]}"#, "empty_key"),
        (&*format!(r#"{{"target":"C1","puts":[["{long_key}",1]]}}"#), "key_too_long"),
        (
            &*format!(r#"{{"target":"C1","puts":[["v",1]],"delay_ms":{}}}"#, MAX_DELAY_MS + 1),
            "delay_too_long",
        ),
        (r#"{"target":"C1","puts":[["v",1]],"delay_ms":1,"not_before_ms":1}"#, "conflicting_delay"),
        (r#"{"target":"C1","puts":[["v",1],["v",2]]}"#, "duplicate_key"),
        (r#"{"target":"C1"}"#, "row_without_effects"),
        (r#"{"target":"C1","puts":[["v","\ud800"]]}"#, "lone_surrogate"),
        (r#"{"target":"endpoint:unconfigured","puts":[["v",1]]}"#, "unknown_endpoint"),
    ];
    let mut sim = Sim::new(1);
    for (bad, code) in bad_rows {
        let bad = bad.replace("C1", &c1);
        let request = rows(&format!(r#"[{{"target":"{c0}","puts":[["v",1]]}},{bad}]"#));
        let plain = sim.enqueue_keyed("plain", None, request.clone()).unwrap_err();
        let routed = sim.enqueue_routed(L, &m, None, request).unwrap_err();
        assert_eq!(routed.error.code(), code);
        assert_eq!(routed.error, plain, "the same refusal as a plain source");
        assert!(routed.error.to_string().starts_with("rows[1]"), "{}", routed.error);
        assert!(routed.committed.is_empty(), "{code}: committed {:?}", routed.committed);
        assert_eq!(written(&sim, &m), 0, "{code}: a row was written");
    }
    assert_eq!(sim.os("plain"), 0);
}

#[test]
fn per_request_limits_hold_across_partitions() {
    let m = map(2, 1, &[]);
    let (c0, c1) = (homed(0, 2, "c"), homed(1, 2, "c"));
    let mut sim = Sim::new(2);
    let many: Vec<EnqueueRow> =
        (0..=MAX_ROWS_PER_ENQUEUE).map(|i| row(if i % 2 == 0 { &c0 } else { &c1 }, i64::from(i))).collect();
    let refused = sim.enqueue_routed(L, &m, None, many.clone()).unwrap_err();
    assert_eq!(refused.error.code(), "too_many_rows");
    let at_limit = many[..MAX_ROWS_PER_ENQUEUE as usize].to_vec();
    assert_eq!(written(&sim, &m), 0);
    let big = |t: &str| EnqueueRow::new(name(t), vec![("v".into(), json!("x".repeat(60_000)))], vec![]);
    let large: Vec<EnqueueRow> = (0..20).map(|i| big(if i % 2 == 0 { &c0 } else { &c1 })).collect();
    let refused = sim.enqueue_routed(L, &m, None, large).unwrap_err();
    assert_eq!(refused.error.code(), "request_too_large");
    assert_eq!(written(&sim, &m), 0);
    let done = sim.enqueue_routed(L, &m, None, at_limit).unwrap();
    assert_eq!(done.seqs.len(), MAX_ROWS_PER_ENQUEUE as usize, "the limit itself is accepted");
}

#[test]
fn a_key_reused_for_other_rows_is_refused_before_any_partition_writes() {
    let m = map(2, 1, &[]);
    let (c0, c1) = (homed(0, 2, "c"), homed(1, 2, "c"));
    let mut sim = Sim::new(3);
    sim.enqueue_routed(L, &m, Some("K"), vec![row(&c0, 1)]).unwrap();
    let before = written(&sim, &m);
    // That row plus a row for another partition.
    let more = sim.enqueue_routed(L, &m, Some("K"), vec![row(&c0, 1), row(&c1, 2)]).unwrap_err();
    assert_eq!(more.error.code(), "idempotency_conflict");
    assert!(more.committed.is_empty());
    // A changed row in one partition and a new one in the other.
    let changed = sim.enqueue_routed(L, &m, Some("K"), vec![row(&c0, 9), row(&c1, 2)]).unwrap_err();
    assert_eq!(changed.error.code(), "idempotency_conflict");
    // Rows for the other partition only: no partition's own record knows the key.
    let elsewhere = sim.enqueue_routed(L, &m, Some("K"), vec![row(&c1, 2)]).unwrap_err();
    assert_eq!(elsewhere.error.code(), "idempotency_conflict");
    assert_eq!(written(&sim, &m), before, "nothing written by a refused key");
    let again = sim.enqueue_routed(L, &m, Some("K"), vec![row(&c0, 1)]).unwrap();
    assert!(again.duplicate, "the same rows again are a duplicate");
    // A spanning keyed request, retried whole, is one duplicate.
    let span = vec![row(&c0, 3), row(&c1, 4)];
    let first = sim.enqueue_routed(L, &m, Some("S"), span.clone()).unwrap();
    let retry = sim.enqueue_routed(L, &m, Some("S"), span).unwrap();
    assert!(retry.duplicate);
    assert_eq!(retry.positions, first.positions);
}

#[test]
fn only_the_router_writes_into_a_partition_and_only_rows_of_its_targets() {
    let m = map(2, 1, &[]);
    let (c0, c1) = (homed(0, 2, "c"), homed(1, 2, "c"));
    let mut sim = Sim::new(4);
    sim.enqueue_routed(L, &m, None, vec![row(&c0, 1), row(&c1, 2)]).unwrap();
    let p1 = partition_name(&name(L), 1);
    let now = sim.now_ms();
    let refusal = |r: Result<Option<durable_relay_sql::Enqueued>, EnqueueFailure>| match r {
        Err(EnqueueFailure::Refused(e)) => e,
        other => panic!("expected a refusal, got {other:?}"),
    };
    let direct = sim.with_relay(p1.as_str(), |r| {
        futures::executor::block_on(r.enqueue_routed(now, None, &[row(&c1, 3)], Fence::default()))
    });
    assert_eq!(refusal(direct).code(), "partition_enqueue", "past the router, a row could overtake");
    let misrouted = sim.with_relay(p1.as_str(), |r| {
        futures::executor::block_on(r.enqueue_routed(now, None, &[row(&c0, 3)], Fence::of(&m)))
    });
    assert_eq!(refusal(misrouted).code(), "misrouted_row", "c0's home is partition 0");
    let other_map = map(2, 1, &[3]);
    let unadopted = sim.with_relay(p1.as_str(), |r| {
        futures::executor::block_on(r.enqueue_routed(now, None, &[row(&c1, 3)], Fence::of(&other_map)))
    });
    assert_eq!(refusal(unadopted).code(), "epoch_not_adopted", "another map under the same epoch");
    sim.enqueue_routed(L, &map(3, 2, &[2]), None, vec![row(&c1, 4)]).unwrap();
    let stale = sim.enqueue_routed(L, &m, None, vec![row(&c1, 5)]).unwrap_err();
    assert!(matches!(stale.error, EnqueueRefusal::StaleEpoch { sent: 1, stored: 2 }), "{:?}", stale.error);
}

#[test]
fn a_map_that_skips_an_unsettled_layout_is_refused_and_a_chain_of_layouts_keeps_order() {
    // A target that moves 2 -> 4 -> 3 partitions through three different homes.
    let t = (0..)
        .map(|i| format!("x-{i}"))
        .find(|t| {
            let n = name(t);
            let (h2, h4, h3) = (home(&n, 2), home(&n, 4), home(&n, 3));
            h2 != h4 && h2 != h3 && h4 != h3
        })
        .unwrap();
    let old_home = partition_name(&name(L), home(&name(&t), 2));
    let mut sim = Sim::new(5);
    sim.fail_target(&t);
    let two = map(2, 1, &[]);
    sim.enqueue_routed(L, &two, None, vec![row(&t, 1)]).unwrap();
    sim.run_alarm(old_home.as_str(), RelayBudget::FREE);
    let four = map(4, 2, &[2]);
    let second = sim.enqueue_routed(L, &four, None, vec![row(&t, 2)]).unwrap();
    assert_eq!(second.positions[0].partition, Part::Index(home(&name(&t), 2)), "gated to its oldest home");
    // Before that settled, a map that forgot the 2-partition layout:
    let skipping = map(3, 3, &[4]);
    let refused = sim.enqueue_routed(L, &skipping, None, vec![row(&t, 3)]).unwrap_err();
    assert_eq!(refused.error.code(), "unsettled_layout", "{}", refused.error);
    assert!(refused.error.to_string().contains("keep 2 in from"), "{}", refused.error);
    assert!(refused.committed.is_empty());
    // The whole chain, oldest first, under a new epoch (the partitions that
    // prepared the refused map hold epoch 3), is taken and keeps the order.
    let chain = map(3, 4, &[2, 4]);
    let third = sim.enqueue_routed(L, &chain, None, vec![row(&t, 3)]).unwrap();
    assert_eq!(
        third.positions[0].partition,
        Part::Index(home(&name(&t), 2)),
        "behind the rows at its oldest home"
    );
    sim.heal_target(&t);
    assert!(sim.run_all_until_idle(RelayBudget::FREE, 1_000).drained);
    let fourth = sim.enqueue_routed(L, &chain, None, vec![row(&t, 4)]).unwrap();
    assert_eq!(
        fourth.positions[0].partition,
        Part::Index(home(&name(&t), 3)),
        "released everywhere: its new home"
    );
    assert!(sim.run_all_until_idle(RelayBudget::FREE, 1_000).drained);
    let values: Vec<String> = vec![sim.value(&t, "n").unwrap()];
    assert_eq!(values, vec!["4".to_owned()]);
    let applied: Vec<u64> =
        (0..4).flat_map(|p| sim.applied(&t, partition_name(&name(L), p).as_str())).collect();
    assert_eq!(applied.len(), 4, "each row once: {applied:?}");
    sim.audit().unwrap();
}

/// A request generated for the differential test, as a caller would send it.
struct Request {
    key: Option<String>,
    rows: Vec<EnqueueRow>,
}

/// Requests of 1 to 6 rows over a few targets, some keyed (keys reused, with
/// the same or other content), some delayed, some bad in one row, a few
/// past a per-request limit.
fn generate(rng: &mut SimRng, earlier: &[Request]) -> Request {
    if !earlier.is_empty() && rng.chance(15) {
        // A retry: the same request again, or the same key with other rows.
        let pick = &earlier[rng.below(earlier.len() as u64) as usize];
        let mut rows = pick.rows.clone();
        if rng.chance(50) {
            rows.push(EnqueueRow::new(
                name(&format!("t{}", rng.below(9))),
                vec![("r".into(), json!(1))],
                vec![],
            ));
        }
        return Request { key: pick.key.clone().or_else(|| Some("fresh".into())), rows };
    }
    let n = if rng.chance(3) { MAX_ROWS_PER_ENQUEUE as u64 + 1 } else { 1 + rng.below(6) };
    let mut rows = Vec::new();
    for i in 0..n {
        let target = format!("t{}", rng.below(9));
        let text = match rng.below(40) {
            0 => format!(r#"{{"target":"{target}","puts":[["",1]]}}"#),
            1 => format!(r#"{{"target":"{target}","puts":[["a",1],["a",2]]}}"#),
            2 => format!(r#"{{"target":"{target}"}}"#),
            3 => format!(r#"{{"target":"{target}","puts":[["v","\udc00"]]}}"#),
            4 => format!(r#"{{"target":"{target}","puts":[["v",1]],"delay_ms":{}}}"#, MAX_DELAY_MS + 1),
            5..=7 => format!(r#"{{"target":"{target}","puts":[["v",{i}]],"delay_ms":{}}}"#, rng.below(5_000)),
            8 => format!(r#"{{"target":"{target}","deletes":["v"],"not_before_ms":1}}"#),
            _ => format!(r#"{{"target":"{target}","puts":[["v",{}]],"deletes":["w"]}}"#, rng.below(1_000)),
        };
        rows.extend(decode_enqueue(&format!(r#"{{"rows":[{text}]}}"#)).unwrap().rows);
    }
    let key = rng.chance(40).then(|| format!("k{}", rng.below(12)));
    Request { key, rows }
}

/// What a caller sees of an enqueue: its code and message when refused,
/// whether it was a duplicate and how many rows it took when accepted.
#[derive(Debug, PartialEq, Eq)]
enum Verdict {
    Accepted { duplicate: bool, rows: usize, due_ms: Vec<u64> },
    Refused { code: durable_relay_sql::core::ErrorCode, message: String },
}

#[test]
fn plain_and_partitioned_sources_give_the_same_verdicts_and_write_the_same_rows() {
    let seed = std::env::var("RELAY_DIFF_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64
    });
    let _ = writeln!(std::io::stderr(), "every_path: seed {seed} (replay with RELAY_DIFF_SEED={seed})");
    for (i, m) in [map(1, 1, &[]), map(3, 1, &[]), map(4, 2, &[2])].iter().enumerate() {
        let mut rng = SimRng::new(seed.wrapping_add(i as u64));
        let mut sim = Sim::new(seed);
        let mut sent: Vec<Request> = Vec::new();
        let (mut accepted, mut refused) = (0, 0);
        for step in 0..400 {
            let r = generate(&mut rng, &sent);
            if std::env::var("DIFF_DEBUG").is_ok() {
                eprintln!(
                    "step {step} key {:?} rows {:?}",
                    r.key,
                    r.rows
                        .iter()
                        .map(|x| (x.target.to_string(), x.puts.len(), x.deletes.len()))
                        .collect::<Vec<_>>()
                );
            }
            let plain = match sim.enqueue_keyed("plain", r.key.as_deref(), r.rows.clone()) {
                Ok(done) => Verdict::Accepted {
                    duplicate: done.duplicate,
                    rows: done.seqs.len(),
                    due_ms: done.due_ms,
                },
                Err(e) => Verdict::Refused { code: e.code(), message: e.to_string() },
            };
            let routed = match sim.enqueue_routed(L, m, r.key.as_deref(), r.rows.clone()) {
                Ok(done) => Verdict::Accepted {
                    duplicate: done.duplicate,
                    rows: done.seqs.len(),
                    due_ms: done.due_ms,
                },
                Err(f) => {
                    assert!(
                        f.committed.is_empty(),
                        "step {step}: a refusal ({:?}) committed rows (seed {seed})",
                        f.error
                    );
                    Verdict::Refused { code: f.error.code(), message: f.error.to_string() }
                }
            };
            assert_eq!(routed, plain, "step {step} under {m:?} (seed {seed})");
            match plain {
                Verdict::Accepted { .. } => accepted += 1,
                Verdict::Refused { .. } => refused += 1,
            }
            sent.push(r);
            sim.advance(rng.below(50));
        }
        assert!(
            accepted > 100 && refused > 20,
            "the generator covers both: {accepted} accepted, {refused} refused"
        );
        // The rows written, per target in order, are the same.
        let by_target = |rows: Vec<durable_relay_sql::core::StoredRow>,
                         into: &mut BTreeMap<String, Vec<String>>| {
            for r in rows {
                into.entry(r.target.clone()).or_default().push(r.body);
            }
        };
        let mut plain = BTreeMap::new();
        by_target(sim.queued_rows("plain"), &mut plain);
        let mut routed = BTreeMap::new();
        for p in m.parts() {
            by_target(sim.queued_rows(p.object(&name(L)).as_str()), &mut routed);
        }
        assert_eq!(routed, plain, "rows written under {m:?} (seed {seed})");
    }
}
