//! Partitioned sources: one logical source spread over several source
//! objects, each row routed by a stable hash of its target so that every row
//! for one target goes through one partition and per-(logical source,
//! target) order holds.
//!
//! A [`PartitionMap`] names how many partitions a logical source has, under
//! which routing `epoch`, and (while resizes settle) every earlier count
//! whose rows may still be queued (`from`, oldest first). A target whose
//! home differs between those *layouts* moves: its rows are offered to its
//! old homes first, oldest first, each of which takes them only while it
//! still holds rows for the target and otherwise releases it for good; only
//! then do they go to its home under `partitions` (see [`Route`]). A chain
//! rather than one old count, so that a second resize before the first
//! settled still sends a target's rows behind its oldest ones.
//!
//! Epochs fence routers that run an older map (a deployment rolling out): a
//! partition refuses an older epoch. A partition takes a newer epoch only
//! through *adoption* (see [`PartitionMap::reaches`]): it refuses a map under
//! which a router would no longer reach rows it holds, so a map that leaves
//! out a layout that has not settled is refused, not obeyed.
//!
//! Partition `i` of logical source `s` is the source object named
//! [`partition_name`]`(s, i)` = `s:i`.

#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize};

use crate::limits::{MAX_NAME_BYTES, SEQ_MAX};
use crate::name::Name;

/// Most partitions one logical source may have: each costs one source
/// object, and status and watermark reads fan out to all of them.
pub const MAX_PARTITIONS: u32 = 64;

/// Longest logical source name that can be partitioned: room for `:63`.
pub const MAX_PARTITIONED_NAME_BYTES: u32 = MAX_NAME_BYTES - 3;

/// Most earlier layouts a map may list in `from`: each costs a moving
/// target one more call per enqueue until it settles, and four resizes in
/// a row without one settling is an operator's mistake worth refusing.
pub const MAX_UNSETTLED_LAYOUTS: u32 = 4;

/// How a logical source is partitioned.
///
/// Invariants (checked by [`PartitionMap::validate`]): `1 <= partitions <=
/// MAX_PARTITIONS`; `1 <= epoch <= SEQ_MAX`; every count in `from` in
/// `1..=MAX_PARTITIONS`, at most [`MAX_UNSETTLED_LAYOUTS`] of them, and no
/// count equal to the one after it (ending with `partitions`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PartitionMap {
    /// Partitions rows are routed to.
    pub partitions: u32,
    /// Routing epoch: raised with every change of `partitions`, so that
    /// partitions can refuse routers that still run an older map.
    pub epoch: u64,
    /// The partition counts before the last resizes, oldest first, while
    /// rows routed by them may still be queued. Written as one count or a
    /// list. Targets whose home changed are gated through their old homes
    /// until each releases them.
    #[serde(default, skip_serializing_if = "Vec::is_empty", deserialize_with = "one_or_many")]
    pub from: Vec<u32>,
}

/// `from` as written: one count (`"from":4`) or a list (`"from":[2,4]`).
fn one_or_many<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u32>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum OneOrMany {
        One(u32),
        Many(Vec<u32>),
    }
    Ok(match OneOrMany::deserialize(d)? {
        OneOrMany::One(n) => vec![n],
        OneOrMany::Many(v) => v,
    })
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
    /// A map of `partitions` under `epoch`, with nothing settling.
    pub fn new(partitions: u32, epoch: u64) -> PartitionMap {
        PartitionMap { partitions, epoch, from: Vec::new() }
    }

    /// Checks every invariant written on the fields, and that `logical` can
    /// carry a partition suffix.
    pub fn validate(&self, logical: &Name) -> Result<(), PartitionError> {
        let in_range = |n: u32| (1..=MAX_PARTITIONS).contains(&n);
        if !self.layouts().all(in_range) {
            return Err(PartitionError(format!("{logical}: partition counts are 1..={MAX_PARTITIONS}")));
        }
        if self.from.len() > MAX_UNSETTLED_LAYOUTS as usize {
            return Err(PartitionError(format!(
                "{logical}: from lists {} counts; at most {MAX_UNSETTLED_LAYOUTS} (MAX_UNSETTLED_LAYOUTS) may be unsettled",
                self.from.len()
            )));
        }
        let layouts: Vec<u32> = self.layouts().collect();
        if layouts.windows(2).any(|w| w.first() == w.get(1)) {
            return Err(PartitionError(format!(
                "{logical}: each resize changes the count; from {:?} then {} repeats one",
                self.from, self.partitions
            )));
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

    /// The layouts rows may have been routed by, oldest first, ending with
    /// the current count.
    pub fn layouts(&self) -> impl Iterator<Item = u32> + '_ {
        self.from.iter().copied().chain(std::iter::once(self.partitions))
    }

    /// A fingerprint of the whole map (FNV-1a of its JSON): what a
    /// partition compares to tell whether a router runs the map it adopted.
    pub fn id(&self) -> u64 {
        let from: Vec<String> = self.from.iter().map(u32::to_string).collect();
        fnv(format!("{}/{}/{}", self.partitions, self.epoch, from.join(",")).as_bytes())
    }

    /// Whether a resize is settling (`from` is set).
    pub fn is_settling(&self) -> bool {
        !self.from.is_empty()
    }

    /// Every partition that may hold rows: `0..max(partitions, from...)`.
    pub fn all_partitions(&self) -> u32 {
        self.layouts().max().unwrap_or(self.partitions)
    }

    /// Where a row for `target` goes under this map.
    pub fn route(&self, target: &Name) -> Route {
        route_by(self, fnv(target.as_str().as_bytes()))
    }

    /// Where a logical source's record of an idempotency `key` lives: the
    /// partitions to consult (the key's homes under the older layouts, as
    /// `gates`) and the one that records it (`home`, under `partitions`).
    pub fn key_route(&self, key: &str) -> Route {
        route_by(self, fnv(key.as_bytes()))
    }

    /// Whether a router running this map can still reach partition `index`
    /// for `target`: `index` is the target's home under one of the layouts.
    /// A partition holding rows for a target it cannot be reached for would
    /// see newer rows of that target delivered from elsewhere first, so it
    /// refuses to adopt such a map.
    pub fn reaches(&self, target: &Name, index: u32) -> bool {
        let hash = fnv(target.as_str().as_bytes());
        self.layouts().any(|n| bucket(hash, n) == index)
    }
}

/// Where a router sends a target's rows (or consults a key's record).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Route {
    /// Old homes to offer the rows first, oldest first, each as a gated
    /// enqueue: one takes them while it still holds rows for the target
    /// (so nothing newer overtakes them) and otherwise answers `moved`, for
    /// good. Empty for a target that does not move.
    pub gates: Vec<u32>,
    /// The home under the current count: where the rows go once every gate
    /// has released the target.
    pub home: u32,
}

fn route_by(map: &PartitionMap, hash: u64) -> Route {
    let home = bucket(hash, map.partitions);
    let mut gates: Vec<u32> = Vec::new();
    for n in &map.from {
        let old = bucket(hash, *n);
        if !gates.contains(&old) {
            gates.push(old);
        }
    }
    // Offering the home itself as the last gate changes nothing: it takes the rows either way.
    while gates.last() == Some(&home) {
        gates.pop();
    }
    Route { gates, home }
}

/// FNV-1a (64-bit) of `bytes`. Stable across builds and platforms.
pub(crate) fn fnv(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        hash ^= u64::from(*b);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

fn bucket(hash: u64, partitions: u32) -> u32 {
    assert!(partitions >= 1, "a logical source has at least one partition");
    u32::try_from(hash % u64::from(partitions)).unwrap_or(0)
}

/// The home partition of `target` among `partitions`: FNV-1a (64-bit) of the
/// name's bytes, modulo the count.
pub fn home(target: &Name, partitions: u32) -> u32 {
    bucket(fnv(target.as_str().as_bytes()), partitions)
}

/// The source object that holds partition `index` of `logical`: `logical:index`.
pub fn partition_name(logical: &Name, index: u32) -> Name {
    let text = format!("{logical}:{index}");
    // A validated map's logical name leaves room for the suffix.
    Name::new(text).unwrap_or_else(|_| logical.clone())
}

/// The logical source and index a partition's name spells (`orders:2`), if
/// it spells one.
pub fn partition_of(source: &Name) -> Option<(Name, u32)> {
    let (logical, index) = source.as_str().rsplit_once(':')?;
    let index = index.parse::<u32>().ok().filter(|i| *i < MAX_PARTITIONS)?;
    Some((Name::new(logical).ok()?, index))
}

/// What a partition checks before it accepts a routed enqueue, in the same
/// transaction as the rows.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Fence {
    /// The router's epoch (0: an unrouted enqueue).
    pub epoch: u64,
    /// The router's map, as [`PartitionMap::id`]: a partition that adopted
    /// another map under the same epoch (an operator dropped or changed
    /// `from`) must adopt this one first, so the change is checked too.
    pub map_id: u64,
    /// Whether this is a gated enqueue at a moving target's old home.
    pub gate: bool,
}

impl Fence {
    /// The fence of a router running `map`.
    pub fn of(map: &PartitionMap) -> Fence {
        Fence { epoch: map.epoch, map_id: map.id(), gate: false }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(s: &str) -> Name {
        Name::new(s).unwrap()
    }

    fn map(partitions: u32, epoch: u64, from: &[u32]) -> PartitionMap {
        PartitionMap { partitions, epoch, from: from.to_vec() }
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
        let m = map(4, 2, &[2]);
        for i in 0..200 {
            let t = n(&format!("t{i}"));
            let (old, new) = (home(&t, 2), home(&t, 4));
            let gates = if old == new { vec![] } else { vec![old] };
            assert_eq!(m.route(&t), Route { gates, home: new });
        }
        assert_eq!(map(4, 2, &[]).route(&n("t1")).gates, Vec::<u32>::new());
        assert_eq!(m.all_partitions(), 4);
        assert_eq!(map(2, 3, &[4]).all_partitions(), 4);
    }

    #[test]
    fn a_second_resize_gates_through_every_unsettled_layout_oldest_first() {
        let m = map(3, 3, &[2, 4]);
        let mut seen_two_gates = false;
        for i in 0..300 {
            let t = n(&format!("x-{i}"));
            let r = m.route(&t);
            let (h2, h4, h3) = (home(&t, 2), home(&t, 4), home(&t, 3));
            assert_eq!(r.home, h3);
            assert_eq!(
                r.gates.first().copied(),
                if h2 == h3 && (h4 == h3 || h4 == h2) { None } else { Some(h2) }
            );
            assert!(r.gates.iter().all(|g| *g == h2 || *g == h4), "{r:?}");
            assert_ne!(r.gates.last(), Some(&h3), "the home is never its own last gate");
            seen_two_gates |= r.gates.len() == 2;
            for layout in [2, 4, 3] {
                assert!(m.reaches(&t, home(&t, layout)), "every layout's home is reachable");
            }
        }
        assert!(seen_two_gates, "some target moves twice");
        // A map that forgot the first layout cannot reach some of its homes.
        let skipping = map(3, 3, &[4]);
        let stranded = (0..300).map(|i| n(&format!("x-{i}"))).find(|t| !skipping.reaches(t, home(t, 2)));
        assert!(stranded.is_some());
    }

    #[test]
    fn a_key_is_recorded_at_its_home_and_consulted_at_its_old_ones() {
        let m = map(4, 2, &[2]);
        let r = m.key_route("order-17");
        assert_eq!(r.home, bucket(fnv(b"order-17"), 4));
        assert!(r.gates.iter().all(|g| *g == bucket(fnv(b"order-17"), 2)));
        assert!(map(4, 2, &[]).key_route("order-17").gates.is_empty());
    }

    #[test]
    fn from_is_one_count_or_a_list() {
        let one: PartitionMap = serde_json::from_str(r#"{"partitions":4,"epoch":2,"from":2}"#).unwrap();
        assert_eq!(one, map(4, 2, &[2]));
        let many: PartitionMap = serde_json::from_str(r#"{"partitions":3,"epoch":3,"from":[2,4]}"#).unwrap();
        assert_eq!(many, map(3, 3, &[2, 4]));
        let none: PartitionMap = serde_json::from_str(r#"{"partitions":3,"epoch":3}"#).unwrap();
        assert!(!none.is_settling());
        assert_eq!(serde_json::to_string(&none).unwrap(), r#"{"partitions":3,"epoch":3}"#);
        assert!(serde_json::from_str::<PartitionMap>(r#"{"partitions":3,"epoch":3,"from":"2"}"#).is_err());
    }

    #[test]
    fn maps_are_validated_at_and_past_their_limits() {
        let s = n("orders");
        let ok = map(MAX_PARTITIONS, 1, &[1]);
        assert!(ok.validate(&s).is_ok());
        assert!(map(MAX_PARTITIONS + 1, 1, &[1]).validate(&s).is_err());
        assert!(map(0, 1, &[1]).validate(&s).is_err());
        assert!(map(4, 1, &[0]).validate(&s).is_err());
        assert!(map(4, 0, &[]).validate(&s).is_err());
        assert!(map(4, SEQ_MAX + 1, &[]).validate(&s).is_err());
        assert!(map(4, 1, &[4]).validate(&s).is_err(), "a resize changes the count");
        assert!(map(4, 1, &[2, 2]).validate(&s).is_err());
        assert!(map(4, 1, &[2, 3, 2]).validate(&s).is_ok(), "a count may come back");
        let at: Vec<u32> = (1..=MAX_UNSETTLED_LAYOUTS).map(|i| i + 4).collect();
        assert!(map(4, 1, &at).validate(&s).is_ok());
        let past: Vec<u32> = (1..=MAX_UNSETTLED_LAYOUTS + 1).map(|i| i + 4).collect();
        assert!(map(4, 1, &past).validate(&s).is_err());
        let long = n(&"s".repeat(MAX_PARTITIONED_NAME_BYTES as usize));
        assert!(ok.validate(&long).is_ok());
        assert_eq!(partition_name(&long, 63).as_str().len(), MAX_NAME_BYTES as usize);
        assert!(ok.validate(&n(&"s".repeat(MAX_PARTITIONED_NAME_BYTES as usize + 1))).is_err());
        assert_eq!(partition_name(&s, 3).as_str(), "orders:3");
    }

    #[test]
    fn a_partitions_name_spells_its_logical_source_and_index() {
        assert_eq!(partition_of(&n("orders:3")), Some((n("orders"), 3)));
        assert_eq!(partition_of(&n("a:b:63")), Some((n("a:b"), 63)));
        assert_eq!(partition_of(&n("orders:64")), None);
        assert_eq!(partition_of(&n("orders")), None);
        assert_eq!(partition_of(&n("orders:x")), None);
        assert_eq!(partition_of(&n(":1")), None);
    }
}
