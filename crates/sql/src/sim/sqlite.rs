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
    /// Statements run on this database since it opened (clones share it).
    statements: Rc<std::cell::Cell<u64>>,
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
        Ok(SqliteSql { conn: Rc::new(conn), statements: Rc::default() })
    }

    /// Statements run on this database so far: each is a call into the
    /// runtime in workerd, which the tests of a row's cost count.
    pub fn statements(&self) -> u64 {
        self.statements.get()
    }
}

/// A database kept for reuse, with the rows it held when its object first
/// opened it (what the migrations insert).
struct Kept {
    db: SqliteSql,
    pristine: Option<Vec<(String, Vec<Vec<SqlValue>>)>>,
}

thread_local! {
    /// Databases kept for reuse, by the object they served: a run of the
    /// sequence explorer opens the same few objects thousands of times, and
    /// a database brought back to how its object first opened it keeps its
    /// tables and its prepared statements, which a fresh one must parse
    /// again.
    static POOL: std::cell::RefCell<std::collections::BTreeMap<String, Kept>> = std::cell::RefCell::default();
}

impl SqliteSql {
    /// The database `key` used last (on this thread), brought back to how
    /// its object first opened it, or a fresh one (then call
    /// [`SqliteSql::opened`] once the object opened it). For runs that open
    /// the same objects again and again, one run at a time: a database still
    /// in use by an earlier run would be reset under it.
    pub fn recycled(key: &str) -> Result<SqliteSql, StoreError> {
        let kept = POOL.with(|p| p.borrow().get(key).map(|k| (k.db.clone(), k.pristine.clone())));
        if let Some((db, Some(pristine))) = kept {
            db.reset(&pristine)?;
            return Ok(db);
        }
        let db = SqliteSql::memory()?;
        POOL.with(|p| p.borrow_mut().insert(key.to_owned(), Kept { db: db.clone(), pristine: None }));
        Ok(db)
    }

    /// Records what database `key` holds now as the state to reset it to.
    pub fn opened(key: &str) -> Result<(), StoreError> {
        let fresh = POOL.with(|p| p.borrow().get(key).filter(|k| k.pristine.is_none()).map(|k| k.db.clone()));
        let Some(db) = fresh else { return Ok(()) };
        let mut pristine = Vec::new();
        for table in db.tables()? {
            let rows = db.rows(&format!("SELECT * FROM \"{table}\""), vec![])?;
            pristine.push((table, rows.into_iter().map(|r| r.0).collect()));
        }
        POOL.with(|p| {
            if let Some(k) = p.borrow_mut().get_mut(key) {
                k.pristine = Some(pristine);
            }
        });
        Ok(())
    }

    fn tables(&self) -> Result<Vec<String>, StoreError> {
        let rows = self.rows(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name",
            vec![],
        )?;
        rows.iter().map(|r| r.text(0)).collect()
    }

    /// Deletes every row and puts back `pristine`'s.
    fn reset(&self, pristine: &[(String, Vec<Vec<SqlValue>>)]) -> Result<(), StoreError> {
        for table in self.tables()? {
            self.run(&format!("DELETE FROM \"{table}\""), vec![])?;
        }
        for (table, rows) in pristine {
            for row in rows {
                let marks = vec!["?"; row.len()].join(", ");
                self.run(&format!("INSERT INTO \"{table}\" VALUES ({marks})"), row.clone())?;
            }
        }
        Ok(())
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
        self.statements.set(self.statements.get() + 1);
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
