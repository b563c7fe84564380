//! Deploys in the delivery explorer: a release deployed to the source or
//! to its targets at any point of a sequence, between a call and its
//! answer included, and minutes passing (what the source remembers of a
//! target older than ids expires). Each is a deviation from the plain
//! schedule, so every sequence up to the bound meets them wherever they can
//! fall; the world settles on the releases the sequence left.

use super::{Action, Releases, Run, SOURCE};
use crate::core::PRE_ID_TARGET_MEMORY_MS;
use crate::sim::Release;

/// The targets a scenario may address that are objects (an endpoint runs
/// no release of the relay's).
const OBJECT_TARGETS: [&str; 2] = ["t1", "t2"];

/// Which side a release is deployed to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Side {
    /// The source object.
    Source,
    /// Every target object.
    Targets,
}

impl Run<'_> {
    /// Puts each side on the release the scenario starts it on.
    pub(super) fn start_on(&mut self, releases: Option<Releases>) {
        self.releases = releases;
        let Some(r) = releases else { return };
        self.sim.deploy_source(SOURCE, r.source);
        for t in OBJECT_TARGETS {
            self.sim.deploy_target(t, r.targets);
        }
    }

    /// The deploys allowed now: this release to a side that runs the one
    /// before ids, the release before ids back to a source that started on
    /// it, and minutes passing while no call is awaited.
    pub(super) fn deploys(&self) -> Vec<Action> {
        let (Some(now), Some(start)) = (self.releases, self.scenario.releases) else { return Vec::new() };
        let mut out = Vec::new();
        if now.targets == Release::BeforeIds {
            out.push(Action::Deploy(Side::Targets, Release::Current));
        }
        match now.source {
            Release::BeforeIds => out.push(Action::Deploy(Side::Source, Release::Current)),
            Release::Current if start.source == Release::BeforeIds => {
                out.push(Action::Deploy(Side::Source, Release::BeforeIds));
            }
            Release::Current => {}
        }
        // A call is given up on within MAX_CALL_TIMEOUT_MS: minutes pass
        // only while no delivery awaits one.
        if self.wire.live().is_empty() {
            out.push(Action::Later);
        }
        out
    }

    /// Deploys `release` to `side`: from the next call on, that side sends
    /// and answers as `release` does.
    pub(super) fn deploy(&mut self, side: Side, release: Release) -> String {
        let Some(releases) = self.releases.as_mut() else { return "no release to deploy".into() };
        match side {
            Side::Source => {
                releases.source = release;
                self.sim.deploy_source(SOURCE, release);
            }
            Side::Targets => {
                releases.targets = release;
                for t in OBJECT_TARGETS {
                    self.sim.deploy_target(t, release);
                }
            }
        }
        format!("the {side:?} side is deployed {release:?}")
    }

    /// Minutes pass: the source tries the id again at a target it found
    /// older than ids.
    pub(super) fn later(&mut self) -> String {
        self.sim.advance(PRE_ID_TARGET_MEMORY_MS);
        format!("{} min pass", PRE_ID_TARGET_MEMORY_MS / 60_000)
    }
}
