//! `RelayDirectory`: which sources exist, for the operator's console and
//! `GET /v1/sources`. One object (named [`DIRECTORY_OBJECT`]) holds one row
//! per source. A source lists itself once, after its first accepted enqueue
//! ([`crate::source_do`] keeps a one-row mark so it never asks again), so
//! the enqueue hot path pays nothing after a source's first row. Retiring
//! is explicit (`POST /v1/sources/{s}/retire`) and only for an empty source.
//!
//! | method and path | reply |
//! | --- | --- |
//! | `POST /sources/{source}` | `{"source","new":bool}` (one row written when new) |
//! | `GET /sources?after=&limit=` | [`SourcePage`] |
//! | `DELETE /sources/{source}` | `{"source","removed":bool}` |
//! | `POST /sweep?limit=` | [`SweepPage`]: the scheduled sweep's next page ([`crate::sweep`]) |
//!
//! Schema (component `relay_directory`, version 2):
//!
//! ```sql
//! relay_directory (name TEXT PRIMARY KEY, listed_ms INTEGER) WITHOUT ROWID
//! relay_directory_sweep (id = 1, after TEXT)  -- version 2: where the sweep's round stands
//! ```

use durable_relay::core::ErrorCode;
use std::cell::OnceCell;

use serde::{Deserialize, Serialize};
use worker::{durable_object, wasm_bindgen, DurableObject, Env, Method, Request, Response, State};

use crate::routes::DirectoryOp;
use durable_relay::core::Name;
use durable_relay::durable::{now_ms, DoSql, StubCall};
use durable_relay::http::{json, respond, RelayError};
use durable_relay::store::{int, schema, Sql, StoreError};

/// Binding name of the directory's namespace. Optional: without it the
/// relay works as before and `GET /v1/sources` answers 501 `no_directory`.
pub const DIRECTORY_BINDING: &str = "RELAY_DIRECTORY";
/// The one directory object's name.
pub const DIRECTORY_OBJECT: &str = "sources";

const COMPONENT: &str = "relay_directory";
const MIGRATIONS: &[&[&str]] = &[
    &["CREATE TABLE relay_directory (name TEXT PRIMARY KEY, listed_ms INTEGER NOT NULL) WITHOUT ROWID"],
    // Version 2: the scheduled sweep's cursor, so each run takes the next
    // page and a round covers every source however many there are.
    &["CREATE TABLE relay_directory_sweep (id INTEGER PRIMARY KEY CHECK (id = 1), after TEXT NOT NULL)"],
];

/// One listed source.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Listed {
    /// The source's name.
    pub name: String,
    /// When it listed itself, ms since the epoch.
    pub listed_ms: u64,
}

/// A page of the directory, in name order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourcePage {
    /// The sources on this page.
    pub sources: Vec<Listed>,
    /// Pass as `after` for the next page; none on the last.
    pub next: Option<String>,
}

/// One run's page of the sweep's round.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SweepPage {
    /// The sources to check, in name order.
    pub sources: Vec<String>,
    /// Whether this page ends the round (the next run starts again from
    /// the first source).
    pub round_complete: bool,
    /// Rows the directory read for this page.
    pub rows_read: u64,
}

/// The directory Durable Object.
#[durable_object]
pub struct RelayDirectory {
    db: DoSql,
    ready: OnceCell<()>,
}

impl DurableObject for RelayDirectory {
    fn new(state: State, _env: Env) -> Self {
        RelayDirectory { db: DoSql::new(&state), ready: OnceCell::new() }
    }

    async fn fetch(&self, req: Request) -> worker::Result<Response> {
        respond(self.route(&req))
    }
}

fn store(e: StoreError) -> RelayError {
    RelayError::internal(e.to_string())
}

impl RelayDirectory {
    fn route(&self, req: &Request) -> Result<Response, RelayError> {
        if self.ready.get().is_none() {
            schema::migrate(&self.db, COMPONENT, MIGRATIONS).map_err(store)?;
            let _ = self.ready.set(());
        }
        let url = req.url().map_err(|e| RelayError::bad_request(ErrorCode::BadUrl, e.to_string()))?;
        let internal = |e: worker::Error| RelayError::internal(e.to_string());
        match DirectoryOp::from_url(req.method().as_ref(), &url)? {
            DirectoryOp::Register(name) => {
                let new = self
                    .db
                    .run(
                        "INSERT INTO relay_directory (name, listed_ms) VALUES (?, ?) ON CONFLICT(name) DO NOTHING",
                        vec![name.as_str().into(), int(now_ms())],
                    )
                    .map_err(store)?;
                json(&serde_json::json!({"source": name.as_str(), "new": new > 0})).map_err(internal)
            }
            DirectoryOp::Retire(name) => {
                let removed = self
                    .db
                    .run("DELETE FROM relay_directory WHERE name = ?", vec![name.as_str().into()])
                    .map_err(store)?;
                json(&serde_json::json!({"source": name.as_str(), "removed": removed > 0})).map_err(internal)
            }
            DirectoryOp::List { after, limit } => json(&self.page(after.as_ref(), limit)?).map_err(internal),
            DirectoryOp::Sweep { limit } => json(&self.sweep_page(limit).map_err(store)?).map_err(internal),
        }
    }

    /// The next `limit` sources after the sweep's cursor, advancing it (to
    /// the start once the page reaches the end), in one transaction.
    fn sweep_page(&self, limit: u32) -> Result<SweepPage, StoreError> {
        self.db.transaction(|| {
            let cursor = self.db.exec("SELECT after FROM relay_directory_sweep WHERE id = 1", vec![])?;
            let after = cursor.rows.first().map(|r| r.text(0)).transpose()?.unwrap_or_default();
            let page = self.db.exec(
                "SELECT name FROM relay_directory WHERE name > ? ORDER BY name LIMIT ?",
                vec![after.as_str().into(), int(u64::from(limit) + 1)],
            )?;
            let mut sources = page.rows.iter().map(|r| r.text(0)).collect::<Result<Vec<_>, _>>()?;
            let round_complete = sources.len() <= limit as usize;
            sources.truncate(limit as usize);
            let next =
                if round_complete { String::new() } else { sources.last().cloned().unwrap_or_default() };
            self.db.run(
                "INSERT INTO relay_directory_sweep (id, after) VALUES (1, ?) \
                 ON CONFLICT(id) DO UPDATE SET after = excluded.after",
                vec![next.into()],
            )?;
            let rows_read = u64::from(cursor.read) + u64::from(page.read);
            Ok(SweepPage { sources, round_complete, rows_read })
        })
    }

    /// Up to `limit` sources after `after` (and at most
    /// [`MAX_PAGE_BYTES`](durable_relay::core::MAX_PAGE_BYTES) of them), and
    /// whether more follow.
    fn page(&self, after: Option<&Name>, limit: u32) -> Result<SourcePage, RelayError> {
        let after = after.map_or("", |a| a.as_str());
        let sources: Vec<Listed> = self
            .db
            .rows_as(
                "SELECT name, listed_ms FROM relay_directory WHERE name > ? ORDER BY name LIMIT ?",
                vec![after.into(), int(u64::from(limit) + 1)],
            )
            .map_err(store)?;
        let (sources, more) = durable_relay::core::cut_page(sources, limit, durable_relay::core::json_bytes);
        let next = if more { sources.last().map(|s| s.name.clone()) } else { None };
        Ok(SourcePage { sources, next })
    }
}

/// Sends `op` to the directory, if one is bound: `Ok(None)` when none is.
pub async fn call(env: &Env, op: &DirectoryOp) -> Result<Option<Response>, RelayError> {
    let internal = |e: worker::Error| RelayError::internal(e.to_string());
    let Ok(namespace) = env.durable_object(DIRECTORY_BINDING) else { return Ok(None) };
    let (method, path) = op.request();
    let call = StubCall::new(Method::from(method.to_owned()), path);
    call.send_to(&namespace, DIRECTORY_OBJECT).await.map(Some).map_err(internal)
}
