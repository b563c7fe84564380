//! Native benchmark of the relay core's plan-and-settle cost per row: the
//! CPU an alarm spends in the engine, without storage or network.
//!
//! One measured fire is everything the DO shell asks of the core between
//! reading the window and writing the checkpoint: `begin`, cutting the
//! window, decoding and grouping its rows (`Fire::new`), handing out calls,
//! encoding each call's body, recording its outcome (every call succeeds),
//! and `settle`. Row bodies are built before the clock starts, as the shell
//! reads them from SQLite.
//!
//! Shapes (the workloads of `npm run bench`, one fire each):
//! - `one-target`: a full window (1,024 rows) to one target, Free budget
//!   (two 512-row batches): W2.
//! - `interleaved-64`: a full window round-robin over 64 targets (W3), Free
//!   budget (8 targets) and Paid budget (32 targets).
//! - `distinct`: a full window of distinct targets (W1), Free and Paid.
//!
//! Reports ns per delivered row (what a drained row costs) and per
//! inspected row (what reading the window costs), and delivered rows per
//! millisecond of CPU, a figure to hold against an invocation's CPU limit.
//!
//! It also drains each workload as a backlog (every row enqueued before
//! the first alarm) in the deterministic simulator, under each budget the
//! bench compares, and reports alarms and target calls: what the relay
//! does when it is behind, as opposed to `npm run bench`, where delivery
//! starts with the first enqueue.
//!
//! And it times a whole Free alarm that fills its budget (16 targets, 512
//! rows: 8 targets a fire, two fires, 32 rows a target) through the
//! simulator: the shipped driver and SQL on native SQLite, with the
//! targets' applies (also SQLite) inside the time; a figure to hold
//! against the Free plan's 10 ms of CPU per invocation.
//!
//! cargo run --release --features sim --example core_bench [-- --quick] [--json]

use std::collections::BTreeMap;
use std::hint::black_box;
use std::time::{Duration, Instant};

use durable_relay_sql::core::{
    begin, encode_request, CallOutcome, Effects, EnqueueRow, Fire, FireStart, JsonValue, Name, RelayBudget,
    RelayPolicy, StoredRow, MAX_ROWS_PER_ENQUEUE,
};
use durable_relay_sql::sim::Sim;

/// Time each shape runs for (after one warm-up fire).
const MEASURE_FOR: Duration = Duration::from_millis(400);
/// Time each shape runs for under `--quick`.
const MEASURE_FOR_QUICK: Duration = Duration::from_millis(40);
/// Alarms a simulated backlog drain may take before it counts as stuck.
const SIM_MAX_ALARMS: u32 = 100_000;
/// The simulator's seed (the drains here make no random choices that
/// change the counts; the seed only fixes tie-breaks).
const SIM_SEED: u64 = 5;

/// The largest Free budget that keeps every alarm within 50 subrequests,
/// as the bench configures it (bench/workloads.mjs `FREE_50`).
const FREE_50: RelayBudget = RelayBudget {
    targets_per_fire: 25,
    fires_per_alarm: 2,
    calls_per_target: 2,
    subrequests_per_alarm: 50,
    ..RelayBudget::FREE
};

/// One source's backlog, as the bench sends it: `targets` targets,
/// `rows_per_pair` rows each, round-robin.
struct Backlog {
    workload: &'static str,
    targets: u32,
    rows_per_pair: u32,
}

/// Simulated backlog drain of one source.
struct Drain {
    workload: &'static str,
    budget: &'static str,
    rows: u64,
    alarms: u32,
    fires: u32,
    calls: u32,
    max_calls_per_alarm: u32,
}

/// Targets of the Free backlog: the Free preset's 8 targets a fire, two fires.
const FREE_ALARM_TARGETS: u64 = 16;
/// Rows of the Free backlog: two fires of the preset's 256 rows, more than
/// one Free alarm's work budget reads, so the alarm timed is a full one.
const FREE_ALARM_ROWS: u64 = 512;

/// A full Free alarm timed natively: (rows delivered, median µs per alarm,
/// alarms timed). Each run enqueues a fresh backlog untimed, then times its
/// first alarm, which its work budget ends.
fn free_alarm(runs: u32) -> (u64, f64, u32) {
    let mut times = Vec::new();
    let mut delivered = 0;
    for run in 0..runs {
        let mut sim = Sim::new(SIM_SEED + u64::from(run));
        let rows: Vec<EnqueueRow> = (0..FREE_ALARM_ROWS)
            .map(|n| {
                let target = Name::new(format!("t{}", n % FREE_ALARM_TARGETS)).expect("valid name");
                EnqueueRow::new(target, vec![(format!("k{n}"), serde_json::json!({ "i": n }))], vec![])
            })
            .collect();
        for chunk in rows.chunks(MAX_ROWS_PER_ENQUEUE as usize) {
            sim.enqueue("free-alarm", chunk.to_vec()).expect("valid rows");
        }
        let started = Instant::now();
        let report = black_box(sim.run_alarm("free-alarm", RelayBudget::FREE));
        times.push(started.elapsed().as_secs_f64() * 1e6);
        let summary = report.summary.expect("the alarm succeeds");
        delivered = u64::from(summary.rows_delivered);
        assert!(
            summary.cpu_cut && delivered > 0,
            "a full Free alarm: {delivered} rows, cut {}",
            summary.cpu_cut
        );
    }
    times.sort_by(f64::total_cmp);
    (delivered, times[times.len() / 2], runs)
}

fn drain(backlog: &Backlog, budget_name: &'static str, budget: RelayBudget) -> Drain {
    let mut sim = Sim::new(SIM_SEED);
    let mut rows = Vec::new();
    for r in 0..backlog.rows_per_pair {
        for t in 0..backlog.targets {
            let n = r * backlog.targets + t;
            rows.push(EnqueueRow::new(
                Name::new(format!("bench-t{t}")).expect("valid name"),
                vec![(format!("src-00.{n}"), serde_json::json!({ "i": n }))],
                vec![],
            ));
        }
    }
    let total = rows.len() as u64;
    for chunk in rows.chunks(MAX_ROWS_PER_ENQUEUE as usize) {
        sim.enqueue("src-00", chunk.to_vec()).expect("valid rows");
    }
    let report = sim.run_until_idle("src-00", budget, SIM_MAX_ALARMS);
    assert!(report.drained, "{} did not drain", backlog.workload);
    sim.audit().expect("the simulated drain keeps the relay's invariants");
    Drain {
        workload: backlog.workload,
        budget: budget_name,
        rows: total,
        alarms: report.alarms,
        fires: report.fires,
        calls: report.calls,
        max_calls_per_alarm: report.max_calls_per_alarm,
    }
}

struct Shape {
    name: &'static str,
    budget_name: &'static str,
    budget: RelayBudget,
    /// Target of row `i` (0-based), as an index.
    target_of: fn(u64) -> u64,
}

struct Result {
    name: &'static str,
    budget: &'static str,
    fires: u64,
    inspected_per_fire: u64,
    delivered_per_fire: u64,
    calls_per_fire: u64,
    ns_per_fire: f64,
}

/// A window of rows `1..=rows`, each putting one small key, as the bench
/// workloads enqueue them.
fn window(rows: u64, target_of: fn(u64) -> u64) -> Vec<StoredRow> {
    (1..=rows)
        .map(|seq| {
            let effects = Effects {
                puts: vec![(
                    format!("src-00.{seq}"),
                    JsonValue::from_value(&serde_json::json!({ "i": seq, "s": "src-00" })),
                )],
                deletes: vec![],
                trace: None,
            };
            StoredRow {
                seq,
                target: format!("bench-t{}", target_of(seq - 1)),
                at_ms: 1_000,
                due_ms: 0,
                body: effects.encode().expect("valid row"),
            }
        })
        .collect()
}

/// One fire over `rows`; returns (inspected, delivered, calls).
fn fire(source: &Name, budget: RelayBudget, rows: &[StoredRow]) -> (u64, u64, u64) {
    let os = rows.last().map_or(0, |r| r.seq);
    let begun = begin(FireStart {
        source: source.clone(),
        os,
        rs_text: None,
        now_ms: 2_000,
        budget,
        calls_left: budget.calls_per_alarm(),
        policy: RelayPolicy::default(),
        failing: BTreeMap::new(),
        batched_endpoints: Default::default(),
    })
    .expect("the benchmark's budgets are valid");
    let probe = (begun.window.probe_rows() as usize).min(rows.len());
    let sizes: Vec<(u64, u32)> = rows[..probe].iter().map(|r| (r.seq, r.body.len() as u32)).collect();
    let (take, exhausted) = begun.window.take(&sizes);
    let mut fire = Fire::new(begun, &rows[..take], exhausted);
    let mut calls_made = 0;
    let id = durable_relay_sql::core::SourceId::derive("bench", source.as_str());
    loop {
        let calls = fire.next_calls();
        if calls.is_empty() {
            break;
        }
        for call in &calls {
            black_box(encode_request(source, &id, call, fire.rows()));
        }
        for call in &calls {
            let last = *call.seqs.last().expect("calls are never empty");
            let outcome = CallOutcome::Applied { watermark: last, applied: call.seqs.len() as u32 };
            fire.record(call, outcome);
        }
        calls_made += calls.len() as u64;
    }
    let settlement = fire.settle();
    let report = black_box(settlement).report;
    (u64::from(report.window_rows), u64::from(report.rows_delivered), calls_made)
}

fn measure(shape: &Shape, measure_for: Duration) -> Result {
    let source = Name::new("src-00").expect("valid name");
    let rows = window(u64::from(shape.budget.window_rows()), shape.target_of);
    let (inspected, delivered, calls) = fire(&source, shape.budget, &rows);
    let started = Instant::now();
    let mut fires = 0u64;
    while started.elapsed() < measure_for {
        black_box(fire(&source, shape.budget, black_box(&rows)));
        fires += 1;
    }
    let elapsed = started.elapsed();
    Result {
        name: shape.name,
        budget: shape.budget_name,
        fires,
        inspected_per_fire: inspected,
        delivered_per_fire: delivered,
        calls_per_fire: calls,
        ns_per_fire: elapsed.as_nanos() as f64 / fires as f64,
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let quick = args.iter().any(|a| a == "--quick");
    let as_json = args.iter().any(|a| a == "--json");
    let measure_for = if quick { MEASURE_FOR_QUICK } else { MEASURE_FOR };
    let results: Vec<Result> = shapes().iter().map(|s| measure(s, measure_for)).collect();
    let drains = drains();
    let alarm = free_alarm(if quick { 3 } else { 21 });
    if as_json {
        print_json(&results, &drains, alarm);
    } else {
        print_table(&results, &drains, alarm);
    }
}

/// The fire shapes measured: one target, interleaved, all distinct.
fn shapes() -> [Shape; 5] {
    [
        Shape { name: "one-target", budget_name: "free", budget: RelayBudget::FREE, target_of: |_| 0 },
        Shape {
            name: "interleaved-64",
            budget_name: "free",
            budget: RelayBudget::FREE,
            target_of: |i| i % 64,
        },
        Shape {
            name: "interleaved-64",
            budget_name: "paid",
            budget: RelayBudget::PAID,
            target_of: |i| i % 64,
        },
        Shape { name: "distinct", budget_name: "free", budget: RelayBudget::FREE, target_of: |i| i },
        Shape { name: "distinct", budget_name: "paid", budget: RelayBudget::PAID, target_of: |i| i },
    ]
}

/// Every benchmark backlog drained under every budget.
fn drains() -> Vec<Drain> {
    let backlogs = [
        Backlog { workload: "W1", targets: 4_096, rows_per_pair: 1 },
        Backlog { workload: "W2", targets: 1, rows_per_pair: 10_000 },
        Backlog { workload: "W3 (one of its 16 sources)", targets: 64, rows_per_pair: 20 },
    ];
    let budgets = [("free", RelayBudget::FREE), ("free-50", FREE_50), ("paid", RelayBudget::PAID)];
    backlogs.iter().flat_map(|b| budgets.iter().map(move |(n, budget)| drain(b, n, *budget))).collect()
}

/// A full Free alarm's figures: rows delivered, median microseconds, runs.
type FreeAlarm = (u64, f64, u32);

fn print_json(results: &[Result], drains: &[Drain], (alarm_rows, alarm_us, alarm_runs): FreeAlarm) {
    let out: Vec<serde_json::Value> = results
        .iter()
        .map(|r| {
            serde_json::json!({
                "shape": r.name,
                "budget": r.budget,
                "fires_measured": r.fires,
                "inspected_rows_per_fire": r.inspected_per_fire,
                "delivered_rows_per_fire": r.delivered_per_fire,
                "calls_per_fire": r.calls_per_fire,
                "ns_per_fire": r.ns_per_fire.round(),
                "ns_per_delivered_row": (r.ns_per_fire / r.delivered_per_fire as f64).round(),
                "ns_per_inspected_row": (r.ns_per_fire / r.inspected_per_fire as f64).round(),
                "delivered_rows_per_cpu_ms": (1e6 * r.delivered_per_fire as f64 / r.ns_per_fire).round(),
            })
        })
        .collect();
    let backlog: Vec<serde_json::Value> = drains
        .iter()
        .map(|d| {
            serde_json::json!({
                "workload": d.workload,
                "budget": d.budget,
                "rows": d.rows,
                "alarms": d.alarms,
                "fires": d.fires,
                "target_calls": d.calls,
                "target_calls_per_row": d.calls as f64 / d.rows as f64,
                "max_calls_per_alarm": d.max_calls_per_alarm,
            })
        })
        .collect();
    let free_alarm = serde_json::json!({
        "targets": FREE_ALARM_TARGETS, "rows_delivered": alarm_rows,
        "median_us": alarm_us.round(), "runs": alarm_runs,
    });
    println!("{}", serde_json::json!({"core": out, "backlog": backlog, "free_alarm": free_alarm}));
}

fn print_table(results: &[Result], drains: &[Drain], (alarm_rows, alarm_us, alarm_runs): FreeAlarm) {
    println!(
        "{:<16} {:<6} {:>9} {:>9} {:>6} {:>12} {:>14} {:>14} {:>12}",
        "shape",
        "budget",
        "inspected",
        "delivered",
        "calls",
        "us/fire",
        "ns/delivered",
        "ns/inspected",
        "rows/cpu-ms"
    );
    for r in results {
        println!(
            "{:<16} {:<6} {:>9} {:>9} {:>6} {:>12.1} {:>14.0} {:>14.0} {:>12.0}",
            r.name,
            r.budget,
            r.inspected_per_fire,
            r.delivered_per_fire,
            r.calls_per_fire,
            r.ns_per_fire / 1e3,
            r.ns_per_fire / r.delivered_per_fire as f64,
            r.ns_per_fire / r.inspected_per_fire as f64,
            1e6 * r.delivered_per_fire as f64 / r.ns_per_fire
        );
    }
    println!(
        "\nbacklog drains (simulator): {:<28} {:<8} {:>7} {:>7} {:>6} {:>7} {:>10}",
        "workload", "budget", "rows", "alarms", "fires", "calls", "max/alarm"
    );
    for d in drains {
        println!(
            "                             {:<28} {:<8} {:>7} {:>7} {:>6} {:>7} {:>10}",
            d.workload, d.budget, d.rows, d.alarms, d.fires, d.calls, d.max_calls_per_alarm
        );
    }
    println!(
        "\na full Free alarm (simulator, native SQLite, targets' applies included): {alarm_rows} rows to \
         {FREE_ALARM_TARGETS} targets in {:.2} ms (median of {alarm_runs})",
        alarm_us / 1e3
    );
}
