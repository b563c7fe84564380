//! Partitioned sources: one logical source spread over several source
//! objects, each row routed by a stable hash of its target so that every row
//! for one target goes through one object and per-(logical source, target)
//! order holds.
//!
//! A [`PartitionMap`] names the logical source's current [`Layout`] (a
//! partition count, or `plain`: the logical source's own object, as it was
//! before it was partitioned), under which routing `epoch`, and (while
//! resizes settle) every earlier layout whose rows may still be queued
//! (`from`, oldest first). A target whose home differs between those layouts
//! moves: its rows are offered to its old homes first, oldest first, each of
//! which takes them only while it still holds rows for the target and
//! otherwise releases it; only then do they go to its home under the current
//! layout (see [`Route`]). A chain rather than one old layout, so that a
//! second resize before the first settled still sends a target's rows behind
//! its oldest ones.
//!
//! The objects of a logical source `s` are its [`Part`]s: partition `i` is
//! the source object `s:i` ([`partition_name`]), and [`Part::Plain`] is the
//! object named `s` itself. Idempotency keys live apart from the layouts, at
//! one of [`KEY_HOMES`] fixed partitions ([`key_home`]), so that no map
//! change moves a key's record (see `crate::keys`).
//!
//! Epochs fence routers that run another map: every change of a logical
//! source's map raises its epoch, and an object refuses an older one. An
//! object takes a newer map only through the two-phase adoption of
//! `crate::adoption`.

#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

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

/// How many partitions an idempotency key's record may live at: a key's
/// home is `fnv(key) % KEY_HOMES`, whatever the partition count, so a
/// resize never moves a key's record and a retry after any map change
/// finds it. Never change it: every recorded key would move.
pub const KEY_HOMES: u32 = 64;

/// One way a logical source's rows were routed: by a partition count, or
/// all to the logical source's own object (`plain`, how the source ran
/// before it was partitioned). Written as a count or `"plain"`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Layout {
    /// Every row at the object named after the logical source.
    Plain,
    /// Row for target `t` at partition `fnv(t) % n`.
    Count(u32),
}

/// One object of a logical source: a partition, or its own plain object.
/// Written as an index or `"plain"`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Part {
    /// The object named after the logical source.
    Plain,
    /// Partition `i`: the object `logical:i`.
    Index(u32),
}

const PLAIN: &str = "plain";

/// A count or `"plain"`, as written in a map, a position or a reply.
#[derive(Deserialize)]
#[serde(untagged)]
enum CountOrPlain {
    Count(u32),
    Word(String),
}

fn count_or_plain<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
    match CountOrPlain::deserialize(d)? {
        CountOrPlain::Count(n) => Ok(Some(n)),
        CountOrPlain::Word(w) if w == PLAIN => Ok(None),
        CountOrPlain::Word(w) => {
            Err(serde::de::Error::custom(format!("{w:?} is neither a count nor \"plain\"")))
        }
    }
}

impl Serialize for Layout {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Layout::Plain => s.serialize_str(PLAIN),
            Layout::Count(n) => s.serialize_u32(*n),
        }
    }
}

impl<'de> Deserialize<'de> for Layout {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Layout, D::Error> {
        Ok(count_or_plain(d)?.map_or(Layout::Plain, Layout::Count))
    }
}

impl Serialize for Part {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Part::Plain => s.serialize_str(PLAIN),
            Part::Index(i) => s.serialize_u32(*i),
        }
    }
}

impl<'de> Deserialize<'de> for Part {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Part, D::Error> {
        Ok(count_or_plain(d)?.map_or(Part::Plain, Part::Index))
    }
}

impl fmt::Display for Layout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Layout::Plain => f.write_str(PLAIN),
            Layout::Count(n) => write!(f, "{n}"),
        }
    }
}

impl fmt::Display for Part {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Part::Plain => f.write_str(PLAIN),
            Part::Index(i) => write!(f, "{i}"),
        }
    }
}

impl Layout {
    /// Where a row whose target hashes to `hash` goes under this layout.
    fn home(self, hash: u64) -> Part {
        match self {
            Layout::Plain => Part::Plain,
            Layout::Count(n) => Part::Index(bucket(hash, n)),
        }
    }

    /// The objects this layout routes to.
    fn parts(self) -> impl Iterator<Item = Part> {
        let (plain, count) = match self {
            Layout::Plain => (true, 0),
            Layout::Count(n) => (false, n),
        };
        plain.then_some(Part::Plain).into_iter().chain((0..count).map(Part::Index))
    }
}

impl Part {
    /// The source object that is this part of `logical`.
    pub fn object(self, logical: &Name) -> Name {
        match self {
            Part::Plain => logical.clone(),
            Part::Index(i) => partition_name(logical, i),
        }
    }
}

/// How a logical source is partitioned.
///
/// Invariants (checked by [`PartitionMap::validate`]): every count in
/// `1..=MAX_PARTITIONS`; `1 <= epoch <= SEQ_MAX`; at most
/// [`MAX_UNSETTLED_LAYOUTS`] layouts in `from`, and no layout equal to the
/// one after it (ending with `partitions`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PartitionMap {
    /// The layout rows are routed by now: a count, or `"plain"`.
    pub partitions: Layout,
    /// Routing epoch: raised with every change of the map, so that objects
    /// can refuse routers that still run another one.
    pub epoch: u64,
    /// The layouts before the last changes, oldest first, while rows routed
    /// by them may still be queued. Written as one layout or a list.
    /// Targets whose home changed are gated through their old homes until
    /// each releases them.
    #[serde(default, skip_serializing_if = "Vec::is_empty", deserialize_with = "one_or_many")]
    pub from: Vec<Layout>,
}

/// `from` as written: one layout (`"from":4`) or a list (`"from":[2,4]`).
fn one_or_many<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Layout>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum OneOrMany {
        One(Layout),
        Many(Vec<Layout>),
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
    /// A map of `partitions` partitions under `epoch`, with nothing settling.
    pub fn new(partitions: u32, epoch: u64) -> PartitionMap {
        PartitionMap { partitions: Layout::Count(partitions), epoch, from: Vec::new() }
    }

    /// Checks every invariant written on the fields, and that `logical` can
    /// carry a partition suffix.
    pub fn validate(&self, logical: &Name) -> Result<(), PartitionError> {
        let in_range = |l: Layout| match l {
            Layout::Plain => true,
            Layout::Count(n) => (1..=MAX_PARTITIONS).contains(&n),
        };
        if !self.layouts().all(in_range) {
            return Err(PartitionError(format!("{logical}: partition counts are 1..={MAX_PARTITIONS}")));
        }
        if self.from.len() > MAX_UNSETTLED_LAYOUTS as usize {
            return Err(PartitionError(format!(
                "{logical}: from lists {} layouts; at most {MAX_UNSETTLED_LAYOUTS} (MAX_UNSETTLED_LAYOUTS) may be unsettled",
                self.from.len()
            )));
        }
        let layouts: Vec<Layout> = self.layouts().collect();
        if layouts.windows(2).any(|w| w.first() == w.get(1)) {
            return Err(PartitionError(format!(
                "{logical}: each change changes the layout; from {} then {} repeats one",
                list(&self.from),
                self.partitions
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
    /// the current one.
    pub fn layouts(&self) -> impl Iterator<Item = Layout> + '_ {
        self.from.iter().copied().chain(std::iter::once(self.partitions))
    }

    /// A fingerprint of the whole map (FNV-1a of its text): what an object
    /// compares to tell whether a router runs the map it adopted.
    pub fn id(&self) -> u64 {
        fnv(format!("{}/{}/{}", self.partitions, self.epoch, list(&self.from)).as_bytes())
    }

    /// Whether a change is settling (`from` is set).
    pub fn is_settling(&self) -> bool {
        !self.from.is_empty()
    }

    /// Whether the logical source's own object is one of the layouts: it
    /// holds rows from before the source was partitioned, or is where rows
    /// go now.
    pub fn has_plain(&self) -> bool {
        self.layouts().any(|l| l == Layout::Plain)
    }

    /// Every object that may hold rows under the layouts: the plain object
    /// when a layout is plain, then partitions `0..max count`.
    pub fn parts(&self) -> Vec<Part> {
        let mut parts: Vec<Part> = self.layouts().flat_map(Layout::parts).collect();
        parts.sort();
        parts.dedup();
        parts
    }

    /// Where a row for `target` goes under this map.
    pub fn route(&self, target: &Name) -> Route {
        let hash = fnv(target.as_str().as_bytes());
        let home = self.partitions.home(hash);
        let mut gates: Vec<Part> = Vec::new();
        for layout in &self.from {
            let old = layout.home(hash);
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

    /// Whether a router running this map can still reach `part` for
    /// `target`: `part` is the target's home under one of the layouts. An
    /// object holding rows for a target it cannot be reached for would see
    /// newer rows of that target delivered from elsewhere first, so it
    /// refuses to adopt such a map.
    pub fn reaches(&self, target: &Name, part: Part) -> bool {
        let hash = fnv(target.as_str().as_bytes());
        self.layouts().any(|l| l.home(hash) == part)
    }
}

/// Layouts as written in a message: `[2, 4]`, `[plain]`.
fn list(layouts: &[Layout]) -> String {
    let items: Vec<String> = layouts.iter().map(Layout::to_string).collect();
    items.join(",")
}

/// Where a router sends a target's rows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Route {
    /// Old homes to offer the rows first, oldest first, each as a gated
    /// enqueue: one takes them while it still holds rows for the target
    /// (so nothing newer overtakes them) and otherwise answers `moved`.
    /// Empty for a target that does not move.
    pub gates: Vec<Part>,
    /// The home under the current layout: where the rows go once every
    /// gate has released the target.
    pub home: Part,
}

impl Route {
    /// Every object of the chain, gates first, the home last.
    pub fn chain(&self) -> Vec<Part> {
        self.gates.iter().copied().chain([self.home]).collect()
    }
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
    assert!(partitions >= 1, "a layout has at least one partition");
    u32::try_from(hash % u64::from(partitions)).unwrap_or(0)
}

/// The home partition of `target` among `partitions`: FNV-1a (64-bit) of the
/// name's bytes, modulo the count.
pub fn home(target: &Name, partitions: u32) -> u32 {
    bucket(fnv(target.as_str().as_bytes()), partitions)
}

/// The partition that records idempotency `key` of a logical source,
/// whatever its map: `fnv(key) % KEY_HOMES`.
pub fn key_home(key: &str) -> u32 {
    bucket(fnv(key.as_bytes()), KEY_HOMES)
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

/// Which part of its logical source an object is, by its name: `s:i` is
/// partition `i`; any other name is the plain object of the logical source
/// of that name.
pub fn part_of(source: &Name) -> Part {
    partition_of(source).map_or(Part::Plain, |(_, index)| Part::Index(index))
}

/// What an object checks before it accepts a routed request, in the same
/// transaction as its writes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Fence {
    /// The router's epoch (0: an unrouted enqueue).
    pub epoch: u64,
    /// The router's map, as [`PartitionMap::id`]: an object that adopted
    /// another map must refuse it (see `crate::adoption`).
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
mod tests;
