//! durable-relay for Durable Objects written in JavaScript or TypeScript:
//! the library's own [`RelaySource`] and [`RelayTarget`] facades, exported with
//! wasm-bindgen. Nothing of the relay is re-implemented here or in the
//! package's JavaScript: this module turns JavaScript values into the
//! facades' arguments (an enqueue body goes through the same decoder as the
//! HTTP API) and their results and refusals back into JavaScript values.
//!
//! Each exported object holds its facade behind an `Rc` and every method
//! returns a `Promise` after cloning it, so no call keeps the exported
//! object borrowed while it awaits: an enqueue or a status read that
//! arrives while the alarm awaits a slow target is served.

#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

use std::cell::RefCell;
use std::rc::Rc;

use durable_relay::core::{
    decode_enqueue, ApplyRow, ErrorCode, Sender, Traceparent, ENQUEUE_ENVELOPE_DEPTH, MAX_VALUE_DEPTH,
    SEQ_MAX,
};
use durable_relay::durable::now_ms;
use durable_relay::embed::{log_alarm_as, Enqueue, HookError, OnApply, RelaySource, RelayTarget, WriteError};
use durable_relay::http::RelayError;
use durable_relay::{DoSql, HostAlarm};
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use worker::js_sys::{self, Function, Promise, Reflect};
use worker::wasm_bindgen_futures::future_to_promise;
use worker::worker_sys::DurableObjectState;
use worker::{Env, State};

#[wasm_bindgen(start)]
fn start() {
    console_error_panic_hook::set_once();
}

thread_local! {
    /// The package's `RelayError` class, which every refusal is an instance
    /// of (so callers can catch it with `instanceof`); the package registers
    /// it once, as it instantiates the module.
    static ERROR_CLASS: RefCell<Option<Function>> = const { RefCell::new(None) };
}

/// Registers the package's `RelayError` class: `new class(code, message,
/// status, retryAfterS)` builds each refusal from here on.
#[wasm_bindgen(js_name = useErrorClass)]
pub fn use_error_class(class: Function) {
    ERROR_CLASS.with(|c| *c.borrow_mut() = Some(class));
}

/// The deepest nesting the engine decodes in an enqueue body
/// (`MAX_VALUE_DEPTH` inside a value plus the body's own levels): the
/// package's check of the caller's values walks no deeper.
#[wasm_bindgen(js_name = maxEnqueueDepth)]
pub fn max_enqueue_depth() -> u32 {
    MAX_VALUE_DEPTH + ENQUEUE_ENVELOPE_DEPTH
}

/// A refusal as a JavaScript `RelayError`: the message leads with the
/// code, and `code`, `status` (and `retryAfterS` when there is one) carry
/// the HTTP API's.
fn js_error(e: impl Into<RelayError>) -> JsValue {
    let e: RelayError = e.into();
    let retry = e.retry_after_s.map_or(JsValue::UNDEFINED, JsValue::from);
    let args =
        js_sys::Array::of4(&e.code.as_str().into(), &e.message.as_str().into(), &e.status.into(), &retry);
    if let Some(class) = ERROR_CLASS.with(|c| c.borrow().clone()) {
        // A constructor that throws answers its throw instead.
        return Reflect::construct(&class, &args).unwrap_or_else(|thrown| thrown);
    }
    // No class registered (the module used without the package): an Error shaped alike.
    let error = js_sys::Error::new(&format!("{}: {}", e.code, e.message));
    error.set_name("RelayError");
    // Setting a property on a fresh Error object cannot fail.
    let _ = Reflect::set(&error, &"code".into(), &e.code.as_str().into());
    let _ = Reflect::set(&error, &"status".into(), &JsValue::from(e.status));
    error.into()
}

/// A value the relay serialises, as a JavaScript value.
fn to_js<T: serde::Serialize>(value: &T) -> Result<JsValue, JsValue> {
    let text = serde_json::to_string(value).map_err(|e| js_error(RelayError::internal(e.to_string())))?;
    js_sys::JSON::parse(&text)
}

/// The message of a value JavaScript threw.
fn thrown(value: &JsValue) -> String {
    value
        .dyn_ref::<js_sys::Error>()
        .map(|e| String::from(e.message()))
        .or_else(|| value.as_string())
        .unwrap_or_else(|| "the handler threw".into())
}

/// The source side of the relay in a JavaScript Durable Object.
#[wasm_bindgen(js_name = RawSource)]
pub struct JsSource {
    /// The library's facade, shared with every call in flight.
    source: Rc<RelaySource>,
}

#[wasm_bindgen(js_class = RawSource)]
impl JsSource {
    /// The relay of the object whose `ctx` and `env` these are, calling
    /// targets through the Durable Object binding named `targets`; refused
    /// (`bad_configuration`) when that binding or a `RELAY_*` variable is
    /// wrong, so the object does not start with a relay that cannot run.
    /// `alarm`, unless undefined, is the host's scheduler the relay keeps
    /// its alarm with instead of the object's own (the package's `alarm`
    /// option), refused the same way when it lacks `get`, `set` or
    /// `delete`.
    #[wasm_bindgen(constructor)]
    pub fn new(ctx: JsValue, env: JsValue, targets: String, alarm: JsValue) -> Result<JsSource, JsValue> {
        let state = State::from(ctx.unchecked_into::<DurableObjectState>());
        let env: Env = env.unchecked_into();
        let mut source = RelaySource::new(state, env).targets(targets);
        if !alarm.is_undefined() {
            source = source.scheduler(HostAlarm::new(alarm, "alarm").map_err(js_error)?);
        }
        source.check().map_err(js_error)?;
        Ok(JsSource { source: Rc::new(source) })
    }

    /// Enqueues the rows of `body` (the HTTP API's enqueue body, as JSON
    /// text) and runs `writes(enqueued)` inside the same transaction: both
    /// commit or neither does. A throw from `writes` rolls back and
    /// rejects with `aborted`; a duplicate does not run it.
    pub fn enqueue(&self, body: String, traceparent: Option<String>, writes: Option<Function>) -> Promise {
        let source = Rc::clone(&self.source);
        future_to_promise(async move {
            let request = decode_enqueue(&body).map_err(js_error)?;
            let trace = parse_trace(traceparent)?;
            let options = Enqueue { key: request.idempotency_key.clone(), trace };
            let run_writes = |_: &DoSql, done: &durable_relay::Enqueued| -> Result<(), WriteError> {
                let Some(writes) = &writes else { return Ok(()) };
                let done = to_js(done).map_err(|e| WriteError::new(thrown(&e)))?;
                writes.call1(&JsValue::NULL, &done).map(|_| ()).map_err(|e| WriteError::new(thrown(&e)))
            };
            let (_, done) =
                source.enqueue_with(&request.rows, options, run_writes).await.map_err(js_error)?;
            to_js(&done)
        })
    }

    /// Opens the relay and loads its alarm state, which
    /// [`enqueue_now`](JsSource::enqueue_now) needs; the package runs it in
    /// `blockConcurrencyWhile` when the object starts.
    pub fn ready(&self) -> Promise {
        let source = Rc::clone(&self.source);
        future_to_promise(async move {
            let relay = source.relay().map_err(js_error)?;
            relay.ready().await.map_err(js_error)?;
            Ok(JsValue::UNDEFINED)
        })
    }

    /// Enqueues the rows of `body` without awaiting, inside the caller's own
    /// `transactionSync` (or in a transaction of their own outside one):
    /// they commit or roll back with the caller's writes. Answers
    /// `{ enqueued, alarm_at }`: the alarm time the caller must set now
    /// (`null` when the alarm already is early enough).
    #[wasm_bindgen(js_name = enqueueNow)]
    pub fn enqueue_now(&self, body: String, traceparent: Option<String>) -> Result<JsValue, JsValue> {
        let request = decode_enqueue(&body).map_err(js_error)?;
        let trace = parse_trace(traceparent)?;
        let rows: Vec<_> = request.rows.into_iter().map(|r| r.with_trace(trace.clone())).collect();
        let relay = self.source.relay().map_err(js_error)?;
        let key = request.idempotency_key.as_deref();
        let (done, at) = relay.enqueue_now(now_ms(), key, &rows).map_err(js_error)?;
        let out = js_sys::Object::new();
        let _ = Reflect::set(&out, &"enqueued".into(), &to_js(&done)?);
        let _ =
            Reflect::set(&out, &"alarm_at".into(), &at.map_or(JsValue::NULL, |t| JsValue::from(t as f64)));
        Ok(out.into())
    }

    /// Reads the stored alarm afresh and re-arms it if the outbox needs it:
    /// run after a caller's transaction that called `enqueue_now` ends, in
    /// case it rolled the alarm back.
    #[wasm_bindgen(js_name = recheckAlarm)]
    pub fn recheck_alarm(&self) -> Promise {
        let source = Rc::clone(&self.source);
        future_to_promise(async move {
            let relay = source.relay().map_err(js_error)?;
            let (_, rearmed) = relay.recheck_alarm(now_ms()).await.map_err(js_error)?;
            Ok(rearmed.into())
        })
    }

    /// Starts delivering what the outbox holds in this invocation, without
    /// waiting for it (`RELAY_IN_TURN`): the package runs it once the
    /// transaction of an `enqueueSync` is over. `enqueue` and `fetch` start
    /// it themselves.
    pub fn deliver(&self) {
        self.source.deliver_in_turn();
    }

    /// Forgets the alarm noted as armed: setting it failed, so the next use
    /// reads it afresh.
    #[wasm_bindgen(js_name = alarmUnknown)]
    pub fn alarm_unknown(&self) {
        if let Ok(relay) = self.source.relay() {
            relay.alarm_unknown();
        }
    }

    /// Runs one alarm: delivers, arms the next, logs its `relay_alarm`
    /// line (as `RELAY_ALARM_LOG` says), and answers what it did. Rejects when the alarm failed (the
    /// relay armed its own retry first). `retry_count` is the platform's
    /// `alarmInfo.retryCount` (absent or 0: not a retry): a retry runs a
    /// smaller fire.
    pub fn alarm(&self, retry_count: Option<u32>) -> Promise {
        let source = Rc::clone(&self.source);
        source.alarm_retried(retry_count.unwrap_or(0));
        future_to_promise(async move {
            let summary = source.run_alarm().await.map_err(|e| js_error(RelayError::internal(e)))?;
            log_alarm_as(&summary, serde_json::Map::new(), source.alarm_log());
            to_js(&summary)
        })
    }

    /// Sets the host's own alarm time, `at` ms since the epoch (a whole
    /// number 0..=2^53-1, else 400 `invalid_request`): the relay arms the
    /// object's alarm at the earlier of it and its own time.
    #[wasm_bindgen(js_name = setAlarm)]
    pub fn set_alarm(&self, at: f64) -> Promise {
        let source = Rc::clone(&self.source);
        future_to_promise(async move {
            let whole = at.fract() == 0.0 && (0.0..=SEQ_MAX as f64).contains(&at);
            if !whole {
                return Err(js_error(RelayError::bad_request(
                    ErrorCode::InvalidRequest,
                    format!("the alarm time {at} is not a whole number of ms since the epoch, 0..=2^53-1"),
                )));
            }
            source.set_alarm(at as u64).await.map_err(js_error)?;
            Ok(JsValue::UNDEFINED)
        })
    }

    /// The host's own alarm time (ms since the epoch), or null: never the
    /// relay's.
    #[wasm_bindgen(js_name = getAlarm)]
    pub fn get_alarm(&self) -> Result<JsValue, JsValue> {
        let at = self.source.get_alarm().map_err(js_error)?;
        Ok(at.map_or(JsValue::NULL, |t| JsValue::from(t as f64)))
    }

    /// Clears the host's own alarm time; the relay's stays.
    #[wasm_bindgen(js_name = deleteAlarm)]
    pub fn delete_alarm(&self) -> Result<(), JsValue> {
        self.source.delete_alarm().map_err(js_error)
    }

    /// Serves the relay's source protocol (status, parked targets, redrive,
    /// discard, enqueue from other Workers) for `request`.
    pub fn fetch(&self, request: web_sys_request::Request) -> Promise {
        let source = Rc::clone(&self.source);
        future_to_promise(async move {
            let resp = source.fetch(worker::Request::from(request)).await.map_err(js_error)?;
            Ok(worker::worker_sys::web_sys::Response::from(resp).into())
        })
    }
}

/// A `traceparent` from JavaScript, or 400 `invalid_traceparent`.
fn parse_trace(text: Option<String>) -> Result<Option<Traceparent>, JsValue> {
    text.map(|t| Traceparent::parse(t.trim()))
        .transpose()
        .map_err(|e| js_error(RelayError::bad_request(e.code(), e.to_string())))
}

/// `web_sys::Request`, as workers-rs re-exports it.
mod web_sys_request {
    pub use worker::worker_sys::web_sys::Request;
}

/// A JavaScript `onApply(source, rows, sourceId)` as the target's handler:
/// the source's name, the new rows, and the id its watermark is kept under
/// (`null` for a sender older than ids whose name's watermark no identified
/// sender took over).
struct JsHandler {
    /// The function, or none: keep the rows' keys only.
    on_apply: Option<Function>,
}

impl OnApply for JsHandler {
    fn on_apply(&self, _: &DoSql, source: &Sender, rows: &[ApplyRow]) -> Result<(), HookError> {
        let Some(on_apply) = &self.on_apply else { return Ok(()) };
        let rows = to_js(&rows).map_err(|e| thrown(&e))?;
        let id = source.id.as_ref().map_or(JsValue::NULL, |id| id.as_str().into());
        on_apply
            .call3(&JsValue::NULL, &source.name.as_str().into(), &rows, &id)
            .map(|_| ())
            .map_err(|e| thrown(&e).into())
    }
}

/// The target side of the relay in a JavaScript Durable Object.
#[wasm_bindgen(js_name = RawTarget)]
pub struct JsTarget {
    /// The library's facade, shared with every call in flight.
    target: Rc<RelayTarget<JsHandler>>,
}

#[wasm_bindgen(js_class = RawTarget)]
impl JsTarget {
    /// The inbox of the object whose `ctx` this is; `on_apply(source,
    /// rows, sourceId)` runs inside every apply's transaction for the rows
    /// new to it.
    #[wasm_bindgen(constructor)]
    pub fn new(ctx: JsValue, on_apply: Option<Function>) -> JsTarget {
        let state = State::from(ctx.unchecked_into::<DurableObjectState>());
        JsTarget { target: Rc::new(RelayTarget::new(&state).on_apply(JsHandler { on_apply })) }
    }

    /// Serves the relay's target protocol (`/apply` from sources, keys,
    /// watermarks, status) for `request`.
    pub fn fetch(&self, request: web_sys_request::Request) -> Promise {
        let target = Rc::clone(&self.target);
        future_to_promise(async move {
            let resp = target.fetch(worker::Request::from(request)).await.map_err(js_error)?;
            Ok(worker::worker_sys::web_sys::Response::from(resp).into())
        })
    }
}
