//! Plain outbox rows as SQL binds them: a row's columns in the order every
//! statement binds them, and the multi-row insert the enqueue, parking and
//! unpacking share.

use super::{int, Outbox, Sql, SqlValue, StoreError};
use crate::core::StoredRow;

/// Rows per multi-row INSERT: six bound parameters each, under SQLite's
/// 100-parameter limit per statement.
pub(super) const INSERT_ROWS_PER_STATEMENT: usize = 16;

/// An outbox row's columns in the order every statement here binds them:
/// `seq, target, at_ms, bytes, body, due_ms`.
pub(super) fn row_values(row: &StoredRow) -> [SqlValue; 6] {
    [
        int(row.seq),
        row.target.as_str().into(),
        int(row.at_ms),
        int(row.body.len() as u64),
        row.body.as_str().into(),
        int(row.due_ms),
    ]
}

impl<S: Sql> Outbox<S> {
    /// Inserts `rows` as plain rows of `table` in one statement.
    pub(super) fn insert_rows(&self, table: &str, rows: &[StoredRow]) -> Result<u32, StoreError> {
        let placeholders = vec!["(?, ?, ?, ?, ?, ?)"; rows.len()].join(", ");
        let mut params: Vec<SqlValue> = Vec::with_capacity(rows.len() * 6);
        for r in rows {
            params.extend(row_values(r));
        }
        self.sql.run(
            &format!("INSERT INTO {table} (seq, target, at_ms, bytes, body, due_ms) VALUES {placeholders}"),
            params,
        )
    }
}
