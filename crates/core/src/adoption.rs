//! How an object of a partitioned logical source takes a new map: in two
//! phases, so that no object routes by a map another object still refuses.
//!
//! A router that meets an object without its map runs an *adoption round*:
//!
//! 1. **prepare** at every object that may hold rows (those of every layout
//!    of its map and of every map the objects held before, and the plain
//!    object): each refuses a map under which a router would no longer
//!    reach rows it holds ([`decide_prepare`]). A prepared object takes no
//!    routed request at all: not from an older map (its rows could become
//!    unreachable), not from the new one (another object may still refuse
//!    it).
//! 2. **activate** at the same objects, only once every one prepared: each
//!    takes routed requests of that map from then on ([`decide_activate`]).
//!
//! Invariant (what the two phases buy): every object that accepts routed
//! requests has the same map, and that map reaches every row of every
//! object. Maps are ordered by epoch, and every change of a map raises it:
//! an object refuses an older epoch, and another map under its own epoch.
//! An object activates a map only after every object prepared it, and
//! preparing a newer map deactivates the older one, so two maps are never
//! active at once; an object adds rows only under its active map, so the
//! rows it holds stay reachable by every map it prepared.

#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]
#![deny(clippy::unreachable, clippy::todo, clippy::unimplemented)]

use crate::enqueue::EnqueueRefusal;
use crate::name::Name;
use crate::partition::{Fence, Layout, Part, PartitionMap};

/// What an object stored of the maps routers brought it.
///
/// Invariant: `active` implies `map` is set; `epoch` is `map`'s epoch when
/// `map` is set (a row stored before maps were kept has an epoch alone).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Adoption {
    /// The newest epoch prepared (0: never routed to).
    pub epoch: u64,
    /// The map prepared under `epoch`.
    pub map: Option<PartitionMap>,
    /// Whether `map` was activated: routed requests of it are taken.
    pub active: bool,
    /// When `map` was activated, ms since the epoch (0 when not).
    pub since_ms: u64,
    /// Every object of every map this object prepared: the objects the
    /// logical source has had, as far as this one knows. A router adopting
    /// a map asks them all, so rows left at an object no later map names
    /// are still asked about, even after a round that failed.
    ///
    /// Invariant: sorted, without repeats; only grows.
    pub known: Vec<Part>,
}

impl Adoption {
    /// What this object knows once it prepared `map`.
    pub fn known_with(&self, map: &PartitionMap) -> Vec<Part> {
        let mut known: Vec<Part> = self.known.iter().copied().chain(map.parts()).collect();
        if let Some(m) = &self.map {
            known.extend(m.parts());
        }
        known.sort();
        known.dedup();
        known
    }
}

/// What an object holds that a new map must still reach, read by the
/// shell for [`decide_prepare`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Holdings {
    /// Targets with queued or parked (not discarded) rows here.
    pub targets: Vec<String>,
    /// At the plain object: idempotency keys its plain enqueues recorded
    /// that are still live, and when the last of them expires, ms.
    pub plain_keys: Option<(u64, u64)>,
}

/// What preparing a map does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Prepared {
    /// The object holds this map already, prepared or active: nothing to
    /// write.
    Already,
    /// Store the map, inactive.
    Store,
}

/// Decides whether the object `part` (`name`) may prepare `map`, given
/// what it stored and holds (see the module doc).
pub fn decide_prepare(
    stored: &Adoption,
    name: &Name,
    part: Part,
    map: &PartitionMap,
    holdings: &Holdings,
) -> Result<Prepared, EnqueueRefusal> {
    if map.epoch < stored.epoch {
        return Err(EnqueueRefusal::StaleEpoch { sent: map.epoch, stored: stored.epoch });
    }
    if map.epoch == stored.epoch {
        return match &stored.map {
            Some(m) if m == map => Ok(Prepared::Already),
            Some(_) => Err(EnqueueRefusal::MapChanged { epoch: map.epoch }),
            // Stored before maps were kept: this epoch's map is whatever the
            // routers run; taking it again checks it now.
            None => reachable(stored, name, part, map, holdings).map(|()| Prepared::Store),
        };
    }
    reachable(stored, name, part, map, holdings).map(|()| Prepared::Store)
}

/// Refuses `map` when it leaves something this object holds unreachable.
fn reachable(
    stored: &Adoption,
    name: &Name,
    part: Part,
    map: &PartitionMap,
    holdings: &Holdings,
) -> Result<(), EnqueueRefusal> {
    for held in &holdings.targets {
        // A stored target name that is no longer valid cannot be routed at
        // all: no map reaches it, and none strands it further.
        let Ok(target) = Name::new(held.as_str()) else { continue };
        if !map.reaches(&target, part) {
            let keep = stored.map.as_ref().and_then(|m| {
                m.layouts().find(|l| single(*l).reaches(&target, part) && !map.layouts().any(|c| c == *l))
            });
            return Err(EnqueueRefusal::UnsettledLayout {
                partition: name.to_string(),
                target: held.clone(),
                keep,
            });
        }
    }
    if let (Part::Plain, Some((keys, until_ms))) = (part, holdings.plain_keys) {
        if keys > 0 && !map.has_plain() {
            return Err(EnqueueRefusal::PlainKeys { source: name.to_string(), keys, until_ms });
        }
    }
    Ok(())
}

/// A map of one layout, to ask where that layout routes a target.
fn single(layout: Layout) -> PartitionMap {
    PartitionMap { partitions: layout, epoch: 1, from: Vec::new() }
}

/// Decides whether the object may activate `map`: only the map it prepared.
/// `Ok(true)` when the activation must be written, `Ok(false)` when it is
/// active already.
pub fn decide_activate(stored: &Adoption, map: &PartitionMap) -> Result<bool, EnqueueRefusal> {
    match &stored.map {
        Some(m) if m == map => Ok(!stored.active),
        _ if map.epoch < stored.epoch => {
            Err(EnqueueRefusal::StaleEpoch { sent: map.epoch, stored: stored.epoch })
        }
        _ => Err(EnqueueRefusal::EpochNotAdopted { sent: map.epoch, stored: stored.epoch }),
    }
}

/// Checks a routed request's `fence` against what the object stored: the
/// map it runs must be the active one. Returns that map.
pub fn check_routed(stored: &Adoption, fence: Fence) -> Result<&PartitionMap, EnqueueRefusal> {
    if fence.epoch < stored.epoch {
        return Err(EnqueueRefusal::StaleEpoch { sent: fence.epoch, stored: stored.epoch });
    }
    match &stored.map {
        Some(map) if stored.active && map.epoch == fence.epoch && map.id() == fence.map_id => Ok(map),
        _ => Err(EnqueueRefusal::EpochNotAdopted { sent: fence.epoch, stored: stored.epoch }),
    }
}

/// Whether an unrouted (plain) enqueue may be taken by the object `part`
/// (`name`) at `now_ms`: anywhere no map was ever prepared; at the plain
/// object, also once it has run a map that routes everything to it and
/// nothing elsewhere (`{"partitions":"plain"}`) for a whole dedup horizon,
/// so that every key recorded while the source was partitioned has
/// expired or is recorded here.
pub fn check_unrouted(
    stored: &Adoption,
    name: &Name,
    part: Part,
    now_ms: u64,
    dedup_horizon_ms: u64,
) -> Result<(), EnqueueRefusal> {
    if stored.epoch == 0 && stored.map.is_none() {
        return Ok(());
    }
    match part {
        Part::Index(_) => Err(EnqueueRefusal::PartitionEnqueue { source: name.to_string() }),
        Part::Plain => {
            let plain_only = stored
                .map
                .as_ref()
                .is_some_and(|m| stored.active && m.partitions == Layout::Plain && m.from.is_empty());
            let plain_at_ms = stored.since_ms.saturating_add(dedup_horizon_ms);
            if plain_only && now_ms >= plain_at_ms {
                return Ok(());
            }
            Err(EnqueueRefusal::PartitionedSource {
                source: name.to_string(),
                plain_at_ms: plain_only.then_some(plain_at_ms),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::partition::home;

    fn n(s: &str) -> Name {
        Name::new(s).unwrap()
    }

    fn map(partitions: Layout, epoch: u64, from: &[Layout]) -> PartitionMap {
        PartitionMap { partitions, epoch, from: from.to_vec() }
    }

    fn active(m: &PartitionMap, since_ms: u64) -> Adoption {
        Adoption { epoch: m.epoch, map: Some(m.clone()), active: true, since_ms, known: m.parts() }
    }

    /// A target whose home moves from `from` to `to` partitions, from
    /// partition `at` under `from`.
    fn mover(from: u32, to: u32) -> (String, u32) {
        (0..)
            .map(|i| n(&format!("t{i}")))
            .find(|t| home(t, from) != home(t, to))
            .map(|t| (t.to_string(), home(&t, from)))
            .unwrap()
    }

    #[test]
    fn a_newer_map_is_prepared_only_when_it_reaches_what_the_object_holds() {
        use Layout::Count;
        let m1 = map(Count(2), 1, &[]);
        let (t, at) = mover(2, 3);
        let name = n(&format!("orders:{at}"));
        let holds = Holdings { targets: vec![t.clone()], plain_keys: None };
        let grow = map(Count(3), 2, &[Count(2)]);
        assert_eq!(
            decide_prepare(&active(&m1, 5), &name, Part::Index(at), &grow, &holds),
            Ok(Prepared::Store)
        );
        let skipping = map(Count(3), 2, &[]);
        assert_eq!(
            decide_prepare(&active(&m1, 5), &name, Part::Index(at), &skipping, &holds),
            Err(EnqueueRefusal::UnsettledLayout {
                partition: name.to_string(),
                target: t,
                keep: Some(Count(2))
            })
        );
        let empty = Holdings::default();
        assert_eq!(
            decide_prepare(&active(&m1, 5), &name, Part::Index(at), &skipping, &empty),
            Ok(Prepared::Store)
        );
    }

    #[test]
    fn epochs_only_go_forward_and_each_names_one_map() {
        use Layout::Count;
        let m2 = map(Count(3), 2, &[Count(2)]);
        let stored = active(&m2, 5);
        let none = Holdings::default();
        let name = n("orders:0");
        let older = map(Count(2), 1, &[]);
        assert_eq!(
            decide_prepare(&stored, &name, Part::Index(0), &older, &none),
            Err(EnqueueRefusal::StaleEpoch { sent: 1, stored: 2 })
        );
        assert_eq!(decide_prepare(&stored, &name, Part::Index(0), &m2, &none), Ok(Prepared::Already));
        let dropped_from_same_epoch = map(Count(3), 2, &[]);
        assert_eq!(
            decide_prepare(&stored, &name, Part::Index(0), &dropped_from_same_epoch, &none),
            Err(EnqueueRefusal::MapChanged { epoch: 2 })
        );
        let dropped = map(Count(3), 3, &[]);
        assert_eq!(decide_prepare(&stored, &name, Part::Index(0), &dropped, &none), Ok(Prepared::Store));
    }

    #[test]
    fn only_the_prepared_map_is_activated_and_only_the_active_map_is_served() {
        use Layout::Count;
        let m2 = map(Count(3), 2, &[Count(2)]);
        let prepared =
            Adoption { epoch: 2, map: Some(m2.clone()), active: false, since_ms: 0, known: m2.parts() };
        assert_eq!(
            check_routed(&prepared, Fence::of(&m2)),
            Err(EnqueueRefusal::EpochNotAdopted { sent: 2, stored: 2 }),
            "a prepared map serves nothing"
        );
        let m1 = map(Count(2), 1, &[]);
        assert_eq!(
            check_routed(&prepared, Fence::of(&m1)),
            Err(EnqueueRefusal::StaleEpoch { sent: 1, stored: 2 }),
            "nor does the map before it"
        );
        assert_eq!(decide_activate(&prepared, &m2), Ok(true));
        assert_eq!(decide_activate(&active(&m2, 1), &m2), Ok(false));
        assert_eq!(check_routed(&active(&m2, 1), Fence::of(&m2)), Ok(&m2));
        let m3 = map(Count(4), 3, &[Count(3)]);
        assert_eq!(
            decide_activate(&prepared, &m3),
            Err(EnqueueRefusal::EpochNotAdopted { sent: 3, stored: 2 }),
            "a map never prepared here"
        );
        assert_eq!(decide_activate(&prepared, &m1), Err(EnqueueRefusal::StaleEpoch { sent: 1, stored: 2 }));
    }

    #[test]
    fn an_object_remembers_every_object_of_every_map_it_prepared() {
        use Layout::{Count, Plain};
        let four = map(Count(4), 1, &[]);
        let plain = map(Plain, 2, &[]);
        let stored = active(&four, 1);
        let known = stored.known_with(&plain);
        assert_eq!(known, vec![Part::Plain, Part::Index(0), Part::Index(1), Part::Index(2), Part::Index(3)]);
        let after = Adoption { epoch: 2, map: Some(plain.clone()), active: false, since_ms: 0, known };
        assert_eq!(after.known_with(&plain).len(), 5, "a plain-only map forgets none of the four partitions");
    }

    #[test]
    fn the_plain_object_keeps_its_keys_reachable() {
        use Layout::{Count, Plain};
        let name = n("orders");
        let holds = Holdings { targets: vec![], plain_keys: Some((3, 9_000)) };
        let with_plain = map(Count(2), 1, &[Plain]);
        let without = map(Count(2), 1, &[]);
        let fresh = Adoption::default();
        assert_eq!(decide_prepare(&fresh, &name, Part::Plain, &with_plain, &holds), Ok(Prepared::Store));
        assert_eq!(
            decide_prepare(&fresh, &name, Part::Plain, &without, &holds),
            Err(EnqueueRefusal::PlainKeys { source: "orders".into(), keys: 3, until_ms: 9_000 })
        );
        let rows = Holdings { targets: vec!["a".into()], plain_keys: None };
        assert!(matches!(
            decide_prepare(&fresh, &name, Part::Plain, &without, &rows),
            Err(EnqueueRefusal::UnsettledLayout { keep: None, .. })
        ));
    }

    #[test]
    fn an_unrouted_enqueue_is_taken_where_no_map_was_and_at_a_plain_object_a_horizon_after_it_went_back() {
        use Layout::{Count, Plain};
        let name = n("orders");
        assert_eq!(check_unrouted(&Adoption::default(), &name, Part::Plain, 0, 10), Ok(()));
        let parted = active(&map(Count(2), 1, &[]), 100);
        assert!(matches!(
            check_unrouted(&parted, &n("orders:1"), Part::Index(1), 0, 10),
            Err(EnqueueRefusal::PartitionEnqueue { .. })
        ));
        assert!(matches!(
            check_unrouted(&parted, &name, Part::Plain, 10_000, 10),
            Err(EnqueueRefusal::PartitionedSource { plain_at_ms: None, .. })
        ));
        let back = active(&map(Plain, 3, &[]), 100);
        assert_eq!(
            check_unrouted(&back, &name, Part::Plain, 109, 10),
            Err(EnqueueRefusal::PartitionedSource { source: "orders".into(), plain_at_ms: Some(110) })
        );
        assert_eq!(check_unrouted(&back, &name, Part::Plain, 110, 10), Ok(()), "at the edge");
        let settling = active(&map(Plain, 3, &[Count(2)]), 100);
        assert!(
            check_unrouted(&settling, &name, Part::Plain, 10_000, 10).is_err(),
            "partitions may hold rows"
        );
    }
}
