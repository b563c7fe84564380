//! A row as the source persists it ([`StoredRow`]), and as a fire takes it
//! once decoded and checked ([`QueuedRow`]); a stored row that cannot be
//! relayed is a [`CorruptRow`], never skipped.

use std::fmt;

use super::{len_u32, Effects};
use crate::limits::SEQ_MAX;
use crate::name::Name;

/// A row exactly as the source persists it. Shells read and write this.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredRow {
    /// Outbox sequence, 1..=[`SEQ_MAX`].
    pub seq: u64,
    /// Target object name (validated on decode).
    pub target: String,
    /// Commit-time clock reading of the enqueue, in ms since the epoch.
    pub at_ms: u64,
    /// Not to be delivered before this time, ms since the epoch (0: due at
    /// once). Effective: never earlier than an older row's of the same
    /// target (see [`delay`](crate::delay)).
    pub due_ms: u64,
    /// The encoded [`Effects`].
    pub body: String,
}

/// Why a persisted row cannot be relayed. The relay never skips such a row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CorruptRow {
    /// Sequence zero or past [`SEQ_MAX`].
    Seq(u64),
    /// The target name is invalid.
    Target(String),
    /// The body does not decode to valid effects.
    Body(String),
}

impl fmt::Display for CorruptRow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CorruptRow::Seq(s) => write!(f, "sequence {s} is out of range"),
            CorruptRow::Target(e) => write!(f, "invalid target: {e}"),
            CorruptRow::Body(e) => write!(f, "invalid body: {e}"),
        }
    }
}

/// A decoded, deliverable outbox row.
///
/// Invariant: `seq` in 1..=[`SEQ_MAX`]; `body` decodes to valid effects
/// with `effects` of them and is `bytes` long.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueuedRow {
    /// Outbox sequence.
    pub seq: u64,
    /// Where the row goes.
    pub target: Name,
    /// Commit-time clock reading, ms since the epoch.
    pub at_ms: u64,
    /// Not to be delivered before this time (0: due at once); see
    /// [`StoredRow::due_ms`].
    pub due_ms: u64,
    /// Encoded effects, sent to the target verbatim.
    pub body: String,
    /// `body.len()`, for batch and fire byte budgets.
    pub bytes: u32,
    /// Puts plus deletes, for the batch effect budget.
    pub effects: u32,
    /// Whether `body` was read and checked; a fire never sends a row
    /// without it (see `Fire::new`).
    pub sendable: bool,
}

impl QueuedRow {
    /// Decodes a persisted row, validating every field.
    pub fn decode(row: &StoredRow) -> Result<QueuedRow, CorruptRow> {
        if row.seq == 0 || row.seq > SEQ_MAX {
            return Err(CorruptRow::Seq(row.seq));
        }
        let target = Name::new(row.target.clone()).map_err(|e| CorruptRow::Target(e.to_string()))?;
        let effects = Effects::decode(&row.body)?;
        Ok(QueuedRow {
            seq: row.seq,
            target,
            at_ms: row.at_ms,
            due_ms: row.due_ms,
            body: row.body.clone(),
            bytes: len_u32(row.body.len()),
            effects: effects.count(),
            sendable: true,
        })
    }

    /// A row this fire cannot send, checked without its body (which the
    /// shell may not have read): sequence and target only.
    pub fn unsendable(row: &StoredRow) -> Result<QueuedRow, CorruptRow> {
        if row.seq == 0 || row.seq > SEQ_MAX {
            return Err(CorruptRow::Seq(row.seq));
        }
        let target = Name::new(row.target.clone()).map_err(|e| CorruptRow::Target(e.to_string()))?;
        Ok(QueuedRow {
            seq: row.seq,
            target,
            at_ms: row.at_ms,
            due_ms: row.due_ms,
            body: String::new(),
            bytes: 0,
            effects: 0,
            sendable: false,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn corrupt_rows_are_reported_not_decoded() {
        let good = StoredRow {
            seq: 1,
            target: "t".into(),
            at_ms: 5,
            due_ms: 0,
            body: r#"{"deletes":["a"]}"#.into(),
        };
        let row = QueuedRow::decode(&good).unwrap();
        assert_eq!((row.seq, row.effects, row.bytes), (1, 1, 17));
        let bad_seq = StoredRow { seq: 0, ..good.clone() };
        assert_eq!(QueuedRow::decode(&bad_seq), Err(CorruptRow::Seq(0)));
        let past = StoredRow { seq: SEQ_MAX + 1, ..good.clone() };
        assert!(matches!(QueuedRow::decode(&past), Err(CorruptRow::Seq(_))));
        let bad_target = StoredRow { target: "a b".into(), ..good.clone() };
        assert!(matches!(QueuedRow::decode(&bad_target), Err(CorruptRow::Target(_))));
        let bad_body = StoredRow { body: "{".into(), ..good.clone() };
        assert!(matches!(QueuedRow::decode(&bad_body), Err(CorruptRow::Body(_))));
        let unknown = StoredRow { body: r#"{"deletes":["a"],"x":1}"#.into(), ..good };
        assert!(matches!(QueuedRow::decode(&unknown), Err(CorruptRow::Body(_))));
    }
}
