//! Upgrades of objects that hold data. For every schema version of the
//! outbox (`relay_source`) and of the inbox (`relay_target`), a fixture in
//! `tests/fixtures/upgrade/` holds an object caught mid-flight at that
//! version (each file's header says what it holds). Each test brings a
//! fresh SQLite to the version, loads the fixture, lets the current code
//! open (and migrate) it, and drives it through the simulator: the shipped
//! SQL and driver, with the simulator's audit after every fire. Each test
//! is named for the behaviour it pins.
//!
//! The layout every source fixture shares (source `orders`; each row puts
//! `k{seq} = seq` and `last = seq` at its target): rows 1-2 went to `alpha`
//! before; queued 3, 5, 7 for `alpha` and 4, 6, 8 for `bravo`. From
//! version 2: `charlie` parked with 9 and 10; `delta` failing (not parked)
//! with 11 and 12 queued; 13 for `foxtrot` parked and discarded; 14 for
//! `bravo`; dedup records `batch-3` (rows 3-4) and `order-11`. From version
//! 4: 15 and 16 for `echo`, delayed until [`DUE`], and echo's hold. Version
//! 6: the dedup record `later-15` of the delayed rows, and the key claim
//! `claim-9`, which version 8 replaces by its routed records of the key.
//! Version 11: the state row says the source never stored a partition map.
//! The target fixture is `alpha`, which applied 1, 2, 3 and 5
//! (watermark 5) while the source's checkpoint of 3 and 5 was lost.
//!
//! A release that adds a migration adds its fixture (`source-vN.sql` or
//! `target-vN.sql`); `every_schema_version_has_its_fixture` fails until it does.

use std::collections::BTreeMap;
use std::path::PathBuf;

use durable_relay_sql::core::{
    content_digest, encode_rows, Delay, EnqueueRefusal, EnqueueRow, KeyVerdict, Name, Part, RelayBudget,
    Ticket,
};
use durable_relay_sql::sim::{Sim, SqliteSql};
use durable_relay_sql::store::outbox::SourceState;
use durable_relay_sql::testing::upgrade::{migrate_to, Component};
use durable_relay_sql::{EnqueueFailure, Inbox, Outbox, OutboxSettings, Sql};
use serde_json::json;

const S: &str = "orders";
/// The simulator's clock at the start; the fixtures' times are around it.
const T0: u64 = 1_700_000_000_000;
/// When the fixtures' delayed rows are due.
const DUE: u64 = T0 + 60_000;
/// The target whose fixture is loaded, and what it applied before.
const ALPHA: &str = "alpha";
const ALPHA_APPLIED: [u64; 4] = [1, 2, 3, 5];
/// Rows `alpha`'s fixture counts as applied from the source.
const ALPHA_APPLIED_ROWS: u64 = 4;

// ---- the fixtures ---------------------------------------------------------

fn fixture_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/upgrade")
}

fn fixture_name(component: Component, version: u32) -> String {
    format!("{}-v{version}.sql", component.fixture_prefix())
}

/// The fixture's statements: each ends with `;` at a line's end; lines
/// starting with `--` are comments.
fn statements(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    for line in text.lines().filter(|l| !l.trim_start().starts_with("--") && !l.trim().is_empty()) {
        current.push_str(line);
        current.push('\n');
        if line.trim_end().ends_with(';') {
            out.push(std::mem::take(&mut current));
        }
    }
    assert!(current.trim().is_empty(), "a statement without its closing `;`: {current}");
    out
}

/// A fresh database at `version` of `component`, holding its fixture.
fn database_at(component: Component, version: u32) -> SqliteSql {
    let sql = SqliteSql::memory().unwrap();
    assert_eq!(migrate_to(&sql, component, version).unwrap(), version);
    let name = fixture_name(component, version);
    let text = std::fs::read_to_string(fixture_dir().join(&name)).unwrap();
    for statement in statements(&text) {
        sql.run(&statement, vec![]).unwrap_or_else(|e| panic!("{name}: {e} in {statement}"));
    }
    sql
}

/// A world holding `alpha` at target version `target_v` and the source at
/// source version `source_v`, both opened (and migrated) by the current code.
fn world(source_v: u32, target_v: u32) -> Sim {
    let mut sim = Sim::new(u64::from(source_v * 10 + target_v));
    assert_eq!(sim.now_ms(), T0, "the fixtures' times are set around the simulator's start");
    sim.audit_every_fire(true);
    sim.adopt_target(ALPHA, database_at(Component::Target, target_v)).unwrap();
    sim.adopt_source(S, database_at(Component::Source, source_v)).unwrap();
    sim.audit().unwrap_or_else(|e| panic!("source v{source_v} target v{target_v}: {e}"));
    sim
}

// ---- what each source version holds ----------------------------------------

/// One row of the shared layout.
#[derive(Clone, Copy, Debug)]
struct Held {
    seq: u64,
    target: &'static str,
    parked: bool,
}

const fn queued(seq: u64, target: &'static str) -> Held {
    Held { seq, target, parked: false }
}

/// Rows the source fixture at `version` still owes (queued or parked).
fn held(version: u32) -> Vec<Held> {
    let mut rows = vec![
        queued(3, ALPHA),
        queued(4, "bravo"),
        queued(5, ALPHA),
        queued(6, "bravo"),
        queued(7, ALPHA),
        queued(8, "bravo"),
    ];
    if version >= 2 {
        rows.extend([
            Held { seq: 9, target: "charlie", parked: true },
            Held { seq: 10, target: "charlie", parked: true },
            queued(11, "delta"),
            queued(12, "delta"),
            queued(14, "bravo"),
        ]);
    }
    if version >= 4 {
        rows.extend([queued(15, "echo"), queued(16, "echo")]);
    }
    rows
}

/// The last sequence the fixture at `version` allocated.
fn last_seq(version: u32) -> u64 {
    match version {
        1 => 8,
        2 | 3 => 14,
        _ => 16,
    }
}

/// Rows discarded before the upgrade (row 13, from version 2).
fn discarded(version: u32) -> u64 {
    u64::from(version >= 2)
}

/// Every sequence each target must end up with, ascending (alpha's
/// earlier rows included).
fn per_target(version: u32) -> BTreeMap<&'static str, Vec<u64>> {
    let mut out: BTreeMap<&'static str, Vec<u64>> = BTreeMap::new();
    out.insert(ALPHA, ALPHA_APPLIED[..2].to_vec());
    for row in held(version) {
        out.entry(row.target).or_default().push(row.seq);
    }
    out
}

fn body_bytes(seq: u64) -> u64 {
    format!(r#"{{"puts":[["k{seq}",{seq}],["last",{seq}]],"deletes":[]}}"#).len() as u64
}

fn row(target: &str, seq: u64) -> EnqueueRow {
    let puts = vec![(format!("k{seq}"), json!(seq)), ("last".to_owned(), json!(seq))];
    EnqueueRow::new(Name::new(target).unwrap(), puts, vec![])
}

fn state(sim: &Sim) -> SourceState {
    sim.with_relay(S, |r| r.outbox().state()).unwrap()
}

fn source_versions() -> std::ops::RangeInclusive<u32> {
    1..=Component::Source.newest()
}

fn target_versions() -> std::ops::RangeInclusive<u32> {
    1..=Component::Target.newest()
}

// ---- driving ----------------------------------------------------------------

/// Runs the source's alarms as they fall due until nothing is queued
/// (parked rows stay). Returns the alarms run.
fn drain(sim: &mut Sim) -> u32 {
    let mut alarms = 0;
    while !sim.queued(S).is_empty() {
        assert!(alarms < 100, "rows still queued after 100 alarms: {:?}", sim.queued(S));
        let at = sim.alarm_at(S).expect("an alarm is armed while rows are queued");
        sim.advance(at.saturating_sub(sim.now_ms()));
        sim.run_alarm(S, RelayBudget::FREE);
        alarms += 1;
    }
    alarms
}

/// Drains, redrives the parked target, and drains again.
fn deliver_everything(sim: &mut Sim, version: u32) {
    drain(sim);
    let parked: Vec<u64> = held(version).iter().filter(|r| r.parked).map(|r| r.seq).collect();
    assert_eq!(sim.parked_rows(S, "charlie"), parked, "v{version}: the parked rows wait for the operator");
    assert_eq!(sim.redrive(S, "charlie") as usize, parked.len());
    drain(sim);
}

// ---- the tests --------------------------------------------------------------

#[test]
fn every_version_delivers_each_row_once_in_order_after_an_upgrade() {
    for source_v in source_versions() {
        for target_v in target_versions() {
            let mut sim = world(source_v, target_v);
            deliver_everything(&mut sim, source_v);
            let ctx = format!("source v{source_v} target v{target_v}");
            for (target, seqs) in per_target(source_v) {
                let fresh: Vec<u64> =
                    seqs.iter().copied().filter(|s| target != ALPHA || !ALPHA_APPLIED.contains(s)).collect();
                assert_eq!(sim.applied(target, S), fresh, "{ctx}: {target} applied these, in order, once");
                for seq in &seqs {
                    assert_eq!(
                        sim.value(target, &format!("k{seq}")),
                        Some(seq.to_string()),
                        "{ctx}: {target}"
                    );
                }
                let last = seqs.last().copied().unwrap();
                assert_eq!(sim.value(target, "last"), Some(last.to_string()), "{ctx}: {target}'s last write");
                assert_eq!(sim.watermark(target, S), last, "{ctx}: {target}'s watermark");
            }
            assert_eq!(sim.value("foxtrot", "k13"), None, "{ctx}: a discarded row is not delivered");
            sim.audit().unwrap_or_else(|e| panic!("{ctx}: {e}"));
        }
    }
}

#[test]
fn a_target_ahead_of_a_lost_checkpoint_skips_the_rows_it_applied() {
    for source_v in source_versions() {
        for target_v in target_versions() {
            let mut sim = world(source_v, target_v);
            let ctx = format!("source v{source_v} target v{target_v}");
            assert_eq!(sim.watermark(ALPHA, S), 5, "{ctx}: the watermark survives the upgrade");
            drain(&mut sim);
            assert_eq!(sim.applied(ALPHA, S), vec![7], "{ctx}: 3 and 5 were skipped as duplicates");
            let marks = sim.with_target(ALPHA, |i| i.watermarks()).unwrap();
            let orders = marks.iter().find(|m| m.source == S).unwrap();
            assert_eq!((orders.watermark, orders.applied_rows), (7, ALPHA_APPLIED_ROWS + 1), "{ctx}");
            let billing = marks.iter().find(|m| m.source == "billing").unwrap();
            assert_eq!(
                (billing.watermark, billing.applied_rows),
                (40, 40),
                "{ctx}: another source untouched"
            );
            assert_eq!(sim.value(ALPHA, "billing-total").as_deref(), Some(r#"{"cents":1200}"#), "{ctx}");
        }
    }
}

#[test]
fn the_state_counters_agree_with_the_rows_after_each_upgrade() {
    for source_v in source_versions() {
        let sim = world(source_v, Component::Target.newest());
        let ctx = format!("source v{source_v}");
        let rows = held(source_v);
        let (parked, queued): (Vec<Held>, Vec<Held>) = rows.iter().partition(|r| r.parked);
        let st = state(&sim);
        let os = last_seq(source_v);
        assert_eq!((st.os, st.enqueued_rows), (os, os), "{ctx}");
        assert_eq!(st.queued_rows, queued.len() as u64, "{ctx}");
        assert_eq!(st.queued_bytes, queued.iter().map(|r| body_bytes(r.seq)).sum::<u64>(), "{ctx}");
        assert_eq!(st.parked_rows, parked.len() as u64, "{ctx}");
        assert_eq!(st.parked_bytes, parked.iter().map(|r| body_bytes(r.seq)).sum::<u64>(), "{ctx}");
        assert_eq!((st.delivered_rows, st.discarded_total), (2, discarded(source_v)), "{ctx}");
        assert_eq!(sim.with_relay(S, |r| r.outbox().audit()).unwrap(), Ok(()), "{ctx}");
    }
}

#[test]
fn the_state_counters_count_every_row_delivered_after_an_upgrade() {
    for source_v in source_versions() {
        let mut sim = world(source_v, Component::Target.newest());
        deliver_everything(&mut sim, source_v);
        let st = state(&sim);
        let os = last_seq(source_v);
        let ctx = format!("source v{source_v}");
        assert_eq!((st.queued_rows, st.queued_bytes, st.parked_rows, st.parked_bytes), (0, 0, 0, 0), "{ctx}");
        assert_eq!((st.os, st.enqueued_rows), (os, os), "{ctx}");
        assert_eq!(st.delivered_rows, os - discarded(source_v), "{ctx}: every row not discarded");
        assert_eq!(st.discarded_total, discarded(source_v), "{ctx}");
        assert_eq!(sim.with_relay(S, |r| r.outbox().audit()).unwrap(), Ok(()), "{ctx}");
    }
}

#[test]
fn the_parked_target_keeps_its_rows_and_new_ones_until_redriven_after_an_upgrade() {
    for source_v in 2..=Component::Source.newest() {
        let mut sim = world(source_v, Component::Target.newest());
        let ctx = format!("source v{source_v}");
        let next = last_seq(source_v) + 1;
        assert_eq!(sim.enqueue(S, vec![row("charlie", next)]).unwrap(), vec![next], "{ctx}");
        drain(&mut sim);
        assert!(sim.applied("charlie", S).is_empty(), "{ctx}: nothing reaches a parked target");
        assert_eq!(
            sim.parked_rows(S, "charlie"),
            vec![9, 10, next],
            "{ctx}: a new row joins the parked ones"
        );
        assert_eq!(sim.redrive(S, "charlie"), 3, "{ctx}");
        drain(&mut sim);
        assert_eq!(sim.applied("charlie", S), vec![9, 10, next], "{ctx}: in order, once");
        assert_eq!(sim.target_record(S, "charlie"), None, "{ctx}: unparked");
    }
}

#[test]
fn a_failing_target_is_retried_and_cleared_after_an_upgrade() {
    for source_v in 2..=Component::Source.newest() {
        let mut sim = world(source_v, Component::Target.newest());
        let ctx = format!("source v{source_v}");
        let record = sim.target_record(S, "delta").unwrap();
        assert_eq!((record.failed_cycles, record.parked), (2, None), "{ctx}: failing, not parked");
        drain(&mut sim);
        assert_eq!(sim.applied("delta", S), vec![11, 12], "{ctx}");
        assert_eq!(sim.target_record(S, "delta"), None, "{ctx}: its failures are forgotten once it applies");
    }
}

#[test]
fn delayed_rows_wait_for_their_due_time_after_an_upgrade() {
    for source_v in 4..=Component::Source.newest() {
        let mut sim = world(source_v, Component::Target.newest());
        let ctx = format!("source v{source_v}");
        let next = last_seq(source_v) + 1;
        let done = sim.enqueue_keyed(S, None, vec![row("echo", next)]).unwrap();
        assert_eq!(done.due_ms, vec![DUE], "{ctx}: a later row for echo inherits its stored hold");
        while sim.alarm_at(S).is_some_and(|at| at < DUE) {
            let at = sim.alarm_at(S).unwrap();
            sim.advance(at.saturating_sub(sim.now_ms()));
            sim.run_alarm(S, RelayBudget::FREE);
            assert!(sim.applied("echo", S).is_empty(), "{ctx}: echo was sent a row before {DUE}");
        }
        assert_eq!(sim.applied(ALPHA, S), vec![7], "{ctx}: rows due at once did not wait for echo's");
        drain(&mut sim);
        assert!(sim.now_ms() >= DUE, "{ctx}");
        assert_eq!(sim.applied("echo", S), vec![15, 16, next], "{ctx}");
        sim.audit().unwrap_or_else(|e| panic!("{ctx}: {e}"));
    }
}

#[test]
fn dedup_records_answer_a_repeated_key_after_an_upgrade() {
    for source_v in 2..=Component::Source.newest() {
        let mut sim = world(source_v, Component::Target.newest());
        let ctx = format!("source v{source_v}");
        let batch = || vec![row(ALPHA, 3), row("bravo", 4)];
        for moment in ["before delivery", "after delivery"] {
            let again = sim.enqueue_keyed(S, Some("batch-3"), batch()).unwrap();
            assert!(again.duplicate, "{ctx} {moment}: batch-3 is a repeat");
            assert_eq!(again.seqs, vec![3, 4], "{ctx} {moment}");
            let other = sim.enqueue_keyed(S, Some("order-11"), vec![row("delta", 99)]);
            assert_eq!(other, Err(EnqueueRefusal::Conflict { key: "order-11".into() }), "{ctx} {moment}");
            drain(&mut sim);
        }
        assert_eq!(sim.os(S), last_seq(source_v), "{ctx}: no repeat allocated a sequence");
        assert_eq!(sim.applied("bravo", S).first(), Some(&4), "{ctx}: row 4 was delivered once");
    }
}

#[test]
fn a_delayed_enqueue_repeated_after_an_upgrade_answers_its_due_times() {
    let mut sim = world(6, Component::Target.newest());
    let rows = vec![
        row("echo", 15).delayed(Delay::NotBefore(DUE)),
        row("echo", 16).delayed(Delay::NotBefore(T0 + 30_000)),
    ];
    let again = sim.enqueue_keyed(S, Some("later-15"), rows).unwrap();
    assert!(again.duplicate);
    assert_eq!((again.seqs, again.due_ms), (vec![15, 16], vec![DUE, DUE]));
}

#[test]
fn a_routed_key_recorded_at_version_8_names_its_content_and_reach_after_an_upgrade() {
    let sim = world(8, Component::Target.newest());
    let digest = |seq| content_digest(&encode_rows(&[row("charlie", seq)]).unwrap());
    let attempt = |d: &str| sim.with_relay(S, |r| r.record_key(T0, "claim-9", d, &[Part::Index(0)]));
    let retry = attempt(&digest(9)).unwrap();
    assert_eq!(
        retry,
        KeyVerdict::Retry {
            ticket: Ticket { gen_ms: T0 - 300_000, attempt: 3 },
            reach: vec![Part::Plain, Part::Index(1)]
        },
        "the same content is the third attempt, told what the first two reached"
    );
    let other = attempt(&digest(10));
    assert_eq!(other, Err(EnqueueFailure::Refused(EnqueueRefusal::Conflict { key: "claim-9".into() })));
    let sealed =
        sim.with_relay(S, |r| r.seal(T0, "claim-9", &digest(9), Ticket { gen_ms: T0 - 300_000, attempt: 3 }));
    assert_eq!(sealed.unwrap().taken.get("charlie").map(|t| t.seqs.clone()), Some(vec![9]));
}

#[test]
fn a_key_claim_of_a_build_before_version_8_is_dropped_by_the_upgrade() {
    // No release wrote them: a claim records neither the attempt nor where
    // its rows went, so it could not answer a retry; the key starts afresh.
    for source_v in [6, 7] {
        let sim = world(source_v, Component::Target.newest());
        let digest = content_digest(&encode_rows(&[row("charlie", 10)]).unwrap());
        let fresh = sim.with_relay(S, |r| r.record_key(T0, "claim-9", &digest, &[]));
        assert_eq!(fresh, Ok(KeyVerdict::Fresh(Ticket { gen_ms: T0, attempt: 1 })), "source v{source_v}");
    }
}

#[test]
fn a_partition_record_stored_before_version_11_still_fences_unrouted_enqueues_after_the_upgrade() {
    // An object that stored a map before the state row could say so: the
    // upgrade sets the flag from the record, so the plain enqueue still
    // consults the fence (the record's epoch, with no map, refuses one).
    let mut sim = Sim::new(11);
    sim.audit_every_fire(true);
    let sql = database_at(Component::Source, 10);
    sql.run("INSERT INTO relay_partition (id, epoch, map, active, since_ms, known) VALUES (1, 3, NULL, 1, 0, NULL)", vec![])
        .unwrap();
    sim.adopt_source(S, sql).unwrap();
    sim.audit().unwrap();
    let refused =
        sim.with_relay(S, |r| futures::executor::block_on(r.enqueue(T0, None, &[row("bravo", 17)])));
    assert_eq!(
        refused,
        Err(EnqueueFailure::Refused(EnqueueRefusal::PartitionedSource {
            source: S.into(),
            plain_at_ms: None
        }))
    );
}

#[test]
fn a_database_newer_than_the_code_is_refused() {
    for component in Component::ALL {
        let newest = component.newest();
        let sql = SqliteSql::memory().unwrap();
        migrate_to(&sql, component, newest).unwrap();
        let err = migrate_to(&sql, component, newest + 1).unwrap_err().to_string();
        assert!(err.contains(&format!("schema version {} is unknown", newest + 1)), "{err}");
        let newer =
            vec![durable_relay_sql::store::int(u64::from(newest + 1)), component.schema_name().into()];
        sql.run("UPDATE relay_schema SET version = ? WHERE component = ?", newer).unwrap();
        let refused = match component {
            Component::Source => Outbox::open(sql, OutboxSettings::default()).err(),
            Component::Target => Inbox::open(sql).err(),
        };
        let err =
            refused.unwrap_or_else(|| panic!("{component:?}: version {} opened", newest + 1)).to_string();
        let expected = format!(
            "{} schema is version {}; this build knows up to {newest}",
            component.schema_name(),
            newest + 1
        );
        assert!(err.contains(&expected), "{component:?}: {err}");
    }
}

#[test]
fn every_schema_version_has_its_fixture() {
    let present: Vec<String> = std::fs::read_dir(fixture_dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    for component in Component::ALL {
        let newest = component.newest();
        for version in 1..=newest {
            let name = fixture_name(component, version);
            assert!(
                present.contains(&name),
                "{} has schema version {version} but no upgrade fixture: add tests/fixtures/upgrade/{name} \
                 (an object caught mid-flight at that version; see tests/upgrades.rs)",
                component.schema_name()
            );
        }
        let prefix = format!("{}-v", component.fixture_prefix());
        let fixtures = present.iter().filter(|n| n.starts_with(&prefix)).count();
        assert_eq!(fixtures, newest as usize, "{prefix}*.sql: one fixture per schema version, 1..={newest}");
    }
}

// ---- the next release's schema ------------------------------------------------

/// A step the next release might add that this one does not know, of every
/// kind a release may add without raising the required version: a column
/// with a default on each of the component's tables, a table of its own and
/// an index on an existing table. Applied as that release would: the
/// applied version goes past this build's newest, the required one stays.
fn apply_next_release_step(sql: &SqliteSql, component: Component) {
    let tables: Vec<String> = sql
        .rows(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'relay_%' \
             AND name != 'relay_schema' ORDER BY name",
            vec![],
        )
        .unwrap()
        .iter()
        .map(|r| r.text(0).unwrap())
        .collect();
    assert!(tables.len() >= 2, "{component:?}: {tables:?}");
    for table in &tables {
        sql.run(
            &format!("ALTER TABLE {table} ADD COLUMN next_release_note TEXT NOT NULL DEFAULT 'n'"),
            vec![],
        )
        .unwrap();
    }
    sql.run("CREATE TABLE relay_next_release (k TEXT PRIMARY KEY, v INTEGER NOT NULL) WITHOUT ROWID", vec![])
        .unwrap();
    sql.run(&format!("CREATE INDEX relay_next_release_index ON {} (next_release_note)", tables[0]), vec![])
        .unwrap();
    let applied = vec![
        format!("{}.applied", component.schema_name()).into(),
        durable_relay_sql::store::int(u64::from(component.newest() + 1)),
    ];
    sql.run(
        "INSERT INTO relay_schema (component, version) VALUES (?, ?) \
         ON CONFLICT(component) DO UPDATE SET version = excluded.version",
        applied,
    )
    .unwrap();
}

/// The versions stored for `component`: (required, applied).
fn stored(sim: &Sim, component: Component, object: &str) -> (u32, u32) {
    fn read(sql: &impl Sql, component: Component) -> (u32, u32) {
        let v = durable_relay_sql::store::schema::stored_versions(sql, component.schema_name()).unwrap();
        (v.required, v.applied)
    }
    match component {
        Component::Source => sim.with_relay(object, |r| read(r.outbox().sql(), component)),
        Component::Target => sim.with_target(object, |i| read(i.sql(), component)),
    }
}

/// This build runs on storage the next release wrote, when that release's
/// newest steps are ones a build before it can run on: every row of the
/// newest fixtures is delivered once and in order, parked rows are
/// redriven, the audit holds, and neither version is lowered or the
/// unknown step touched.
#[test]
fn this_build_runs_on_a_compatible_step_of_the_next_release() {
    let (source_v, target_v) = (Component::Source.newest(), Component::Target.newest());
    let mut sim = Sim::new(71);
    sim.audit_every_fire(true);
    let target = database_at(Component::Target, target_v);
    apply_next_release_step(&target, Component::Target);
    let source = database_at(Component::Source, source_v);
    apply_next_release_step(&source, Component::Source);
    sim.adopt_target(ALPHA, target).unwrap();
    sim.adopt_source(S, source).unwrap();
    sim.audit().unwrap();
    // The newest source fixture holds a pack, which raised its required
    // version past the schema's own (see pack.rs).
    let (source_required, _) = stored(&sim, Component::Source, S);
    assert!(source_required >= Component::Source.required());
    deliver_everything(&mut sim, source_v);
    for (target, seqs) in per_target(source_v) {
        let fresh: Vec<u64> =
            seqs.iter().copied().filter(|s| target != ALPHA || !ALPHA_APPLIED.contains(s)).collect();
        assert_eq!(sim.applied(target, S), fresh, "{target} applied these, in order, once");
    }
    assert_eq!(sim.enqueue(S, vec![row(ALPHA, 0)]).unwrap(), vec![last_seq(source_v) + 1]);
    drain(&mut sim);
    sim.audit().unwrap();
    let required = |c: Component| c.required();
    assert_eq!(stored(&sim, Component::Source, S), (source_required, source_v + 1));
    assert_eq!(stored(&sim, Component::Target, ALPHA), (required(Component::Target), target_v + 1));
}

/// Storage a build before the applied version wrote (one version row)
/// migrates to this build's newest, keeping the required version where
/// the build before can still read it: version 6 of the inbox only adds a
/// table, so the inbox stays readable by the release that wrote version 5.
#[test]
fn an_upgrade_keeps_the_required_version_the_build_before_can_read() {
    for component in Component::ALL {
        let sql = SqliteSql::memory().unwrap();
        migrate_to(&sql, component, component.required()).unwrap();
        let before =
            durable_relay_sql::store::schema::stored_versions(&sql, component.schema_name()).unwrap();
        assert_eq!((before.required, before.applied), (component.required(), component.required()));
        let (required, applied) = match component {
            Component::Source => {
                let outbox = Outbox::open(sql, OutboxSettings::default()).unwrap();
                let v =
                    durable_relay_sql::store::schema::stored_versions(outbox.sql(), "relay_source").unwrap();
                (v.required, v.applied)
            }
            Component::Target => {
                let inbox = Inbox::open(sql).unwrap();
                let v =
                    durable_relay_sql::store::schema::stored_versions(inbox.sql(), "relay_target").unwrap();
                (v.required, v.applied)
            }
        };
        assert_eq!((required, applied), (component.required(), component.newest()), "{component:?}");
    }
    assert_eq!((Component::Target.required(), Component::Target.newest()), (5, 6));
}

/// The contract with the release this one replaces: it runs on whatever
/// this build stores. Its record (`tests/e2e/releases/previous.json`, which
/// the end-to-end suite builds and runs beside this build) names the newest
/// version of each component it knows; the version this build requires
/// must not be past it, so a step the previous release could not run on
/// waits for a release whose previous one knows it.
#[test]
fn the_previous_release_runs_on_what_this_build_stores() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/e2e/releases/previous.json");
    let record: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    for component in Component::ALL {
        let known = record["schema"][component.schema_name()].as_u64().expect("the record names the version");
        assert!(
            u64::from(component.required()) <= known,
            "{}: this build requires version {}, which the previous release ({}) does not know (it knows {known})",
            component.schema_name(),
            component.required(),
            record["commit"]
        );
        assert!(
            known <= u64::from(component.newest()),
            "{}: the previous release is newer",
            component.schema_name()
        );
    }
}
