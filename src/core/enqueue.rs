//! Enqueue planning: validate rows against the named limits, assign
//! sequences after `os`, and stamp the commit-time clock reading.
//!
//! The plan is all-or-nothing: one bad row rejects the request and nothing
//! is written. The shell writes the planned rows and the new `os` in the
//! same atomic block as the caller's own state change.

use std::fmt;

use serde::Deserialize;

use super::limits::{MAX_ENQUEUE_BYTES, MAX_ROWS_PER_ENQUEUE, SEQ_MAX};
use super::name::Name;
use super::row::{Effects, JsonValue, RowError, StoredRow};

/// One row as a caller submits it.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnqueueRow {
    /// The target partition.
    pub target: Name,
    /// Keys to set, with JSON values.
    #[serde(default)]
    pub puts: Vec<(String, JsonValue)>,
    /// Keys to remove.
    #[serde(default)]
    pub deletes: Vec<String>,
}

impl EnqueueRow {
    /// A row of puts and deletes for `target`. Values are normalised at
    /// planning time.
    pub fn new(target: Name, puts: Vec<(String, serde_json::Value)>, deletes: Vec<String>) -> Self {
        let puts = puts
            .into_iter()
            .map(|(k, v)| (k, JsonValue::from_value(&v)))
            .collect();
        EnqueueRow {
            target,
            puts,
            deletes,
        }
    }

    /// The row's effects with every value re-encoded compactly with sorted
    /// object keys, so equal content always has equal bytes.
    pub fn normalised_effects(&self) -> Effects {
        let puts = self
            .puts
            .iter()
            .map(|(k, v)| {
                let value: serde_json::Value =
                    serde_json::from_str(v.as_str()).expect("a JsonValue is valid JSON");
                (k.clone(), JsonValue::from_value(&value))
            })
            .collect();
        Effects {
            puts,
            deletes: self.deletes.clone(),
        }
    }
}

/// Why an enqueue was refused. Nothing was written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EnqueueError {
    /// The request has no rows.
    NoRows,
    /// More than [`MAX_ROWS_PER_ENQUEUE`] rows; carries the count.
    TooManyRows(u32),
    /// Rows encode to more than [`MAX_ENQUEUE_BYTES`]; carries the total.
    TooManyBytes(u64),
    /// Row `index` (0-based) is invalid.
    Row {
        /// Position of the row in the request.
        index: u32,
        /// What is wrong with it.
        error: RowError,
    },
    /// Allocating the rows would pass [`SEQ_MAX`].
    SequenceExhausted,
}

impl EnqueueError {
    /// Stable machine-readable code.
    pub fn code(&self) -> &'static str {
        match self {
            EnqueueError::NoRows => "no_rows",
            EnqueueError::TooManyRows(_) => "too_many_rows",
            EnqueueError::TooManyBytes(_) => "request_too_large",
            EnqueueError::Row { error, .. } => error.code(),
            EnqueueError::SequenceExhausted => "sequence_exhausted",
        }
    }
}

impl fmt::Display for EnqueueError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EnqueueError::NoRows => write!(f, "request has no rows"),
            EnqueueError::TooManyRows(n) => {
                write!(
                    f,
                    "request has {n} rows; the limit is {MAX_ROWS_PER_ENQUEUE}"
                )
            }
            EnqueueError::TooManyBytes(n) => write!(
                f,
                "rows encode to {n} bytes; one request may carry {MAX_ENQUEUE_BYTES}"
            ),
            EnqueueError::Row { index, error } => write!(f, "rows[{index}]: {error}"),
            EnqueueError::SequenceExhausted => {
                write!(f, "the source has allocated its last sequence ({SEQ_MAX})")
            }
        }
    }
}

impl std::error::Error for EnqueueError {}

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

/// Validates `rows` and assigns them sequences after `os`, stamped `now_ms`.
pub fn plan_enqueue(
    os: u64,
    now_ms: u64,
    rows: &[EnqueueRow],
) -> Result<EnqueuePlan, EnqueueError> {
    assert!(os <= SEQ_MAX, "stored os {os} past SEQ_MAX");
    if rows.is_empty() {
        return Err(EnqueueError::NoRows);
    }
    let count = u32::try_from(rows.len()).unwrap_or(u32::MAX);
    if count > MAX_ROWS_PER_ENQUEUE {
        return Err(EnqueueError::TooManyRows(count));
    }
    if SEQ_MAX - os < u64::from(count) {
        return Err(EnqueueError::SequenceExhausted);
    }
    let mut planned = Vec::with_capacity(rows.len());
    let mut bytes: u64 = 0;
    for (index, row) in rows.iter().enumerate() {
        let body = row
            .normalised_effects()
            .encode()
            .map_err(|error| EnqueueError::Row {
                index: index as u32,
                error,
            })?;
        bytes += body.len() as u64;
        if bytes > u64::from(MAX_ENQUEUE_BYTES) {
            return Err(EnqueueError::TooManyBytes(bytes));
        }
        planned.push(StoredRow {
            seq: os + 1 + index as u64,
            target: row.target.as_str().to_owned(),
            at_ms: now_ms,
            body,
        });
    }
    let plan = EnqueuePlan {
        rows: planned,
        os: os + u64::from(count),
        bytes,
    };
    assert!(plan.os <= SEQ_MAX);
    Ok(plan)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn row(target: &str, key: &str) -> EnqueueRow {
        EnqueueRow::new(
            Name::new(target).unwrap(),
            vec![(key.into(), json!({"b": 1, "a": 2}))],
            vec![],
        )
    }

    #[test]
    fn sequences_follow_os_and_rows_are_stamped() {
        let plan = plan_enqueue(41, 1_000, &[row("t", "a"), row("u", "b")]).unwrap();
        assert_eq!(plan.seqs(), vec![42, 43]);
        assert_eq!(plan.os, 43);
        assert!(plan.rows.iter().all(|r| r.at_ms == 1_000));
        assert_eq!(
            plan.rows[0].body,
            r#"{"puts":[["a",{"a":2,"b":1}]],"deletes":[]}"#
        );
    }

    #[test]
    fn values_are_normalised_whatever_their_spelling() {
        let spaced: EnqueueRow =
            serde_json::from_str(r#"{"target":"t","puts":[["k", { "b" : 1, "a" : [ 1 , 2 ] }]]}"#)
                .unwrap();
        let plan = plan_enqueue(0, 0, &[spaced]).unwrap();
        assert_eq!(
            plan.rows[0].body,
            r#"{"puts":[["k",{"a":[1,2],"b":1}]],"deletes":[]}"#
        );
    }

    #[test]
    fn empty_request_is_refused() {
        assert_eq!(plan_enqueue(0, 0, &[]), Err(EnqueueError::NoRows));
    }

    #[test]
    fn row_count_is_checked_at_and_past_the_limit() {
        let rows: Vec<_> = (0..MAX_ROWS_PER_ENQUEUE)
            .map(|i| row("t", &format!("k{i}")))
            .collect();
        assert!(plan_enqueue(0, 0, &rows).is_ok());
        let rows: Vec<_> = (0..=MAX_ROWS_PER_ENQUEUE)
            .map(|i| row("t", &format!("k{i}")))
            .collect();
        assert_eq!(
            plan_enqueue(0, 0, &rows),
            Err(EnqueueError::TooManyRows(MAX_ROWS_PER_ENQUEUE + 1))
        );
    }

    /// A row whose body encodes to exactly `n` bytes.
    fn row_of_bytes(n: usize) -> EnqueueRow {
        let overhead = r#"{"puts":[["k",""]],"deletes":[]}"#.len();
        EnqueueRow::new(
            Name::new("t").unwrap(),
            vec![("k".into(), json!("x".repeat(n - overhead)))],
            vec![],
        )
    }

    #[test]
    fn request_bytes_are_checked_at_and_past_the_limit() {
        let chunk = 65_000;
        let full = 16;
        let last = MAX_ENQUEUE_BYTES as usize - full * chunk;
        let mut rows: Vec<_> = (0..full).map(|_| row_of_bytes(chunk)).collect();
        rows.push(row_of_bytes(last));
        assert_eq!(
            plan_enqueue(0, 0, &rows).unwrap().bytes,
            u64::from(MAX_ENQUEUE_BYTES)
        );
        *rows.last_mut().unwrap() = row_of_bytes(last + 1);
        assert_eq!(
            plan_enqueue(0, 0, &rows),
            Err(EnqueueError::TooManyBytes(u64::from(MAX_ENQUEUE_BYTES) + 1))
        );
    }

    #[test]
    fn a_bad_row_names_its_index() {
        let bad = EnqueueRow::new(Name::new("t").unwrap(), vec![], vec![]);
        let err = plan_enqueue(0, 0, &[row("t", "a"), bad]).unwrap_err();
        assert_eq!(
            err,
            EnqueueError::Row {
                index: 1,
                error: RowError::NoEffects
            }
        );
        assert_eq!(err.code(), "row_without_effects");
    }

    #[test]
    fn sequences_stop_at_the_safe_integer_limit() {
        assert_eq!(
            plan_enqueue(SEQ_MAX - 1, 0, &[row("t", "a")]).unwrap().os,
            SEQ_MAX
        );
        assert_eq!(
            plan_enqueue(SEQ_MAX - 1, 0, &[row("t", "a"), row("t", "b")]),
            Err(EnqueueError::SequenceExhausted)
        );
        assert_eq!(
            plan_enqueue(SEQ_MAX, 0, &[row("t", "a")]),
            Err(EnqueueError::SequenceExhausted)
        );
    }

    #[test]
    fn unknown_fields_in_a_row_are_refused() {
        assert!(
            serde_json::from_str::<EnqueueRow>(r#"{"target":"t","deletes":["a"],"x":1}"#).is_err()
        );
        assert!(serde_json::from_str::<EnqueueRow>(r#"{"target":"a b","deletes":["a"]}"#).is_err());
    }
}
