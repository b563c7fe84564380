//! Idempotent enqueue: an optional key names an enqueue; the same key with
//! the same content answers with the original sequences, the same key with
//! different content is a conflict, and neither writes anything. Content
//! identity is a SHA-256 digest of the canonical rows. Records expire after
//! a horizon and are pruned by the alarm in bounded batches.

#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]
#![deny(clippy::unreachable, clippy::todo, clippy::unimplemented)]

use sha2::{Digest, Sha256};

use crate::enqueue::{EncodedRows, KeyError};
use crate::limits::MAX_IDEMPOTENCY_KEY_BYTES;
use crate::row::Effects;

/// What is remembered about one keyed enqueue.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DedupRecord {
    /// The caller's key.
    pub key: String,
    /// Hex SHA-256 of the canonical rows.
    pub digest: String,
    /// First sequence the enqueue was given (its sequences are contiguous).
    pub first_seq: u64,
    /// Rows in the enqueue.
    pub rows: u32,
    /// When it was accepted, ms since the epoch.
    pub at_ms: u64,
    /// Each row's effective due time as the enqueue answered it, in the
    /// order of its sequences; empty when no row waited. A duplicate
    /// answers the same.
    pub due_ms: Vec<u64>,
}

impl DedupRecord {
    /// The sequences the original enqueue was given.
    pub fn seqs(&self) -> Vec<u64> {
        (self.first_seq..self.first_seq + u64::from(self.rows)).collect()
    }

    /// Whether the record has outlived `horizon_ms` at `now_ms`.
    pub fn expired(&self, now_ms: u64, horizon_ms: u64) -> bool {
        now_ms.saturating_sub(self.at_ms) >= horizon_ms
    }
}

/// What to do with a keyed enqueue.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Dedup {
    /// A new key (or an expired one): enqueue and remember it.
    Fresh,
    /// The same key and content were accepted before: answer with these.
    Duplicate(Vec<u64>),
    /// The key was used for different content.
    Conflict,
}

/// Checks a key's length.
pub fn validate_key(key: &str) -> Result<(), KeyError> {
    if key.is_empty() {
        return Err(KeyError::Empty);
    }
    if key.len() > MAX_IDEMPOTENCY_KEY_BYTES as usize {
        return Err(KeyError::TooLong(u32::try_from(key.len()).unwrap_or(u32::MAX)));
    }
    Ok(())
}

/// Hex SHA-256 over the canonical rows: each row's target and encoded
/// body (canonical values), length-prefixed so no two row lists share an
/// encoding.
pub fn content_digest(rows: &EncodedRows) -> String {
    let mut hash = Sha256::new();
    for (target, body, delay) in &rows.rows {
        let body = Effects::untraced(body);
        for part in [target.as_str(), &*body] {
            hash.update((part.len() as u64).to_be_bytes());
            hash.update(part.as_bytes());
        }
        // Only delayed rows add a part, so an undelayed row's digest is what
        // it was before delays existed (stored records stay comparable).
        if let Some(d) = delay {
            let part = d.digest_text();
            hash.update((part.len() as u64).to_be_bytes());
            hash.update(part.as_bytes());
        }
    }
    hash.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// Decides a keyed enqueue given the stored record for its key.
pub fn decide(record: Option<&DedupRecord>, digest: &str, now_ms: u64, horizon_ms: u64) -> Dedup {
    match record {
        Some(r) if !r.expired(now_ms, horizon_ms) && r.digest == digest => Dedup::Duplicate(r.seqs()),
        Some(r) if !r.expired(now_ms, horizon_ms) => Dedup::Conflict,
        _ => Dedup::Fresh,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::enqueue::{encode_rows, EnqueueRow};
    use crate::Name;
    use serde_json::json;

    fn row(t: &str, v: serde_json::Value) -> EnqueueRow {
        EnqueueRow::new(Name::new(t).unwrap(), vec![("k".into(), v)], vec![])
    }

    fn digest(rows: &[EnqueueRow]) -> String {
        content_digest(&encode_rows(rows).unwrap())
    }

    #[test]
    fn a_retry_with_a_new_trace_is_the_same_content() {
        let t1 =
            crate::Traceparent::parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01").unwrap();
        let t2 =
            crate::Traceparent::parse("00-4bf92f3577b34da6a3ce929d0e0e4736-11f067aa0ba902b7-01").unwrap();
        let plain = encode_rows(&[row("t", json!(1))]).unwrap();
        let a = encode_rows(&[row("t", json!(1)).with_trace(Some(t1))]).unwrap();
        let b = encode_rows(&[row("t", json!(1)).with_trace(Some(t2))]).unwrap();
        assert_ne!(a.rows[0].1, b.rows[0].1, "the bodies carry their traces");
        assert_eq!(content_digest(&a), content_digest(&b));
        assert_eq!(content_digest(&a), content_digest(&plain));
        assert_ne!(content_digest(&a), content_digest(&encode_rows(&[row("t", json!(2))]).unwrap()));
    }

    #[test]
    fn digest_ignores_spelling_but_not_content() {
        let spaced: EnqueueRow =
            serde_json::from_str(r#"{"target":"t","puts":[["k", {"b":1, "a":2}]]}"#).unwrap();
        let tight = row("t", json!({"a": 2, "b": 1}));
        assert_eq!(digest(&[spaced]), digest(std::slice::from_ref(&tight)));
        assert_ne!(digest(std::slice::from_ref(&tight)), digest(&[row("t", json!({"a": 2}))]));
        assert_ne!(digest(std::slice::from_ref(&tight)), digest(&[row("u", json!({"a": 2, "b": 1}))]));
        assert_ne!(digest(std::slice::from_ref(&tight)), digest(&[tight.clone(), tight]));
        assert_eq!(content_digest(&EncodedRows { rows: vec![], bytes: 0 }).len(), 64);
    }

    #[test]
    fn same_key_same_content_is_a_duplicate_different_content_a_conflict() {
        let r = DedupRecord {
            key: "k".into(),
            digest: "d1".into(),
            first_seq: 5,
            rows: 3,
            at_ms: 1_000,
            due_ms: vec![],
        };
        assert_eq!(decide(Some(&r), "d1", 2_000, 10_000), Dedup::Duplicate(vec![5, 6, 7]));
        assert_eq!(decide(Some(&r), "d2", 2_000, 10_000), Dedup::Conflict);
        assert_eq!(decide(None, "d1", 2_000, 10_000), Dedup::Fresh);
    }

    #[test]
    fn a_record_expires_at_its_horizon() {
        let r = DedupRecord {
            key: "k".into(),
            digest: "d".into(),
            first_seq: 1,
            rows: 1,
            at_ms: 1_000,
            due_ms: vec![],
        };
        assert_eq!(decide(Some(&r), "d", 10_999, 10_000), Dedup::Duplicate(vec![1]));
        assert_eq!(decide(Some(&r), "d", 11_000, 10_000), Dedup::Fresh);
        assert_eq!(decide(Some(&r), "other", 11_000, 10_000), Dedup::Fresh);
    }

    #[test]
    fn keys_are_checked_at_and_past_their_limit() {
        assert!(validate_key(&"k".repeat(MAX_IDEMPOTENCY_KEY_BYTES as usize)).is_ok());
        assert_eq!(
            validate_key(&"k".repeat(MAX_IDEMPOTENCY_KEY_BYTES as usize + 1)),
            Err(KeyError::TooLong(MAX_IDEMPOTENCY_KEY_BYTES + 1))
        );
        assert_eq!(validate_key(""), Err(KeyError::Empty));
    }
}
