//! Sending rows to an HTTPS endpoint: [`EndpointTargets`] POSTs a call's
//! row (or, to an endpoint that takes batches, its rows as an array),
//! signed as Standard Webhooks has it, and reads the answer as
//! [`outcome_of`] says; [`RelayTargets`] sends each call to an endpoint or
//! to a Durable Object by its target's name.
//!
//! One call is one fetch, so the subrequests the fire counts are the ones
//! the platform counts; the core gives an endpoint one row per call unless
//! it takes batches.

use std::rc::Rc;
use std::time::Duration;

use futures::future::{select, Either};
use futures::StreamExt;
use serde::Deserialize;
use serde_json::value::RawValue;
use worker::{AbortController, Fetch, Headers, Method, Request, RequestInit, RequestRedirect};

use super::{classified, now_ms, DoTargets};
use crate::core::{CallOutcome, Effects, Failure, Name};
use crate::driver::Targets;
use crate::endpoint::{batch_id, message_id, outcome_of, retry_after_ms, signatures, Endpoint, Endpoints};

/// Most bytes of an endpoint's refusal kept in the failure it records (and
/// the source's status shows): enough to read why, never the whole body.
pub const ENDPOINT_EXCERPT_BYTES: u32 = 256;

/// What every request says it is from.
const USER_AGENT: &str = concat!("durable-relay/", env!("CARGO_PKG_VERSION"));

/// Targets of both kinds: `endpoint:<name>` goes to the endpoint of that
/// name, any other name to a Durable Object.
pub struct RelayTargets {
    /// The Durable Object targets.
    pub objects: DoTargets,
    /// The endpoint targets.
    pub endpoints: EndpointTargets,
}

impl Targets for RelayTargets {
    async fn apply(&self, target: &Name, body: String) -> CallOutcome {
        match target.endpoint() {
            Some(name) => self.endpoints.apply(name, body).await,
            None => self.objects.apply(target, body).await,
        }
    }
}

/// The configured endpoints, as targets.
pub struct EndpointTargets {
    /// The endpoints by name.
    pub endpoints: Rc<Endpoints>,
}

/// A batch as the core encodes it, its row's body left as the text stored.
#[derive(Deserialize)]
struct Batch<'a> {
    #[serde(borrow)]
    source: &'a str,
    #[serde(borrow, default)]
    source_id: Option<&'a str>,
    #[serde(borrow)]
    rows: Vec<BatchRow<'a>>,
}

/// One row of a [`Batch`].
#[derive(Deserialize)]
struct BatchRow<'a> {
    seq: u64,
    #[serde(borrow)]
    effects: &'a RawValue,
}

/// A request ready to send: its id, the rows it carries, its payload and
/// trace context.
struct Signed {
    id: String,
    last: u64,
    rows: u32,
    payload: String,
    trace: Option<String>,
}

impl EndpointTargets {
    /// Sends the call's row (or rows, to an endpoint that takes batches) to
    /// endpoint `name`. A name no longer configured, or a call of many rows
    /// to an endpoint that takes one, parks the endpoint: the rows wait, in
    /// order, for the operator to fix it and redrive them.
    pub async fn apply(&self, name: &str, body: String) -> CallOutcome {
        let Some(endpoint) = self.endpoints.get(name) else {
            return permanent(format!("no endpoint named {name} is configured in RELAY_ENDPOINTS"));
        };
        let call = match signed(&body, endpoint.batch) {
            Ok(call) => call,
            Err(message) => return permanent(message),
        };
        let controller = AbortController::default();
        let send = std::pin::pin!(send(endpoint, &call, controller.signal()));
        let timeout = std::pin::pin!(worker::Delay::from(Duration::from_millis(endpoint.timeout_ms)));
        match select(send, timeout).await {
            Either::Left((Ok(outcome), _)) => outcome,
            Either::Left((Err(e), _)) => CallOutcome::Failed(classified(&e)),
            Either::Right(_) => {
                // Frees the connection: one of the few a Worker may hold open.
                controller.abort();
                CallOutcome::Failed(Failure::Transient(format!(
                    "no answer within {} ms",
                    endpoint.timeout_ms
                )))
            }
        }
    }
}

fn permanent(message: String) -> CallOutcome {
    CallOutcome::Failed(Failure::Permanent(message))
}

/// The call's request: one row as a JSON object (the source, the sequence
/// and the row's effects), or, for an endpoint that takes batches, its rows
/// as an array of such objects.
fn signed(body: &str, batch: bool) -> Result<Signed, String> {
    let b: Batch<'_> =
        serde_json::from_str(body).map_err(|e| format!("a batch the relay cannot read: {e}"))?;
    let source_id = b.source_id.ok_or("a batch without its source's id")?;
    let source = serde_json::to_string(b.source).map_err(|e| e.to_string())?;
    let payloads = b.rows.iter().map(|r| payload(&source, r)).collect::<Result<Vec<_>, _>>()?;
    match (b.rows.as_slice(), payloads.as_slice(), batch) {
        ([row], [one], false) => Ok(Signed {
            id: message_id(source_id, row.seq),
            last: row.seq,
            rows: 1,
            payload: one.clone(),
            trace: Effects::trace_of(row.effects.get()).map(str::to_string),
        }),
        ([first, .., last] | [first @ last], _, true) => Ok(Signed {
            id: batch_id(source_id, first.seq, last.seq),
            last: last.seq,
            rows: u32::try_from(payloads.len()).map_err(|e| e.to_string())?,
            payload: format!("[{}]", payloads.join(",")),
            trace: None,
        }),
        (rows, _, _) => Err(format!("an endpoint takes one row per call, got {}", rows.len())),
    }
}

/// One row's object: the source, the sequence and the row's effects.
fn payload(source: &str, row: &BatchRow<'_>) -> Result<String, String> {
    let effects = Effects::untraced(row.effects.get());
    let fields = effects.strip_prefix('{').ok_or("a row body that is not an object")?;
    Ok(format!(r#"{{"source":{source},"seq":{},{fields}"#, row.seq))
}

/// POSTs `call`, signed for this attempt, and reads the answer.
async fn send(
    endpoint: &Endpoint,
    call: &Signed,
    signal: worker::AbortSignal,
) -> worker::Result<CallOutcome> {
    let timestamp_s = now_ms() / 1_000;
    let headers = Headers::new();
    headers.set("content-type", "application/json")?;
    headers.set("user-agent", USER_AGENT)?;
    headers.set("webhook-id", &call.id)?;
    headers.set("webhook-timestamp", &timestamp_s.to_string())?;
    headers.set("webhook-signature", &signatures(&endpoint.keys, &call.id, timestamp_s, &call.payload))?;
    if let Some(trace) = &call.trace {
        headers.set("traceparent", trace)?;
    }
    for (name, value) in &endpoint.headers {
        headers.set(name, value)?;
    }
    let mut init = RequestInit::new();
    init.with_method(Method::Post)
        .with_headers(headers)
        .with_body(Some(call.payload.as_str().into()))
        .with_redirect(RequestRedirect::Manual);
    let request = Request::new_with_init(&endpoint.url, &init)?;
    let mut response = Fetch::Request(request).send_with_signal(&signal).await?;
    let status = response.status_code();
    let pause_ms = response.headers().get("retry-after")?.and_then(|v| retry_after_ms(&v, now_ms(), date_ms));
    Ok(match outcome_of(status, call.last, call.rows, pause_ms) {
        CallOutcome::Failed(failure) => CallOutcome::Failed(with_excerpt(failure, &mut response).await),
        CallOutcome::Throttled { failure, retry_after_ms } => {
            CallOutcome::Throttled { failure: with_excerpt(failure, &mut response).await, retry_after_ms }
        }
        delivered => delivered,
    })
}

/// An HTTP date as the runtime reads it, ms since the epoch.
fn date_ms(text: &str) -> Option<u64> {
    let ms = worker::js_sys::Date::parse(text);
    (ms.is_finite() && ms >= 0.0).then_some(ms as u64)
}

/// The failure, with the first [`ENDPOINT_EXCERPT_BYTES`] of the answer's
/// body appended: read only that far, so a large answer costs nothing.
async fn with_excerpt(failure: Failure, response: &mut worker::Response) -> Failure {
    let mut bytes = Vec::new();
    if let Ok(mut stream) = response.stream() {
        while let Some(Ok(chunk)) = stream.next().await {
            bytes.extend_from_slice(&chunk);
            if bytes.len() >= ENDPOINT_EXCERPT_BYTES as usize {
                break;
            }
        }
    }
    bytes.truncate(ENDPOINT_EXCERPT_BYTES as usize);
    let excerpt = String::from_utf8_lossy(&bytes);
    let excerpt = excerpt.trim();
    if excerpt.is_empty() {
        return failure;
    }
    let message = format!("{}: {excerpt}", failure.message());
    match failure {
        Failure::Interrupted(_) => Failure::Interrupted(message),
        Failure::Overloaded(_) => Failure::Overloaded(message),
        Failure::Transient(_) => Failure::Transient(message),
        Failure::Permanent(_) => Failure::Permanent(message),
    }
}
