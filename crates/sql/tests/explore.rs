//! The sequence explorers, over the shipped router, objects and SQL: the
//! partition protocol's (see `durable_relay_sql::sim::explore`: every
//! sequence of sends, retries, router steps, crashes, late calls, deploys
//! and alarms) and the deliveries' (see `..::explore::deliveries`: every
//! interleaving of one source's enqueues, in-turn deliveries, alarm, target
//! calls answered, lost, timed out or late, and restarts), each straying
//! from the plain schedule in at most the bound's number of choices
//! (the deliveries', cheaper, one more). `scripts/test` runs the quick bound (2);
//! `RELAY_EXPLORE=deep` runs the deep one (3); `RELAY_EXPLORE=N` any other.
//! A failing sequence prints a `RELAY_EXPLORE_REPLAY=scenario:choices` line;
//! with it set, the scenario's test runs that sequence alone and prints its
//! script. The tests named for packed rows run their scenario with every
//! multi-row enqueue stored as one pack (`SourceConfig::pack_rows`).

use std::io::Write;

use durable_relay_sql::sim::explore::deliveries::{
    delivery_scenarios, explore_deliveries, replay_deliveries,
};
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

/// The choices `RELAY_EXPLORE_REPLAY` names for scenario `name`: none when
/// it is unset, `Some(None)` when it names another scenario (this test then
/// does nothing).
fn replay_choices(name: &str) -> Option<Option<Vec<usize>>> {
    let line = std::env::var("RELAY_EXPLORE_REPLAY").ok()?;
    let (wanted, choices) = line.split_once(':').expect("RELAY_EXPLORE_REPLAY=scenario:choices");
    if wanted != name {
        return Some(None);
    }
    Some(Some(choices.split(',').filter(|c| !c.is_empty()).map(|c| c.parse().expect("a choice")).collect()))
}

/// What one exploration found, whichever explorer ran.
struct Found {
    sequences: u64,
    longest: u64,
    breach: Option<String>,
}

/// Explores `name` with `explore` within the bounds (or replays the
/// sequence `RELAY_EXPLORE_REPLAY` names with `replay`, when it names this
/// scenario), and fails on a breach or a bound that allows too much or too
/// little.
fn explore_with(
    name: &str,
    explore: impl Fn(&Bounds) -> Found,
    replay: impl Fn(&Bounds, &[usize]) -> Result<String, String>,
) {
    let (bounds, which) = bounds();
    match replay_choices(name) {
        Some(None) => return,
        Some(Some(choices)) => {
            match replay(&bounds, &choices) {
                Ok(script) => println!("{script}"),
                Err(breach) => panic!("{breach}"),
            }
            return;
        }
        None => {}
    }
    let started = std::time::Instant::now();
    let found = explore(&bounds);
    let _ = writeln!(
        std::io::stderr(),
        "explore {name} ({which}): {} sequences, the longest {} steps, {:.1} s",
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

/// Explores the partition protocol's scenario `name`.
fn explore_scenario(name: &str) {
    let scenario = scenarios().into_iter().find(|s| s.name == name).expect("a scenario of that name");
    explore_with(
        name,
        |bounds| {
            let f = explore(&scenario, bounds, SEQUENCES_MAX);
            Found { sequences: f.sequences, longest: u64::from(f.longest), breach: f.breach }
        },
        |bounds, choices| replay(&scenario, bounds, choices),
    );
}

/// The deliveries' bound: one deviation past `bounds`, since a sequence
/// of one source is short and cheap (the quick bound runs in seconds).
fn deeper(bounds: &Bounds) -> Bounds {
    Bounds { deviations: bounds.deviations + 1 }
}

/// Explores the delivery scenario `name`: one source's enqueues, in-turn
/// deliveries, alarm, calls and restarts.
fn explore_deliveries_of(name: &str) {
    let scenario =
        delivery_scenarios().into_iter().find(|s| s.name == name).expect("a delivery scenario of that name");
    explore_with(
        name,
        |bounds| {
            let f = explore_deliveries(&scenario, &deeper(bounds), SEQUENCES_MAX);
            Found { sequences: f.sequences, longest: f.longest as u64, breach: f.breach }
        },
        |bounds, choices| replay_deliveries(&scenario, &deeper(bounds), choices),
    );
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

#[test]
fn every_interleaving_of_in_turn_deliveries_and_the_alarm_on_one_target_keeps_order_and_effect_once() {
    explore_deliveries_of("one-target-stream");
}

#[test]
fn every_interleaving_of_in_turn_deliveries_and_the_alarm_on_two_targets_keeps_order_and_effect_once() {
    explore_deliveries_of("two-targets");
}

#[test]
fn every_interleaving_of_deliveries_to_an_endpoint_beside_an_object_keeps_first_arrivals_in_order() {
    explore_deliveries_of("endpoint-beside-an-object");
}

#[test]
fn every_interleaving_of_a_target_older_than_ids_upgraded_mid_stream_applies_each_row_once() {
    explore_deliveries_of("a-target-older-than-ids-upgraded");
}

#[test]
fn every_interleaving_of_a_source_upgraded_and_rolled_back_around_ids_applies_each_row_once() {
    explore_deliveries_of("a-source-before-ids-upgraded-and-rolled-back");
}

#[test]
fn every_interleaving_of_deliveries_to_two_targets_from_packed_rows_keeps_order_and_effect_once() {
    durable_relay_sql::sim::Sim::set_pack_rows(true);
    explore_deliveries_of("two-targets");
}

#[test]
fn every_interleaving_of_packed_rows_to_an_endpoint_beside_an_object_keeps_first_arrivals_in_order() {
    durable_relay_sql::sim::Sim::set_pack_rows(true);
    explore_deliveries_of("endpoint-beside-an-object");
}

#[test]
fn every_sequence_of_a_grow_with_packed_rows_keeps_every_promise() {
    durable_relay_sql::sim::Sim::set_pack_rows(true);
    explore_scenario("grow");
}

#[test]
fn every_delivery_scenario_has_its_test() {
    let all: Vec<&str> = delivery_scenarios().iter().map(|s| s.name).collect();
    assert_eq!(
        all,
        [
            "one-target-stream",
            "two-targets",
            "endpoint-beside-an-object",
            "a-target-older-than-ids-upgraded",
            "a-source-before-ids-upgraded-and-rolled-back"
        ],
        "a new scenario needs its test here"
    );
}
