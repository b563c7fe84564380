//! A source's identity at its targets: its name and its object's id.
//!
//! Names collide wherever rows can meet: two source classes (or two
//! Workers) may each hold an object named `default`, and both send their
//! row 1 to the same target. Keyed by name alone, the target took the
//! second row 1 for a duplicate: both sources reported it delivered and its
//! effect never arrived. These tests run the shipped SQL through the
//! simulator (which derives each object's id from its class and name, as
//! workerd's ids differ per namespace) and the inbox directly, for the
//! upgrade of a target whose watermarks were written before ids: the first
//! identified sender of a name claims that name's old watermark in the
//! apply that first writes, so no row is applied twice, and a sender that
//! sends no id keeps using it.

use durable_relay_sql::core::{
    encode_request, ApplyRow, Effects, Name, NoHook, QueuedRow, RelayBudget, RelayHook, Sender, SourceId,
    TargetCall,
};
use durable_relay_sql::sim::{Sim, SqliteSql, SIM_SOURCE_CLASS};
use durable_relay_sql::{ApplyFailure, Inbox, Watermark};
use serde_json::json;

const BUDGET: RelayBudget = RelayBudget::FREE;

fn drain(sim: &mut Sim, source: &str) {
    let report = sim.run_until_idle(source, BUDGET, 50);
    assert!(report.drained, "{source} drained");
}

fn delivered(sim: &Sim, source: &str) -> u64 {
    sim.with_relay(source, |r| r.outbox().state().unwrap().delivered_rows)
}

/// Two sources named `default`, in two classes, each send their row 1 to
/// the same target: both effects arrive, and the target keeps a watermark
/// for each.
#[test]
fn two_sources_of_one_name_in_two_classes_each_deliver_their_row_one() {
    let mut sim = Sim::new(11);
    sim.audit_every_fire(true);
    sim.place_source("first", SIM_SOURCE_CLASS, "default");
    sim.place_source("second", "OtherSource", "default");
    let (first_name, first_id) = sim.identity("first");
    let (second_name, second_id) = sim.identity("second");
    assert_eq!((first_name.as_str(), second_name.as_str()), ("default", "default"));
    assert_ne!(first_id, second_id, "ids differ across classes");

    assert_eq!(sim.put("first", "t", "from-first", json!("a")).unwrap(), 1);
    assert_eq!(sim.put("second", "t", "from-second", json!("b")).unwrap(), 1);
    drain(&mut sim, "first");
    drain(&mut sim, "second");

    assert_eq!(sim.value("t", "from-first").as_deref(), Some(r#""a""#));
    assert_eq!(
        sim.value("t", "from-second").as_deref(),
        Some(r#""b""#),
        "the second source's row 1 is not the first's duplicate"
    );
    assert_eq!((delivered(&sim, "first"), delivered(&sim, "second")), (1, 1));
    assert_eq!(sim.applied("t", "first"), vec![1]);
    assert_eq!(sim.applied("t", "second"), vec![1]);
    let marks = sim.with_target("t", |i| i.watermarks()).unwrap();
    let mut ids: Vec<Option<String>> = marks.iter().map(|m| m.source_id.clone()).collect();
    ids.sort();
    let mut want = vec![Some(first_id.to_string()), Some(second_id.to_string())];
    want.sort();
    assert_eq!(ids, want, "two watermark rows, one per id: {marks:?}");
    assert!(marks.iter().all(|m| m.source == "default" && m.watermark == 1 && m.applied_rows == 1));
    sim.audit().unwrap();
}

/// The same, interleaved over several rows and alarms: each source's rows
/// arrive once, in order, whatever the other sends.
#[test]
fn two_sources_of_one_name_interleaving_many_rows_each_arrive_once_in_order() {
    let mut sim = Sim::new(12);
    sim.audit_every_fire(true);
    sim.place_source("left", "LeftClass", "orders");
    sim.place_source("right", "RightClass", "orders");
    for i in 1..=6u64 {
        sim.put("left", "t", &format!("left-{i}"), json!(i)).unwrap();
        sim.put("right", "t", &format!("right-{i}"), json!(i)).unwrap();
        sim.put("right", "t", "last-right", json!(i)).unwrap();
        if i % 2 == 0 {
            sim.run_alarm("left", BUDGET);
            sim.run_alarm("right", BUDGET);
        }
    }
    drain(&mut sim, "left");
    drain(&mut sim, "right");
    assert_eq!(sim.applied("t", "left"), (1..=6).collect::<Vec<u64>>());
    assert_eq!(sim.applied("t", "right"), (1..=12).collect::<Vec<u64>>());
    for i in 1..=6 {
        assert_eq!(sim.value("t", &format!("left-{i}")), Some(i.to_string()));
        assert_eq!(sim.value("t", &format!("right-{i}")), Some(i.to_string()));
    }
    assert_eq!((sim.watermark("t", "left"), sim.watermark("t", "right")), (6, 12));
    sim.audit().unwrap();
}

/// A target upgraded with a watermark written before ids (the legacy row
/// of `orders`, at 2): the identified `orders` skips its rows 1 and 2 and
/// claims the row with its first apply (no row applied twice); a second
/// `orders` in another class is a source of its own and delivers its row 1.
/// (The simulator's audit would count rows 1 and 2 as lost: they stand for
/// rows applied before the upgrade, so this test checks them itself.)
#[test]
fn an_upgraded_targets_old_watermark_is_claimed_by_the_first_identified_sender() {
    let mut sim = Sim::new(13);
    sim.place_source("other", "OtherSource", "orders");
    sim.with_target("t", |i| i.set_watermark("orders", None, 2)).unwrap();
    for k in 1..=3u64 {
        sim.put("orders", "t", &format!("k{k}"), json!(k)).unwrap();
    }
    let (_, id) = sim.identity("orders");
    assert_eq!(sim.watermark("t", "orders"), 2, "before it applies, the sender reads the legacy watermark");
    drain(&mut sim, "orders");
    assert_eq!(
        sim.applied("t", "orders"),
        vec![3],
        "rows 1 and 2 were the legacy watermark's: not applied again"
    );
    assert_eq!((sim.value("t", "k1"), sim.value("t", "k3")), (None, Some("3".into())));
    let marks = sim.with_target("t", |i| i.watermarks()).unwrap();
    assert_eq!(
        marks,
        vec![Watermark {
            source: "orders".into(),
            source_id: Some(id.to_string()),
            watermark: 3,
            applied_rows: 1,
            batches: 1,
            sql_rows_written: 2,
        }],
        "the legacy row took the sender's id"
    );

    sim.put("other", "t", "from-other", json!(true)).unwrap();
    drain(&mut sim, "other");
    assert_eq!(sim.value("t", "from-other").as_deref(), Some("true"), "another class's orders starts at 0");
    assert_eq!(sim.watermark("t", "other"), 1);
    assert_eq!(sim.watermark("t", "orders"), 3);
    assert_eq!((delivered(&sim, "orders"), delivered(&sim, "other")), (3, 1));
}

// ---- the inbox directly -------------------------------------------------------

fn inbox() -> Inbox<SqliteSql> {
    Inbox::open(SqliteSql::memory().unwrap()).unwrap()
}

/// An apply body from `source` (with `id`, or none as an older build
/// sends) carrying rows `seqs`, each putting `k{seq}`.
fn body(source: &str, id: Option<&SourceId>, seqs: &[u64]) -> String {
    let name = Name::new(source).unwrap();
    let rows: Vec<QueuedRow> = seqs
        .iter()
        .map(|&seq| {
            let body = format!(r#"{{"puts":[["k{seq}",{seq}]],"deletes":[]}}"#);
            QueuedRow {
                seq,
                target: Name::new("t").unwrap(),
                at_ms: 0,
                due_ms: 0,
                bytes: body.len() as u32,
                effects: 1,
                body,
                sendable: true,
            }
        })
        .collect();
    let call = TargetCall { group: 0, target: Name::new("t").unwrap(), seqs: seqs.to_vec(), bytes: 0 };
    match id {
        Some(id) => encode_request(&name, id, &call, &rows),
        None => {
            let text = encode_request(&name, &SourceId::derive("x", "x"), &call, &rows);
            let (head, tail) = text.split_once(r#","source_id":""#).unwrap();
            let tail = &tail[tail.find('"').unwrap() + 1..];
            format!("{head}{tail}")
        }
    }
}

fn marks(inbox: &Inbox<SqliteSql>) -> Vec<(String, Option<String>, u64)> {
    inbox.watermarks().unwrap().into_iter().map(|m| (m.source, m.source_id, m.watermark)).collect()
}

#[test]
fn a_sender_without_an_id_keeps_using_the_legacy_row() {
    let inbox = inbox();
    inbox.set_watermark("s", None, 4).unwrap();
    let reply = inbox.apply_body(&body("s", None, &[3, 4, 5]), &NoHook).unwrap();
    assert_eq!((reply.watermark, reply.applied, reply.duplicates), (5, 1, 2));
    assert_eq!(marks(&inbox), vec![("s".into(), None, 5)]);
}

/// The rollback an operator reaches for first: an older build (no ids)
/// delivers rows 1-3, the current build's sender claims the name's
/// watermark with row 4, then the older build runs again and resends row 2
/// (its checkpoint was lost) and goes on with row 5. Row 2 is a duplicate;
/// row 5 applies against the claimer's watermark, so when the current
/// build comes back its row 5 is a duplicate too: nothing applies twice.
#[test]
fn a_sender_without_an_id_after_a_claim_applies_against_the_claimers_watermark() {
    let inbox = inbox();
    let id = SourceId::derive("A", "s");
    inbox.apply_body(&body("s", None, &[1, 2, 3]), &NoHook).unwrap();
    let reply = inbox.apply_body(&body("s", Some(&id), &[4]), &NoHook).unwrap();
    assert_eq!((reply.watermark, reply.applied), (4, 1));
    assert_eq!(marks(&inbox), vec![("s".into(), Some(id.to_string()), 4)], "claimed");

    let reply = inbox.apply_body(&body("s", None, &[2]), &NoHook).unwrap();
    assert_eq!((reply.watermark, reply.applied, reply.duplicates), (4, 0, 1), "row 2 is not applied again");
    let reply = inbox.apply_body(&body("s", None, &[2, 3, 4, 5]), &NoHook).unwrap();
    assert_eq!((reply.watermark, reply.applied, reply.duplicates), (5, 1, 3));
    assert_eq!(marks(&inbox), vec![("s".into(), Some(id.to_string()), 5)], "no fresh legacy row");

    let reply = inbox.apply_body(&body("s", Some(&id), &[5, 6]), &NoHook).unwrap();
    assert_eq!((reply.watermark, reply.applied, reply.duplicates), (6, 1, 1), "upgraded again: 5 once");
    assert_eq!(inbox.watermark(&Name::new("s").unwrap(), None).unwrap(), 6, "an older sender reads it too");
}

/// Forgetting a name's watermarks forgets who claimed its legacy one: a
/// sender without an id then starts from 0, as the operator asked.
#[test]
fn forgetting_a_name_forgets_its_claim() {
    let inbox = inbox();
    let id = SourceId::derive("A", "s");
    inbox.apply_body(&body("s", None, &[1]), &NoHook).unwrap();
    inbox.apply_body(&body("s", Some(&id), &[2]), &NoHook).unwrap();
    assert!(inbox.forget_watermark("s").unwrap());
    let reply = inbox.apply_body(&body("s", None, &[1]), &NoHook).unwrap();
    assert_eq!(reply.applied, 1);
    assert_eq!(marks(&inbox), vec![("s".into(), None, 1)]);
}

/// The hook is told whose watermark the rows were applied against: the
/// sender's name and id, the claimer's id for a sender without an id after
/// a claim, and no id before any claim.
#[test]
fn the_hook_is_told_the_name_and_id_the_watermark_is_kept_by() {
    struct Told(std::cell::RefCell<Vec<(String, Vec<u64>)>>);
    impl RelayHook for Told {
        fn extra_effects(&self, sender: &Sender, rows: &[ApplyRow]) -> Result<Effects, String> {
            self.0.borrow_mut().push((sender.key(), rows.iter().map(|r| r.seq).collect()));
            Ok(Effects::default())
        }
    }
    let told = Told(Default::default());
    let inbox = inbox();
    let (a, b) = (SourceId::derive("A", "default"), SourceId::derive("B", "default"));
    inbox.apply_body(&body("default", None, &[1]), &told).unwrap();
    inbox.apply_body(&body("default", Some(&a), &[1, 2]), &told).unwrap();
    inbox.apply_body(&body("default", Some(&b), &[1]), &told).unwrap();
    inbox.apply_body(&body("default", None, &[3]), &told).unwrap();
    let expected = vec![
        ("default".to_owned(), vec![1]),
        (format!("default/{}", a.as_str()), vec![2]),
        (format!("default/{}", b.as_str()), vec![1]),
        (format!("default/{}", a.as_str()), vec![3]),
    ];
    assert_eq!(told.0.into_inner(), expected);
}

/// A `null` id is no sender's: an older build omits the field and every
/// later one sends its id. It is refused, and nothing is written.
#[test]
fn a_null_source_id_is_refused_and_writes_nothing() {
    let inbox = inbox();
    let refused = inbox.apply_body(
        r#"{"source":"s","source_id":null,"rows":[{"seq":1,"effects":{"puts":[["k",1]]}}]}"#,
        &NoHook,
    );
    let Err(ApplyFailure::Rejected(e)) = refused else { panic!("{refused:?}") };
    assert_eq!(e.code().as_str(), "invalid_source_id");
    assert!(e.to_string().contains("source_id is null"), "{e}");
    assert_eq!(marks(&inbox), vec![]);
    assert_eq!(inbox.value("k").unwrap(), None);
}

#[test]
fn a_batch_of_duplicates_claims_nothing_and_writes_nothing() {
    let inbox = inbox();
    inbox.set_watermark("s", None, 4).unwrap();
    let id = SourceId::derive("A", "s");
    let reply = inbox.apply_body(&body("s", Some(&id), &[2, 4]), &NoHook).unwrap();
    assert_eq!((reply.watermark, reply.applied, reply.duplicates), (4, 0, 2));
    assert_eq!(marks(&inbox), vec![("s".into(), None, 4)], "the claim waits for an apply that writes");
}

/// The hook refuses the claiming apply: the claim rolls back with it.
#[test]
fn a_claim_commits_with_its_apply_or_not_at_all() {
    struct Refuse;
    impl RelayHook for Refuse {
        fn extra_effects(&self, _: &Sender, _: &[ApplyRow]) -> Result<Effects, String> {
            Err("not now".into())
        }
    }
    let inbox = inbox();
    inbox.set_watermark("s", None, 4).unwrap();
    let id = SourceId::derive("A", "s");
    let refused = inbox.apply_body(&body("s", Some(&id), &[5]), &Refuse);
    assert!(matches!(refused, Err(ApplyFailure::Hook(_))), "{refused:?}");
    assert_eq!(marks(&inbox), vec![("s".into(), None, 4)]);
    assert_eq!(inbox.value("k5").unwrap(), None);
    inbox.apply_body(&body("s", Some(&id), &[5]), &NoHook).unwrap();
    assert_eq!(marks(&inbox), vec![("s".into(), Some(id.to_string()), 5)]);
}

/// A second identified sender of the name, after the claim, starts at 0;
/// had it come first it would have claimed the legacy row instead.
#[test]
fn only_the_first_identified_sender_claims() {
    let inbox = inbox();
    inbox.set_watermark("s", None, 4).unwrap();
    let (a, b) = (SourceId::derive("A", "s"), SourceId::derive("B", "s"));
    inbox.apply_body(&body("s", Some(&a), &[5]), &NoHook).unwrap();
    let reply = inbox.apply_body(&body("s", Some(&b), &[1]), &NoHook).unwrap();
    assert_eq!((reply.watermark, reply.applied), (1, 1));
    let mut want = vec![("s".to_owned(), Some(a.to_string()), 5), ("s".to_owned(), Some(b.to_string()), 1)];
    want.sort();
    assert_eq!(marks(&inbox), want);
    assert!(inbox.forget_watermark("s").unwrap());
    assert!(marks(&inbox).is_empty(), "forgetting a name forgets every id of it");
}

/// A malformed id is refused before anything is read or written.
#[test]
fn a_malformed_source_id_is_refused_and_writes_nothing() {
    let inbox = inbox();
    let good = body("s", Some(&SourceId::derive("A", "s")), &[1]);
    for bad in ["", "abc", &"A".repeat(64), &"a".repeat(65)] {
        let text = good.replacen(SourceId::derive("A", "s").as_str(), bad, 1);
        match inbox.apply_body(&text, &NoHook) {
            Err(ApplyFailure::Rejected(e)) => {
                assert_eq!(e.code(), "invalid_source_id", "{bad:?}");
                assert!(e.to_string().contains("source_id"), "{e}");
            }
            other => panic!("{bad:?}: {other:?}"),
        }
    }
    assert!(marks(&inbox).is_empty());
    assert_eq!(inbox.value("k1").unwrap(), None);
}
