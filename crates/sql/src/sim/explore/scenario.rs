//! What the explorer explores: scenarios (configurations in deploy order,
//! requests, targets) and the bounds of a run.

use serde_json::json;

use crate::core::{home, Delay, EnqueueRow, Layout, PartitionMap};

/// A request a producer sends (and may send again, as is).
#[derive(Clone, Debug)]
pub struct Request {
    /// How scripts name it.
    pub label: String,
    /// Its idempotency key.
    pub key: Option<String>,
    /// Its rows: a target each, and a delay, ms.
    pub rows: Vec<(String, Option<u64>)>,
}

/// Every row's value: the request's number times this, plus the row's index.
pub(crate) const VALUE_STRIDE: u64 = 100;

impl Request {
    /// The rows of request `i`, each putting a value no other row puts.
    pub(crate) fn rows(&self, i: usize) -> Vec<EnqueueRow> {
        self.rows
            .iter()
            .enumerate()
            .map(|(k, (target, delay))| {
                let value = value_of(i, k);
                let row = EnqueueRow::to(crate::sim::name(target)).put("v", json!(value));
                match delay {
                    Some(ms) => row.delayed(Delay::For(*ms)),
                    None => row,
                }
            })
            .collect()
    }
}

/// The value row `k` of request `i` puts.
pub(crate) fn value_of(i: usize, k: usize) -> u64 {
    (i as u64 + 1) * VALUE_STRIDE + k as u64
}

/// The request and row a value came from.
pub(crate) fn row_of(value: u64) -> (usize, usize) {
    ((value / VALUE_STRIDE).saturating_sub(1) as usize, (value % VALUE_STRIDE) as usize)
}

/// One of the events a scenario scripts, in its order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// The next request is sent for the first time.
    Send,
    /// The next configuration is deployed.
    Deploy,
}

/// A logical source's life: its configurations, in the order an operator
/// deploys them (`None`: a plain source), what producers send, and the
/// order of those events in the plain schedule.
#[derive(Clone, Debug)]
pub struct Scenario {
    /// How it is named in scripts and replays.
    pub name: &'static str,
    /// The logical source.
    pub logical: &'static str,
    /// The configurations, in deploy order.
    pub configs: Vec<Option<PartitionMap>>,
    /// The requests, in the order they are first sent.
    pub requests: Vec<Request>,
    /// The plain schedule's events, in order: a `Send` per request and a
    /// `Deploy` per configuration after the first.
    pub script: Vec<Event>,
    /// Every target a request names.
    pub targets: Vec<String>,
}

impl Scenario {
    /// Configuration `i` as a script shows it.
    pub(crate) fn config_text(&self, i: usize) -> String {
        match self.configs.get(i) {
            Some(Some(map)) => serde_json::to_string(map).unwrap_or_default(),
            _ => "plain".into(),
        }
    }
}

/// How far a sequence may stray from the plain schedule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bounds {
    /// Choices other than the plain schedule's: crashes, another router's
    /// step, retries, alarms, late calls, events cutting in.
    pub deviations: u32,
}

impl Bounds {
    /// What `scripts/test` runs.
    pub const QUICK: Bounds = Bounds { deviations: 2 };
    /// Behind a flag (`RELAY_EXPLORE=deep`).
    pub const DEEP: Bounds = Bounds { deviations: 3 };
}

/// A target named `prefix…` whose home under each count is what `want`
/// accepts.
fn target(prefix: &str, want: impl Fn(&dyn Fn(u32) -> u32) -> bool) -> String {
    (0..)
        .map(|i| format!("{prefix}{i}"))
        .find(|t| {
            let n = crate::sim::name(t);
            want(&|c| home(&n, c))
        })
        .unwrap_or_default()
}

fn map(partitions: Layout, epoch: u64, from: &[Layout]) -> Option<PartitionMap> {
    Some(PartitionMap { partitions, epoch, from: from.to_vec() })
}

fn keyed(label: &str, key: &str, rows: &[(&str, Option<u64>)]) -> Request {
    let rows = rows.iter().map(|(t, d)| ((*t).to_owned(), *d)).collect();
    Request { label: label.into(), key: Some(key.into()), rows }
}

fn unkeyed(label: &str, rows: &[(&str, Option<u64>)]) -> Request {
    let rows = rows.iter().map(|(t, d)| ((*t).to_owned(), *d)).collect();
    Request { label: label.into(), key: None, rows }
}

/// Every scenario the explorer runs.
pub fn scenarios() -> Vec<Scenario> {
    use Event::{Deploy, Send};
    use Layout::{Count, Plain};
    let mover = target("m", |h| h(2) != h(3));
    let stayer = target("s", |h| h(2) == h(3));
    let wanderer = target("w", |h| h(3) != h(2) && h(2) != h(4) && h(3) != h(4));
    let requests = |m: &str, s: &str| {
        vec![
            keyed("k1: a moving target", "k1", &[(m, None)]),
            keyed("k2: a staying and a moving target, one delayed", "k2", &[(s, None), (m, Some(5_000))]),
            keyed("k1 again, other content", "k1", &[(s, None)]),
        ]
    };
    vec![
        Scenario {
            name: "grow",
            logical: "lx",
            configs: vec![map(Count(2), 1, &[]), map(Count(3), 2, &[Count(2)]), map(Count(3), 3, &[])],
            requests: requests(&mover, &stayer),
            script: vec![Send, Deploy, Send, Deploy, Send],
            targets: vec![mover.clone(), stayer.clone()],
        },
        Scenario {
            name: "second-change-before-settling",
            logical: "lx",
            configs: vec![
                map(Count(3), 1, &[]),
                map(Count(2), 2, &[Count(3)]),
                map(Count(4), 3, &[Count(3), Count(2)]),
            ],
            requests: vec![
                keyed("k1: a target that moves twice", "k1", &[(&wanderer, None)]),
                unkeyed("no key: the same target", &[(&wanderer, None)]),
                keyed("k2: it and a target that stays", "k2", &[(&stayer, None), (&wanderer, None)]),
            ],
            script: vec![Send, Deploy, Send, Deploy, Send],
            targets: vec![wanderer.clone(), stayer.clone()],
        },
        Scenario {
            name: "a-layout-skipped",
            logical: "lx",
            configs: vec![map(Count(2), 1, &[]), map(Count(3), 2, &[]), map(Count(3), 3, &[Count(2)])],
            requests: vec![
                keyed("k1: a moving target", "k1", &[(&mover, None)]),
                unkeyed("no key: the same target", &[(&mover, None)]),
                keyed("k2: it and a target that stays", "k2", &[(&stayer, None), (&mover, None)]),
            ],
            script: vec![Send, Deploy, Send, Deploy, Send],
            targets: vec![mover.clone(), stayer.clone()],
        },
        Scenario {
            name: "plain-to-partitioned",
            logical: "lx",
            // Dropping "plain" waits until the plain object's keys expire (a
            // day by default): a unit test covers that edge.
            configs: vec![None, map(Count(2), 1, &[Plain])],
            requests: requests(&mover, &stayer),
            script: vec![Send, Send, Deploy, Send],
            targets: vec![mover.clone(), stayer.clone()],
        },
        Scenario {
            name: "partitioned-to-plain",
            logical: "lx",
            configs: vec![map(Count(2), 1, &[]), map(Plain, 2, &[Count(2)]), map(Plain, 3, &[])],
            requests: requests(&mover, &stayer),
            script: vec![Send, Deploy, Send, Deploy, Send],
            targets: vec![mover, stayer],
        },
    ]
}
