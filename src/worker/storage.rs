//! SQLite plumbing shared by the source and target sides: statement helpers
//! that count rows written, `transactionSync` (which workers-rs does not
//! bind) for all-or-nothing writes, and schema versioning.

use serde::de::DeserializeOwned;
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use worker::{SqlStorage, SqlStorageValue};

#[wasm_bindgen]
extern "C" {
    /// `ctx.storage` seen through the one method we bind ourselves.
    #[wasm_bindgen(extends = worker::js_sys::Object)]
    type SyncStorage;

    #[wasm_bindgen(method, catch, js_name = transactionSync)]
    fn transaction_sync(
        this: &SyncStorage,
        body: &mut dyn FnMut() -> Result<JsValue, JsValue>,
    ) -> Result<JsValue, JsValue>;
}

/// A storage failure, or a guard that did not hold inside a transaction.
#[derive(Debug)]
pub enum StoreError {
    /// SQLite or the runtime refused an operation.
    Sql(String),
    /// A guard failed; the transaction rolled back and nothing was written.
    Guard(&'static str),
}

impl std::fmt::Display for StoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StoreError::Sql(e) => write!(f, "storage error: {e}"),
            StoreError::Guard(g) => write!(f, "guard failed: {g}"),
        }
    }
}

impl From<worker::Error> for StoreError {
    fn from(e: worker::Error) -> Self {
        StoreError::Sql(e.to_string())
    }
}

/// Marker thrown through `transactionSync` to carry a guard failure.
const GUARD_PREFIX: &str = "durable-relay guard: ";

/// A Durable Object's SQLite database and its `transactionSync`.
#[derive(Clone)]
pub struct Db {
    sql: SqlStorage,
    storage: JsValue,
}

impl Db {
    /// Wraps the storage of a Durable Object. `storage` is `ctx.storage`
    /// (from `worker_sys::DurableObjectState::storage`).
    pub fn new(sql: SqlStorage, storage: JsValue) -> Db {
        Db { sql, storage }
    }

    /// Takes a Durable Object's `State` apart to reach `ctx.storage` (for
    /// `transactionSync`), and hands the `State` back with the database.
    pub fn from_state(state: worker::State) -> (worker::State, Db) {
        let raw = state._inner();
        let storage: JsValue = raw.storage().map(JsValue::from).unwrap_or(JsValue::UNDEFINED);
        let state = worker::State::from(raw);
        let sql = state.storage().sql();
        (state, Db::new(sql, storage))
    }

    /// The underlying SQL handle.
    pub fn sql(&self) -> &SqlStorage {
        &self.sql
    }

    /// Runs a statement to completion; returns the rows it wrote.
    pub fn run(&self, query: &str, params: Vec<SqlStorageValue>) -> Result<u32, StoreError> {
        let cursor = self.sql.exec(query, params)?;
        let _ = cursor.raw().count();
        Ok(cursor.rows_written() as u32)
    }

    /// Runs a query and deserialises every row.
    pub fn rows<T: DeserializeOwned>(
        &self,
        query: &str,
        params: Vec<SqlStorageValue>,
    ) -> Result<Vec<T>, StoreError> {
        Ok(self.sql.exec(query, params)?.to_array()?)
    }

    /// Runs `body` in `transactionSync`: if it returns an error, or throws,
    /// everything it wrote is rolled back.
    pub fn transaction<T>(&self, mut body: impl FnMut() -> Result<T, StoreError>) -> Result<T, StoreError> {
        let storage: &SyncStorage = self.storage.unchecked_ref();
        let mut out = None;
        let mut guard = None;
        let result = storage.transaction_sync(&mut || match body() {
            Ok(v) => {
                out = Some(v);
                Ok(JsValue::UNDEFINED)
            }
            Err(StoreError::Guard(g)) => {
                guard = Some(g);
                Err(JsValue::from_str(&format!("{GUARD_PREFIX}{g}")))
            }
            Err(StoreError::Sql(e)) => Err(JsValue::from_str(&e)),
        });
        match result {
            Ok(_) => Ok(out.expect("transaction body returned Ok")),
            Err(_) if guard.is_some() => Err(StoreError::Guard(guard.expect("set above"))),
            Err(e) => Err(StoreError::Sql(js_error_text(&e))),
        }
    }

    /// Reads the schema version stored under `component` (0 if none).
    pub fn schema_version(&self, component: &str) -> Result<u32, StoreError> {
        self.run(
            "CREATE TABLE IF NOT EXISTS relay_schema (component TEXT PRIMARY KEY, version INTEGER NOT NULL)",
            vec![],
        )?;
        #[derive(serde::Deserialize)]
        struct V {
            version: u32,
        }
        let rows: Vec<V> =
            self.rows("SELECT version FROM relay_schema WHERE component = ?", vec![component.into()])?;
        Ok(rows.first().map_or(0, |v| v.version))
    }

    /// Brings `component`'s tables to the newest version by running, in
    /// one transaction, every migration after the stored version.
    /// `migrations[i]` moves version `i` to `i + 1`. A stored version newer
    /// than this code knows is refused: downgrades are not supported.
    pub fn migrate(&self, component: &str, migrations: &[&[&str]]) -> Result<u32, StoreError> {
        let newest = migrations.len() as u32;
        let stored = self.schema_version(component)?;
        if stored > newest {
            return Err(StoreError::Sql(format!(
                "{component} schema is version {stored}; this build knows up to {newest}"
            )));
        }
        if stored == newest {
            return Ok(newest);
        }
        self.transaction(|| {
            for step in &migrations[stored as usize..] {
                for statement in *step {
                    self.run(statement, vec![])?;
                }
            }
            self.run(
                "INSERT INTO relay_schema (component, version) VALUES (?, ?) \
                 ON CONFLICT(component) DO UPDATE SET version = excluded.version",
                vec![component.into(), (newest as i64).into()],
            )?;
            Ok(())
        })?;
        Ok(newest)
    }
}

/// A sequence or count as a bound SQLite integer. Values stay within
/// `SEQ_MAX`, so the JS number carrying it is exact.
pub fn int(v: u64) -> SqlStorageValue {
    assert!(v <= crate::core::SEQ_MAX, "{v} past SEQ_MAX");
    SqlStorageValue::Integer(v as i64)
}

/// The message of a JS error value.
pub fn js_error_text(e: &JsValue) -> String {
    if let Some(s) = e.as_string() {
        return s;
    }
    worker::js_sys::Reflect::get(e, &JsValue::from_str("message"))
        .ok()
        .and_then(|m| m.as_string())
        .unwrap_or_else(|| format!("{e:?}"))
}
