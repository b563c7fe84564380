//! The relay inside your own Durable Objects, in a few lines: a [`RelaySource`]
//! for the object that writes rows, a [`RelayTarget`] for the object that
//! applies them. Both are opened on first use, read the same variables as
//! the reference Worker ([`RelayConfig`]), and serve the relay's own
//! `fetch` protocol for what your object does not handle itself.
//!
//! ```no_run
//! use durable_relay::prelude::*;
//!
//! const ORDERS_TABLE: Migrations =
//!     &[&["CREATE TABLE IF NOT EXISTS orders (id TEXT PRIMARY KEY, seq INTEGER NOT NULL)"]];
//!
//! #[durable_object]
//! pub struct Orders {
//!     relay: RelaySource,
//! }
//!
//! impl DurableObject for Orders {
//!     fn new(state: State, env: Env) -> Self {
//!         Orders { relay: RelaySource::new(state, env).targets("CUSTOMERS").tables("orders", ORDERS_TABLE) }
//!     }
//!
//!     async fn fetch(&self, _req: Request) -> worker::Result<Response> {
//!         respond(self.place().await)
//!     }
//!
//!     async fn alarm(&self) -> worker::Result<Response> {
//!         self.relay.alarm().await
//!     }
//! }
//!
//! impl Orders {
//!     async fn place(&self) -> Result<Response, RelayError> {
//!         // Your write and the row commit together, or neither does.
//!         let row = row("customer-7")?.put("order:17", serde_json::json!({"amount": 30}));
//!         let (_, done) = self
//!             .relay
//!             .enqueue_with(&[row], Enqueue::key("order-17"), |sql, done| {
//!                 let seq = done.seqs.first().copied().unwrap_or(0);
//!                 sql.run("INSERT INTO orders (id, seq) VALUES (?, ?)", vec!["order-17".into(), int(seq)])?;
//!                 Ok(())
//!             })
//!             .await?;
//!         Ok(json(&done)?)
//!     }
//! }
//! # fn main() {}
//! ```

#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]
#![deny(clippy::unreachable, clippy::todo, clippy::unimplemented)]

mod binding;
mod log;
mod source;
mod target;
mod write;

use worker::Env;

use crate::config::RelayConfig;
use crate::core::{EnqueueRow, ErrorCode, Name};
pub use crate::hook::{HookError, KeysOnly, OnApply};
use crate::http::RelayError;
pub use log::{alarm_is_logged, log_alarm, log_alarm_as, log_alarm_with};
pub use source::{Enqueue, RelaySource};
pub use target::RelayTarget;
pub use write::{EnqueueWithError, WriteError};

/// The binding a [`RelaySource`] calls its targets through unless told another
/// ([`RelaySource::targets`]): the reference Worker's.
pub const DEFAULT_TARGET_BINDING: &str = "RELAY_TARGET";

/// Your own tables, as versioned migrations: each entry is one version's
/// statements, applied once, in order, with the relay's own (see
/// [`schema::migrate`](crate::store::schema::migrate)).
pub type Migrations = &'static [&'static [&'static str]];

/// A row for the target named `target`, to add effects to: refused (400
/// `invalid_target`) when the name is not one.
pub fn row(target: &str) -> Result<EnqueueRow, RelayError> {
    let name = Name::new(target)
        .map_err(|e| RelayError::bad_request(ErrorCode::InvalidTarget, format!("{target:?}: {e}")))?;
    Ok(EnqueueRow::to(name))
}

/// The relay's configuration from the Worker's variables.
fn config(env: &Env) -> Result<RelayConfig, RelayError> {
    RelayConfig::from_env(env).map_err(|e| RelayError::new(500, ErrorCode::BadConfiguration, e.to_string()))
}
