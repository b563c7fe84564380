//! A typed client for Rust Workers that enqueue through a source's Durable
//! Object stub: the reference relay's `RelaySource` (bound with
//! `script_name = "durable-relay"`), or an embedder's own source object
//! that serves [`durable::source`](crate::durable::source). Each call's
//! refusal is a [`RelayError`] with the relay's code and status.
//!
//! ```no_run
//! use durable_relay::http::RelayError;
//! use durable_relay::{row, ErrorCode, RelayClient};
//!
//! async fn place_order(env: &worker::Env) -> Result<bool, RelayError> {
//!     let orders = RelayClient::from_env(env, "RELAY_SOURCE")?.source("orders")?;
//!     let balance = row("customer-1")?.put("balance", serde_json::json!(10));
//!     let done = match orders.enqueue_keyed("order-17", &[balance]).await {
//!         Ok(done) => done, // done.seqs, done.duplicate, ...
//!         Err(e) if e.code == ErrorCode::OutboxFull => return Ok(false), // retry after e.retry_after_s
//!         // Workers Free's rows written for the day are used up: retry after 00:00 UTC.
//!         Err(e) if e.code == ErrorCode::DailyWriteLimit => return Ok(false),
//!         Err(e) => return Err(e.into()),
//!     };
//!     let _status = orders.status().await?; // SourceStatus
//!     Ok(orders.delivered_through(done.seqs[0]).await?) // true once the customer applied it
//! }
//! ```

#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]
#![deny(clippy::unreachable, clippy::todo, clippy::unimplemented)]

use std::fmt;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use worker::{Env, ObjectNamespace, Stub};

use crate::codes::ErrorCode;
use crate::core::{
    EnqueueRefusal, EnqueueRow, Fence, KeyVerdict, Name, Part, PartitionMap, Ticket, Traceparent,
};
use crate::durable::source::{fence_headers, ticket_headers, TRACEPARENT_HEADER};
use crate::durable::{StubCall, StubReply};
use crate::partition::{self, Partitions, RouteFailure};
use crate::protocol::wire::{
    ActionOutcome, AdoptBody, DeliveredThrough, EnqueueBody, Enqueued, KeyBody, KeyReply, ParkedPage,
    PlainKeyBody, PlainKeyReply, PrepareReply, QueuedPage, Rearmed, RoutedEnqueue, RoutedKey, SealBody,
    Sealed, SourceStatus, TargetPage, WatermarkReply,
};
use crate::routes::SourceOp;

pub use crate::http::RelayError;

impl RelayError {
    fn runtime(e: impl fmt::Display) -> RelayError {
        RelayError { status: 500, code: ErrorCode::Internal, message: e.to_string(), retry_after_s: None }
    }
}

/// The relay's sources, reached through a Durable Object namespace.
pub struct RelayClient {
    namespace: ObjectNamespace,
}

impl RelayClient {
    /// A client over a source class's namespace.
    pub fn new(namespace: ObjectNamespace) -> RelayClient {
        RelayClient { namespace }
    }

    /// A client over the namespace bound as `binding`.
    pub fn from_env(env: &Env, binding: &str) -> Result<RelayClient, RelayError> {
        Ok(RelayClient::new(env.durable_object(binding).map_err(RelayError::runtime)?))
    }

    /// The source named `name` (refused when the name is invalid).
    pub fn source(&self, name: &str) -> Result<SourceClient, RelayError> {
        let name = Name::new(name).map_err(|e| RelayError {
            status: 400,
            code: ErrorCode::InvalidName,
            message: e.to_string(),
            retry_after_s: None,
        })?;
        let stub = self
            .namespace
            .id_from_name(name.as_str())
            .and_then(|id| id.get_stub())
            .map_err(RelayError::runtime)?;
        Ok(SourceClient { name, stub })
    }
}

/// One source.
pub struct SourceClient {
    name: Name,
    stub: Stub,
}

#[derive(Deserialize)]
struct ErrorBody {
    error: ErrorFields,
}

#[derive(Deserialize)]
struct ErrorFields {
    code: String,
    message: String,
}

impl SourceClient {
    /// The source's name.
    pub fn name(&self) -> &Name {
        &self.name
    }

    /// Enqueues `rows`, atomically.
    pub async fn enqueue(&self, rows: &[EnqueueRow]) -> Result<Enqueued, RelayError> {
        self.send_enqueue(rows, None).await
    }

    /// Enqueues `rows` under an idempotency key: a repeat answers the
    /// original sequences with `duplicate: true`.
    pub async fn enqueue_keyed(&self, key: &str, rows: &[EnqueueRow]) -> Result<Enqueued, RelayError> {
        self.send_enqueue(rows, Some(key)).await
    }

    /// Enqueues `rows` carrying the caller's W3C trace context: stored and
    /// sent with every row, and named in the source's and the target's log
    /// lines. `key` as in [`SourceClient::enqueue_keyed`].
    pub async fn enqueue_traced(
        &self,
        trace: &Traceparent,
        key: Option<&str>,
        rows: &[EnqueueRow],
    ) -> Result<Enqueued, RelayError> {
        let body = serde_json::to_string(&EnqueueBody { rows, idempotency_key: key })
            .map_err(RelayError::runtime)?;
        let headers = [(TRACEPARENT_HEADER, trace.as_str().to_owned())];
        self.call_with(SourceOp::Enqueue, Some(body), &headers).await
    }

    async fn send_enqueue(&self, rows: &[EnqueueRow], key: Option<&str>) -> Result<Enqueued, RelayError> {
        let body = serde_json::to_string(&EnqueueBody { rows, idempotency_key: key })
            .map_err(RelayError::runtime)?;
        self.call(SourceOp::Enqueue, Some(body)).await
    }

    /// The source's status.
    pub async fn status(&self) -> Result<SourceStatus, RelayError> {
        self.call(SourceOp::Status, None).await
    }

    /// Whether every row through `seq` was applied (or discarded).
    pub async fn delivered_through(&self, seq: u64) -> Result<bool, RelayError> {
        let reply: DeliveredThrough = self.call(SourceOp::DeliveredThrough(seq), None).await?;
        Ok(reply.delivered)
    }

    /// Sets the source's alarm if rows are queued and none is set.
    pub async fn rearm(&self) -> Result<Rearmed, RelayError> {
        self.call(SourceOp::Rearm, None).await
    }

    /// The commit-time lower bound of the rows still owed.
    pub async fn relay_watermark(&self) -> Result<u64, RelayError> {
        let reply: WatermarkReply = self.call(SourceOp::Watermark, None).await?;
        Ok(reply.relay_watermark)
    }

    /// A page of the parked and failing targets, in name order after
    /// `after`: at most `limit` (1..=[`MAX_TARGETS_PER_PAGE`](crate::core::MAX_TARGETS_PER_PAGE)).
    pub async fn targets(&self, after: Option<&Name>, limit: u32) -> Result<TargetPage, RelayError> {
        self.call(SourceOp::ParkedTargets { after: after.cloned(), limit }, None).await
    }

    /// A page of `target`'s parked rows: at most `limit` (1..=
    /// [`MAX_PARKED_ROWS_PER_PAGE`](crate::core::MAX_PARKED_ROWS_PER_PAGE))
    /// with sequences after `after`.
    pub async fn parked_rows(&self, target: &Name, after: u64, limit: u32) -> Result<ParkedPage, RelayError> {
        self.call(SourceOp::ParkedRows { target: target.clone(), after, limit }, None).await
    }

    /// A page of the rows still queued for `target`, in the order it
    /// receives them: at most `limit` (1..=
    /// [`MAX_QUEUED_ROWS_PER_PAGE`](crate::core::MAX_QUEUED_ROWS_PER_PAGE))
    /// with sequences after `after`.
    pub async fn queued(&self, target: &Name, after: u64, limit: u32) -> Result<QueuedPage, RelayError> {
        self.call(SourceOp::Queued { target: target.clone(), after, limit }, None).await
    }

    /// Puts a parked target's rows back, in order.
    pub async fn redrive(&self, target: &Name) -> Result<ActionOutcome, RelayError> {
        self.call(SourceOp::Redrive(target.clone()), None).await
    }

    /// Drops a parked target's rows.
    pub async fn discard(&self, target: &Name) -> Result<ActionOutcome, RelayError> {
        self.call(SourceOp::Discard(target.clone()), None).await
    }

    /// Calls `op` and reads its JSON reply as a `T` (any JSON for a
    /// `serde_json::Value`).
    pub async fn call<T: DeserializeOwned>(
        &self,
        op: SourceOp,
        body: Option<String>,
    ) -> Result<T, RelayError> {
        self.call_with(op, body, &[]).await
    }

    async fn call_with<T: DeserializeOwned>(
        &self,
        op: SourceOp,
        body: Option<String>,
        headers: &[(&str, String)],
    ) -> Result<T, RelayError> {
        let mut call = StubCall::source(&op).body(body);
        for (name, value) in headers {
            call = call.header(name, value.clone());
        }
        let StubReply { status, retry_after_s, text } =
            call.read(&self.stub).await.map_err(RelayError::runtime)?;
        if status == 200 {
            return serde_json::from_str(&text).map_err(RelayError::runtime);
        }
        Err(refusal(status, retry_after_s, text))
    }
}

/// A refusal's reply as a [`RelayError`]: the code and message of its JSON
/// error body (`internal` with the text when it has none), the status and
/// the `Retry-After` seconds.
fn refusal(status: u16, retry_after_s: Option<u32>, text: String) -> RelayError {
    match serde_json::from_str::<ErrorBody>(&text) {
        Ok(b) => RelayError {
            status,
            code: ErrorCode::parse(&b.error.code),
            message: b.error.message,
            retry_after_s,
        },
        Err(_) => RelayError { status, code: ErrorCode::Internal, message: text, retry_after_s },
    }
}

/// A partitioned logical source (see [`crate::core::partition`]): enqueues
/// go through the shared router to its partitions, each partition is a
/// [`SourceClient`] of its own (`logical:index`), and what is read or done
/// over the whole source is gathered from every object ([`crate::logical`]).
pub struct PartitionedClient<'a> {
    client: &'a RelayClient,
    logical: Name,
    map: PartitionMap,
    /// The endpoints the partitions take rows for, when this Worker knows
    /// them (see [`with_endpoints`](PartitionedClient::with_endpoints)).
    endpoints: Option<std::collections::BTreeSet<String>>,
}

impl RelayClient {
    /// The logical source `logical`, partitioned by `map` (which must be the
    /// map every other router of it uses; see docs/partitioned-sources.md).
    pub fn partitioned(
        &self,
        logical: &Name,
        map: PartitionMap,
    ) -> Result<PartitionedClient<'_>, RelayError> {
        map.validate(logical).map_err(|e| RelayError {
            status: 400,
            code: ErrorCode::InvalidPartition,
            message: e.to_string(),
            retry_after_s: None,
        })?;
        Ok(PartitionedClient { client: self, logical: logical.clone(), map, endpoints: None })
    }
}

impl PartitionedClient<'_> {
    /// Refuses, before anything is sent, a request with a row to an
    /// endpoint not among `names` (the partitions' `RELAY_ENDPOINTS`), so
    /// one spanning partitions writes nothing; without it each partition
    /// refuses its own share.
    pub fn with_endpoints(mut self, names: std::collections::BTreeSet<String>) -> Self {
        self.endpoints = Some(names);
        self
    }

    /// Enqueues `rows`, routed by target; atomic per partition (see
    /// [`crate::partition`]). `trace` travels with every row.
    pub async fn enqueue(
        &self,
        key: Option<&str>,
        rows: &[EnqueueRow],
        trace: Option<&Traceparent>,
    ) -> Result<RoutedEnqueue, RouteFailure<RelayError>> {
        let sink = Sink { client: self, trace };
        partition::enqueue(&self.map, &sink, key, rows, crate::durable::now_ms()).await
    }

    /// The logical source's name.
    pub fn logical(&self) -> &Name {
        &self.logical
    }

    /// The map it is routed by.
    pub fn map(&self) -> &PartitionMap {
        &self.map
    }

    /// Object `part` of the logical source (a partition, or the plain
    /// object), for what is read or done per object.
    pub fn part(&self, part: Part) -> Result<SourceClient, RelayError> {
        self.client.source(part.object(&self.logical).as_str())
    }

    /// Partition `index`, for what is read or done per partition.
    pub fn partition(&self, index: u32) -> Result<SourceClient, RelayError> {
        self.part(Part::Index(index))
    }

    /// Every object a logical read asks
    /// ([`durable_relay_sql::logical::objects`]), with its part.
    pub fn parts(&self) -> Result<Vec<(Part, SourceClient)>, RelayError> {
        durable_relay_sql::logical::objects(&self.map).into_iter().map(|p| Ok((p, self.part(p)?))).collect()
    }
}

/// The router's sink over the objects' stubs.
struct Sink<'a, 'b> {
    client: &'a PartitionedClient<'b>,
    trace: Option<&'a Traceparent>,
}

impl Sink<'_, '_> {
    /// Calls `op` with `body` as JSON at `part`.
    async fn send<B: Serialize, T: DeserializeOwned>(
        &self,
        part: Part,
        op: SourceOp,
        body: &B,
        headers: &[(&str, String)],
    ) -> Result<T, RelayError> {
        let body = serde_json::to_string(body).map_err(RelayError::runtime)?;
        self.client.part(part)?.call_with(op, Some(body), headers).await
    }
}

impl Partitions for Sink<'_, '_> {
    type Error = RelayError;

    fn endpoints(&self) -> Option<&std::collections::BTreeSet<String>> {
        self.client.endpoints.as_ref()
    }

    async fn enqueue(
        &self,
        part: Part,
        key: Option<RoutedKey<'_>>,
        rows: &[EnqueueRow],
        fence: Fence,
    ) -> Result<Option<Enqueued>, RelayError> {
        let body = EnqueueBody { rows, idempotency_key: key.map(|k| k.key) };
        let mut headers = fence_headers(fence);
        if let Some(k) = key {
            headers.extend(ticket_headers(k.ticket, k.digest));
        }
        if let Some(t) = self.trace {
            headers.push((TRACEPARENT_HEADER, t.as_str().to_owned()));
        }
        match self.send(part, SourceOp::Enqueue, &body, &headers).await {
            Ok(done) => Ok(Some(done)),
            Err(e) if fence.gate && e.code == ErrorCode::TargetMoved => Ok(None),
            Err(e) => Err(e),
        }
    }

    async fn record_key(
        &self,
        home: u32,
        key: &str,
        digest: &str,
        reach: &[Part],
    ) -> Result<KeyVerdict, RelayError> {
        let body = KeyBody { key: key.to_owned(), digest: digest.to_owned(), reach: reach.to_vec() };
        let reply: KeyReply = self.send(Part::Index(home), SourceOp::RecordKey, &body, &[]).await?;
        reply
            .verdict()
            .ok_or_else(|| RelayError::runtime("a key's home answered a verdict this build does not know"))
    }

    async fn seal(&self, part: Part, key: &str, digest: &str, ticket: Ticket) -> Result<Sealed, RelayError> {
        let body = SealBody { key: key.to_owned(), digest: digest.to_owned(), ticket };
        self.send(part, SourceOp::Seal, &body, &[]).await
    }

    async fn probe_plain(
        &self,
        key: &str,
        digest: &str,
        fence: Fence,
    ) -> Result<Option<Enqueued>, RelayError> {
        let body = PlainKeyBody { key: key.to_owned(), digest: digest.to_owned() };
        let reply: PlainKeyReply =
            self.send(Part::Plain, SourceOp::PlainKey, &body, &fence_headers(fence)).await?;
        Ok(reply.enqueued)
    }

    async fn prepare(&self, part: Part, map: &PartitionMap) -> Result<Vec<Part>, RelayError> {
        let reply: PrepareReply =
            self.send(part, SourceOp::Prepare, &AdoptBody { map: map.clone() }, &[]).await?;
        Ok(reply.known)
    }

    async fn activate(&self, part: Part, map: &PartitionMap) -> Result<(), RelayError> {
        let _: serde_json::Value =
            self.send(part, SourceOp::Activate, &AdoptBody { map: map.clone() }, &[]).await?;
        Ok(())
    }

    fn refused(&self, refusal: EnqueueRefusal) -> RelayError {
        RelayError::from(refusal)
    }

    fn unadopted(&self, error: &RelayError) -> bool {
        error.code == ErrorCode::EpochNotAdopted
    }

    fn moved_on_direct(&self, part: Part) -> RelayError {
        RelayError {
            status: 500,
            code: ErrorCode::Internal,
            message: format!(
                "object {part} of {} answered a direct enqueue with target_moved",
                self.client.logical
            ),
            retry_after_s: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_daily_write_limit_reply_is_its_code_with_the_wait_until_midnight() {
        let body = r#"{"error":{"code":"daily_write_limit","message":"daily write limit: ..."}}"#;
        let e = refusal(503, Some(23_400), body.into());
        assert_eq!((e.status, e.code, e.retry_after_s), (503, ErrorCode::DailyWriteLimit, Some(23_400)));
        let garbled = refusal(502, None, "bad gateway".into());
        assert_eq!((garbled.code, garbled.message.as_str()), (ErrorCode::Internal, "bad gateway"));
    }
}
