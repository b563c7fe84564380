//! What a partitioned source's router and the source objects behind it say
//! to each other: the two phases of adopting a map (`POST /prepare`,
//! `POST /activate`), a key's attempt at its home (`POST /keys`), the seal
//! of a retried key at each object it reached (`POST /seal`), the probe of
//! a plain layout's key (`POST /plain-key`) and how a change of layout
//! settles (`GET /settling/{layout}`). Only a router sends these (their
//! reach is [`Reach::Router`](crate::Reach::Router)); a routed enqueue's
//! key travels in headers as a [`RoutedKey`].

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::source::Enqueued;
use crate::core::{KeyVerdict, Part, PartitionMap, Taken, Ticket};

/// `POST /prepare`'s and `POST /activate`'s body.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AdoptBody {
    /// The router's map.
    pub map: PartitionMap,
}

/// `POST /prepare`'s reply.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PrepareReply {
    /// Every object the preparing object knows its logical source has
    /// had, under any map it adopted.
    pub known: Vec<Part>,
}

/// `POST /activate`'s reply.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Activated {
    /// Always true: an object that cannot activate answers an error.
    pub active: bool,
}

/// `POST /keys`'s body.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeyBody {
    /// The idempotency key.
    pub key: String,
    /// The digest of the whole request's content.
    pub digest: String,
    /// Every object this attempt may send rows to.
    pub reach: Vec<Part>,
}

/// `POST /keys`'s reply: a [`KeyVerdict`] on the wire.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct KeyReply {
    /// `fresh` (the first attempt) or `retry`.
    pub verdict: String,
    /// This attempt.
    pub ticket: Ticket,
    /// For a retry: the objects earlier attempts may have sent rows to.
    #[serde(default)]
    pub reach: Vec<Part>,
}

impl From<KeyVerdict> for KeyReply {
    fn from(v: KeyVerdict) -> KeyReply {
        match v {
            KeyVerdict::Fresh(ticket) => KeyReply { verdict: "fresh".into(), ticket, reach: Vec::new() },
            KeyVerdict::Retry { ticket, reach } => KeyReply { verdict: "retry".into(), ticket, reach },
        }
    }
}

impl KeyReply {
    /// The verdict it carries; `None` for one this build does not know.
    pub fn verdict(self) -> Option<KeyVerdict> {
        match self.verdict.as_str() {
            "fresh" => Some(KeyVerdict::Fresh(self.ticket)),
            "retry" => Some(KeyVerdict::Retry { ticket: self.ticket, reach: self.reach }),
            _ => None,
        }
    }
}

/// `POST /seal`'s body.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SealBody {
    /// The idempotency key.
    pub key: String,
    /// The digest of the whole request's content.
    pub digest: String,
    /// The retry's attempt.
    pub ticket: Ticket,
}

/// What a seal found: the rows this object took for the key, by target
/// (`POST /seal`'s reply).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sealed {
    /// The rows taken, by target.
    pub taken: BTreeMap<String, Taken>,
    /// Rows in this object's outbox.
    pub queued_rows: u64,
    /// Rows parked at this object.
    pub parked_rows: u64,
}

/// `POST /plain-key`'s body.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlainKeyBody {
    /// The idempotency key.
    pub key: String,
    /// The digest of the whole request's content.
    pub digest: String,
}

/// `POST /plain-key`'s reply.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlainKeyReply {
    /// The original enqueue, as a duplicate, when the plain object's plain
    /// enqueues recorded the key; none for a key it does not know.
    pub enqueued: Option<Enqueued>,
}

/// What an object holds that keeps a change of its logical source's map
/// from settling (`GET /settling/{layout}`'s reply).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Settling {
    /// Targets it holds rows for whose home under the current layout is
    /// another object.
    pub foreign_targets: u64,
    /// At the plain object: idempotency keys its plain enqueues recorded
    /// that are still live.
    pub plain_keys: u64,
    /// When the last of those expires, ms (0: none).
    pub plain_keys_until_ms: u64,
}

/// A routed request's key: the key, the content it names and the attempt.
/// The key travels in the enqueue's body, the digest and the attempt in
/// its headers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RoutedKey<'a> {
    /// The idempotency key.
    pub key: &'a str,
    /// Hex SHA-256 of the whole request's content.
    pub digest: &'a str,
    /// The attempt, as the key's home answered it.
    pub ticket: Ticket,
}
