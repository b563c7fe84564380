//! Partitioned sources: one logical source spread over several source
//! objects, each row routed by a stable hash of its target so that every row
//! for one target goes through one partition and per-(logical source,
//! target) order holds.
//!
//! A [`PartitionMap`] names how many partitions a logical source has, under
//! which routing `epoch`, and (while a resize is settling) how many it had
//! before (`from`). A target whose home partition differs between `from` and
//! `partitions` *moves*: its rows keep going to the old home while that
//! partition still holds rows for it, and go to the new home only once the
//! old one has released it (see [`Route::Gate`]). Epochs fence routers that
//! run an older map (a deployment rolling out): a partition that has seen a
//! newer epoch refuses an older one.
//!
//! Partition `i` of logical source `s` is the source object named
//! [`partition_name`]`(s, i)` = `s:i`.

#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::limits::{MAX_NAME_BYTES, SEQ_MAX};
use crate::name::Name;

/// Most partitions one logical source may have: each costs one source
/// object, and status and watermark reads fan out to all of them.
pub const MAX_PARTITIONS: u32 = 64;

/// Longest logical source name that can be partitioned: room for `:63`.
pub const MAX_PARTITIONED_NAME_BYTES: u32 = MAX_NAME_BYTES - 3;

/// How a logical source is partitioned.
///
/// Invariants (checked by [`PartitionMap::validate`]): `1 <= partitions <=
/// MAX_PARTITIONS`; `1 <= epoch <= SEQ_MAX`; `from`, when set, in
/// `1..=MAX_PARTITIONS`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PartitionMap {
    /// Partitions rows are routed to.
    pub partitions: u32,
    /// Routing epoch: raised with every change of `partitions`, so that
    /// partitions can refuse routers that still run an older map.
    pub epoch: u64,
    /// The partition count before the last resize, while rows routed by it
    /// may still be queued. Targets whose home changed are gated through
    /// their old home until it releases them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<u32>,
}

/// Why a partition map is refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionError(pub String);

impl fmt::Display for PartitionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for PartitionError {}

impl PartitionMap {
    /// Checks every invariant written on the fields, and that `logical` can
    /// carry a partition suffix.
    pub fn validate(&self, logical: &Name) -> Result<(), PartitionError> {
        let in_range = |n: u32| (1..=MAX_PARTITIONS).contains(&n);
        if !in_range(self.partitions) || !self.from.is_none_or(in_range) {
            return Err(PartitionError(format!("{logical}: partition counts are 1..={MAX_PARTITIONS}")));
        }
        if self.epoch == 0 || self.epoch > SEQ_MAX {
            return Err(PartitionError(format!("{logical}: epoch is 1..=2^53-1")));
        }
        if logical.as_str().len() > MAX_PARTITIONED_NAME_BYTES as usize {
            return Err(PartitionError(format!(
                "{logical}: a partitioned source's name is at most {MAX_PARTITIONED_NAME_BYTES} bytes"
            )));
        }
        Ok(())
    }

    /// Every partition that may hold rows: `0..max(partitions, from)`.
    pub fn all_partitions(&self) -> u32 {
        self.partitions.max(self.from.unwrap_or(0))
    }

    /// Where a row for `target` goes under this map.
    pub fn route(&self, target: &Name) -> Route {
        let new = home(target, self.partitions);
        match self.from.map(|n| home(target, n)) {
            Some(old) if old != new => Route::Gate { old, new },
            _ => Route::Direct(new),
        }
    }
}

/// Where a router sends a target's rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route {
    /// To this partition.
    Direct(u32),
    /// The target moves from `old` to `new`: first to `old` as a gated
    /// enqueue, which `old` accepts while it still holds rows for the target
    /// (so nothing newer overtakes them) and otherwise answers `moved`, for
    /// good; then, once moved, to `new`.
    Gate {
        /// The home under the previous count.
        old: u32,
        /// The home under the current count.
        new: u32,
    },
}

/// The home partition of `target` among `partitions`: FNV-1a (64-bit) of the
/// name's bytes, modulo the count. Stable across builds and platforms.
pub fn home(target: &Name, partitions: u32) -> u32 {
    assert!(partitions >= 1, "a logical source has at least one partition");
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for b in target.as_str().bytes() {
        hash ^= u64::from(b);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    u32::try_from(hash % u64::from(partitions)).unwrap_or(0)
}

/// The source object that holds partition `index` of `logical`: `logical:index`.
pub fn partition_name(logical: &Name, index: u32) -> Name {
    let text = format!("{logical}:{index}");
    // A validated map's logical name leaves room for the suffix.
    Name::new(text).unwrap_or_else(|_| logical.clone())
}

/// What a partition checks before it accepts a routed enqueue, in the same
/// transaction as the rows.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Fence {
    /// The router's epoch (0: an unpartitioned source, never checked).
    pub epoch: u64,
    /// Whether this is a gated enqueue at a moving target's old home.
    pub gate: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(s: &str) -> Name {
        Name::new(s).unwrap()
    }

    #[test]
    fn home_is_stable_and_spreads_targets() {
        // Pinned: changing the hash would move every target of every deployed source.
        assert_eq!(home(&n("customer-1"), 4), home(&n("customer-1"), 4));
        let pinned: Vec<u32> =
            ["a", "b", "customer-1", "customer-2"].iter().map(|t| home(&n(t), 8)).collect();
        assert_eq!(pinned, vec![4, 5, 7, 2], "FNV-1a 64, checked against an independent implementation");
        let mut counts = [0u32; 4];
        for i in 0..4_000 {
            counts[home(&n(&format!("t{i}")), 4) as usize] += 1;
        }
        assert!(counts.iter().all(|&c| (900..1_100).contains(&c)), "{counts:?}");
        assert_eq!(home(&n("x"), 1), 0);
    }

    #[test]
    fn a_target_is_gated_only_when_its_home_moves() {
        let map = PartitionMap { partitions: 4, epoch: 2, from: Some(2) };
        for i in 0..200 {
            let t = n(&format!("t{i}"));
            let (old, new) = (home(&t, 2), home(&t, 4));
            let want = if old == new { Route::Direct(new) } else { Route::Gate { old, new } };
            assert_eq!(map.route(&t), want);
        }
        let settled = PartitionMap { from: None, ..map };
        assert!(matches!(settled.route(&n("t1")), Route::Direct(_)));
        assert_eq!(map.all_partitions(), 4);
        assert_eq!(PartitionMap { partitions: 2, epoch: 3, from: Some(4) }.all_partitions(), 4);
    }

    #[test]
    fn maps_are_validated_at_and_past_their_limits() {
        let s = n("orders");
        let ok = PartitionMap { partitions: MAX_PARTITIONS, epoch: 1, from: Some(1) };
        assert!(ok.validate(&s).is_ok());
        assert!(PartitionMap { partitions: MAX_PARTITIONS + 1, ..ok }.validate(&s).is_err());
        assert!(PartitionMap { partitions: 0, ..ok }.validate(&s).is_err());
        assert!(PartitionMap { from: Some(0), ..ok }.validate(&s).is_err());
        assert!(PartitionMap { epoch: 0, ..ok }.validate(&s).is_err());
        assert!(PartitionMap { epoch: SEQ_MAX + 1, ..ok }.validate(&s).is_err());
        let long = n(&"s".repeat(MAX_PARTITIONED_NAME_BYTES as usize));
        assert!(ok.validate(&long).is_ok());
        assert_eq!(partition_name(&long, 63).as_str().len(), MAX_NAME_BYTES as usize);
        assert!(ok.validate(&n(&"s".repeat(MAX_PARTITIONED_NAME_BYTES as usize + 1))).is_err());
        assert_eq!(partition_name(&s, 3).as_str(), "orders:3");
    }
}
