//! [`Sql`] over a native SQLite (rusqlite, bundled): the simulator's store.
//! The outbox and inbox SQL that ships runs here unchanged. Transactions are
//! savepoints, so they nest like `transactionSync`.

use std::rc::Rc;

use rusqlite::types::{Value, ValueRef};
use rusqlite::Connection;

use crate::store::{Row, Rows, Sql, SqlValue, StoreError};

/// Prepared statements kept per database: more than the relay has.
const STATEMENT_CACHE_CAPACITY: usize = 256;

/// An in-memory SQLite database; clones share it.
#[derive(Clone)]
pub struct SqliteSql {
    conn: Rc<Connection>,
}

fn sql_error(e: rusqlite::Error) -> StoreError {
    StoreError::Sql(e.to_string())
}

impl SqliteSql {
    /// A fresh, empty database in memory.
    pub fn memory() -> Result<SqliteSql, StoreError> {
        let conn = Connection::open_in_memory().map_err(sql_error)?;
        // The relay uses a few dozen distinct statements; keep them all prepared.
        conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE_CAPACITY);
        Ok(SqliteSql { conn: Rc::new(conn) })
    }
}

fn to_value(v: SqlValue) -> Value {
    match v {
        SqlValue::Null => Value::Null,
        SqlValue::Int(i) => Value::Integer(i),
        SqlValue::Real(f) => Value::Real(f),
        SqlValue::Text(s) => Value::Text(s),
        SqlValue::Blob(b) => Value::Blob(b),
    }
}

fn from_ref(v: ValueRef<'_>) -> SqlValue {
    match v {
        ValueRef::Null => SqlValue::Null,
        ValueRef::Integer(i) => SqlValue::Int(i),
        ValueRef::Real(f) => SqlValue::Real(f),
        ValueRef::Text(t) => SqlValue::Text(String::from_utf8_lossy(t).into_owned()),
        ValueRef::Blob(b) => SqlValue::Blob(b.to_vec()),
    }
}

impl Sql for SqliteSql {
    fn exec(&self, query: &str, params: Vec<SqlValue>) -> Result<Rows, StoreError> {
        let before = self.conn.total_changes();
        let mut stmt = self.conn.prepare_cached(query).map_err(sql_error)?;
        let columns = stmt.column_count();
        let mut cursor =
            stmt.query(rusqlite::params_from_iter(params.into_iter().map(to_value))).map_err(sql_error)?;
        let mut rows = Vec::new();
        while let Some(row) = cursor.next().map_err(sql_error)? {
            let values = (0..columns).map(|i| row.get_ref(i).map(from_ref)).collect::<Result<Vec<_>, _>>();
            rows.push(Row(values.map_err(sql_error)?));
        }
        drop(cursor);
        let written = self.conn.total_changes().saturating_sub(before);
        let read = u32::try_from(rows.len()).unwrap_or(u32::MAX);
        Ok(Rows { rows, written: u32::try_from(written).unwrap_or(u32::MAX), read })
    }

    fn transaction<T>(&self, mut body: impl FnMut() -> Result<T, StoreError>) -> Result<T, StoreError> {
        self.conn.execute_batch("SAVEPOINT relay_tx").map_err(sql_error)?;
        match body() {
            Ok(v) => {
                self.conn.execute_batch("RELEASE relay_tx").map_err(sql_error)?;
                Ok(v)
            }
            Err(e) => {
                self.conn.execute_batch("ROLLBACK TO relay_tx; RELEASE relay_tx").map_err(sql_error)?;
                Err(e)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transactions_roll_back_and_nest() {
        let db = SqliteSql::memory().unwrap();
        db.run("CREATE TABLE t (v INTEGER)", vec![]).unwrap();
        let r: Result<(), StoreError> = db.transaction(|| {
            db.run("INSERT INTO t VALUES (1)", vec![])?;
            Err(StoreError::Guard("no"))
        });
        assert!(r.is_err());
        assert_eq!(db.rows("SELECT COUNT(*) FROM t", vec![]).unwrap()[0].u64(0), Ok(0), "rolled back");
        db.transaction(|| {
            db.run("INSERT INTO t VALUES (1)", vec![])?;
            let inner: Result<(), StoreError> = db.transaction(|| {
                db.run("INSERT INTO t VALUES (2)", vec![])?;
                Err(StoreError::Guard("inner"))
            });
            assert!(inner.is_err());
            Ok(())
        })
        .unwrap();
        assert_eq!(
            db.rows("SELECT SUM(v) FROM t", vec![]).unwrap()[0].u64(0),
            Ok(1),
            "only the inner part rolled back"
        );
        assert_eq!(db.exec("UPDATE t SET v = 5", vec![]).unwrap().written, 1);
        assert_eq!(db.exec("SELECT v FROM t", vec![]).unwrap().written, 0);
    }
}
