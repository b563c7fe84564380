//! The wire contract beside the Rust code: the TypeScript types callers
//! compile against name every error code the relay can answer with.

use durable_relay_sql::core::ErrorCode;

#[test]
fn the_typescript_error_codes_are_the_rust_ones() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../clients/typescript/durable-relay.d.ts");
    let dts = std::fs::read_to_string(path).expect("clients/typescript/durable-relay.d.ts");
    let start = dts.find("export type ErrorCode =").expect("an ErrorCode union");
    let end = start + dts[start..].find(';').expect("the union's end");
    let union: Vec<&str> = dts[start..end].split('"').skip(1).step_by(2).collect();
    let rust: Vec<&str> = ErrorCode::ALL.iter().map(|c| c.as_str()).collect();
    assert_eq!(union, rust, "clients/typescript/durable-relay.d.ts ErrorCode vs ErrorCode::ALL");
}

// ---- every field of every wire type, against the TypeScript interfaces ----

use std::collections::{BTreeMap, BTreeSet};

use durable_relay_sql::core::{Delay, EnqueueRow, Name, RelayBudget, ScanState, Traceparent};
use durable_relay_sql::partition::{Position, RoutedEnqueue};
use durable_relay_sql::sim::Sim;
use durable_relay_sql::{
    ActionOutcome, AlarmSummary, Enqueued, ParkedPage, Rearmed, SourceStatus, TargetPage, TargetReport,
};
use serde_json::{json, Value};

/// The fields each `export interface` of the `.d.ts` declares at its top
/// level (nested inline objects are checked by their own entries below).
fn interfaces(dts: &str) -> BTreeMap<String, BTreeSet<String>> {
    let mut out = BTreeMap::new();
    let mut current: Option<(String, BTreeSet<String>)> = None;
    let mut depth = 0i32;
    for line in dts.lines() {
        let trimmed = line.trim();
        if current.is_none() {
            if let Some(rest) = trimmed.strip_prefix("export interface ") {
                let name = rest.split(|c: char| !c.is_alphanumeric()).next().unwrap_or_default();
                current = Some((name.to_owned(), BTreeSet::new()));
                depth = 1;
            }
            continue;
        }
        let at_top = depth == 1;
        if at_top && !trimmed.starts_with("/**") && !trimmed.starts_with('*') {
            if let Some((field, _)) = trimmed.split_once(':') {
                let field = field.trim_end_matches('?');
                if field.chars().all(|c| c.is_alphanumeric() || c == '_') && !field.is_empty() {
                    current.as_mut().unwrap().1.insert(field.to_owned());
                }
            }
        }
        depth += trimmed.matches('{').count() as i32 - trimmed.matches('}').count() as i32;
        if depth <= 0 {
            let (name, fields) = current.take().unwrap();
            out.insert(name, fields);
        }
    }
    out
}

fn keys(v: &Value) -> BTreeSet<String> {
    v.as_object().expect("an object").keys().cloned().collect()
}

/// Sample values of every wire type, with every optional field present.
fn samples() -> Vec<(&'static str, Value)> {
    let mut sim = Sim::new(1);
    sim.fail_target("down");
    let trace = Traceparent::parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01").unwrap();
    let rows = vec![
        EnqueueRow::to(Name::new("t").unwrap()).put("k", json!(1)).with_trace(Some(trace)),
        EnqueueRow::to(Name::new("down").unwrap()).put("k", json!(2)).delayed(Delay::For(0)),
    ];
    let now = sim.now_ms();
    let enqueued: Enqueued =
        sim.with_relay("s", |r| futures::executor::block_on(r.enqueue(now, Some("k"), &rows))).unwrap();
    let alarm = sim.run_alarm("s", RelayBudget::FREE);
    let summary = alarm.summary.expect("an alarm summary");
    let status: SourceStatus = sim.with_relay("s", |r| futures::executor::block_on(r.status(now))).unwrap();
    let targets: TargetPage = sim.with_relay("s", |r| r.targets("", 1)).unwrap();
    let report: TargetReport = targets.targets[0].clone();
    let mut scan = ScanState::new_cycle(9, None);
    (scan.blocked, scan.clock_ms, scan.next_due_ms, scan.passed_failing) =
        (vec![Name::new("b").unwrap()], 1, Some(2), true);
    (scan.retries, scan.recovered, scan.retry_through_ms, scan.waiting_retry_ms) = (1, 1, Some(2), Some(3));
    scan.next_retry_ms = Some(3);
    let delayed = Enqueued { due_ms: vec![1], ..enqueued.clone() };
    let routed = RoutedEnqueue {
        seqs: vec![1],
        positions: vec![Position { partition: durable_relay_sql::core::Part::Index(0), seq: 1 }],
        duplicate: false,
        queued_rows: 1,
        parked_rows: 0,
        at_ms: 1,
        due_ms: vec![1],
    };
    let page = ParkedPage { target: "t".into(), rows: vec![], next: Some(1) };
    let to = |v: &dyn erased::Ser| v.value();
    vec![
        ("Enqueued", to(&delayed)),
        ("Enqueued", to(&routed)),
        ("Position", to(&Position { partition: durable_relay_sql::core::Part::Index(0), seq: 1 })),
        ("SourceStatus", to(&status)),
        ("ScanState", to(&scan)),
        ("AlarmSummary", to(&summary)),
        ("AlarmSummary", to(&AlarmSummary { write_limited: true, host_alarm: true, ..summary.clone() })),
        ("TargetReport", to(&report)),
        ("TargetPage", to(&TargetPage { next: Some("t".into()), ..targets })),
        ("ParkedPage", to(&page)),
        ("ActionOutcome", to(&ActionOutcome { rows: 1, was_parked: true })),
        ("Rearmed", to(&Rearmed { rearmed: true, alarm_at_ms: Some(1), queued_rows: 1 })),
        ("RelayBudget", to(&RelayBudget::FREE)),
    ]
}

/// Serialising through a trait object, so one list can hold every type.
mod erased {
    pub trait Ser {
        fn value(&self) -> serde_json::Value;
    }
    impl<T: serde::Serialize> Ser for T {
        fn value(&self) -> serde_json::Value {
            serde_json::to_value(self).expect("a wire type serialises")
        }
    }
}

#[test]
fn every_field_of_every_wire_type_is_declared_in_typescript_and_nothing_more() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../clients/typescript/durable-relay.d.ts");
    let declared = interfaces(&std::fs::read_to_string(path).expect("the .d.ts"));
    let mut seen: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
    for (name, value) in samples() {
        let fields = declared.get(name).unwrap_or_else(|| panic!("no TypeScript interface {name}"));
        let sent = keys(&value);
        let missing: Vec<&String> = sent.difference(fields).collect();
        assert!(missing.is_empty(), "{name}: Rust sends {missing:?}, which the TypeScript interface lacks");
        seen.entry(name).or_default().extend(sent);
    }
    for (name, sent) in seen {
        let extra: Vec<&String> = declared[name].difference(&sent).collect();
        assert!(extra.is_empty(), "{name}: TypeScript declares {extra:?}, which Rust never sends");
    }
}

#[test]
fn replies_of_a_release_that_said_os_and_rs_still_decode() {
    let enqueued = json!({
        "seqs": [4], "os": 4, "duplicate": false, "queued_rows": 1, "parked_rows": 0, "at_ms": 7
    });
    let e: Enqueued = serde_json::from_value(enqueued).expect("an old enqueue reply");
    assert_eq!(e.last_seq, 4);
    let now = serde_json::to_value(&e).expect("encode");
    assert!(now.get("last_seq").is_some() && now.get("os").is_none(), "{now}");

    let sim = Sim::new(1);
    let now = sim.now_ms();
    let status: SourceStatus = sim.with_relay("s", |r| futures::executor::block_on(r.status(now))).unwrap();
    let mut status = serde_json::to_value(status).expect("a status");
    let obj = status.as_object_mut().expect("an object");
    for (new, old) in [("last_seq", "os"), ("scan_state", "rs"), ("scan_state_corrupt", "rs_corrupt")] {
        let v = obj.remove(new).unwrap_or_else(|| panic!("status has {new}"));
        obj.insert(old.into(), v);
    }
    let s: SourceStatus = serde_json::from_value(status).expect("an old status reply");
    assert_eq!(s.last_seq, 0);
}

#[test]
fn every_reply_the_rust_client_reads_decodes_what_the_relay_writes() {
    let effects = r#"{"puts":[["k",123456789012345678901234567890]],"deletes":[]}"#;
    let row = durable_relay_sql::store::outbox::ParkedRow { seq: 3, at_ms: 9, effects: effects.into() };
    let page = ParkedPage { target: "t".into(), rows: vec![row], next: Some(3) };
    let text = serde_json::to_string(&page).expect("encode");
    assert!(text.contains("123456789012345678901234567890]]"), "effects are JSON, not a string: {text}");
    assert_eq!(serde_json::from_str::<ParkedPage>(&text).expect("decode"), page, "every digit back");
    for (name, value) in samples() {
        let text = value.to_string();
        let decoded = match name {
            "Enqueued" if value.get("positions").is_some() => {
                serde_json::from_str::<RoutedEnqueue>(&text).map(|_| ())
            }
            "Enqueued" => serde_json::from_str::<Enqueued>(&text).map(|_| ()),
            "SourceStatus" => serde_json::from_str::<SourceStatus>(&text).map(|_| ()),
            "TargetReport" => serde_json::from_str::<TargetReport>(&text).map(|_| ()),
            "TargetPage" => serde_json::from_str::<TargetPage>(&text).map(|_| ()),
            "ActionOutcome" => serde_json::from_str::<ActionOutcome>(&text).map(|_| ()),
            "Rearmed" => serde_json::from_str::<Rearmed>(&text).map(|_| ()),
            _ => Ok(()),
        };
        assert!(decoded.is_ok(), "{name}: {decoded:?}");
    }
}
