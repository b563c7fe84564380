//! Prints a readable delivery schedule from the simulator: one source, a
//! backlog to several targets, one target failing until it heals.
//!
//! cargo run --features sim --example schedule [-- free|paid] [seed]

use durable_relay_sql::core::{EnqueueRow, Name, RelayBudget};
use durable_relay_sql::sim::Sim;
use serde_json::json;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let budget = match args.first().map(String::as_str) {
        Some("paid") => RelayBudget::PAID,
        _ => RelayBudget::FREE,
    };
    let seed = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(1);
    let mut sim = Sim::new(seed);
    let targets: Vec<String> = (0..20).map(|i| format!("customer-{i:02}")).collect();
    for round in 0..3 {
        let rows = targets
            .iter()
            .map(|t| {
                EnqueueRow::new(
                    Name::new(t.as_str()).unwrap(),
                    vec![("balance".into(), json!(round))],
                    vec![],
                )
            })
            .collect();
        sim.enqueue("orders", rows).unwrap();
    }
    sim.fail_target("customer-03");
    println!(
        "seed {seed}; {} rows queued at source 'orders' for 20 targets; customer-03 is down",
        sim.queued("orders").len()
    );
    println!("budget: {budget:?}\n");
    let mut alarm = 0;
    while let Some(at) = sim.alarm_at("orders") {
        sim.advance(at.saturating_sub(sim.now_ms()));
        if alarm == 4 {
            println!("-- customer-03 heals --");
            sim.heal_target("customer-03");
        }
        alarm += 1;
        let report = sim.run_alarm("orders", budget);
        for (i, f) in report.fires.iter().enumerate() {
            let called: Vec<String> = f.calls.iter().map(|(t, n)| format!("{t}x{n}")).collect();
            let failed: Vec<&str> = f.report.failed.iter().map(|(t, _)| t.as_str()).collect();
            println!(
                "alarm {alarm} fire {}: calls {:>2}, applied {:>2}, delivered {:>2}, cursor {:>2}/{}, failed {:?}, retries {}, wake {:?}",
                i + 1,
                f.report.calls,
                f.report.rows_applied,
                f.report.rows_delivered,
                f.scan.cursor,
                f.scan.cycle_end,
                failed,
                f.report.retries,
                f.wake
            );
            if !called.is_empty() {
                println!("    called: {}", called.join(" "));
            }
        }
    }
    sim.audit().expect("invariants hold");
    println!(
        "\ndrained after {alarm} alarms; customer-03 applied {:?}",
        sim.applied("customer-03", "orders")
    );
}
