//! The bench queue's consumer: applies each message's row to its target
//! through `POST /bench/apply`, which has no watermark skip, so whatever
//! order and repetition Queues delivers is what the targets see (and
//! count).
//!
//! One invocation gets one batch. Its messages are grouped per target,
//! keeping batch order within a target, and each target gets one call;
//! distinct targets are called concurrently, at most
//! [`BENCH_MAX_IN_FLIGHT`] at once, as the relay calls them. Messages of a
//! target whose call succeeded are acked; the others are retried (the
//! queue's `retry_delay` and `max_retries` apply; see bench/wrangler.toml).
//! A message addressed to an HTTPS endpoint (`endpoint:<name>`, configured
//! in `RELAY_ENDPOINTS` as for the relay) is sent alone, through the
//! relay's own [`EndpointTargets`]: the same signed request, the same
//! answer rules, so the endpoint benchmark compares delivery and not two
//! HTTP clients. Those calls run concurrently like the others; Queues
//! promises no order, and the benchmark counts what arrives out of order.
//!
//! Each invocation logs one JSON line, `{"event":"bench_queue_batch",...}`,
//! that the benchmark driver reads for progress and invocation counts.
//!
//! The handler never returns an error: workers-rs turns one into a panic,
//! and with `panic = "abort"` that would take the isolate down.

use std::rc::Rc;

use durable_relay::core::{CallOutcome, ENDPOINT_PREFIX};
use durable_relay::work::{self, Level};
use durable_relay::{EndpointTargets, RelayConfig};
use futures::stream::{self, StreamExt};
use serde::Serialize;
use worker::{event, Context, Env, Message, MessageBatch, MessageExt};

use super::wire::{call_apply, encode_apply, encode_endpoint_call, BenchReply, QueueRow};
use super::{flag, BENCH_MAX_IN_FLIGHT, BENCH_SOURCE_BINDING};
use crate::TARGET_BINDING;

/// One consumer invocation, as logged.
#[derive(Debug, Default, Serialize)]
struct BatchLog {
    event: &'static str,
    messages: u32,
    targets: u32,
    calls: u32,
    failed_calls: u32,
    retried: u32,
    first: u32,
    duplicates: u32,
    out_of_order: u32,
    effect_rows_written: u32,
    at_ms: u64,
    error: Option<String>,
}

#[event(queue)]
async fn queue(batch: MessageBatch<QueueRow>, env: Env, _ctx: Context) -> worker::Result<()> {
    let mut log = BatchLog { event: "bench_queue_batch", ..BatchLog::default() };
    if let Err(e) = consume(&batch, &env, &mut log).await {
        log.error = Some(e);
        batch.retry_all();
    }
    log.at_ms = worker::Date::now().as_millis();
    work::log(Level::Info, &serde_json::to_string(&log).unwrap_or_else(|_| "{}".into()));
    Ok(())
}

async fn consume(batch: &MessageBatch<QueueRow>, env: &Env, log: &mut BatchLog) -> Result<(), String> {
    if !flag::enabled(env).map_err(|e| e.message)? {
        return Err("the benchmark is off (RELAY_BENCH)".into());
    }
    let messages = batch.messages().map_err(|e| e.to_string())?;
    log.messages = messages.len() as u32;
    let (to_endpoints, to_objects): (Vec<_>, Vec<_>) =
        messages.iter().partition(|m| m.body().target.starts_with(ENDPOINT_PREFIX));
    if !to_endpoints.is_empty() {
        send_to_endpoints(&to_endpoints, env, log).await?;
    }
    if !to_objects.is_empty() {
        apply_to_objects(&to_objects, env, log).await?;
    }
    Ok(())
}

/// Sends each message to its endpoint as the relay would, one request per
/// row, at most [`BENCH_MAX_IN_FLIGHT`] at once.
async fn send_to_endpoints(
    messages: &[&Message<QueueRow>],
    env: &Env,
    log: &mut BatchLog,
) -> Result<(), String> {
    let config = RelayConfig::from_env(env).map_err(|e| e.to_string())?;
    let targets = EndpointTargets { endpoints: Rc::new(config.endpoints) };
    let sources = env.durable_object(BENCH_SOURCE_BINDING).map_err(|e| e.to_string())?;
    let calls = messages.iter().map(|m| {
        let (targets, sources) = (&targets, &sources);
        async move {
            let row = m.body();
            let Some(name) = row.target.strip_prefix(ENDPOINT_PREFIX) else {
                return false;
            };
            let Ok(id) = sources.id_from_name(&row.source) else { return false };
            let outcome = targets.apply(name, encode_endpoint_call(row, &id.to_string())).await;
            matches!(outcome, CallOutcome::Applied { .. })
        }
    });
    let outcomes: Vec<bool> = stream::iter(calls).buffered(BENCH_MAX_IN_FLIGHT as usize).collect().await;
    for (m, delivered) in messages.iter().zip(outcomes) {
        log.calls += 1;
        if delivered {
            log.first += 1;
            m.ack();
        } else {
            log.failed_calls += 1;
            log.retried += 1;
            m.retry();
        }
    }
    Ok(())
}

/// Groups messages per target object and applies each group in one call.
async fn apply_to_objects(
    messages: &[&Message<QueueRow>],
    env: &Env,
    log: &mut BatchLog,
) -> Result<(), String> {
    let namespace = env.durable_object(TARGET_BINDING).map_err(|e| e.to_string())?;
    let mut groups: Vec<(&str, Vec<usize>)> = Vec::new();
    for (i, m) in messages.iter().enumerate() {
        let target = m.body().target.as_str();
        match groups.iter_mut().find(|(t, _)| *t == target) {
            Some((_, g)) => g.push(i),
            None => groups.push((target, vec![i])),
        }
    }
    log.targets += groups.len() as u32;
    let calls = groups.iter().enumerate().map(|(g, (target, members))| {
        let body = encode_apply(members.iter().map(|&i| {
            let row = messages[i].body();
            (row.source.as_str(), row.seq, row.effects.as_str())
        }));
        let namespace = &namespace;
        async move { (g, call_apply(namespace, target, body).await) }
    });
    let outcomes: Vec<(usize, Result<BenchReply, String>)> =
        stream::iter(calls).buffer_unordered(BENCH_MAX_IN_FLIGHT as usize).collect().await;
    log.calls += outcomes.len() as u32;
    for (g, outcome) in outcomes {
        let members = &groups[g].1;
        match outcome {
            Ok(reply) => {
                log.first += reply.first;
                log.duplicates += reply.duplicates;
                log.out_of_order += reply.out_of_order;
                log.effect_rows_written += reply.effect_rows_written;
                members.iter().for_each(|&i| messages[i].ack());
            }
            Err(_) => {
                log.failed_calls += 1;
                log.retried += members.len() as u32;
                members.iter().for_each(|&i| messages[i].retry());
            }
        }
    }
    Ok(())
}
