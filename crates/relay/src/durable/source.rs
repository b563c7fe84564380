//! A source object's `fetch` protocol, served from a [`Relay`]: the
//! reference `RelaySource` serves it, and so can an embedder's own source
//! object, which then answers the Rust client, the RPC entrypoint and the
//! front door exactly like the reference one.
//!
//! | method and path | body / query | reply |
//! | --- | --- | --- |
//! | `POST /enqueue` (optional `traceparent` header) | `{"rows":[{"target","puts":[[k,v]..],"deletes":[k..]}],"idempotency_key"?}` | [`Enqueued`](crate::Enqueued) |
//! | `GET /status` | | [`SourceStatus`](crate::SourceStatus) |
//! | `GET /delivered-through/{seq}` | | `{"seq":N,"delivered":bool}` |
//! | `GET /watermark` | | `{"relay_watermark":ms,"now_ms":ms}` |
//! | `GET /parked` | | `{"targets":[..]}`: parked and failing targets |
//! | `GET /parked/{target}?after=&limit=` | | a [`ParkedPage`](crate::ParkedPage) |
//! | `POST /parked/{target}/redrive` | | `{"rows":n,"was_parked":bool}` |
//! | `POST /parked/{target}/discard` | | `{"rows":n,"was_parked":bool}` |
//! | `GET /queued?target=&after=&limit=` | | a [`QueuedPage`](crate::protocol::wire::QueuedPage) |
//! | `POST /rearm` | | `{"rearmed":bool,"alarm_at_ms":ms or null,"queued_rows":n}` |
//! | `GET /settling/{layout}` | | a [`Settling`](crate::store::outbox::Settling) |
//! | `POST /prepare` (routers) | `{"map":{...}}` | `{"known":[part...]}`: every object it knows |
//! | `POST /activate` (routers) | `{"map":{...}}` | `{"active":true}` |
//! | `POST /keys` (routers) | `{"key","digest","reach"}` | `{"verdict":"fresh"|"retry","ticket","reach"}` |
//! | `POST /seal` (routers) | `{"key","digest","ticket"}` | a [`Sealed`](crate::store::outbox::Sealed) |
//! | `POST /plain-key` (routers) | `{"key","digest"}` | `{"enqueued":Enqueued or null}` |
//!
//! A partition router adds `relay-partition-epoch` and `relay-partition-map`
//! (its map's [`id`](crate::core::PartitionMap::id)) to `POST /enqueue` and
//! `POST /plain-key`, `relay-partition-gate: 1` at a moving target's old
//! home, and, for a keyed request, `relay-key-ticket` (`gen_ms.attempt`)
//! and `relay-key-digest`; a gated enqueue the object cannot take is 409
//! `target_moved`, a map it has not activated 409 `epoch_not_adopted`.

#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]
#![deny(clippy::unreachable, clippy::todo, clippy::unimplemented)]

use crate::core::ErrorCode;
use crate::work::{self, Level};
use worker::{Request, Response};

use super::{now_ms, DoAlarm};
use crate::core::{decode_enqueue, Fence, PartitionMap, Ticket, Traceparent, SEQ_MAX};
use crate::http::{json, parse_json, read_body, RelayError};
use crate::protocol::wire::{Activated, PlainKeyReply, PrepareReply, RoutedKey};
/// The bodies this protocol takes and answers, at the paths they had
/// before the protocol crate owned them.
pub use crate::protocol::wire::{
    AdoptBody, DeliveredThrough, KeyBody, KeyReply, PlainKeyBody, SealBody, WatermarkReply,
};
use crate::routes::SourceOp;
use crate::source::Relay;
use crate::store::Sql;

/// The header that carries W3C trace context on `POST /enqueue`.
pub const TRACEPARENT_HEADER: &str = "traceparent";

/// Parses and serves one request of the source's protocol.
pub async fn handle<S: Sql>(relay: &Relay<S, DoAlarm>, req: &mut Request) -> Result<Response, RelayError> {
    serve(relay, req, operation(req)?).await
}

/// The operation of the source's protocol `req` asks for: its request line,
/// parsed once.
pub fn operation(req: &Request) -> Result<SourceOp, RelayError> {
    let url = req.url().map_err(|e| RelayError::bad_request(ErrorCode::BadUrl, e.to_string()))?;
    Ok(SourceOp::from_url(req.method().as_ref(), &url)?)
}

/// Serves one parsed operation: the longer ones each in a function of
/// their own.
pub async fn serve<S: Sql>(
    relay: &Relay<S, DoAlarm>,
    req: &mut Request,
    op: SourceOp,
) -> Result<Response, RelayError> {
    match op {
        SourceOp::Enqueue => enqueue(relay, req).await,
        SourceOp::Prepare => {
            let body: AdoptBody = parse_json(&read_body(req).await?)?;
            let known = relay.prepare(now_ms(), &body.map)?;
            json(&PrepareReply { known }).map_err(RelayError::from)
        }
        SourceOp::Activate => {
            let body: AdoptBody = parse_json(&read_body(req).await?)?;
            relay.activate(now_ms(), &body.map)?;
            json(&Activated { active: true }).map_err(RelayError::from)
        }
        SourceOp::RecordKey => record_key(relay, req).await,
        SourceOp::Seal => {
            let body: SealBody = parse_json(&read_body(req).await?)?;
            checked_key(&body.key)?;
            json(&relay.seal(now_ms(), &body.key, &body.digest, body.ticket)?).map_err(RelayError::from)
        }
        SourceOp::PlainKey => plain_key(relay, req).await,
        SourceOp::Settling(layout) => {
            let map = PartitionMap { partitions: layout, epoch: 1, from: Vec::new() };
            json(&relay.settling(&map, now_ms())?).map_err(RelayError::from)
        }
        SourceOp::Status => json(&relay.status(now_ms()).await?).map_err(RelayError::from),
        SourceOp::Rearm => rearm(relay).await,
        SourceOp::DeliveredThrough(seq) => {
            json(&DeliveredThrough { seq, delivered: relay.delivered_through(seq)? })
                .map_err(RelayError::from)
        }
        SourceOp::Watermark => {
            let now = now_ms();
            json(&WatermarkReply { relay_watermark: relay.relay_watermark(now)?, now_ms: now })
                .map_err(RelayError::from)
        }
        SourceOp::ParkedTargets { after, limit } => {
            json(&relay.targets(after.as_ref().map_or("", |a| a.as_str()), limit)?).map_err(RelayError::from)
        }
        SourceOp::ParkedRows { target, after, limit } => {
            json(&relay.parked_page(&target, after, limit)?).map_err(RelayError::from)
        }
        SourceOp::Queued { target, after, limit } => {
            json(&relay.queued_page(&target, after, limit)?).map_err(RelayError::from)
        }
        SourceOp::Redrive(target) => {
            let outcome = relay.redrive(&target, now_ms()).await?;
            log_operator("redrive", relay, &target, outcome.rows, outcome.was_parked);
            json(&outcome).map_err(RelayError::from)
        }
        SourceOp::Discard(target) => {
            let outcome = relay.discard(&target, now_ms())?;
            log_operator("discard", relay, &target, outcome.rows, outcome.was_parked);
            json(&outcome).map_err(RelayError::from)
        }
    }
}

/// `POST /enqueue`: the rows, carrying the request's trace; through the
/// router's fence and key ticket when it sent them.
async fn enqueue<S: Sql>(relay: &Relay<S, DoAlarm>, req: &mut Request) -> Result<Response, RelayError> {
    let trace = traceparent(req)?;
    let fence = fence(req)?;
    let ticket = key_ticket(req)?;
    let mut body = decode_enqueue(&read_body(req).await?)?;
    if trace.is_some() {
        for row in &mut body.rows {
            row.trace.clone_from(&trace);
        }
    }
    let key = body.idempotency_key.as_deref();
    if fence == Fence::default() && ticket.is_none() {
        return json(&relay.enqueue(now_ms(), key, &body.rows).await?).map_err(RelayError::from);
    }
    if fence.epoch == 0 {
        return Err(RelayError::bad_request(
            ErrorCode::InvalidPartition,
            format!("{TICKET_HEADER} needs {EPOCH_HEADER}"),
        ));
    }
    let routed = routed_key(key, ticket.as_ref())?;
    match relay.enqueue_routed(now_ms(), routed, &body.rows, fence).await? {
        Some(done) => json(&done).map_err(RelayError::from),
        None => Err(RelayError::new(
            409,
            ErrorCode::TargetMoved,
            "this partition holds no rows for the target: send it to its new home",
        )),
    }
}

/// `POST /keys` (routers): records a keyed request's attempt.
async fn record_key<S: Sql>(relay: &Relay<S, DoAlarm>, req: &mut Request) -> Result<Response, RelayError> {
    let body: KeyBody = parse_json(&read_body(req).await?)?;
    checked_key(&body.key)?;
    let verdict = relay.record_key(now_ms(), &body.key, &body.digest, &body.reach)?;
    json(&KeyReply::from(verdict)).map_err(RelayError::from)
}

/// `POST /plain-key` (routers): whether a plain keyed request was enqueued.
async fn plain_key<S: Sql>(relay: &Relay<S, DoAlarm>, req: &mut Request) -> Result<Response, RelayError> {
    let fence = fence(req)?;
    let body: PlainKeyBody = parse_json(&read_body(req).await?)?;
    checked_key(&body.key)?;
    let enqueued = relay.probe_plain(now_ms(), &body.key, &body.digest, fence)?;
    json(&PlainKeyReply { enqueued }).map_err(RelayError::from)
}

/// `POST /rearm`: re-arms the alarm, logging when it had to.
async fn rearm<S: Sql>(relay: &Relay<S, DoAlarm>) -> Result<Response, RelayError> {
    let rearmed = relay.rearm(now_ms()).await?;
    if rearmed.rearmed {
        work::log_json(
            Level::Info,
            &serde_json::json!({"event": "relay_rearmed", "source": relay.name(), "queued_rows": rearmed.queued_rows}),
        );
    }
    json(&rearmed).map_err(RelayError::from)
}

/// A key a router sent, checked as an enqueue's key is.
fn checked_key(key: &str) -> Result<(), RelayError> {
    crate::core::dedup::validate_key(key).map_err(|e| RelayError::from(crate::core::EnqueueRefusal::Key(e)))
}

/// The header a partition router sends its map's epoch in (see
/// [`crate::core::partition`]).
pub const EPOCH_HEADER: &str = "relay-partition-epoch";
/// The header a partition router sends its map's id in.
pub const MAP_HEADER: &str = "relay-partition-map";
/// The header that marks a gated enqueue at a moving target's old home.
pub const GATE_HEADER: &str = "relay-partition-gate";
/// The header a keyed routed enqueue carries its attempt in: `gen_ms.attempt`.
pub const TICKET_HEADER: &str = "relay-key-ticket";
/// The header a keyed routed enqueue carries its request's digest in.
pub const DIGEST_HEADER: &str = "relay-key-digest";

/// A keyed routed enqueue's attempt and digest, from its headers.
pub fn key_ticket(req: &Request) -> Result<Option<(Ticket, String)>, RelayError> {
    let header = |h: &str| req.headers().get(h).ok().flatten();
    parse_ticket(header(TICKET_HEADER).as_deref(), header(DIGEST_HEADER).as_deref())
}

/// A keyed routed enqueue's attempt and digest from the text of their two
/// headers (each absent or as sent): both or neither.
pub fn parse_ticket(
    ticket: Option<&str>,
    digest: Option<&str>,
) -> Result<Option<(Ticket, String)>, RelayError> {
    let bad = |m: String| RelayError::bad_request(ErrorCode::InvalidPartition, m);
    let (ticket, digest) = match (ticket, digest) {
        (None, None) => return Ok(None),
        (Some(t), Some(d)) => (t.trim(), d.trim()),
        _ => return Err(bad(format!("{TICKET_HEADER} and {DIGEST_HEADER} go together"))),
    };
    let parsed = ticket.split_once('.').and_then(|(g, a)| {
        let gen_ms = g.parse::<u64>().ok().filter(|g| *g <= SEQ_MAX)?;
        let attempt = a.parse::<u32>().ok().filter(|a| *a >= 1)?;
        Some(Ticket { gen_ms, attempt })
    });
    let ticket = parsed.ok_or_else(|| bad(format!("{TICKET_HEADER} {ticket:?} is not gen_ms.attempt")))?;
    let hex = digest.len() == 64 && digest.bytes().all(|b| b.is_ascii_hexdigit());
    if !hex {
        return Err(bad(format!("{DIGEST_HEADER} is not a SHA-256 in hex")));
    }
    Ok(Some((ticket, digest.to_owned())))
}

/// The headers that carry a keyed routed enqueue's attempt.
pub fn ticket_headers(ticket: Ticket, digest: &str) -> Vec<(&'static str, String)> {
    vec![(TICKET_HEADER, format!("{}.{}", ticket.gen_ms, ticket.attempt)), (DIGEST_HEADER, digest.to_owned())]
}

/// A routed enqueue's key: the body's key with the headers' attempt; both
/// or neither.
fn routed_key<'a>(
    key: Option<&'a str>,
    ticket: Option<&'a (Ticket, String)>,
) -> Result<Option<RoutedKey<'a>>, RelayError> {
    match (key, ticket) {
        (None, None) => Ok(None),
        (Some(key), Some((ticket, digest))) => Ok(Some(RoutedKey { key, digest, ticket: *ticket })),
        _ => Err(RelayError::bad_request(
            ErrorCode::InvalidPartition,
            format!("a routed idempotency_key travels with {TICKET_HEADER}, and only with one"),
        )),
    }
}

/// The request's partition fence; the default (unrouted) without the headers.
pub fn fence(req: &Request) -> Result<Fence, RelayError> {
    let header = |h: &str| req.headers().get(h).ok().flatten();
    parse_fence(
        header(EPOCH_HEADER).as_deref(),
        header(MAP_HEADER).as_deref(),
        header(GATE_HEADER).as_deref(),
    )
}

/// A fence from the text of its three headers (each absent or as sent):
/// the one decode point for them, pure so it is fuzzed natively.
pub fn parse_fence(epoch: Option<&str>, map: Option<&str>, gate: Option<&str>) -> Result<Fence, RelayError> {
    let header = |h: &str| match h {
        EPOCH_HEADER => epoch.map(str::to_owned),
        MAP_HEADER => map.map(str::to_owned),
        _ => gate.map(str::to_owned),
    };
    let bad = |m: String| RelayError::bad_request(ErrorCode::InvalidPartition, m);
    let epoch = match header(EPOCH_HEADER) {
        None => 0,
        Some(text) => text
            .trim()
            .parse::<u64>()
            .ok()
            .filter(|e| (1..=SEQ_MAX).contains(e))
            .ok_or_else(|| bad(format!("{EPOCH_HEADER} {text:?} is not an epoch 1..=2^53-1")))?,
    };
    let map_id = match header(MAP_HEADER) {
        None if epoch == 0 => 0,
        None => return Err(bad(format!("{EPOCH_HEADER} needs {MAP_HEADER}"))),
        Some(text) => {
            text.trim().parse::<u64>().map_err(|_| bad(format!("{MAP_HEADER} {text:?} is not a map id")))?
        }
    };
    let gate = header(GATE_HEADER).is_some_and(|g| g.trim() == "1");
    if (gate || map_id != 0) && epoch == 0 {
        return Err(bad(format!("{GATE_HEADER} and {MAP_HEADER} need {EPOCH_HEADER}")));
    }
    Ok(Fence { epoch, map_id, gate })
}

/// The headers that carry `fence`, for a router's request.
pub fn fence_headers(fence: Fence) -> Vec<(&'static str, String)> {
    let mut headers = Vec::new();
    if fence.epoch > 0 {
        headers.push((EPOCH_HEADER, fence.epoch.to_string()));
        headers.push((MAP_HEADER, fence.map_id.to_string()));
    }
    if fence.gate {
        headers.push((GATE_HEADER, "1".to_owned()));
    }
    headers
}

/// The request's `traceparent` header, validated; none when absent.
pub fn traceparent(req: &Request) -> Result<Option<Traceparent>, RelayError> {
    let header = req.headers().get(TRACEPARENT_HEADER).ok().flatten();
    header
        .map(|h| Traceparent::parse(h.trim()))
        .transpose()
        .map_err(|e| RelayError::bad_request(e.code(), e.to_string()))
}

fn log_operator<S: Sql>(
    action: &str,
    relay: &Relay<S, DoAlarm>,
    target: &crate::core::Name,
    rows: u64,
    was: bool,
) {
    work::log_json(
        Level::Info,
        &serde_json::json!({"event": "relay_operator", "action": action, "source": relay.name().as_str(),
            "target": target.as_str(), "rows": rows, "was_parked": was}),
    );
}
