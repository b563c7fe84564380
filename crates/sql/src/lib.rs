//! durable-relay-sql: the relay over SQL storage, with no Workers runtime.
//! Everything here reaches the outside world through three interfaces the
//! caller implements: [`Sql`] (a SQLite connection), [`Targets`] (calls to
//! target objects) and [`AlarmStore`] (the object's alarm). Durable Object
//! glue implements them in the `durable-relay` crate; the simulator (feature
//! `sim`) implements them over a native SQLite, a fake clock and fake
//! targets, so the SQL and the driver that ship are the ones it runs. This
//! crate has no `worker` dependency, so the compiler keeps that boundary.
//!
//! - [`store`]: the outbox and the inbox, as SQL over [`Sql`].
//! - [`driver`]: the one alarm driver over any store and [`Targets`].
//! - [`source`]: [`Relay`], the source side as one type (enqueue, alarm,
//!   status, operator actions), keeping the alarm right.
//! - [`partition`]: the router of partitioned sources, over any sink;
//!   [`logical`]: a partitioned source read and acted on as one source,
//!   over any sink.
//! - [`peers`]: what a source sends a target of another release.
//! - `testing` (feature `testing`): fault wrappers, the target's test tables
//!   and the storage suite; `sim` (feature `sim`): the simulator.

#![deny(unsafe_code)]

pub use durable_relay_core as core;

pub mod driver;
pub mod logical;
pub mod partition;
pub mod peers;
#[cfg(feature = "sim")]
pub mod sim;
pub mod source;
pub mod store;
#[cfg(feature = "testing")]
pub mod testing;

pub use driver::{AlarmError, AlarmOptions, AlarmSummary, FireObserver, FireRecord, NoObserver, Targets};
pub use source::{AlarmFailure, AlarmStore, Rearmed, Relay, SourceConfig, SourceStatus};
pub use store::inbox::{ApplyFailure, Inbox, InboxTotals, KeyValue, KeysPage, Watermark, WatermarkPage};
pub use store::outbox::{
    ActionOutcome, Commit, EnqueueFailure, Enqueued, Outbox, OutboxSettings, ParkedPage, QueuedPage,
    TargetPage, TargetReport,
};
pub use store::{Sql, SqlValue, StoreError};
