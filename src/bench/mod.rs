//! Benchmark-only plumbing: what `npm run bench` needs to compare
//! the relay with Cloudflare Queues and with direct writes in one run of
//! local workerd. It is compiled only with the cargo feature `bench`
//! (scripts/build-bench-worker), so the production Worker neither ships nor
//! pays for it; and even in that build nothing here is reachable unless
//! `RELAY_BENCH=on`, which is refused when `RELAY_ENV` is `production` (or
//! unset), exactly like `RELAY_TEST_FAULTS`.
//!
//! - [`flag`]: the `RELAY_BENCH` switch.
//! - [`wire`]: the bench apply call's body and reply, and the queue message.
//! - [`target`]: the target side. An arrival log (source, seq, time) that
//!   the relay's apply path feeds through a [`RelayHook`](durable_relay::core::RelayHook)
//!   and the Queues and direct paths feed through `POST /bench/apply`, which
//!   applies effects unconditionally (no watermark skip), so rows that
//!   arrive out of order or twice are applied as they come and counted.
//! - [`source`]: `BenchSource`, a Durable Object that allocates sequences
//!   like an outbox and then either calls the targets synchronously (direct
//!   writes) or sends each row as a queue message.
//! - [`consumer`]: the queue consumer (`#[event(queue)]`).
//! - [`front`]: the `/v1/bench/...` routes of the front door Worker.
//! - [`heap`]: the allocator's count of live wasm heap bytes, for the soak.
//!
//! The bindings these need (the `BenchSource` class, the queue producer
//! and consumer) live in `bench/wrangler.toml`, not in the production
//! `wrangler.toml`.

pub mod consumer;
pub mod flag;
pub mod front;
pub mod heap;
pub mod source;
pub mod target;
pub mod wire;

/// Binding name of the `BenchSource` namespace (bench/wrangler.toml).
pub const BENCH_SOURCE_BINDING: &str = "BENCH_SOURCE";
/// Binding name of the bench queue's producer (bench/wrangler.toml).
pub const BENCH_QUEUE_BINDING: &str = "BENCH_QUEUE";
/// Path prefix of the bench routes on the front door.
pub const FRONT_PREFIX: &str = "/v1/bench/";
/// Path prefix of the bench routes on a target Durable Object.
pub const TARGET_PREFIX: &str = "/bench/";
/// Concurrent target calls the direct writer and the queue consumer make,
/// the same as the relay's default in-flight limit so no system gets more
/// parallelism than another.
pub const BENCH_MAX_IN_FLIGHT: u32 = durable_relay::core::DEFAULT_MAX_IN_FLIGHT;
