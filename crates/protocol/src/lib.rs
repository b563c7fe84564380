//! durable-relay-protocol: the relay's wire, with no storage and no Workers
//! runtime. Every operation of the source and target objects is declared
//! once in [`operations`] (method, path, who may call it, request and reply
//! types, RPC method, error codes); [`routes`] parses a request line into a
//! typed operation and builds one back; a line it cannot accept is a
//! [`Refusal`]; [`wire`] holds the request and reply bodies the table
//! names, one module per side. The Durable Object glue (`durable-relay`)
//! serves these operations; the reference Worker's front door and the Rust
//! client build them; [`generate`] (feature `generate`, the command
//! `scripts/generate`) writes the TypeScript method list, the npm package's
//! operations and `protocol.json` from the same table.

#![deny(unsafe_code)]

pub use durable_relay_core as core;

#[cfg(feature = "generate")]
pub mod generate;
pub mod line;
pub mod operations;
mod params;
pub mod refusal;
pub mod routes;
pub mod wire;

pub use operations::*;
pub use refusal::Refusal;
pub use routes::{SourceOp, TargetOp};
