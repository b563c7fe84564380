//! The relay's storage: the source's outbox and the target's inbox, written
//! once as SQL over the [`Sql`] interface. Durable Object SQLite implements
//! it in workerd (`DoSql` in the `durable-relay` crate); a native SQLite implements it
//! for the simulator (`crate::sim::SqliteSql`, feature `sim`), so the SQL
//! that ships is the SQL the simulator runs.
//!
//! Values cross the interface as [`SqlValue`]s; rows come back positional
//! (the queries name their columns) and are decoded with [`Row`]'s typed
//! accessors, which report a wrong type as [`StoreError::Corrupt`] rather
//! than panicking.

pub mod inbox;
pub mod outbox;
pub mod schema;

use std::fmt;

use crate::core::SEQ_MAX;

/// One SQLite value.
#[derive(Clone, Debug, PartialEq)]
pub enum SqlValue {
    /// NULL.
    Null,
    /// An integer. The relay binds only `0..=SEQ_MAX` (see [`int`]), which a
    /// JavaScript number carries exactly.
    Int(i64),
    /// A floating-point number (never written by the relay).
    Real(f64),
    /// UTF-8 text.
    Text(String),
    /// Bytes (never written by the relay).
    Blob(Vec<u8>),
}

impl From<&str> for SqlValue {
    fn from(s: &str) -> Self {
        SqlValue::Text(s.to_owned())
    }
}

impl From<String> for SqlValue {
    fn from(s: String) -> Self {
        SqlValue::Text(s)
    }
}

impl<T: Into<SqlValue>> From<Option<T>> for SqlValue {
    fn from(v: Option<T>) -> Self {
        v.map_or(SqlValue::Null, Into::into)
    }
}

/// A sequence, count or time as a bound integer.
///
/// Panics past [`SEQ_MAX`]: every integer the relay binds is one it
/// allocated or counted itself (request values are range-checked where
/// they are decoded), and past 2^53 a JavaScript number would round it.
pub fn int(v: u64) -> SqlValue {
    assert!(v <= SEQ_MAX, "binding {v}, past SEQ_MAX");
    SqlValue::Int(v as i64)
}

/// One result row, positional.
#[derive(Clone, Debug, PartialEq)]
pub struct Row(pub Vec<SqlValue>);

impl Row {
    fn get(&self, i: usize) -> Result<&SqlValue, StoreError> {
        self.0.get(i).ok_or_else(|| StoreError::Corrupt(format!("result has no column {i}")))
    }

    /// Column `i` as a non-negative integer.
    pub fn u64(&self, i: usize) -> Result<u64, StoreError> {
        self.opt_u64(i)?.ok_or_else(|| StoreError::Corrupt(format!("column {i} is NULL")))
    }

    /// Column `i` as a non-negative integer, or NULL.
    pub fn opt_u64(&self, i: usize) -> Result<Option<u64>, StoreError> {
        match self.get(i)? {
            SqlValue::Null => Ok(None),
            SqlValue::Int(v) if *v >= 0 => Ok(Some(*v as u64)),
            SqlValue::Real(f) if *f >= 0.0 && f.fract() == 0.0 && *f <= SEQ_MAX as f64 => Ok(Some(*f as u64)),
            other => Err(StoreError::Corrupt(format!("column {i} is {other:?}, not a count"))),
        }
    }

    /// Column `i` as an integer that fits `u32`.
    pub fn u32(&self, i: usize) -> Result<u32, StoreError> {
        let v = self.u64(i)?;
        u32::try_from(v).map_err(|_| StoreError::Corrupt(format!("column {i} is {v}, past u32")))
    }

    /// Column `i` as text.
    pub fn text(&self, i: usize) -> Result<String, StoreError> {
        self.opt_text(i)?.ok_or_else(|| StoreError::Corrupt(format!("column {i} is NULL")))
    }

    /// Column `i` as text, or NULL.
    pub fn opt_text(&self, i: usize) -> Result<Option<String>, StoreError> {
        match self.get(i)? {
            SqlValue::Null => Ok(None),
            SqlValue::Text(s) => Ok(Some(s.clone())),
            other => Err(StoreError::Corrupt(format!("column {i} is {other:?}, not text"))),
        }
    }
}

/// What one statement returned.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Rows {
    /// The result rows, in order.
    pub rows: Vec<Row>,
    /// SQLite rows the statement wrote (billing's "rows written").
    pub written: u32,
    /// Rows the statement read (billing's "rows read": every row scanned,
    /// index entries included). Durable Objects count it; the native
    /// backend reports the rows returned, a lower bound.
    pub read: u32,
}

/// A storage failure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreError {
    /// SQLite or the runtime refused an operation.
    Sql(String),
    /// A guard failed inside a transaction, which rolled back.
    Guard(&'static str),
    /// A stored value has the wrong type or shape.
    Corrupt(String),
    /// The caller's own code aborted the transaction, which rolled back.
    Aborted(String),
    /// The platform refused a write because the account used up its daily
    /// allowance of rows written (Workers Free); the transaction rolled
    /// back. Writes come back at 00:00 UTC (see
    /// [`seconds_until_next_utc_day`](crate::core::seconds_until_next_utc_day)).
    /// Carries the platform's message.
    WriteLimit(String),
}

/// The start of the error Durable Objects throw for a write past the Free
/// plan's daily rows-written allowance, as the platform words it.
pub const PLATFORM_WRITE_LIMIT_MESSAGE: &str = "Exceeded allowed rows written in Durable Objects free tier.";

impl StoreError {
    /// The storage error for a failure the platform described as `message`:
    /// [`StoreError::WriteLimit`] when it is the daily rows-written refusal
    /// (recognised by its words, with or without the final period, wherever
    /// the runtime places them in the message), else [`StoreError::Sql`].
    pub fn from_platform(message: String) -> StoreError {
        let words = PLATFORM_WRITE_LIMIT_MESSAGE.trim_end_matches('.');
        if message.contains(words) {
            StoreError::WriteLimit(message)
        } else {
            StoreError::Sql(message)
        }
    }

    /// Whether this is the platform's daily rows-written refusal.
    pub fn is_write_limit(&self) -> bool {
        matches!(self, StoreError::WriteLimit(_))
    }
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreError::Sql(e) => write!(f, "storage error: {e}"),
            StoreError::Guard(g) => write!(f, "guard failed: {g}"),
            StoreError::Corrupt(e) => write!(f, "corrupt stored value: {e}"),
            StoreError::Aborted(e) => write!(f, "transaction aborted: {e}"),
            StoreError::WriteLimit(e) => write!(f, "daily write limit: {e}"),
        }
    }
}

impl std::error::Error for StoreError {}

/// A SQLite database: what the outbox and the inbox need of one.
///
/// Statements run synchronously. Within one Durable Object turn (no
/// `.await` between statements) nothing else interleaves; [`transaction`]
/// makes a block all-or-nothing.
///
/// [`transaction`]: Sql::transaction
pub trait Sql {
    /// Runs one statement with positional `?` parameters.
    fn exec(&self, query: &str, params: Vec<SqlValue>) -> Result<Rows, StoreError>;

    /// Runs `body` so that either everything it wrote commits or, if it
    /// returns an error (or throws), nothing does. May nest.
    fn transaction<T>(&self, body: impl FnMut() -> Result<T, StoreError>) -> Result<T, StoreError>;

    /// Runs a statement to completion; returns the rows it wrote.
    fn run(&self, query: &str, params: Vec<SqlValue>) -> Result<u32, StoreError> {
        Ok(self.exec(query, params)?.written)
    }

    /// Runs a query; returns its rows.
    fn rows(&self, query: &str, params: Vec<SqlValue>) -> Result<Vec<Row>, StoreError> {
        Ok(self.exec(query, params)?.rows)
    }

    /// Runs a query; returns its first row, if any.
    fn first(&self, query: &str, params: Vec<SqlValue>) -> Result<Option<Row>, StoreError> {
        Ok(self.exec(query, params)?.rows.into_iter().next())
    }
}

impl<S: Sql> Sql for std::rc::Rc<S> {
    fn exec(&self, query: &str, params: Vec<SqlValue>) -> Result<Rows, StoreError> {
        (**self).exec(query, params)
    }

    fn transaction<T>(&self, body: impl FnMut() -> Result<T, StoreError>) -> Result<T, StoreError> {
        (**self).transaction(body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typed_accessors_report_wrong_types_instead_of_panicking() {
        let row = Row(vec![SqlValue::Int(7), SqlValue::Null, SqlValue::Text("t".into()), SqlValue::Int(-1)]);
        assert_eq!(row.u64(0), Ok(7));
        assert_eq!(row.opt_u64(1), Ok(None));
        assert!(matches!(row.u64(1), Err(StoreError::Corrupt(_))));
        assert!(matches!(row.u64(2), Err(StoreError::Corrupt(_))));
        assert!(matches!(row.u64(3), Err(StoreError::Corrupt(_))), "negative");
        assert!(matches!(row.u64(9), Err(StoreError::Corrupt(_))), "missing column");
        assert_eq!(row.text(2), Ok("t".into()));
        assert!(matches!(row.text(0), Err(StoreError::Corrupt(_))));
        let big = Row(vec![SqlValue::Int(i64::from(u32::MAX) + 1)]);
        assert!(matches!(big.u32(0), Err(StoreError::Corrupt(_))));
    }

    #[test]
    fn the_platforms_daily_write_refusal_is_told_apart_from_other_failures() {
        let exact = PLATFORM_WRITE_LIMIT_MESSAGE.to_owned();
        assert_eq!(StoreError::from_platform(exact.clone()), StoreError::WriteLimit(exact));
        let wrapped = format!("Error: {} (object abc)", PLATFORM_WRITE_LIMIT_MESSAGE.trim_end_matches('.'));
        assert!(StoreError::from_platform(wrapped).is_write_limit(), "wrapped, without the period");
        for other in [
            "SQLITE_FULL: database or disk is full",
            "Exceeded allowed rows read",
            "Network connection lost.",
        ] {
            assert_eq!(StoreError::from_platform(other.into()), StoreError::Sql(other.into()));
        }
    }

    #[test]
    #[should_panic(expected = "past SEQ_MAX")]
    fn binding_past_the_safe_range_is_a_bug() {
        let _ = int(SEQ_MAX + 1);
    }
}
