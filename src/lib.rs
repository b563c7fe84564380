//! durable-relay: a transactional-outbox relay between Cloudflare Durable
//! Objects, in order per target, exactly once in effect, within the Workers
//! Free and Paid budgets.
//!
//! - [`core`]: the engine, with no I/O (planning and settling fires, the
//!   target-side apply rules, enqueue planning, encodings).
//! - [`sim`]: a deterministic simulator over memory (feature `sim`).
#![deny(unsafe_code)]

pub mod core;
#[cfg(feature = "sim")]
pub mod sim;
pub mod worker;
