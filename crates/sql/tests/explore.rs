//! The sequence explorer over the partition protocol (see
//! `durable_relay_sql::sim::explore`): every sequence of sends, retries, router
//! steps, crashes, late calls, deploys and alarms that strays from the plain
//! schedule in at most the bound's number of choices, over the shipped
//! router, objects and SQL. `scripts/test` runs the quick bound (2);
//! `RELAY_EXPLORE=deep` runs the deep one (3); `RELAY_EXPLORE=N` any other.
//! A failing sequence prints a `RELAY_EXPLORE_REPLAY=scenario:choices` line;
//! with it set, the scenario's test runs that sequence alone and prints its
//! script.

use std::io::Write;

use durable_relay_sql::sim::explore::{explore, replay, scenarios, Bounds};

/// Sequences one scenario may run before the test calls the bound too wide.
const SEQUENCES_MAX: u64 = 50_000_000;

fn bounds() -> (Bounds, String) {
    match std::env::var("RELAY_EXPLORE").as_deref() {
        Ok("deep") => (Bounds::DEEP, "deep".into()),
        Ok(n) => match n.parse() {
            Ok(deviations) => (Bounds { deviations }, format!("{deviations} deviations")),
            Err(_) => panic!("RELAY_EXPLORE is deep or a number of deviations, not {n:?}"),
        },
        Err(_) => (Bounds::QUICK, "quick".into()),
    }
}

/// Explores scenario `name` within the bounds (or replays the sequence
/// `RELAY_EXPLORE_REPLAY` names, when it names this scenario).
fn explore_scenario(name: &str) {
    let scenario = scenarios().into_iter().find(|s| s.name == name).expect("a scenario of that name");
    let (bounds, which) = bounds();
    if let Ok(line) = std::env::var("RELAY_EXPLORE_REPLAY") {
        let (wanted, choices) = line.split_once(':').expect("RELAY_EXPLORE_REPLAY=scenario:choices");
        if wanted != name {
            return;
        }
        let choices: Vec<usize> =
            choices.split(',').filter(|c| !c.is_empty()).map(|c| c.parse().expect("a choice")).collect();
        match replay(&scenario, &bounds, &choices) {
            Ok(script) => println!("{script}"),
            Err(breach) => panic!("{breach}"),
        }
        return;
    }
    let started = std::time::Instant::now();
    let found = explore(&scenario, &bounds, SEQUENCES_MAX);
    let _ = writeln!(
        std::io::stderr(),
        "explore {name} ({which}): {} sequences, the longest {} actions, {:.1} s",
        found.sequences,
        found.longest,
        started.elapsed().as_secs_f64()
    );
    if let Some(breach) = found.breach {
        panic!("{breach}");
    }
    assert!(found.sequences < SEQUENCES_MAX, "{name}: the bound allows too many sequences");
    assert!(found.sequences > 100, "{name}: the bound allows almost no deviation");
}

#[test]
fn every_sequence_of_a_grow_keeps_every_promise() {
    explore_scenario("grow");
}

#[test]
fn every_sequence_of_a_second_change_before_settling_keeps_every_promise() {
    explore_scenario("second-change-before-settling");
}

#[test]
fn every_sequence_of_a_change_that_skips_a_layout_keeps_every_promise() {
    explore_scenario("a-layout-skipped");
}

#[test]
fn every_sequence_of_a_plain_source_becoming_partitioned_keeps_every_promise() {
    explore_scenario("plain-to-partitioned");
}

#[test]
fn every_sequence_of_a_partitioned_source_becoming_plain_keeps_every_promise() {
    explore_scenario("partitioned-to-plain");
}

#[test]
fn every_scenario_has_its_test() {
    let named = [
        "grow",
        "second-change-before-settling",
        "a-layout-skipped",
        "plain-to-partitioned",
        "partitioned-to-plain",
    ];
    let all: Vec<&str> = scenarios().iter().map(|s| s.name).collect();
    assert_eq!(all, named, "a new scenario needs its test here");
}
