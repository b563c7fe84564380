//! The HTTP API's route table (docs/http-api.md) against the front door's
//! own router: every documented route parses to a route, needs the scope
//! the table gives it, and every route a caller may reach is documented.
//! (Which relay operations are public is checked against the protocol
//! table by the library's tests.)

use std::collections::BTreeSet;

use durable_relay::core::Name;
use durable_relay::routes::{SourceOp, TargetOp};
use durable_relay_worker::routes::{FrontRoute, SourceRoute, TargetRoute};

fn routes_table() -> Vec<(String, String, String)> {
    let path = format!("{}/docs/http-api.md", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let table = text.split("| route | scope | what |").nth(1).expect("the route table");
    table
        .lines()
        .skip(2)
        .take_while(|l| l.starts_with("| `"))
        .map(|l| {
            let cells: Vec<&str> = l.trim_matches('|').split(" | ").map(str::trim).collect();
            let (method, path) = cells[0].trim_matches('`').split_once(' ').expect("METHOD /path");
            (method.to_owned(), path.to_owned(), cells[1].to_owned())
        })
        .collect()
}

/// The route a caller may reach that the table must document, by kind;
/// `None` for the test builds' routes and the steps only the relay's own
/// objects take (the front door refuses those). Exhaustive, so a new route
/// cannot compile without a decision here.
fn documented(route: &FrontRoute) -> Option<&'static str> {
    match route {
        FrontRoute::Health => Some("health"),
        FrontRoute::Sources { .. } => Some("directory"),
        FrontRoute::Source(_, r) => match r {
            SourceRoute::Relay(op) => match op {
                SourceOp::Enqueue => Some("enqueue"),
                SourceOp::Status => Some("source status"),
                SourceOp::Watermark => Some("watermark"),
                SourceOp::DeliveredThrough(_) => Some("delivered through"),
                SourceOp::ParkedTargets { .. } => Some("parked targets"),
                SourceOp::ParkedRows { .. } => Some("parked rows"),
                SourceOp::Queued { .. } => Some("queued rows"),
                SourceOp::Redrive(_) => Some("redrive"),
                SourceOp::Discard(_) => Some("discard"),
                SourceOp::Rearm => Some("rearm"),
                SourceOp::Prepare
                | SourceOp::Activate
                | SourceOp::RecordKey
                | SourceOp::Seal
                | SourceOp::PlainKey
                | SourceOp::Settling(_) => None,
            },
            SourceRoute::Alarms => Some("alarms"),
            SourceRoute::Retire => Some("retire"),
            SourceRoute::Faults | SourceRoute::Audit | SourceRoute::Conformance => None,
        },
        FrontRoute::Target(_, r) => match r {
            TargetRoute::Relay(op) => match op {
                TargetOp::Status => Some("target status"),
                TargetOp::Keys { .. } => Some("keys"),
                TargetOp::Watermarks { .. } => Some("watermarks"),
                TargetOp::ForgetWatermark(_) => Some("forget watermark"),
                TargetOp::Apply => None,
            },
            TargetRoute::Faults | TargetRoute::Log(_) | TargetRoute::Audit => None,
        },
    }
}

/// One route of every kind: every operation from its declaration, and the
/// front door's own routes.
fn samples() -> Vec<FrontRoute> {
    let n = |s: &str| Name::new(s).unwrap();
    let source = |r| FrontRoute::Source(n("s"), r);
    let target = |r| FrontRoute::Target(n("t"), r);
    let mut out = vec![FrontRoute::Health, FrontRoute::Sources { after: None, limit: 1 }];
    out.extend(SourceOp::examples(1).into_iter().map(|op| source(SourceRoute::Relay(op))));
    out.extend([source(SourceRoute::Alarms), source(SourceRoute::Retire)]);
    out.extend(TargetOp::examples(1).into_iter().map(|op| target(TargetRoute::Relay(op))));
    out
}

#[test]
fn every_documented_route_parses_and_needs_the_scope_the_table_gives() {
    let rows = routes_table();
    assert!(rows.len() >= 15, "the table has {} routes", rows.len());
    let mut kinds = BTreeSet::new();
    for (method, path, scope) in &rows {
        let (line, query) = path.split_once('?').unwrap_or((path, ""));
        // A query parameter a request must give, given; the others left out.
        let required = if query.split('&').any(|q| q == "target=") { "?target=customer-1" } else { "" };
        let concrete = format!("{line}{required}")
            .replace("{source}", "orders")
            .replace("{target}", "customer-1")
            .replace("{seq}", "4");
        let url = worker::Url::parse(&format!("https://relay{concrete}")).unwrap();
        let route = FrontRoute::parse(method, &url)
            .unwrap_or_else(|e| panic!("{method} {path} does not route: {}", e.message));
        assert_eq!(route.scope().as_str(), scope, "{method} {path}: the scope it needs");
        let kind = documented(&route).unwrap_or_else(|| panic!("{method} {path} is not a caller's route"));
        assert!(kinds.insert(kind), "{method} {path} is documented twice");
    }
    let every: BTreeSet<&str> = samples().iter().filter_map(documented).collect();
    assert_eq!(kinds, every, "every route a caller may reach is documented");
}
