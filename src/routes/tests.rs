//! The request lines' tests: every front-door route parses to its typed
//! operation and needs its scope, bad lines get their codes, and every
//! route survives its trip to the object.

use super::*;
use durable_relay::core::MAX_KEYS_PER_PAGE;
use durable_relay::routes::{SourceOp, TargetOp};

fn front(method: &str, path: &str) -> Result<FrontRoute, Refusal> {
    FrontRoute::parse(method, &Url::parse(&format!("https://relay.example{path}")).unwrap())
}

fn code(method: &str, path: &str) -> ErrorCode {
    front(method, path).unwrap_err().code
}

fn s(n: &str) -> Name {
    Name::new(n).unwrap()
}

fn relay(op: SourceOp) -> SourceRoute {
    SourceRoute::Relay(op)
}

#[test]
fn front_routes_parse_to_typed_operations() {
    assert_eq!(front("GET", "/v1/health").unwrap(), FrontRoute::Health);
    assert_eq!(
        front("POST", "/v1/sources/a/enqueue").unwrap(),
        FrontRoute::Source(s("a"), relay(SourceOp::Enqueue))
    );
    assert_eq!(
        front("GET", "/v1/sources/a/parked/t?limit=5").unwrap(),
        FrontRoute::Source(s("a"), relay(SourceOp::ParkedRows { target: s("t"), after: 0, limit: 5 }))
    );
    assert_eq!(
        front("GET", "/v1/targets/t/keys?prefix=a%20b").unwrap(),
        FrontRoute::Target(
            s("t"),
            TargetRoute::Relay(TargetOp::Keys {
                prefix: "a b".into(),
                after: String::new(),
                limit: MAX_KEYS_PER_PAGE
            })
        )
    );
    assert_eq!(
        front("POST", "/v1/sources/a/faults").unwrap(),
        FrontRoute::Source(s("a"), SourceRoute::Faults)
    );
    assert_eq!(
        front("GET", "/v1/targets/t/log?source=a").unwrap(),
        FrontRoute::Target(s("t"), TargetRoute::Log(s("a")))
    );
}

#[test]
fn the_directory_pages_at_its_limit_and_its_operations_round_trip() {
    assert_eq!(
        front("GET", "/v1/sources").unwrap(),
        FrontRoute::Sources { after: None, limit: MAX_SOURCES_PER_PAGE }
    );
    assert_eq!(
        front("GET", "/v1/sources?after=b&limit=100").unwrap(),
        FrontRoute::Sources { after: Some(s("b")), limit: 100 }
    );
    assert_eq!(code("GET", "/v1/sources?limit=101"), "invalid_limit");
    assert_eq!(code("GET", "/v1/sources?limit=0"), "invalid_limit");
    assert_eq!(code("GET", "/v1/sources?after=a%2Fb"), "invalid_query");
    assert_eq!(code("POST", "/v1/sources"), "no_route");
    assert_eq!(
        front("POST", "/v1/sources/a/retire").unwrap(),
        FrontRoute::Source(s("a"), SourceRoute::Retire)
    );
    assert_eq!(
        front("GET", "/v1/sources/a/alarms").unwrap(),
        FrontRoute::Source(s("a"), SourceRoute::Alarms)
    );
    for op in [
        DirectoryOp::Register(s("a")),
        DirectoryOp::Retire(s("a")),
        DirectoryOp::List { after: None, limit: 1 },
        DirectoryOp::List { after: Some(s("x:y")), limit: 100 },
    ] {
        let (method, path) = op.request();
        let url = Url::parse(&format!("https://d{path}")).unwrap();
        assert_eq!(DirectoryOp::from_url(method, &url).unwrap(), op);
    }
}

/// Every front-door route, by request line, with the scope it needs.
const SCOPES: &[(&str, &str, Scope)] = &[
    ("POST", "/v1/sources/a/enqueue", Scope::Producer),
    ("GET", "/v1/health", Scope::Reader),
    ("GET", "/v1/sources?limit=5", Scope::Reader),
    ("GET", "/v1/sources/a/status", Scope::Reader),
    ("GET", "/v1/sources/a/watermark", Scope::Reader),
    ("GET", "/v1/sources/a/delivered-through/7", Scope::Reader),
    ("GET", "/v1/sources/a/parked", Scope::Reader),
    ("GET", "/v1/sources/a/parked/t?after=3", Scope::Reader),
    ("GET", "/v1/sources/a/queued?target=t", Scope::Reader),
    ("GET", "/v1/sources/a/alarms", Scope::Reader),
    ("GET", "/v1/targets/t/status", Scope::Reader),
    ("GET", "/v1/targets/t/keys?prefix=k", Scope::Reader),
    ("GET", "/v1/targets/t/watermarks", Scope::Reader),
    ("POST", "/v1/sources/a/parked/t/redrive", Scope::Operator),
    ("POST", "/v1/sources/a/parked/t/discard", Scope::Operator),
    ("POST", "/v1/sources/a/rearm", Scope::Operator),
    ("POST", "/v1/sources/a/retire", Scope::Operator),
    ("DELETE", "/v1/targets/t/watermarks/a", Scope::Operator),
    ("POST", "/v1/sources/a/faults", Scope::Operator),
    ("GET", "/v1/sources/a/audit", Scope::Operator),
    ("POST", "/v1/sources/a/conformance", Scope::Operator),
    ("POST", "/v1/targets/t/faults", Scope::Operator),
    ("GET", "/v1/targets/t/log?source=a", Scope::Operator),
    ("GET", "/v1/targets/t/audit", Scope::Operator),
];

#[test]
fn every_front_route_needs_its_scope() {
    for (method, path, scope) in SCOPES {
        assert_eq!(front(method, path).unwrap().scope(), *scope, "{method} {path}");
    }
}

#[test]
fn the_scope_table_covers_every_route_variant() {
    // One request line per variant: a variant added without a line here
    // leaves its name out of this set.
    use std::mem::discriminant as d;
    let variant = |route: FrontRoute| match route {
        FrontRoute::Source(_, SourceRoute::Relay(op)) => format!("source op {:?}", d(&op)),
        FrontRoute::Source(_, route) => format!("source route {:?}", d(&route)),
        FrontRoute::Target(_, TargetRoute::Relay(op)) => format!("target op {:?}", d(&op)),
        FrontRoute::Target(_, route) => format!("target route {:?}", d(&route)),
        other => format!("{:?}", d(&other)),
    };
    let variants: std::collections::BTreeSet<String> =
        SCOPES.iter().map(|(m, p, _)| variant(front(m, p).unwrap())).collect();
    assert_eq!(variants.len(), SCOPES.len(), "each line a different route: {variants:?}");
    let sources = SCOPES.iter().filter(|(_, p, _)| p.starts_with("/v1/sources/a/")).count();
    let targets = SCOPES.iter().filter(|(_, p, _)| p.starts_with("/v1/targets/")).count();
    let public = |table: &[durable_relay::protocol::Operation]| {
        table.iter().filter(|o| o.reach == Reach::Public).count()
    };
    // The source's own routes beyond the protocol: alarms, retire, faults, audit, conformance.
    assert_eq!(sources, public(durable_relay::protocol::SOURCE_OPERATIONS) + 5);
    // The target's own: faults, log, audit.
    assert_eq!(targets, public(durable_relay::protocol::TARGET_OPERATIONS) + 3);
}

#[test]
fn the_steps_the_front_door_refuses_still_need_an_operator() {
    let layout = durable_relay::core::Layout::Count(2);
    let steps = [
        SourceOp::Prepare,
        SourceOp::Activate,
        SourceOp::RecordKey,
        SourceOp::Seal,
        SourceOp::PlainKey,
        SourceOp::Settling(layout),
    ];
    for op in steps {
        assert_eq!(FrontRoute::Source(s("a"), relay(op)).scope(), Scope::Operator);
    }
    assert_eq!(FrontRoute::Target(s("t"), TargetRoute::Relay(TargetOp::Apply)).scope(), Scope::Operator);
}

#[test]
fn an_operator_reads_but_neither_enqueues_nor_lends_its_rights() {
    use Scope::{Operator, Producer, Reader};
    let covered: Vec<(Scope, Scope)> = Scope::ALL
        .iter()
        .flat_map(|held| Scope::ALL.iter().map(move |needed| (*held, *needed)))
        .filter(|(held, needed)| held.covers(*needed))
        .collect();
    assert_eq!(
        covered,
        vec![(Producer, Producer), (Reader, Reader), (Operator, Reader), (Operator, Operator)]
    );
}

#[test]
fn only_the_exact_console_files_are_open() {
    let asset = |m: &str, p: &str| ConsoleAsset::from_url(m, &Url::parse(&format!("https://r{p}")).unwrap());
    assert_eq!(asset("GET", "/"), Some(ConsoleAsset::Page));
    assert_eq!(asset("GET", "/console.js"), Some(ConsoleAsset::Script));
    assert_eq!(asset("GET", "/console.css"), Some(ConsoleAsset::Style));
    assert_eq!(asset("POST", "/"), None);
    assert_eq!(asset("GET", "/?token=x"), None);
    assert_eq!(asset("GET", "/console.js/x"), None);
    assert_eq!(asset("GET", "/v1/health"), None);
}

#[test]
fn bad_request_lines_get_their_codes() {
    assert_eq!(code("GET", "/v1/sources/a/enqueue"), "no_route");
    assert_eq!(code("POST", "/v1/targets/t/apply"), "no_route", "apply is for sources only");
    assert_eq!(code("POST", "/v1/sources/a:1/adopt"), "no_route", "adoption is for routers only");
    assert_eq!(code("POST", "/v1/sources/a:1/claim"), "no_route", "claims are for routers only");
    assert_eq!(code("GET", "/v1/sources/a%2Fb/status"), "invalid_name");
    assert_eq!(code("GET", "/v1/sources/a%zz/status"), "invalid_name", "a bad escape stays as sent");
    assert_eq!(code("GET", "/v1/sources/a/delivered-through/9007199254740992"), "invalid_seq");
    assert_eq!(code("GET", "/v1/sources/a/alarms?x=1"), "invalid_query");
    assert_eq!(code("POST", "/v1/sources/a/faults?x=1"), "invalid_query");
    assert_eq!(code("GET", "/v1/targets/t/log"), "invalid_query", "the log needs its source");
    assert_eq!(code("GET", "/v1/targets/t/log?source=a%2Fb"), "invalid_name");
    let endpoint = front("GET", "/v1/targets/endpoint%3Ahook/watermarks").unwrap_err();
    assert_eq!((endpoint.status, endpoint.code), (404, ErrorCode::NoRoute), "an endpoint is no object");
    assert!(endpoint.message.contains("endpoint:hook is an HTTPS endpoint"), "{}", endpoint.message);
    assert_eq!(code("POST", "/v1/targets/endpoint:hook/faults"), "no_route");
    assert_eq!(
        front("GET", "/v1/sources/x%3A1/status").unwrap(),
        FrontRoute::Source(s("x:1"), relay(SourceOp::Status))
    );
}

#[test]
fn every_route_survives_its_trip_to_the_object() {
    let sources = [
        SourceRoute::Alarms,
        SourceRoute::Retire,
        SourceRoute::Faults,
        SourceRoute::Audit,
        SourceRoute::Conformance,
        relay(SourceOp::Status),
    ];
    for route in sources {
        let url = Url::parse(&format!("https://relay{}", route.path())).unwrap();
        assert_eq!(SourceRoute::from_url(route.method(), &url).unwrap(), route);
    }
    let targets = [
        TargetRoute::Faults,
        TargetRoute::Log(s("a:b")),
        TargetRoute::Audit,
        TargetRoute::Relay(TargetOp::Watermarks { after: None, limit: 3 }),
        TargetRoute::Relay(TargetOp::Watermarks {
            after: Some(durable_relay::routes::WatermarkCursor::parse("a:b").unwrap()),
            limit: 500,
        }),
    ];
    for route in targets {
        let url = Url::parse(&format!("https://relay{}", route.path())).unwrap();
        assert_eq!(TargetRoute::from_url(route.method(), &url).unwrap(), route);
    }
}
