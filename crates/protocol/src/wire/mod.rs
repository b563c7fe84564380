//! The bodies that cross the wire: every request and reply the operations
//! table names (`request` and `reply` in [`crate::operations`]), one module
//! per side, plus the types they contain.
//!
//! This crate owns them, so a caller that only talks to the relay (the Rust
//! client, another Worker) names them without the storage crate. The
//! storage crate (`durable-relay-sql`) builds the replies from its tables
//! and re-exports each at its old path; the Durable Object glue
//! (`durable-relay`) decodes the requests and serves the replies. A type
//! the engine already defines stays there and is re-exported here under
//! its wire name: the enqueue decoder ([`decode_enqueue`](crate::core::decode_enqueue)),
//! the apply batch and its answer ([`ApplyRequest`], [`ApplyReply`]), the
//! partition map and key attempt the router's bodies carry.
//!
//! - [`source`]: what a source's public operations take and answer
//!   (enqueue, status, watermarks, parked targets and rows, operator
//!   actions, re-arm);
//! - [`router`]: what a partitioned source's router and its objects say to
//!   each other (adoption, keys, seal, plain keys, settling);
//! - [`target`]: what a target's operations take and answer;
//! - [`logical`]: what a partitioned source answers as one source.
//!
//! Every type here is plain data: methods that need storage stay in the
//! storage crate, pure ones (such as [`Enqueued::first_due_ms`]) live with
//! their type.

pub mod logical;
pub mod router;
pub mod source;
pub mod target;

pub use crate::core::{ApplyReply, ApplyRequest};
pub use logical::{LogicalStatus, LogicalTargetPage, PartitionStatus, PartitionTarget, Totals};
pub use router::{
    Activated, AdoptBody, KeyBody, KeyReply, PlainKeyBody, PlainKeyReply, PrepareReply, RoutedKey, SealBody,
    Sealed, Settling,
};
pub use source::{
    ActionOutcome, AlarmOptions, CapacityReport, DeliveredThrough, EnqueueBody, Enqueued, OutboxSettings,
    ParkedPage, ParkedRow, Position, QueuedPage, QueuedRow, Rearmed, RoutedEnqueue, SourceConfig,
    SourceStatus, TargetPage, TargetReport, WatermarkReply,
};
pub use target::{Forgotten, KeyValue, KeysPage, TargetStatus, Watermark, WatermarkPage};
