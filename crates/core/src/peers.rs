//! What a source knows of its targets' protocol, without I/O: which
//! targets predate source ids, how their refusal of an id reads, and a
//! batch without the id for them.
//!
//! A batch carries the sending object's id (`source_id`) from protocol
//! version 2 on. A target of version 1 refuses the field before it writes
//! anything (422 `malformed_batch`, "unknown field `source_id`"). Two
//! releases meet during every deploy, and a target script deployed on its
//! own schedule can lag for longer, so a source meets such a target and
//! must not park its rows there: the refused batch is sent again at once
//! without the id (as an older source would have sent it), and every batch
//! to that target goes without one for [`PRE_ID_TARGET_MEMORY_MS`]. Then
//! the id is tried again: a target upgraded meanwhile takes it and from then
//! on keys the source's watermark by name and id (claiming the name's
//! watermark, which the batches without an id advanced).

#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]
#![deny(clippy::unreachable, clippy::todo, clippy::unimplemented)]

use std::collections::BTreeMap;

use crate::fire::Failure;
use crate::limits::{PRE_ID_TARGETS_MAX, PRE_ID_TARGET_MEMORY_MS};
use crate::name::Name;
use crate::source_id::SourceId;

/// The words of a version 1 target's refusal of a batch with an id: serde's
/// message for a field its request type does not declare.
const REFUSED_ID: &str = "unknown field `source_id`";

/// Whether `failure` is a target's refusal of the batch's `source_id`: the
/// answer of a target older than ids, which wrote nothing.
pub fn refuses_source_id(failure: &Failure) -> bool {
    matches!(failure, Failure::Permanent(m) if m.contains(REFUSED_ID))
}

/// The batch `body` (as [`encode_request`](crate::encode_request) wrote it
/// for the source `id`) without its `source_id`: what a source older than
/// ids sends. A body without the id is returned as it is.
pub fn without_source_id(body: &str, id: &SourceId) -> String {
    body.replacen(&format!(r#","source_id":"{}""#, id.as_str()), "", 1)
}

/// The targets a source has found to predate ids, and since when.
///
/// Invariant: at most [`PRE_ID_TARGETS_MAX`] entries.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PreIdTargets {
    /// When each target last refused an id, ms since the epoch.
    refused_at_ms: BTreeMap<Name, u64>,
}

impl PreIdTargets {
    /// Whether batches to `target` go without the id at `now_ms`: it
    /// refused one less than [`PRE_ID_TARGET_MEMORY_MS`] ago.
    pub fn predates_ids(&self, target: &Name, now_ms: u64) -> bool {
        self.refused_at_ms.get(target).is_some_and(|at| now_ms.saturating_sub(*at) < PRE_ID_TARGET_MEMORY_MS)
    }

    /// Notes that `target` refused an id at `now_ms`. When the memory is
    /// full, the target that refused longest ago is forgotten first (it
    /// would be tried with an id again, costing one call).
    pub fn note(&mut self, target: &Name, now_ms: u64) {
        self.refused_at_ms.retain(|_, at| now_ms.saturating_sub(*at) < PRE_ID_TARGET_MEMORY_MS);
        if !self.refused_at_ms.contains_key(target) && self.refused_at_ms.len() >= PRE_ID_TARGETS_MAX as usize
        {
            let oldest = self.refused_at_ms.iter().min_by_key(|(_, at)| **at).map(|(t, _)| t.clone());
            if let Some(oldest) = oldest {
                self.refused_at_ms.remove(&oldest);
            }
        }
        self.refused_at_ms.insert(target.clone(), now_ms);
        assert!(self.refused_at_ms.len() <= PRE_ID_TARGETS_MAX as usize, "the memory is bounded");
    }

    /// How many targets are remembered.
    pub fn len(&self) -> u32 {
        self.refused_at_ms.len() as u32
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.refused_at_ms.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(s: &str) -> Name {
        Name::new(s).unwrap()
    }

    /// A version 1 target's answer, as it reaches the source.
    const REFUSAL: &str =
        "422: {\"error\":{\"code\":\"malformed_batch\",\"message\":\"batch does not decode: \
                           unknown field `source_id`, expected `source` or `rows` at line 1 column 25\"}}";

    #[test]
    fn only_the_refusal_of_the_id_field_reads_as_a_target_older_than_ids() {
        assert!(refuses_source_id(&Failure::Permanent(REFUSAL.into())));
        assert!(!refuses_source_id(&Failure::Permanent("422: unknown field `rows2`".into())));
        assert!(!refuses_source_id(&Failure::Transient(REFUSAL.into())), "a transient failure is no answer");
        assert!(!refuses_source_id(&Failure::Permanent("422: invalid_source_id".into())));
    }

    #[test]
    fn a_batch_without_its_id_is_what_an_older_source_sends() {
        let id = SourceId::derive("RelaySource", "s");
        let body = format!(r#"{{"source":"s","source_id":"{}","rows":[{{"seq":1}}]}}"#, id.as_str());
        assert_eq!(without_source_id(&body, &id), r#"{"source":"s","rows":[{"seq":1}]}"#);
        let bare = r#"{"source":"s","rows":[]}"#;
        assert_eq!(without_source_id(bare, &id), bare);
    }

    #[test]
    fn a_target_is_sent_no_id_for_the_memory_then_tried_again() {
        let mut m = PreIdTargets::default();
        assert!(!m.predates_ids(&n("t"), 1_000));
        m.note(&n("t"), 1_000);
        assert!(m.predates_ids(&n("t"), 1_000));
        assert!(m.predates_ids(&n("t"), 1_000 + PRE_ID_TARGET_MEMORY_MS - 1), "one ms short");
        assert!(!m.predates_ids(&n("t"), 1_000 + PRE_ID_TARGET_MEMORY_MS), "tried with the id again");
        assert!(!m.predates_ids(&n("u"), 1_000), "another target is not");
    }

    #[test]
    fn the_memory_holds_at_most_its_bound_forgetting_the_oldest_first() {
        let mut m = PreIdTargets::default();
        for i in 0..PRE_ID_TARGETS_MAX {
            m.note(&n(&format!("t{i}")), 10 + u64::from(i));
        }
        assert_eq!(m.len(), PRE_ID_TARGETS_MAX, "at the bound");
        m.note(&n("t0"), 5_000);
        assert_eq!(m.len(), PRE_ID_TARGETS_MAX, "a target noted again takes no new place");
        m.note(&n("past"), 5_001);
        assert_eq!(m.len(), PRE_ID_TARGETS_MAX, "past the bound: still the bound");
        assert!(!m.predates_ids(&n("t1"), 5_002), "the one that refused longest ago went");
        assert!(m.predates_ids(&n("t0"), 5_002) && m.predates_ids(&n("past"), 5_002));
    }

    #[test]
    fn an_expired_entry_makes_room_before_any_is_evicted() {
        let mut m = PreIdTargets::default();
        m.note(&n("old"), 0);
        m.note(&n("new"), PRE_ID_TARGET_MEMORY_MS);
        assert_eq!(m.len(), 1);
        assert!(m.predates_ids(&n("new"), PRE_ID_TARGET_MEMORY_MS));
    }
}
