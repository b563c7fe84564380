//! The front door for partitioned logical sources (`RELAY_PARTITIONS`):
//! enqueues go through the library's router to the objects (the
//! partitions `logical:index`, and the logical source's own object while
//! the map lists the plain layout); status, the watermark, the parked
//! targets and the operator's actions are the library's, gathered from
//! every object (`durable_relay::logical`); per-object reads (positions,
//! parked rows, alarm history) are addressed to the partition itself,
//! `/v1/sources/{logical}:{index}/...`, or at the logical name to its own
//! object while the map lists the plain layout or, when it does not, while
//! that object still holds rows.

#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

use durable_relay::core::ErrorCode;
use worker::{Env, Request, Response};

use durable_relay::core::{decode_enqueue, Name, Part, PartitionMap};
use durable_relay::durable::source::traceparent;
use durable_relay::http::{json, read_body, RelayError};
use durable_relay::partition::Position;
use durable_relay::routes::SourceOp;
use durable_relay::RelayClient;

use crate::routes::SourceRoute;

use crate::SOURCE_BINDING;

/// Serves `op` on the logical source `logical`.
pub async fn serve(
    env: &Env,
    req: &mut Request,
    logical: &Name,
    map: &PartitionMap,
    route: SourceRoute,
) -> Result<Response, RelayError> {
    let client = RelayClient::from_env(env, SOURCE_BINDING)?;
    let endpoints = crate::config(env)?.endpoints.into_keys().collect();
    let routed = client.partitioned(logical, map.clone())?.with_endpoints(endpoints);
    let SourceRoute::Relay(op) = route else {
        return Err(per_partition(logical, &route.path()));
    };
    match op {
        SourceOp::Enqueue => {
            let trace = traceparent(req)?;
            let body = decode_enqueue(&read_body(req).await?)?;
            match routed.enqueue(body.idempotency_key.as_deref(), &body.rows, trace.as_ref()).await {
                Ok(done) => json(&done).map_err(RelayError::from),
                Err(failure) => partial(failure.error, &failure.committed),
            }
        }
        SourceOp::Status => json(&routed.status().await?).map_err(RelayError::from),
        SourceOp::Watermark => {
            let min = routed.relay_watermark().await?;
            json(&serde_json::json!({ "relay_watermark": min, "now_ms": durable_relay::durable::now_ms() }))
                .map_err(RelayError::from)
        }
        SourceOp::ParkedTargets { after, limit } => {
            json(&routed.targets(after.as_ref(), limit).await?).map_err(RelayError::from)
        }
        SourceOp::Redrive(t) => json(&routed.redrive(&t).await?).map_err(RelayError::from),
        SourceOp::Discard(t) => json(&routed.discard(&t).await?).map_err(RelayError::from),
        SourceOp::Rearm => json(&routed.rearm().await?).map_err(RelayError::from),
        SourceOp::Queued { target, after, limit } => {
            json(&routed.queued(&target, after, limit).await?).map_err(RelayError::from)
        }
        // A per-object read at the logical name: the plain object's, while
        // it is one of the objects (see `reaches_plain`).
        op @ (SourceOp::DeliveredThrough(_) | SourceOp::ParkedRows { .. }) => {
            if !routed.reaches_plain().await? {
                return Err(per_partition(logical, &op.path()));
            }
            let reply: serde_json::Value = routed.part(Part::Plain)?.call(op, None).await?;
            json(&reply).map_err(RelayError::from)
        }
        // A router's own steps: the front door refuses them before this
        // (they are not `Reach::Public`), so no logical source offers them.
        op @ (SourceOp::Prepare
        | SourceOp::Activate
        | SourceOp::RecordKey
        | SourceOp::Seal
        | SourceOp::PlainKey
        | SourceOp::Settling(_)) => Err(RelayError::new(
            404,
            ErrorCode::NoRoute,
            format!("no route for {} {}", op.operation().method, op.path()),
        )),
    }
}

/// Whether the logical name's own per-object routes reach its plain object
/// under `map` (one call to learn it when the map does not list it).
pub async fn reaches_plain(env: &Env, logical: &Name, map: &PartitionMap) -> Result<bool, RelayError> {
    if map.has_plain() {
        return Ok(true);
    }
    let client = RelayClient::from_env(env, SOURCE_BINDING)?;
    client.partitioned(logical, map.clone())?.reaches_plain().await
}

/// The refusal of a per-partition operation at the logical source.
fn per_partition(logical: &Name, path: &str) -> RelayError {
    RelayError::bad_request(
        ErrorCode::PartitionedSource,
        format!(
            "{logical} is partitioned: address one partition, /v1/sources/{logical}:<index>/{}",
            path.trim_start_matches('/')
        ),
    )
}

/// A refusal that may leave some partitions committed: the partition's
/// status and code, plus the positions that did commit.
fn partial(error: RelayError, committed: &[Position]) -> Result<Response, RelayError> {
    let e = error;
    let body =
        serde_json::json!({ "error": { "code": e.code, "message": e.message, "committed": committed } });
    // The refusal's own response (status, content type, Retry-After), with this body.
    let response = e.response().map_err(|x| RelayError::internal(x.to_string()))?;
    let headers = response.headers().clone();
    Response::ok(body.to_string())
        .map(|r| r.with_status(e.status).with_headers(headers))
        .map_err(|x| RelayError::internal(x.to_string()))
}
