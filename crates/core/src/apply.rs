//! The target side, without I/O: which rows of a batch are duplicates, which
//! to apply, the new watermark, and the hook that adds effects to the same
//! atomic apply. The batch's wire form, shared by both sides, is
//! `apply/batch.rs`.
//!
//! A target keeps one watermark per source (`rh`): the highest source
//! sequence it has applied. Rows at or below it are duplicates. Because a
//! batch is ascending and the watermark is a threshold, the duplicates are
//! always a prefix of the batch. A source is its name and its object's id
//! ([`SourceId`]): names collide across classes and Workers, ids do not. A
//! batch without an id comes from a build older than ids and is kept apart
//! (see `store::inbox` for how an upgraded target hands its old watermark
//! to the first identified sender).

#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]
#![deny(clippy::unreachable, clippy::todo, clippy::unimplemented)]

use std::fmt;

use crate::name::Name;
use crate::row::Effects;
use crate::source_id::SourceId;

mod batch;

pub use batch::{
    decode_request, encode_request, validate_request, ApplyError, ApplyReply, ApplyRequest, ApplyRow,
    PutDecodeError,
};

/// The source a batch came from, as its target keys the watermark: its
/// name and its object's id. What a target's hook is told, so that an
/// embedder's own records per source are kept apart exactly as the
/// watermarks are (two classes may each have an object named `default`).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Sender {
    /// The source's name (what `idFromName` was given).
    pub name: Name,
    /// The id of the watermark the rows are applied against: the sending
    /// object's own; or, for a sender older than ids, the id of the sender
    /// that took over its name's watermark, if one did; `None` for a sender
    /// older than ids whose name's watermark no identified sender took.
    pub id: Option<SourceId>,
}

impl Sender {
    /// The sender as one string, as the target's watermark listing spells
    /// it: `name/id`, or `name` without an id (a name never holds `/`).
    pub fn key(&self) -> String {
        match &self.id {
            Some(id) => format!("{}/{}", self.name, id.as_str()),
            None => self.name.as_str().to_owned(),
        }
    }
}

impl fmt::Display for Sender {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.key())
    }
}

/// What a target does with a validated batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ApplyPlan {
    /// Leading rows at or below the watermark: skipped.
    pub duplicates: usize,
    /// The watermark after applying the rest. Equal to the old one when
    /// everything was a duplicate, so that case writes nothing.
    pub watermark: u64,
}

impl ApplyPlan {
    /// Rows to apply: those after the duplicate prefix.
    pub fn to_apply<'a>(&self, request: &'a ApplyRequest) -> &'a [ApplyRow] {
        request.rows.get(self.duplicates..).unwrap_or_default()
    }

    /// The reply for this plan.
    pub fn reply(&self, request: &ApplyRequest) -> ApplyReply {
        ApplyReply {
            watermark: self.watermark,
            applied: (request.rows.len() - self.duplicates) as u32,
            duplicates: self.duplicates as u32,
        }
    }
}

/// Plans applying `request` at a target whose watermark for its source is
/// `watermark`. The request must have passed [`validate_request`].
pub fn plan_apply(watermark: u64, request: &ApplyRequest) -> ApplyPlan {
    let duplicates = request.rows.iter().take_while(|r| r.seq <= watermark).count();
    let last = request.rows.last().map_or(0, |r| r.seq);
    let plan = ApplyPlan { duplicates, watermark: watermark.max(last) };
    assert!(plan.watermark >= watermark, "a watermark never moves back");
    plan
}

/// Adds effects to a target's apply, inside the same atomic block. Called
/// only when at least one row is new, with the new rows. Added effects must
/// tolerate the batch being delivered again after a lost reply (they are
/// not repeated: the watermark skips it, but the hook must not assume it
/// ran for every delivery attempt). An error rejects this target's batch
/// and nothing else.
pub trait RelayHook {
    /// Effects to apply after the rows' own, atomically with them, for the
    /// rows `sender` sent. Two senders may share a name: a hook that keeps
    /// anything per sender keys it by [`Sender::key`] (name and id).
    fn extra_effects(&self, sender: &Sender, rows: &[ApplyRow]) -> Result<Effects, String>;
}

/// The default hook: adds nothing.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoHook;

impl RelayHook for NoHook {
    fn extra_effects(&self, _: &Sender, _: &[ApplyRow]) -> Result<Effects, String> {
        Ok(Effects::default())
    }
}

#[cfg(test)]
mod tests {
    use super::batch::tests::request;
    use super::*;

    #[test]
    fn rows_at_or_below_the_watermark_are_duplicates() {
        let r = request(&[3, 5, 9]);
        let plan = plan_apply(5, &r);
        assert_eq!(plan, ApplyPlan { duplicates: 2, watermark: 9 });
        assert_eq!(plan.to_apply(&r), &r.rows[2..]);
        assert_eq!(plan.reply(&r), ApplyReply { watermark: 9, applied: 1, duplicates: 2 });
    }

    #[test]
    fn an_all_duplicate_batch_keeps_the_watermark() {
        let r = request(&[3, 5]);
        assert_eq!(plan_apply(7, &r), ApplyPlan { duplicates: 2, watermark: 7 });
        assert_eq!(plan_apply(0, &r), ApplyPlan { duplicates: 0, watermark: 5 });
    }
}
