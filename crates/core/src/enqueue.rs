//! Enqueue planning: validate rows against the named limits, assign
//! sequences after `os`, and stamp the commit-time clock reading.
//!
//! The plan is all-or-nothing: one bad row rejects the request and nothing
//! is written. The shell writes the planned rows and the new `os` in the
//! same atomic block as the caller's own state change.

#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]
#![deny(clippy::unreachable, clippy::todo, clippy::unimplemented)]

use serde::{Deserialize, Serialize};

use crate::delay::Delay;
use crate::json::{canonical, ValueError};
use crate::limits::{MAX_ENQUEUE_BYTES, MAX_ROWS_PER_ENQUEUE, SEQ_MAX};
use crate::name::Name;
use crate::row::{Effects, JsonValue, RowError, StoredRow};
use crate::trace::Traceparent;

mod refusal;

pub use refusal::{unknown_endpoint, Capacity, EnqueueError, EnqueueRefusal, KeyError};

/// One row as a caller submits it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnqueueRow {
    /// The target: the name of the Durable Object the row is delivered to.
    pub target: Name,
    /// Keys to set, with JSON values.
    #[serde(default)]
    pub puts: Vec<(String, JsonValue)>,
    /// Keys to remove.
    #[serde(default)]
    pub deletes: Vec<String>,
    /// The producer's trace context (from a `traceparent` header or option,
    /// never from the row's JSON), stored and sent with the row.
    #[serde(skip)]
    pub trace: Option<Traceparent>,
    /// Deliver no earlier than this time, ms since the epoch (see
    /// [`delay`](crate::delay)); at most [`MAX_DELAY_MS`](crate::MAX_DELAY_MS)
    /// ahead. Not with `delay_ms`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_before_ms: Option<u64>,
    /// Deliver no earlier than this long after the enqueue commits, ms; at
    /// most [`MAX_DELAY_MS`](crate::MAX_DELAY_MS). Not with `not_before_ms`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay_ms: Option<u64>,
}

impl EnqueueRow {
    /// A row of puts and deletes for `target`. Values are normalised at
    /// planning time.
    pub fn new(target: Name, puts: Vec<(String, serde_json::Value)>, deletes: Vec<String>) -> Self {
        let puts = puts.into_iter().map(|(k, v)| (k, JsonValue::from_value(&v))).collect();
        EnqueueRow { target, puts, deletes, trace: None, not_before_ms: None, delay_ms: None }
    }

    /// A row for `target` with no effects yet: add them with
    /// [`put`](EnqueueRow::put) and [`delete`](EnqueueRow::delete).
    pub fn to(target: Name) -> Self {
        EnqueueRow::new(target, Vec::new(), Vec::new())
    }

    /// The same row, also setting `key` to `value`.
    pub fn put(mut self, key: impl Into<String>, value: serde_json::Value) -> Self {
        self.puts.push((key.into(), JsonValue::from_value(&value)));
        self
    }

    /// The same row, also removing `key`.
    pub fn delete(mut self, key: impl Into<String>) -> Self {
        self.deletes.push(key.into());
        self
    }

    /// The same row, delivered no earlier than `delay` says.
    pub fn delayed(mut self, delay: Delay) -> Self {
        (self.not_before_ms, self.delay_ms) = match delay {
            Delay::NotBefore(at) => (Some(at), None),
            Delay::For(ms) => (None, Some(ms)),
        };
        self
    }

    /// The same row carrying `trace`.
    pub fn with_trace(mut self, trace: Option<Traceparent>) -> Self {
        self.trace = trace;
        self
    }

    /// The row's effects with every value in its canonical text (see
    /// [`json`](crate::json)), so equal content always has equal bytes.
    /// Refuses a value that is too deep, names an object key twice or holds
    /// a lone surrogate.
    pub fn normalised_effects(&self) -> Result<Effects, RowError> {
        let mut puts = Vec::with_capacity(self.puts.len());
        for (k, v) in &self.puts {
            let text = canonical(v.as_str()).map_err(|error| RowError::Value { key: k.clone(), error })?;
            let value = JsonValue::from_text(&text)
                .map_err(|_| RowError::Value { key: k.clone(), error: ValueError::TooDeep })?;
            puts.push((k.clone(), value));
        }
        Ok(Effects { puts, deletes: self.deletes.clone(), trace: self.trace.clone() })
    }
}

/// Rows ready to write, and the `os` to write with them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EnqueuePlan {
    /// Rows with sequences `os_before + 1 ..= os`.
    pub rows: Vec<StoredRow>,
    /// The new `os`. Invariant: `os <= SEQ_MAX`.
    pub os: u64,
    /// Total encoded body bytes.
    pub bytes: u64,
}

impl EnqueuePlan {
    /// The sequences assigned, in request order.
    pub fn seqs(&self) -> Vec<u64> {
        self.rows.iter().map(|r| r.seq).collect()
    }
}

/// Rows validated and encoded, in request order: what the dedup digest
/// covers and what [`plan_encoded`] sequences.
///
/// Invariant: 1..=[`MAX_ROWS_PER_ENQUEUE`] rows, every body a valid encoded
/// [`Effects`], `bytes` their total length, at most [`MAX_ENQUEUE_BYTES`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EncodedRows {
    /// Each row's target, encoded body and requested delay.
    pub rows: Vec<(Name, String, Option<Delay>)>,
    /// Total body bytes.
    pub bytes: u64,
}

/// Validates `rows` against the row and request limits and encodes their
/// bodies. Pure: the first refusal names the row.
pub fn encode_rows(rows: &[EnqueueRow]) -> Result<EncodedRows, EnqueueError> {
    if rows.is_empty() {
        return Err(EnqueueError::NoRows);
    }
    let count = u32::try_from(rows.len()).unwrap_or(u32::MAX);
    if count > MAX_ROWS_PER_ENQUEUE {
        return Err(EnqueueError::TooManyRows(count));
    }
    let mut encoded = Vec::with_capacity(rows.len());
    let mut bytes: u64 = 0;
    for (index, row) in (0u32..).zip(rows) {
        let body = row
            .normalised_effects()
            .and_then(|e| e.encode())
            .map_err(|error| EnqueueError::Row { index, error })?;
        let delay = Delay::from_fields(row.not_before_ms, row.delay_ms)
            .map_err(|e| EnqueueError::Row { index, error: RowError::Delay(e) })?;
        bytes += body.len() as u64;
        if bytes > u64::from(MAX_ENQUEUE_BYTES) {
            return Err(EnqueueError::TooManyBytes(bytes));
        }
        encoded.push((row.target.clone(), body, delay));
    }
    Ok(EncodedRows { rows: encoded, bytes })
}

/// Assigns encoded rows sequences after `os`, stamped `now_ms`, refusing
/// them when the source would pass its `capacity` bounds.
pub fn plan_encoded(
    os: u64,
    now_ms: u64,
    encoded: &EncodedRows,
    capacity: &Capacity,
) -> Result<EnqueuePlan, EnqueueError> {
    assert!(os <= SEQ_MAX, "stored os {os} past SEQ_MAX");
    let count = encoded.rows.len() as u64;
    if SEQ_MAX - os < count {
        return Err(EnqueueError::SequenceExhausted);
    }
    let (after_rows, after_bytes) = (capacity.rows + count, capacity.bytes + encoded.bytes);
    if after_rows > capacity.max_rows || after_bytes > capacity.max_bytes {
        return Err(EnqueueError::OutboxFull { rows: after_rows, bytes: after_bytes, capacity: *capacity });
    }
    let mut rows = Vec::with_capacity(encoded.rows.len());
    for ((seq, index), (target, body, delay)) in (os + 1..).zip(0u32..).zip(&encoded.rows) {
        let due_ms = match delay {
            Some(d) => {
                d.due_ms(now_ms).map_err(|e| EnqueueError::Row { index, error: RowError::Delay(e) })?
            }
            None => 0,
        };
        rows.push(StoredRow {
            seq,
            target: target.as_str().to_owned(),
            at_ms: now_ms,
            due_ms,
            body: body.clone(),
        });
    }
    let plan = EnqueuePlan { rows, os: os + count, bytes: encoded.bytes };
    assert!(plan.os <= SEQ_MAX);
    Ok(plan)
}

/// Validates `rows` and assigns them sequences after `os`, stamped `now_ms`,
/// refusing them when the source would pass its `capacity` bounds:
/// [`encode_rows`] then [`plan_encoded`].
pub fn plan_enqueue(
    os: u64,
    now_ms: u64,
    rows: &[EnqueueRow],
    capacity: &Capacity,
) -> Result<EnqueuePlan, EnqueueError> {
    plan_encoded(os, now_ms, &encode_rows(rows)?, capacity)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn room() -> Capacity {
        Capacity::with_defaults(0, 0)
    }

    fn row(target: &str, key: &str) -> EnqueueRow {
        EnqueueRow::new(Name::new(target).unwrap(), vec![(key.into(), json!({"b": 1, "a": 2}))], vec![])
    }

    #[test]
    fn sequences_follow_os_and_rows_are_stamped() {
        let plan = plan_enqueue(41, 1_000, &[row("t", "a"), row("u", "b")], &room()).unwrap();
        assert_eq!(plan.seqs(), vec![42, 43]);
        assert_eq!(plan.os, 43);
        assert!(plan.rows.iter().all(|r| r.at_ms == 1_000));
        assert_eq!(plan.rows[0].body, r#"{"puts":[["a",{"a":2,"b":1}]],"deletes":[]}"#);
    }

    #[test]
    fn values_are_normalised_whatever_their_spelling() {
        let spaced: EnqueueRow =
            serde_json::from_str(r#"{"target":"t","puts":[["k", { "b" : 1, "a" : [ 1 , 2 ] }]]}"#).unwrap();
        let plan = plan_enqueue(0, 0, &[spaced], &room()).unwrap();
        assert_eq!(plan.rows[0].body, r#"{"puts":[["k",{"a":[1,2],"b":1}]],"deletes":[]}"#);
    }

    #[test]
    fn a_row_is_built_effect_by_effect() {
        let built =
            EnqueueRow::to(Name::new("t").unwrap()).put("a", json!(1)).delete("b").put("c", json!("x"));
        let plan = plan_enqueue(0, 0, &[built], &room()).unwrap();
        assert_eq!(plan.rows[0].body, r#"{"puts":[["a",1],["c","x"]],"deletes":["b"]}"#);
    }

    #[test]
    fn empty_request_is_refused() {
        assert_eq!(plan_enqueue(0, 0, &[], &room()), Err(EnqueueError::NoRows));
    }

    #[test]
    fn row_count_is_checked_at_and_past_the_limit() {
        let rows: Vec<_> = (0..MAX_ROWS_PER_ENQUEUE).map(|i| row("t", &format!("k{i}"))).collect();
        assert!(plan_enqueue(0, 0, &rows, &room()).is_ok());
        let rows: Vec<_> = (0..=MAX_ROWS_PER_ENQUEUE).map(|i| row("t", &format!("k{i}"))).collect();
        assert_eq!(
            plan_enqueue(0, 0, &rows, &room()),
            Err(EnqueueError::TooManyRows(MAX_ROWS_PER_ENQUEUE + 1))
        );
    }

    /// A row whose body encodes to exactly `n` bytes.
    fn row_of_bytes(n: usize) -> EnqueueRow {
        let overhead = r#"{"puts":[["k",""]],"deletes":[]}"#.len();
        EnqueueRow::new(Name::new("t").unwrap(), vec![("k".into(), json!("x".repeat(n - overhead)))], vec![])
    }

    #[test]
    fn request_bytes_are_checked_at_and_past_the_limit() {
        let chunk = 65_000;
        let full = 16;
        let last = MAX_ENQUEUE_BYTES as usize - full * chunk;
        let mut rows: Vec<_> = (0..full).map(|_| row_of_bytes(chunk)).collect();
        rows.push(row_of_bytes(last));
        assert_eq!(plan_enqueue(0, 0, &rows, &room()).unwrap().bytes, u64::from(MAX_ENQUEUE_BYTES));
        *rows.last_mut().unwrap() = row_of_bytes(last + 1);
        assert_eq!(
            plan_enqueue(0, 0, &rows, &room()),
            Err(EnqueueError::TooManyBytes(u64::from(MAX_ENQUEUE_BYTES) + 1))
        );
    }

    #[test]
    fn a_bad_row_names_its_index() {
        let bad = EnqueueRow::new(Name::new("t").unwrap(), vec![], vec![]);
        let err = plan_enqueue(0, 0, &[row("t", "a"), bad], &room()).unwrap_err();
        assert_eq!(err, EnqueueError::Row { index: 1, error: RowError::NoEffects });
        assert_eq!(err.code(), "row_without_effects");
    }

    #[test]
    fn sequences_stop_at_the_safe_integer_limit() {
        assert_eq!(plan_enqueue(SEQ_MAX - 1, 0, &[row("t", "a")], &room()).unwrap().os, SEQ_MAX);
        assert_eq!(
            plan_enqueue(SEQ_MAX - 1, 0, &[row("t", "a"), row("t", "b")], &room()),
            Err(EnqueueError::SequenceExhausted)
        );
        assert_eq!(plan_enqueue(SEQ_MAX, 0, &[row("t", "a")], &room()), Err(EnqueueError::SequenceExhausted));
    }

    #[test]
    fn unknown_fields_in_a_row_are_refused() {
        assert!(serde_json::from_str::<EnqueueRow>(r#"{"target":"t","deletes":["a"],"x":1}"#).is_err());
        assert!(serde_json::from_str::<EnqueueRow>(r#"{"target":"a b","deletes":["a"]}"#).is_err());
    }

    #[test]
    fn backpressure_refuses_at_the_bound_and_accepts_just_below() {
        let cap = Capacity { rows: 8, bytes: 0, max_rows: 10, max_bytes: 1_000_000 };
        assert!(
            plan_enqueue(0, 0, &[row("t", "a"), row("t", "b")], &cap).is_ok(),
            "reaching the bound is fine"
        );
        let err = plan_enqueue(0, 0, &[row("t", "a"), row("t", "b"), row("t", "c")], &cap).unwrap_err();
        assert!(matches!(err, EnqueueError::OutboxFull { rows: 11, .. }));
        assert_eq!(err.code(), "outbox_full");
        let body = plan_enqueue(0, 0, &[row("t", "a")], &room()).unwrap().bytes;
        let cap = Capacity { rows: 0, bytes: 100, max_rows: 10, max_bytes: 100 + body };
        assert!(plan_enqueue(0, 0, &[row("t", "a")], &cap).is_ok());
        let cap = Capacity { max_bytes: 99 + body, ..cap };
        assert!(matches!(plan_enqueue(0, 0, &[row("t", "a")], &cap), Err(EnqueueError::OutboxFull { .. })));
    }
}
