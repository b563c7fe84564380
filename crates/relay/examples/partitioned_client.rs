//! The partitioned-sources chapter's Rust block, compiled by `cargo test`
//! and `cargo clippy --all-targets` (not run: it needs a Worker's `Env`):
//! another Worker enqueues to a partitioned logical source through the
//! typed client. `crates/relay/tests/docs.rs` checks that the chapter shows
//! the marked region verbatim.

use durable_relay::core::{EnqueueRow, Name, PartitionMap};
use durable_relay::partition::RoutedEnqueue;
use durable_relay::RelayClient;
use std::error::Error;
use worker::Env;

// readme: partitioned
/// Enqueues `rows` to the logical source `orders`, spread over its partitions by target.
async fn enqueue_orders(env: &Env, rows: &[EnqueueRow]) -> Result<RoutedEnqueue, Box<dyn Error>> {
    let relay = RelayClient::from_env(env, "RELAY_SOURCE")?;
    let map = PartitionMap::new(4, 1); // the same map as RELAY_PARTITIONS
    let orders = relay.partitioned(&Name::new("orders")?, map)?;
    // A failure names the rows that committed anyway (`e.committed`): retry with the same key.
    let done = orders.enqueue(Some("order-17"), rows, None).await.map_err(|e| e.error)?;
    Ok(done) // done.positions: one Position { partition, seq } per row
}
// readme: end

fn main() {
    // Named so the compiler checks the function's use of the client.
    let _ = enqueue_orders;
}
