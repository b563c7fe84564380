//! The delivery explorer's scenarios: what each enqueue sends where, how
//! many rows go per call, and which release each side runs when the
//! sequence starts (two releases meet during every deploy).

use super::ENDPOINT;
use crate::sim::Release;

/// A scenario: the targets of each enqueue's rows, in order.
#[derive(Clone, Debug)]
pub struct DeliveryScenario {
    /// Its name, for the replay line.
    pub name: &'static str,
    /// Each enqueue's rows, by target name.
    pub enqueues: Vec<Vec<&'static str>>,
    /// Rows per target call: 1, so a delivery makes several calls and each
    /// can be interleaved; more where the scenario checks that an endpoint
    /// still gets one per call.
    pub batch_rows: u32,
    /// The releases the source and its targets start on, and whether the
    /// explorer may deploy another (`None`: this release throughout).
    pub releases: Option<Releases>,
}

/// Which release each side starts on. The explorer may deploy this release
/// to either side at any point and roll a source that started on the
/// release before ids back to it; a target that ran this release stays on
/// it (the release before ids refuses storage this one opened, so going
/// back there is an outage, not a sequence of deliveries), and so does a
/// source that started on this one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Releases {
    /// The source's.
    pub source: Release,
    /// Every target's.
    pub targets: Release,
}

/// The scenarios the tests explore.
pub fn delivery_scenarios() -> Vec<DeliveryScenario> {
    vec![
        DeliveryScenario {
            name: "one-target-stream",
            enqueues: vec![vec!["t1"], vec!["t1"], vec!["t1"]],
            batch_rows: 1,
            releases: None,
        },
        DeliveryScenario {
            name: "two-targets",
            enqueues: vec![vec!["t1", "t2"], vec!["t2"], vec!["t1"]],
            batch_rows: 1,
            releases: None,
        },
        DeliveryScenario {
            name: "endpoint-beside-an-object",
            enqueues: vec![vec![ENDPOINT, ENDPOINT], vec![ENDPOINT, "t1", "t1"], vec![ENDPOINT]],
            batch_rows: 2,
            releases: None,
        },
        DeliveryScenario {
            name: "a-target-older-than-ids-upgraded",
            enqueues: vec![vec!["t1"], vec!["t1"], vec!["t1"]],
            batch_rows: 1,
            releases: Some(Releases { source: Release::Current, targets: Release::BeforeIds }),
        },
        DeliveryScenario {
            name: "a-source-before-ids-upgraded-and-rolled-back",
            enqueues: vec![vec!["t1"], vec!["t1"], vec!["t1"]],
            batch_rows: 1,
            releases: Some(Releases { source: Release::BeforeIds, targets: Release::Current }),
        },
    ]
}
