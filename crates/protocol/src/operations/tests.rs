//! Every declared operation, with generated values in its path and query,
//! parses back from the path it builds to itself, and builds the path its
//! template names. The seed is printed; `RELAY_FUZZ_SEED=<seed>` replays a
//! run.

use std::time::{SystemTime, UNIX_EPOCH};

use url::Url;

use super::*;
use crate::params::samples::Rng;

/// Rounds per run: each builds one operation of every kind.
const ROUNDS: u32 = 2_000;

fn seed() -> u64 {
    let seed = std::env::var("RELAY_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64));
    eprintln!("operations round trip: seed {seed} (replay with RELAY_FUZZ_SEED={seed})");
    seed
}

fn url(path: &str) -> Url {
    Url::parse(&format!("https://relay{path}")).unwrap()
}

/// Whether `path` has the template's literal segments, a non-empty segment
/// for each `{name}`, and the template's query parameters in its order (a
/// parameter may be left out).
fn fits(template: &str, path: &str) -> bool {
    let (t_path, t_query) = template.split_once('?').unwrap_or((template, ""));
    let (p_path, p_query) = path.split_once('?').unwrap_or((path, ""));
    let t: Vec<&str> = t_path.split('/').collect();
    let p: Vec<&str> = p_path.split('/').collect();
    let segments_fit =
        t.len() == p.len() && t.iter().zip(&p).all(|(t, p)| (t.starts_with('{') && !p.is_empty()) || t == p);
    let mut keys = t_query.split('&');
    let query_fits = p_query
        .split('&')
        .filter(|kv| !kv.is_empty())
        .all(|kv| keys.any(|k| Some(k) == kv.split('=').next()));
    segments_fit && query_fits
}

#[test]
fn every_operation_parses_back_from_the_path_it_builds() {
    let seed = seed();
    let mut rng = Rng::new(seed);
    for _ in 0..ROUNDS {
        let sources = SourceOp::samples(&mut rng);
        assert_eq!(sources.len(), SOURCE_OPERATIONS.len(), "one sample per source operation");
        for op in sources {
            let (path, entry) = (op.path(), op.operation());
            assert!(fits(entry.path, &path), "{path} does not fit {} (seed {seed})", entry.path);
            let back = SourceOp::from_url(op.method(), &url(&path));
            assert_eq!(back, Ok(op), "{path} (seed {seed})");
        }
        let targets = TargetOp::samples(&mut rng);
        assert_eq!(targets.len(), TARGET_OPERATIONS.len(), "one sample per target operation");
        for op in targets {
            let (path, entry) = (op.path(), op.operation());
            assert!(fits(entry.path, &path), "{path} does not fit {} (seed {seed})", entry.path);
            let back = TargetOp::from_url(op.method(), &url(&path));
            assert_eq!(back, Ok(op), "{path} (seed {seed})");
        }
    }
}

#[test]
fn the_templates_are_the_declared_paths() {
    let templates: Vec<(&str, &str)> =
        SOURCE_OPERATIONS.iter().chain(TARGET_OPERATIONS).map(|o| (o.name, o.path)).collect();
    assert!(templates.contains(&("parked_rows", "/parked/{target}?after&limit")));
    assert!(templates.contains(&("keys", "/keys?prefix&after&limit")));
    assert!(templates.contains(&("forget_watermark", "/watermarks/{source}")));
    assert!(templates.contains(&("enqueue", "/enqueue")));
}

#[test]
fn each_operations_parameters_are_its_templates_in_the_order_a_call_passes_them() {
    let tables = [SourceOp::parameters(), TargetOp::parameters()];
    for (op, params) in tables.iter().flatten() {
        let (path, query) = op.path.split_once('?').unwrap_or((op.path, ""));
        let in_path = path.split('/').filter_map(|s| s.strip_prefix('{')?.strip_suffix('}'));
        let in_query = query.split('&').filter(|q| !q.is_empty());
        let template: Vec<(&str, Place)> =
            in_path.map(|n| (n, Place::Path)).chain(in_query.map(|n| (n, Place::Query))).collect();
        let declared: Vec<(&str, Place)> = params.iter().map(|p| (p.name, p.place)).collect();
        assert_eq!(declared, template, "{}", op.name);
        for param in params {
            assert!(["string", "number"].contains(&param.ts), "{}: {}", op.name, param.ts);
            assert_eq!(
                param.max.is_some(),
                param.name == "limit",
                "{}: only a page's limit has a maximum",
                op.name
            );
        }
    }
    let listed: Vec<&str> = tables.iter().flatten().map(|(op, _)| op.name).collect();
    let table: Vec<&str> = SOURCE_OPERATIONS.iter().chain(TARGET_OPERATIONS).map(|op| op.name).collect();
    assert_eq!(listed, table, "every operation, in the table's order");
}
