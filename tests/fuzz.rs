//! Generated request lines against the reference Worker's own routes: the
//! front door, the source and target objects' extra operations, the
//! directory and the console. None may panic; each refusal is a 4xx; each
//! accepted route, forwarded to its object, parses there to the same route.
//! The seed is printed; `RELAY_FUZZ_SEED=<seed>` replays a run.

use durable_relay::protocol::Refusal;
use durable_relay_worker::routes::{ConsoleAsset, DirectoryOp, FrontRoute, SourceRoute, TargetRoute};
use proptest::prelude::*;

#[path = "../crates/relay/tests/support/fuzz.rs"]
mod support;
use support::{fuzz, methods, query_text, request_url, segment};

fn reparses_at(path: &str) -> worker::Url {
    worker::Url::parse(&format!("https://relay{path}")).unwrap()
}

#[test]
fn generated_front_door_lines_route_or_get_a_4xx_and_survive_forwarding() {
    let strategy = (
        prop::sample::select(methods()),
        prop::collection::vec(segment(), 0..6),
        proptest::option::of(query_text()),
    );
    fuzz("front-door request lines", 6, 15_000, strategy, |(method, segs, query)| {
        let Some(url) = request_url(&segs, query.as_deref()) else { return Ok(()) };
        let check = |e: &Refusal| (400..500).contains(&e.status);
        match FrontRoute::parse(method, &url) {
            Ok(FrontRoute::Source(_, route)) => {
                prop_assert_eq!(route.method(), method);
                let inner = reparses_at(&route.path());
                prop_assert_eq!(
                    SourceRoute::from_url(method, &inner).ok(),
                    Some(route),
                    "forwarded path re-parses"
                );
            }
            Ok(FrontRoute::Target(_, route)) => {
                prop_assert_eq!(route.method(), method);
                let inner = reparses_at(&route.path());
                prop_assert_eq!(
                    TargetRoute::from_url(method, &inner).ok(),
                    Some(route),
                    "forwarded path re-parses"
                );
            }
            Ok(FrontRoute::Sources { after, limit }) => {
                let op = DirectoryOp::List { after, limit };
                let (m, path) = op.request();
                prop_assert_eq!(
                    DirectoryOp::from_url(m, &reparses_at(&path)).ok(),
                    Some(op),
                    "page re-parses"
                );
            }
            Ok(FrontRoute::Health) => {}
            Err(e) => prop_assert!(check(&e), "{} {}: {:?}", method, url, e),
        }
        match DirectoryOp::from_url(method, &url) {
            Ok(op) => {
                let (m, path) = op.request();
                prop_assert_eq!(DirectoryOp::from_url(m, &reparses_at(&path)).ok(), Some(op), "op re-parses");
            }
            Err(e) => prop_assert!(check(&e)),
        }
        if let Some(asset) = ConsoleAsset::from_url(method, &url) {
            prop_assert_eq!(method, "GET");
            prop_assert!(matches!(asset, ConsoleAsset::Page | ConsoleAsset::Script | ConsoleAsset::Style));
        }
        for e in [SourceRoute::from_url(method, &url).err(), TargetRoute::from_url(method, &url).err()]
            .into_iter()
            .flatten()
        {
            prop_assert!(check(&e), "{} {}: {:?}", method, url, e);
        }
        Ok(())
    });
}
