//! Outbox rows: their effects and their validation. Their persisted form,
//! and its decoding into a deliverable row, is `row/stored.rs`.
//!
//! A row is addressed to one target object and carries key puts and
//! deletes. Its body (the effects) is encoded once, at enqueue, as compact
//! JSON; the source stores that text and later sends it to the target
//! verbatim, so the relay never re-encodes a row on the delivery path.

#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]
#![deny(clippy::unreachable, clippy::todo, clippy::unimplemented)]

use crate::codes::ErrorCode;
use std::collections::BTreeSet;
use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use crate::json::ValueError;
use crate::limits::{MAX_EFFECTS_PER_ROW, MAX_KEY_BYTES, MAX_ROW_BYTES, MAX_VALUE_BYTES, TRACEPARENT_BYTES};
use crate::trace::Traceparent;

mod stored;

pub use stored::{CorruptRow, QueuedRow, StoredRow};

/// A JSON value kept as its compact text.
///
/// Invariant: the text is one valid JSON value.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(transparent)]
pub struct JsonValue(Box<RawValue>);

impl JsonValue {
    /// Encodes `value` compactly (object keys sorted, as serde_json orders them).
    #[allow(clippy::expect_used, reason = "serde_json serialises any Value, and its output is JSON")]
    pub fn from_value(value: &serde_json::Value) -> JsonValue {
        let text = serde_json::to_string(value).expect("a Value always serialises");
        JsonValue(RawValue::from_string(text).expect("serde_json output is valid JSON"))
    }

    /// Parses `text` as one JSON value, keeping it verbatim.
    pub fn from_text(text: &str) -> Result<JsonValue, serde_json::Error> {
        RawValue::from_string(text.to_owned()).map(JsonValue)
    }

    /// The JSON text.
    pub fn as_str(&self) -> &str {
        self.0.get()
    }

    /// The value read as a `T` of your own (a struct, a string, an integer
    /// type wide enough for it). The relay itself never decodes values.
    pub fn decode<T: serde::de::DeserializeOwned>(&self) -> Result<T, serde_json::Error> {
        serde_json::from_str(self.as_str())
    }
}

impl PartialEq for JsonValue {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for JsonValue {}

/// The effects of one row, applied in order: every put, then every delete.
///
/// Invariant (checked by [`Effects::validate`]): 1..=[`MAX_EFFECTS_PER_ROW`]
/// effects, every key 1..=[`MAX_KEY_BYTES`] bytes and named once, every value
/// at most [`MAX_VALUE_BYTES`], the encoding at most [`MAX_ROW_BYTES`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct Effects {
    /// Keys to set, with their JSON values.
    #[serde(default)]
    pub puts: Vec<(String, JsonValue)>,
    /// Keys to remove.
    #[serde(default)]
    pub deletes: Vec<String>,
    /// The producer's W3C trace context, when the enqueue carried one. Last
    /// in the encoding, so [`Effects::untraced`] can set it aside.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<Traceparent>,
}

/// Why a row is not acceptable. Each has a stable code for the HTTP API.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RowError {
    /// The row has neither puts nor deletes.
    NoEffects,
    /// More than [`MAX_EFFECTS_PER_ROW`] effects; carries the count.
    TooManyEffects(u32),
    /// A key is empty.
    EmptyKey,
    /// A key is over [`MAX_KEY_BYTES`]; carries its length.
    KeyTooLong(u32),
    /// A value's JSON is over [`MAX_VALUE_BYTES`]; carries its length.
    ValueTooLarge(u32),
    /// A key appears twice in one row; carries the key.
    DuplicateKey(String),
    /// The encoded row is over [`MAX_ROW_BYTES`] and cannot fit a target
    /// batch; carries its length.
    RowTooLarge(u32),
    /// The value put at `key` is not acceptable JSON (see [`crate::json`]).
    Value {
        /// The key whose value it is.
        key: String,
        /// What is wrong with the value.
        error: ValueError,
    },
    /// The row's delay is refused (see [`crate::delay`]).
    Delay(crate::delay::DelayError),
}

impl RowError {
    /// Stable machine-readable code.
    pub fn code(&self) -> ErrorCode {
        match self {
            RowError::NoEffects => ErrorCode::RowWithoutEffects,
            RowError::TooManyEffects(_) => ErrorCode::TooManyEffects,
            RowError::EmptyKey => ErrorCode::EmptyKey,
            RowError::KeyTooLong(_) => ErrorCode::KeyTooLong,
            RowError::ValueTooLarge(_) => ErrorCode::ValueTooLarge,
            RowError::DuplicateKey(_) => ErrorCode::DuplicateKey,
            RowError::RowTooLarge(_) => ErrorCode::RowTooLarge,
            RowError::Value { error, .. } => error.code(),
            RowError::Delay(e) => e.code(),
        }
    }
}

impl fmt::Display for RowError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RowError::NoEffects => write!(f, "row has no puts and no deletes"),
            RowError::TooManyEffects(n) => {
                write!(f, "row has {n} effects; the limit is {MAX_EFFECTS_PER_ROW}")
            }
            RowError::EmptyKey => write!(f, "a key is empty"),
            RowError::KeyTooLong(n) => {
                write!(f, "a key is {n} bytes; the limit is {MAX_KEY_BYTES}")
            }
            RowError::ValueTooLarge(n) => {
                write!(f, "a value encodes to {n} bytes; the limit is {MAX_VALUE_BYTES}")
            }
            RowError::DuplicateKey(k) => write!(f, "key {k:?} appears twice in one row"),
            RowError::RowTooLarge(n) => {
                write!(f, "row encodes to {n} bytes; one target batch holds rows of at most {MAX_ROW_BYTES}")
            }
            RowError::Value { key, error } => write!(f, "value of key {key:?}: {error}"),
            RowError::Delay(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for RowError {}

fn len_u32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

impl Effects {
    /// Number of puts plus deletes.
    pub fn count(&self) -> u32 {
        len_u32(self.puts.len() + self.deletes.len())
    }

    /// Checks the per-row limits except the encoded size (see [`encode`]).
    ///
    /// [`encode`]: Effects::encode
    pub fn validate(&self) -> Result<(), RowError> {
        let count = self.count();
        if count == 0 {
            return Err(RowError::NoEffects);
        }
        if count > MAX_EFFECTS_PER_ROW {
            return Err(RowError::TooManyEffects(count));
        }
        let mut seen = BTreeSet::new();
        let keys = self.puts.iter().map(|(k, _)| k).chain(self.deletes.iter());
        for key in keys {
            if key.is_empty() {
                return Err(RowError::EmptyKey);
            }
            if key.len() > MAX_KEY_BYTES as usize {
                return Err(RowError::KeyTooLong(len_u32(key.len())));
            }
            if !seen.insert(key.as_str()) {
                return Err(RowError::DuplicateKey(key.clone()));
            }
        }
        for (_, value) in &self.puts {
            if value.as_str().len() > MAX_VALUE_BYTES as usize {
                return Err(RowError::ValueTooLarge(len_u32(value.as_str().len())));
            }
        }
        Ok(())
    }

    /// Validates and encodes the body that the outbox stores and the target
    /// receives.
    #[allow(clippy::expect_used, reason = "strings and raw JSON values always serialise")]
    pub fn encode(&self) -> Result<String, RowError> {
        self.validate()?;
        let body = serde_json::to_string(self).expect("effects always serialise");
        if body.len() > MAX_ROW_BYTES as usize {
            return Err(RowError::RowTooLarge(len_u32(body.len())));
        }
        Ok(body)
    }

    /// The body without its trace context: what identifies the row's
    /// content (an idempotent retry may carry a new `traceparent`). A body
    /// from [`Effects::encode`] ends with `,"trace":"<55 bytes>"}` when it
    /// has one, and with `]}` otherwise.
    pub fn untraced(body: &str) -> std::borrow::Cow<'_, str> {
        const SUFFIX_BYTES: usize = TRACEPARENT_BYTES as usize + r#","trace":""}"#.len();
        let cut = body.len().saturating_sub(SUFFIX_BYTES);
        match (body.get(..cut), body.get(cut..)) {
            (Some(head), Some(tail)) if tail.starts_with(r#","trace":""#) && tail.ends_with(r#""}"#) => {
                std::borrow::Cow::Owned(format!("{head}}}"))
            }
            _ => std::borrow::Cow::Borrowed(body),
        }
    }

    /// The trace context a body from [`Effects::encode`] carries, if any,
    /// without decoding it.
    pub fn trace_of(body: &str) -> Option<&str> {
        let untraced_len = Effects::untraced(body).len();
        if untraced_len == body.len() {
            return None;
        }
        let start = untraced_len - 1 + r#","trace":""#.len();
        body.get(start..start + TRACEPARENT_BYTES as usize)
    }

    /// Decodes and validates a body produced by [`Effects::encode`].
    pub fn decode(body: &str) -> Result<Effects, CorruptRow> {
        if body.len() > MAX_ROW_BYTES as usize {
            return Err(CorruptRow::Body(format!("{} bytes", body.len())));
        }
        let effects: Effects = serde_json::from_str(body).map_err(|e| CorruptRow::Body(e.to_string()))?;
        effects.validate().map_err(|e| CorruptRow::Body(e.to_string()))?;
        Ok(effects)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(k: &str, v: serde_json::Value) -> (String, JsonValue) {
        (k.to_owned(), JsonValue::from_value(&v))
    }

    #[test]
    fn a_trace_rides_last_in_the_body_and_can_be_set_aside() {
        let trace = Traceparent::parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01").unwrap();
        let plain = Effects { puts: vec![put("a", serde_json::json!(1))], deletes: vec![], trace: None };
        let traced = Effects { trace: Some(trace.clone()), ..plain.clone() };
        let (p, t) = (plain.encode().unwrap(), traced.encode().unwrap());
        assert_eq!(t, format!(r#"{{"puts":[["a",1]],"deletes":[],"trace":"{trace}"}}"#));
        assert_eq!(Effects::decode(&t).unwrap(), traced);
        assert_eq!(Effects::untraced(&t), p, "the traced body less its trace is the plain body");
        assert_eq!(Effects::untraced(&p), p, "a plain body is left alone");
        assert_eq!(Effects::trace_of(&t), Some(trace.as_str()));
        assert_eq!(Effects::trace_of(&p), None);
        // A value that merely ends like a trace is not cut: the body ends in "]}".
        let sly =
            Effects { puts: vec![put("k", serde_json::json!(format!(",\"trace\":\"{trace}\"}}")))], ..plain };
        let body = sly.encode().unwrap();
        assert_eq!(Effects::untraced(&body), body);
    }

    #[test]
    fn effects_round_trip_through_their_body() {
        let e = Effects {
            puts: vec![put("a", serde_json::json!({"z": 1, "a": [true, null]}))],
            deletes: vec!["b".into()],
            trace: None,
        };
        let body = e.encode().unwrap();
        assert_eq!(body, r#"{"puts":[["a",{"a":[true,null],"z":1}]],"deletes":["b"]}"#);
        assert_eq!(Effects::decode(&body).unwrap(), e);
    }

    #[test]
    fn row_without_effects_is_rejected() {
        assert_eq!(Effects::default().encode(), Err(RowError::NoEffects));
    }

    #[test]
    fn effect_count_is_checked_at_and_past_the_limit() {
        let mut e = Effects {
            puts: vec![],
            deletes: (0..MAX_EFFECTS_PER_ROW).map(|i| format!("k{i}")).collect(),
            trace: None,
        };
        assert!(e.encode().is_ok());
        e.deletes.push("one-more".into());
        assert_eq!(e.encode(), Err(RowError::TooManyEffects(MAX_EFFECTS_PER_ROW + 1)));
    }

    #[test]
    fn key_length_is_checked_at_and_past_the_limit() {
        let at = "k".repeat(MAX_KEY_BYTES as usize);
        let past = "k".repeat(MAX_KEY_BYTES as usize + 1);
        let ok = Effects { puts: vec![], deletes: vec![at], trace: None };
        assert!(ok.encode().is_ok());
        let bad = Effects { puts: vec![], deletes: vec![past], trace: None };
        assert_eq!(bad.encode(), Err(RowError::KeyTooLong(MAX_KEY_BYTES + 1)));
        let empty = Effects { puts: vec![], deletes: vec![String::new()], trace: None };
        assert_eq!(empty.encode(), Err(RowError::EmptyKey));
    }

    #[test]
    fn value_size_is_checked_at_and_past_the_limit() {
        // A JSON string of n bytes of text encodes to n + 2 bytes.
        let at = "x".repeat(MAX_VALUE_BYTES as usize - 2);
        let e = Effects { puts: vec![put("k", serde_json::json!(at))], deletes: vec![], trace: None };
        assert!(e.encode().is_ok());
        let past = "x".repeat(MAX_VALUE_BYTES as usize - 1);
        let e = Effects { puts: vec![put("k", serde_json::json!(past))], deletes: vec![], trace: None };
        assert_eq!(e.encode(), Err(RowError::ValueTooLarge(MAX_VALUE_BYTES + 1)));
    }

    #[test]
    fn duplicate_key_in_one_row_is_rejected() {
        let e =
            Effects { puts: vec![put("k", serde_json::json!(1))], deletes: vec!["k".into()], trace: None };
        assert_eq!(e.encode(), Err(RowError::DuplicateKey("k".into())));
    }

    #[test]
    fn row_size_is_checked_at_and_past_the_batch_fit_limit() {
        // 17 values of 62 KiB exceed one batch although each value is legal.
        let big = "x".repeat(62 * 1024);
        let e = Effects {
            puts: (0..17).map(|i| put(&format!("k{i}"), serde_json::json!(big))).collect(),
            deletes: vec![],
            trace: None,
        };
        assert!(matches!(e.encode(), Err(RowError::RowTooLarge(n)) if n > MAX_ROW_BYTES));
        // Pad one row to exactly MAX_ROW_BYTES: accepted.
        let mut e = Effects {
            puts: (0..16).map(|i| put(&format!("k{i}"), serde_json::json!(big))).collect(),
            deletes: vec![],
            trace: None,
        };
        let base = e.encode().unwrap().len();
        let pad = MAX_ROW_BYTES as usize - base - r#",["pad",""]"#.len();
        e.puts.push(put("pad", serde_json::json!("y".repeat(pad))));
        assert_eq!(e.encode().unwrap().len(), MAX_ROW_BYTES as usize);
        e.puts.last_mut().unwrap().1 = JsonValue::from_value(&serde_json::json!("y".repeat(pad + 1)));
        assert_eq!(e.encode(), Err(RowError::RowTooLarge(MAX_ROW_BYTES + 1)));
    }
}
