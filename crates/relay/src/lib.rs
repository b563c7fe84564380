//! durable-relay: a transactional-outbox relay between Cloudflare Durable
//! Objects, in order per target, exactly once in effect, within the Workers
//! Free and Paid budgets. This is the library: depend on it to put the
//! outbox in your own Durable Objects. It exports no Worker symbols (no
//! `#[event]`, no `#[durable_object]`); the reference Worker that deploys
//! as-is is the separate `durable-relay-worker` crate.
//!
//! - [`core`]: the engine, without I/O (re-exported `durable-relay-core`).
//! - [`store`]: the outbox and the inbox, as SQL over the [`Sql`] interface.
//! - [`driver`]: the one alarm driver over any store and [`Targets`].
//! - [`RelaySource`] and [`RelayTarget`] ([`embed`]): the relay in your own Durable
//!   Objects in a few lines; start here.
//! - [`Relay`]: the source side in one type (enqueue, alarm, status,
//!   operator actions), keeping the alarm right.
//! - [`durable`]: the Durable Object glue (SQLite, alarm, target calls) and
//!   the objects' `fetch` protocols.
//! - [`prelude`]: everything an embedder's objects name, in one `use`.
//! - [`client`]: a typed client for Rust callers in other Workers.
//! - [`partition`]: the router of partitioned sources, over any sink;
//!   [`logical`]: a partitioned source's status, parked targets and
//!   operator actions gathered from every object.
//! - [`protocol`]: every operation of the objects' protocols, defined once.
//! - [`http`], [`routes`], [`codes`], [`config`]: the wire.
//! - [`vars`]: the Worker's variables, read once per isolate.
//! - [`work`]: what the relay asked of the platform, counted (the profile).
//! - `testing` (feature `testing`) and `sim` (feature `sim`).
//!
//! See ARCHITECTURE.md for the layers and the data flow.

#![deny(unsafe_code)]

pub use durable_relay_core as core;

pub mod client;
pub use durable_relay_core::codes;
pub mod config;
pub use durable_relay_sql::driver;
pub mod durable;
pub mod embed;
pub mod endpoint;
pub mod hook;
pub mod http;
pub mod logical;
pub use durable_relay_sql::partition;
pub mod prelude;
pub use durable_relay_protocol as protocol;
pub use durable_relay_protocol::routes;
#[cfg(feature = "sim")]
pub use durable_relay_sql::sim;
pub use durable_relay_sql::source;
pub use durable_relay_sql::store;
#[cfg(feature = "testing")]
pub use durable_relay_sql::testing;
pub mod vars;
pub mod work;

pub use client::{RelayClient, RelayError, SourceClient};
pub use codes::ErrorCode;
pub use config::{AlarmLog, Plan, RelayConfig};
pub use driver::{AlarmError, AlarmOptions, AlarmSummary, FireObserver, FireRecord, NoObserver, Targets};
pub use durable::endpoint::{EndpointTargets, RelayTargets};
pub use durable::{DoAlarm, DoRelay, DoSql, DoTargets, HostAlarm, StubCall, StubReply};
pub use embed::{row, Enqueue, Migrations, RelaySource, RelayTarget};
pub use hook::{HookError, KeysOnly, OnApply};
pub use source::{AlarmFailure, AlarmStore, Rearmed, Relay, SourceConfig, SourceStatus};
pub use store::inbox::{ApplyFailure, Inbox, InboxTotals, KeyValue, KeysPage, Watermark, WatermarkPage};
pub use store::outbox::{
    ActionOutcome, Commit, EnqueueFailure, Enqueued, Outbox, OutboxSettings, ParkedPage, TargetPage,
    TargetReport,
};
pub use store::{Sql, SqlValue, StoreError};
