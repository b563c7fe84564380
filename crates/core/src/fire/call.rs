//! A fire's target calls: what one carries ([`TargetCall`]) and how it
//! ended ([`CallOutcome`], [`Failure`]).

use crate::name::Name;

/// How a target call ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CallOutcome {
    /// The target holds every row through `watermark` for this source;
    /// `applied` of the sent rows were new to it.
    Applied {
        /// The target's watermark for this source after the call.
        watermark: u64,
        /// Rows the call applied (the rest were duplicates).
        applied: u32,
    },
    /// The call failed; nothing can be assumed about the target.
    Failed(Failure),
}

/// Why a target call failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Failure {
    /// Network, overload, a thrown exception: worth retrying.
    Transient(String),
    /// The target rejected the batch as invalid: retrying will not help.
    Permanent(String),
}

impl Failure {
    /// The message carried by either kind.
    pub fn message(&self) -> &str {
        match self {
            Failure::Transient(m) | Failure::Permanent(m) => m,
        }
    }
}

/// One call to one target: a batch of that target's rows, ascending.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TargetCall {
    /// Which group (target) this is, for [`Fire::record`].
    pub group: u32,
    /// The target: the name of the Durable Object the row is delivered to.
    pub target: Name,
    /// Sequences in the batch, ascending.
    pub seqs: Vec<u64>,
    /// Body bytes plus framing in the batch.
    pub bytes: u32,
}
