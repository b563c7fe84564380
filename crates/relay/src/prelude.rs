//! Everything an embedder's Durable Objects name, in one import, and the
//! shape of a table's migrations (one list of statements per version, each
//! version run once, in order, beside the outbox's own):
//!
//! ```
//! use durable_relay::prelude::*;
//!
//! const ORDERS_TABLE: Migrations = &[
//!     &["CREATE TABLE orders (id TEXT PRIMARY KEY, amount INTEGER NOT NULL)"], // version 1
//!     &["ALTER TABLE orders ADD COLUMN note TEXT"],                              // version 2, later
//! ];
//! # assert_eq!(ORDERS_TABLE.len(), 2);
//! ```
//!
//! It holds the facades ([`RelaySource`], [`RelayTarget`], [`row`], [`Enqueue`], and
//! [`WriteError`] and [`EnqueueWithError`] for an enqueue with your writes),
//! what their callbacks and migrations are written with ([`DoSql`], the
//! [`Sql`] trait that gives it `run`, [`int`], [`StoreError`], [`OnApply`],
//! [`HookError`], [`ApplyRow`] and its [`PutDecodeError`], [`Name`], [`Sender`] (a source as its
//! targets know it: name and id), [`Migrations`]), the HTTP helpers an object's
//! `fetch` answers with ([`RelayError`], [`json`], [`parse_json`],
//! [`read_body`], [`respond`]), the clock ([`now_ms`]), serde's [`Serialize`] and [`Deserialize`]
//! (traits and derives; the derives need `serde` among the embedder's
//! dependencies), and the workers-rs names every Durable Object
//! needs (`durable_object`, `event`, `wasm_bindgen`, [`DurableObject`],
//! [`State`], [`Env`], [`Request`], [`Response`], [`Method`], [`Context`]),
//! so the README's quick start compiles with this one line. Lower layers
//! stay at their own paths ([`crate::store`], [`crate::durable`], ...).

pub use crate::core::{ApplyRow, ErrorCode, Name, PutDecodeError, Sender};
pub use crate::durable::{now_ms, DoSql};
pub use crate::embed::{row, Enqueue, EnqueueWithError, Migrations, RelaySource, RelayTarget, WriteError};
pub use crate::hook::{HookError, OnApply};
/// The older name of [`RelayError`], deprecated: code that names it still
/// builds, with a warning that says what to write.
#[allow(deprecated)]
pub use crate::http::HttpError;
pub use crate::http::{json, parse_json, read_body, respond, RelayError};
pub use crate::store::{int, Sql, SqlValue, StoreError};
pub use serde::{Deserialize, Serialize};
pub use worker::{
    durable_object, event, wasm_bindgen, Context, DurableObject, Env, Method, Request, Response, State,
};
