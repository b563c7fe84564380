//! A source meeting targets of another release: every batch goes through
//! [`Negotiated`], which sends it without the source's id to a target that
//! predates ids (and must not park the rows there), and with it to every
//! other. What is remembered, and why it is safe, is the core's
//! ([`crate::core::peers`]); this is the part that awaits the call.

use std::cell::RefCell;

use crate::core::{refuses_source_id, without_source_id, CallOutcome, Failure, Name, PreIdTargets, SourceId};
use crate::driver::Targets;

/// [`Targets`] that remember which targets predate source ids.
pub struct Negotiated<'a, T> {
    /// The calls themselves.
    pub targets: &'a T,
    /// What the source object has learnt (kept as long as the object is).
    pub pre_id: &'a RefCell<PreIdTargets>,
    /// The source's id, which a batch to an older target goes without.
    pub id: &'a SourceId,
    /// The clock the memory is kept by, ms since the epoch.
    pub now: &'a dyn Fn() -> u64,
}

impl<T: Targets> Targets for Negotiated<'_, T> {
    async fn apply(&self, target: &Name, body: String) -> CallOutcome {
        // An endpoint is sent the relay's own envelope, never an apply body.
        if target.endpoint().is_some() {
            return self.targets.apply(target, body).await;
        }
        let without_id = self.pre_id.borrow().predates_ids(target, (self.now)());
        let body = if without_id { without_source_id(&body, self.id) } else { body };
        let outcome = self.targets.apply(target, body).await;
        match outcome {
            CallOutcome::Failed(ref f) if !without_id && refuses_source_id(f) => {
                self.pre_id.borrow_mut().note(target, (self.now)());
                // Nothing was written: the core sends the batch again at
                // once, and this time it goes without the id.
                CallOutcome::Failed(Failure::Interrupted(format!(
                    "{target} predates source ids: the batch goes again without the id"
                )))
            }
            other => other,
        }
    }
}
