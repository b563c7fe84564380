//! Shared by the fuzz tests of the library and of the reference Worker
//! (each includes this file with `#[path]`): the seeded runner that prints
//! its seed, and the generators of request-line pieces.

#![allow(dead_code)]

use std::io::Write;

use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed, TestCaseError, TestRunner};

// ---- the runner ------------------------------------------------------------

pub fn base_seed() -> u64 {
    static SEED: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *SEED.get_or_init(|| {
        let seed = std::env::var("RELAY_FUZZ_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
            let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
            now.as_nanos() as u64
        });
        // Straight to stderr, past the test harness's capture, so every run
        // shows the seed that replays it.
        let _ = writeln!(std::io::stderr(), "fuzz: base seed {seed} (replay with RELAY_FUZZ_SEED={seed})");
        seed
    })
}

/// Runs `test` on `cases` inputs from `strategy`, seeded from the base seed
/// and `salt`, and fails with the seed and the (shrunk) input.
pub fn fuzz<S: Strategy>(
    name: &str,
    salt: u64,
    cases: u32,
    strategy: S,
    test: impl Fn(S::Value) -> Result<(), TestCaseError>,
) where
    S::Value: std::fmt::Debug,
{
    let scale: u32 = std::env::var("RELAY_FUZZ_SCALE").ok().and_then(|s| s.parse().ok()).unwrap_or(1);
    let seed = base_seed().wrapping_add(salt);
    let config = Config {
        cases: cases.saturating_mul(scale),
        rng_seed: RngSeed::Fixed(seed),
        failure_persistence: None,
        max_shrink_iters: 2_000,
        ..Config::default()
    };
    let mut runner = TestRunner::new(config);
    if let Err(e) = runner.run(&strategy, test) {
        panic!("{name}: {e}\n(base seed {}; replay with RELAY_FUZZ_SEED={})", base_seed(), base_seed());
    }
    let _ =
        writeln!(std::io::stderr(), "fuzz: {name}: {} generated cases passed", cases.saturating_mul(scale));
}

// ---- names and request lines ----------------------------------------------------

/// Names: mostly valid, some at and past the length limit, some of any characters.
pub fn target_name() -> impl Strategy<Value = String> {
    prop_oneof![
        8 => prop::collection::vec(prop::sample::select(vec!['a', 'b', 'Z', '0', '.', '_', ':', '-']), 1..12)
            .prop_map(|c| c.into_iter().collect()),
        1 => Just("t".repeat(64)),
        1 => Just("t".repeat(65)),
        1 => prop::collection::vec(any::<char>(), 0..6).prop_map(|c| c.into_iter().collect()),
    ]
}

/// One path segment: the routes' own words, names, escapes and noise.
pub fn segment() -> impl Strategy<Value = String> {
    let words = vec![
        "v1",
        "sources",
        "targets",
        "enqueue",
        "status",
        "watermark",
        "delivered-through",
        "parked",
        "redrive",
        "discard",
        "keys",
        "watermarks",
        "apply",
        "faults",
        "log",
        "health",
        "alarms",
        "retire",
        "console.js",
        "foreign-targets",
        "adopt",
        "claim",
        "x%3A1",
        "cust%3a9",
        "%3A",
        "%",
        "%%41",
        "64",
        "65",
        "0",
        "9007199254740991",
        "9007199254740992",
        "-1",
        "1e3",
        "..",
        ".",
        "%2F",
        "%00",
        "a%20b",
        "%C3%A9",
        "%FF",
    ];
    prop_oneof![
        4 => prop::sample::select(words).prop_map(str::to_owned),
        2 => target_name(),
        1 => prop::collection::vec(any::<char>(), 0..8).prop_map(|c| c.into_iter().collect()),
    ]
}

/// A query string over the routes' parameters and some others.
pub fn query_text() -> impl Strategy<Value = String> {
    let key =
        prop::sample::select(vec!["after", "limit", "prefix", "source", "seq", "x", "", "after", "limit"]);
    let value = prop_oneof![
        Just("0".to_owned()),
        Just("1".to_owned()),
        Just("500".to_owned()),
        Just("501".to_owned()),
        Just("1000".to_owned()),
        Just("9007199254740992".to_owned()),
        Just("-3".to_owned()),
        Just("%FF".to_owned()),
        (0usize..600).prop_map(|n| "k".repeat(n)),
        target_name(),
    ];
    prop::collection::vec((key, value), 0..4)
        .prop_map(|pairs| pairs.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join("&"))
}

/// A generated request line's URL, if the pieces make one.
pub fn request_url(segs: &[String], query: Option<&str>) -> Option<worker::Url> {
    let mut text = format!("https://relay.example/{}", segs.join("/"));
    if let Some(q) = query {
        text.push('?');
        text.push_str(q);
    }
    worker::Url::parse(&text).ok()
}

/// The methods generated request lines use.
pub fn methods() -> Vec<&'static str> {
    vec!["GET", "POST", "DELETE", "PUT", "PATCH", "HEAD", "OPTIONS", "get"]
}
