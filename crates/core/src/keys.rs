//! Idempotency keys at a partitioned logical source: one record per key,
//! whatever the map, and attempts that cannot overlap.
//!
//! A keyed request's rows may commit at several objects, each in its own
//! transaction, and a router may die between them. Its retry must answer
//! what the first attempt committed, under any map change since, and
//! commit only what it did not. Three records make that so:
//!
//! - **The key's record** ([`KeyRecord`]), at the key's home
//!   (`partition::key_home`, fixed whatever the map): the content the key
//!   names, the *generation* (when the key was first recorded) and the
//!   newest *attempt*, and the *reach*: every object any attempt may have
//!   sent rows to. An attempt starts by recording itself there
//!   ([`decide_key`]): a new key is attempt 1; the same content again is
//!   the next attempt, answered with the reach of the earlier ones; other
//!   content is a conflict.
//! - **A routed record per object** ([`RoutedRecord`]), written in the
//!   transaction that commits the key's rows there: the newest attempt the
//!   object has seen for the key, and the rows it took, by target (a
//!   request's rows for one target always travel together, so a target is
//!   the unit that commits once).
//! - **The seal.** Before it sends anything, a retry *seals* every object
//!   in the reach ([`decide_seal`]): each records the retry's attempt and
//!   answers what it took. From then on an object refuses every older
//!   attempt ([`decide_routed`]: `superseded`), so what earlier attempts
//!   committed can no longer grow: the retry sends only the targets no
//!   object took, and answers the others' positions from the seal.
//!
//! Invariant: a target's rows under one key commit at most once per
//! generation. An attempt commits a target only at an object that has not
//! seen a newer attempt; a newer attempt sends a target only after every
//! object an older attempt could have sent it to answered its seal without
//! it, and those objects refuse the older attempts from then on.
//!
//! A key lives a dedup horizon from its generation. Routed records are
//! written at or after their generation and pruned a horizon after they
//! were written, so they outlive the key's record.

#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]
#![deny(clippy::unreachable, clippy::todo, clippy::unimplemented)]

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::enqueue::EnqueueRefusal;
use crate::partition::Part;

/// One attempt of a keyed routed request: the key's generation and the
/// attempt within it. Ordered: a later generation, or a later attempt of
/// the same one, supersedes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Ticket {
    /// When the key was first recorded at its home, ms since the epoch:
    /// the generation, renewed when the key expires and is used again.
    pub gen_ms: u64,
    /// The attempt within the generation, from 1.
    pub attempt: u32,
}

/// A key's record at its home.
///
/// Invariant: `attempt >= 1`; `reach` is sorted, without repeats, and holds
/// every object any attempt of this generation was told it may send to.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyRecord {
    /// Hex SHA-256 of the request's content (see `dedup::content_digest`).
    pub digest: String,
    /// The generation: when the key was recorded, ms.
    pub gen_ms: u64,
    /// The newest attempt.
    pub attempt: u32,
    /// Every object an attempt may have sent rows to.
    pub reach: Vec<Part>,
}

impl KeyRecord {
    /// The newest attempt's ticket.
    pub fn ticket(&self) -> Ticket {
        Ticket { gen_ms: self.gen_ms, attempt: self.attempt }
    }
}

/// What a key's home answers an attempt.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KeyVerdict {
    /// The key is new (or expired): the first attempt.
    Fresh(Ticket),
    /// The same content under a live key: a later attempt, which must seal
    /// `reach` (what earlier attempts may have sent to) before it sends.
    Retry {
        /// This attempt.
        ticket: Ticket,
        /// The objects earlier attempts may have sent rows to.
        reach: Vec<Part>,
    },
}

/// Whether a key recorded at `gen_ms` is live at `now_ms`.
pub fn key_live(gen_ms: u64, now_ms: u64, horizon_ms: u64) -> bool {
    now_ms.saturating_sub(gen_ms) < horizon_ms
}

/// Decides an attempt of a keyed request for content `digest` that may
/// send rows to `reach`, given the key's stored record: the verdict and
/// the record to store.
pub fn decide_key(
    key: &str,
    stored: Option<&KeyRecord>,
    digest: &str,
    reach: &[Part],
    now_ms: u64,
    horizon_ms: u64,
) -> Result<(KeyVerdict, KeyRecord), EnqueueRefusal> {
    let live = stored.filter(|r| key_live(r.gen_ms, now_ms, horizon_ms));
    let Some(record) = live else {
        // A new generation starts after the last one's, even on a clock
        // that stepped back, so its tickets supersede every older one.
        let gen_ms = stored.map_or(now_ms, |r| now_ms.max(r.gen_ms.saturating_add(1)));
        let record = KeyRecord { digest: digest.to_owned(), gen_ms, attempt: 1, reach: merged(&[], reach) };
        return Ok((KeyVerdict::Fresh(record.ticket()), record));
    };
    if record.digest != digest {
        return Err(EnqueueRefusal::Conflict { key: key.to_owned() });
    }
    let attempt = record.attempt.checked_add(1).ok_or(EnqueueRefusal::Superseded { key: key.to_owned() })?;
    let next = KeyRecord {
        digest: record.digest.clone(),
        gen_ms: record.gen_ms,
        attempt,
        reach: merged(&record.reach, reach),
    };
    Ok((KeyVerdict::Retry { ticket: next.ticket(), reach: record.reach.clone() }, next))
}

fn merged(a: &[Part], b: &[Part]) -> Vec<Part> {
    let all: BTreeSet<Part> = a.iter().chain(b).copied().collect();
    all.into_iter().collect()
}

/// The rows one object took for one target under a key.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Taken {
    /// Their sequences at the object, in request order.
    pub seqs: Vec<u64>,
    /// Their effective due times, in the same order (empty when none waited).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub due_ms: Vec<u64>,
    /// When they committed, ms.
    pub at_ms: u64,
}

/// What one object stored of a key: see the module doc.
///
/// Invariant: every target in `taken` was committed here under `ticket`'s
/// generation; `ticket` never moves back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RoutedRecord {
    /// The request's content (the key's digest), so that the object can
    /// answer an unrouted retry of it once it is a plain source again.
    pub digest: String,
    /// The newest attempt this object has seen (committed or sealed).
    pub ticket: Ticket,
    /// The rows taken here, by target.
    pub taken: BTreeMap<String, Taken>,
    /// When the record was last written, ms: it is pruned a horizon after.
    pub at_ms: u64,
}

/// An object's record of a key as an attempt sees it: the targets taken in
/// its generation (none when the record is of an older one).
fn current(stored: Option<&RoutedRecord>, ticket: Ticket) -> Result<BTreeMap<String, Taken>, ()> {
    match stored {
        Some(r) if r.ticket > ticket => Err(()),
        Some(r) if r.ticket.gen_ms == ticket.gen_ms => Ok(r.taken.clone()),
        _ => Ok(BTreeMap::new()),
    }
}

/// Decides a routed enqueue of attempt `ticket` under `key` at an object
/// holding `stored`: refused when a newer attempt came first; otherwise
/// the targets this object already took in the generation.
pub fn decide_routed(
    key: &str,
    stored: Option<&RoutedRecord>,
    ticket: Ticket,
) -> Result<BTreeMap<String, Taken>, EnqueueRefusal> {
    current(stored, ticket).map_err(|()| EnqueueRefusal::Superseded { key: key.to_owned() })
}

/// Decides a seal by attempt `ticket`: refused when a newer attempt sealed
/// first; otherwise the record to store (this attempt, the targets taken)
/// and the targets taken, for the retry's answer.
pub fn decide_seal(
    key: &str,
    stored: Option<&RoutedRecord>,
    digest: &str,
    ticket: Ticket,
    now_ms: u64,
) -> Result<RoutedRecord, EnqueueRefusal> {
    let taken = decide_routed(key, stored, ticket)?;
    Ok(RoutedRecord { digest: digest.to_owned(), ticket, taken, at_ms: now_ms })
}

#[cfg(test)]
mod tests {
    use super::*;

    const H: u64 = 1_000;

    fn taken(seq: u64) -> Taken {
        Taken { seqs: vec![seq], due_ms: vec![], at_ms: 5 }
    }

    #[test]
    fn a_key_is_fresh_then_retried_then_fresh_again_past_its_horizon() {
        let (v, r1) = decide_key("k", None, "d", &[Part::Index(2), Part::Plain], 100, H).unwrap();
        assert_eq!(v, KeyVerdict::Fresh(Ticket { gen_ms: 100, attempt: 1 }));
        assert_eq!(r1.reach, vec![Part::Plain, Part::Index(2)]);
        let (v, r2) = decide_key("k", Some(&r1), "d", &[Part::Index(0)], 500, H).unwrap();
        assert_eq!(
            v,
            KeyVerdict::Retry { ticket: Ticket { gen_ms: 100, attempt: 2 }, reach: r1.reach.clone() },
            "the reach of the earlier attempts, not this one's"
        );
        assert_eq!(r2.reach, vec![Part::Plain, Part::Index(0), Part::Index(2)]);
        assert_eq!(
            decide_key("k", Some(&r2), "other", &[], 1_099, H),
            Err(EnqueueRefusal::Conflict { key: "k".into() }),
            "other content, at the edge of the horizon"
        );
        let (v, r3) = decide_key("k", Some(&r2), "other", &[Part::Index(1)], 1_100, H).unwrap();
        assert_eq!(v, KeyVerdict::Fresh(Ticket { gen_ms: 1_100, attempt: 1 }), "past it");
        assert_eq!(r3.reach, vec![Part::Index(1)]);
        assert!(
            matches!(decide_key("k", Some(&r3), "d", &[], 50, H), Err(EnqueueRefusal::Conflict { .. })),
            "a clock behind the generation keeps the key live"
        );
    }

    #[test]
    fn a_seal_stops_every_older_attempt_and_answers_what_they_took() {
        let t1 = Ticket { gen_ms: 100, attempt: 1 };
        let t2 = Ticket { gen_ms: 100, attempt: 2 };
        assert_eq!(decide_routed("k", None, t1), Ok(BTreeMap::new()));
        let mut r = RoutedRecord { digest: "d".into(), ticket: t1, taken: BTreeMap::new(), at_ms: 5 };
        r.taken.insert("a".into(), taken(7));
        let sealed = decide_seal("k", Some(&r), "d", t2, 9).unwrap();
        assert_eq!(sealed.ticket, t2);
        assert_eq!(sealed.taken.get("a"), Some(&taken(7)), "the seal answers what attempt 1 took");
        assert_eq!(
            decide_routed("k", Some(&sealed), t1),
            Err(EnqueueRefusal::Superseded { key: "k".into() }),
            "attempt 1 can take no more here"
        );
        assert_eq!(decide_routed("k", Some(&sealed), t2).unwrap().len(), 1);
        assert!(decide_seal("k", Some(&sealed), "d", t1, 9).is_err(), "an older seal comes too late");
        let next_gen = Ticket { gen_ms: 2_000, attempt: 1 };
        assert_eq!(
            decide_routed("k", Some(&sealed), next_gen),
            Ok(BTreeMap::new()),
            "an older generation is gone"
        );
    }
}
