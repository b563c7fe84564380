//! The Durable Object glue: the relay's storage, alarm and target calls on
//! the Workers runtime. Compiled for every target so `cargo clippy` checks
//! it natively; it runs only in workerd (wasm32).
//!
//! - [`DoSql`]: [`Sql`] over the object's SQLite, with `transactionSync`
//!   (which workers-rs does not bind) for all-or-nothing writes;
//! - [`DoAlarm`]: [`AlarmStore`](crate::source::AlarmStore) over the object's alarm, or over the
//!   scheduler of a host that owns it ([`HostAlarm`]);
//! - [`DoTargets`]: [`Targets`] that are Durable Objects in one namespace,
//!   addressed by name, each call with a timeout; [`endpoint`]: HTTPS
//!   endpoints as targets, and the targets of both kinds;
//! - [`StubCall`]: the one way a request reaches an object's `fetch`
//!   protocol;
//! - [`source`] and [`target`]: the objects' `fetch` protocols, served from
//!   a [`Relay`] and an [`Inbox`](crate::Inbox).

mod alarm;
mod call;
pub mod endpoint;
pub mod source;
pub mod target;

pub use alarm::{DoAlarm, HostAlarm};
pub use call::{announce, StubCall, StubReply};

use crate::core::ErrorCode;
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use worker::worker_sys::types::SqlStorage as SqlStorageSys;
use worker::{ObjectNamespace, SqlStorage, SqlStorageValue, State};

use crate::core::{ApplyReply, CallOutcome, Failure, Name, SourceId, ThrownBy};
use crate::driver::{AlarmError, Targets};
use crate::http::RelayError;
use crate::routes::TargetOp;
use crate::source::{Relay, SourceConfig};
use crate::store::{Row, Rows, Sql, SqlValue, StoreError};

#[wasm_bindgen]
extern "C" {
    /// `ctx.storage` seen through the one method we bind ourselves.
    #[wasm_bindgen(extends = worker::js_sys::Object)]
    type SyncStorage;

    #[wasm_bindgen(method, catch, js_name = transactionSync)]
    fn transaction_sync(
        this: &SyncStorage,
        body: &mut dyn FnMut() -> Result<JsValue, JsValue>,
    ) -> Result<JsValue, JsValue>;
}

/// A source relay on Durable Object storage.
pub type DoRelay = Relay<DoSql, DoAlarm>;

/// A Durable Object's SQLite database.
#[derive(Clone)]
pub struct DoSql {
    sql: SqlStorage,
    /// `ctx.storage`, for `transactionSync`.
    storage: JsValue,
}

impl DoSql {
    /// The database of the object whose state this is.
    pub fn new(state: &State) -> DoSql {
        let storage = state.as_raw().storage().map(JsValue::from).unwrap_or(JsValue::UNDEFINED);
        DoSql { sql: state.storage().sql(), storage }
    }

    /// The workers-rs SQL handle.
    pub fn raw(&self) -> &SqlStorage {
        &self.sql
    }

    /// Runs a query and deserialises each row (by column name) into `T`: a
    /// convenience for reading your own tables into structs.
    pub fn rows_as<T: serde::de::DeserializeOwned>(
        &self,
        query: &str,
        params: Vec<SqlValue>,
    ) -> Result<Vec<T>, StoreError> {
        let cursor = self
            .sql
            .exec(query, params.into_iter().map(to_storage).collect::<Vec<_>>())
            .map_err(|e| StoreError::from_platform(e.to_string()))?;
        cursor.to_array().map_err(|e| StoreError::Corrupt(e.to_string()))
    }
}

fn to_storage(v: SqlValue) -> SqlStorageValue {
    match v {
        SqlValue::Null => SqlStorageValue::Null,
        SqlValue::Int(i) => SqlStorageValue::Integer(i),
        SqlValue::Real(f) => SqlStorageValue::Float(f),
        SqlValue::Text(s) => SqlStorageValue::String(s),
        SqlValue::Blob(b) => SqlStorageValue::Blob(b),
    }
}

/// A bound parameter as JavaScript. An integer is a number: the relay binds
/// only `0..=SEQ_MAX`, which a number carries exactly.
fn to_js(v: SqlValue) -> JsValue {
    match v {
        SqlValue::Null => JsValue::NULL,
        SqlValue::Int(i) => JsValue::from_f64(i as f64),
        SqlValue::Real(f) => JsValue::from_f64(f),
        SqlValue::Text(s) => JsValue::from_str(&s),
        SqlValue::Blob(b) => worker::js_sys::Uint8Array::from(b.as_slice()).into(),
    }
}

/// A result value from JavaScript, asking the cheapest question first:
/// most values are numbers (one call across the boundary) or text (two),
/// where a general conversion asks five or six. An integral number within
/// the safe range is an integer, as SQLite returned it; anything else
/// (null, a blob) takes the general conversion.
fn from_js(v: JsValue) -> Result<SqlValue, StoreError> {
    /// 2^53 - 1: the largest integer a JavaScript number holds exactly.
    const SAFE_INTEGER_MAX: f64 = 9_007_199_254_740_991.0;
    if let Some(n) = v.as_f64() {
        let integral = n.fract() == 0.0 && n.abs() <= SAFE_INTEGER_MAX;
        return Ok(if integral { SqlValue::Int(n as i64) } else { SqlValue::Real(n) });
    }
    if let Some(text) = v.as_string() {
        return Ok(SqlValue::Text(text));
    }
    let value = SqlStorageValue::try_from(v).map_err(|e| StoreError::Corrupt(e.to_string()))?;
    Ok(from_storage(value))
}

fn from_storage(v: SqlStorageValue) -> SqlValue {
    match v {
        SqlStorageValue::Null => SqlValue::Null,
        SqlStorageValue::Boolean(b) => SqlValue::Int(i64::from(b)),
        SqlStorageValue::Integer(i) => SqlValue::Int(i),
        SqlStorageValue::Float(f) => SqlValue::Real(f),
        SqlStorageValue::String(s) => SqlValue::Text(s),
        SqlStorageValue::Blob(b) => SqlValue::Blob(b),
    }
}

/// Marker thrown through `transactionSync` to carry our own error.
const ABORT: &str = "durable-relay: transaction aborted";

impl Sql for DoSql {
    fn exec(&self, query: &str, params: Vec<SqlValue>) -> Result<Rows, StoreError> {
        let sql_error = |e: JsValue| StoreError::from_platform(js_error_text(&e));
        let bindings = worker::js_sys::Array::new();
        for p in params {
            bindings.push(&to_js(p));
        }
        let storage: &SqlStorageSys = self.sql.as_ref().unchecked_ref();
        let cursor = storage.exec(query, bindings).map_err(sql_error)?;
        let mut rows = Vec::new();
        let raw = cursor.raw();
        loop {
            let next = raw.next().map_err(sql_error)?;
            if next.done() {
                break;
            }
            // A raw row is an array of the row's values, in column order.
            let values: worker::js_sys::Array = next.value().unchecked_into();
            let mut row = Vec::with_capacity(values.length() as usize);
            for value in values.iter() {
                row.push(from_js(value)?);
            }
            rows.push(Row(row));
        }
        let count = |n: f64| if n >= f64::from(u32::MAX) { u32::MAX } else { n as u32 };
        let (read, written) = (count(cursor.rows_read()), count(cursor.rows_written()));
        crate::work::statement(read, written, u32::try_from(rows.len()).unwrap_or(u32::MAX));
        #[cfg(feature = "testing")]
        crate::work::statement_text(query);
        Ok(Rows { rows, written, read })
    }

    fn transaction<T>(&self, mut body: impl FnMut() -> Result<T, StoreError>) -> Result<T, StoreError> {
        let storage: &SyncStorage = self.storage.unchecked_ref();
        let mut out = None;
        let mut failed = None;
        let result = storage.transaction_sync(&mut || match body() {
            Ok(v) => {
                out = Some(v);
                Ok(JsValue::UNDEFINED)
            }
            Err(e) => {
                failed = Some(e);
                Err(JsValue::from_str(ABORT))
            }
        });
        match (result, out, failed) {
            (Ok(_), Some(v), _) => Ok(v),
            (_, _, Some(e)) => Err(e),
            (Ok(_), None, None) => Err(StoreError::Sql("transactionSync returned without running".into())),
            // Thrown by the platform (at commit, say): classified as it worded it.
            (Err(e), _, None) => Err(StoreError::from_platform(js_error_text(&e))),
        }
    }
}

/// The relay of the source object whose state this is, named by the name it
/// was addressed with (`idFromName`/`getByName`).
pub fn open_relay(state: &State, config: SourceConfig) -> Result<DoRelay, RelayError> {
    Relay::open(source_name(state)?, source_id(state)?, DoSql::new(state), DoAlarm::new(state), config)
        .map_err(open_error)
}

/// The id of the object whose state this is (`state.id().to_string()`):
/// with its name, what its targets key its watermark by. Ids differ across
/// namespaces, so two classes' objects of one name stay apart.
pub(crate) fn source_id(state: &State) -> Result<SourceId, RelayError> {
    SourceId::new(state.id().to_string()).map_err(|e| {
        RelayError::internal(format!("the platform's object id is not one the relay knows: {e}"))
    })
}

/// The source name an object was addressed by (`idFromName`/`getByName`):
/// the relay keys its rows and the targets' watermarks by it, so an object
/// reached by a random or hex id cannot be a source.
pub(crate) fn source_name(state: &State) -> Result<Name, RelayError> {
    let name = state.id().name().ok_or_else(|| {
        RelayError::bad_request(
            ErrorCode::UnnamedSource,
            "address the source with idFromName(<name>) or getByName",
        )
    })?;
    Name::new(name).map_err(|e| RelayError::bad_request(ErrorCode::InvalidSource, e.to_string()))
}

/// Why opening a relay failed, as the caller sees it: a budget the
/// configuration breaks is the deployer's to fix; a store fault is ours.
pub(crate) fn open_error(e: AlarmError) -> RelayError {
    match e {
        AlarmError::Budget(b) => RelayError::new(500, ErrorCode::BadConfiguration, b.to_string()),
        AlarmError::Store(s) => s.into(),
    }
}

/// Targets that are Durable Objects in one namespace, addressed by name.
pub struct DoTargets {
    /// The target class's namespace binding.
    pub namespace: ObjectNamespace,
    /// How long one call may take, ms
    /// (see [`DEFAULT_CALL_TIMEOUT_MS`](crate::core::DEFAULT_CALL_TIMEOUT_MS)).
    pub timeout_ms: u64,
}

impl Targets for DoTargets {
    async fn apply(&self, target: &Name, body: String) -> CallOutcome {
        let call = std::pin::pin!(self.try_apply(target, body));
        let timeout = std::pin::pin!(worker::Delay::from(std::time::Duration::from_millis(self.timeout_ms)));
        match futures::future::select(call, timeout).await {
            futures::future::Either::Left((Ok(outcome), _)) => outcome,
            futures::future::Either::Left((Err(e), _)) => CallOutcome::Failed(classified(&e)),
            futures::future::Either::Right(_) => {
                CallOutcome::Failed(Failure::Transient(format!("no answer within {} ms", self.timeout_ms)))
            }
        }
    }
}

impl DoTargets {
    async fn try_apply(&self, target: &Name, body: String) -> worker::Result<CallOutcome> {
        let reply = StubCall::target(&TargetOp::Apply)
            .body(Some(body))
            .read_from(&self.namespace, target.as_str())
            .await?;
        let StubReply { status, text, .. } = reply;
        Ok(match status {
            200 => match serde_json::from_str::<ApplyReply>(&text) {
                Ok(r) => CallOutcome::Applied { watermark: r.watermark, applied: r.applied },
                Err(e) => CallOutcome::Failed(Failure::Transient(format!("bad reply: {e}"))),
            },
            400..=499 => CallOutcome::Failed(Failure::Permanent(format!("{status}: {text}"))),
            _ => CallOutcome::Failed(Failure::Transient(format!("{status}: {text}"))),
        })
    }
}

/// A call's exception as the platform describes it (see
/// [`classify_thrown`](crate::core::classify_thrown)): the error's
/// `overloaded`, `retryable` and `remote` properties when it is a JS error.
pub(crate) fn classified(e: &worker::Error) -> Failure {
    let message = e.to_string();
    let flag = |v: &JsValue, name: &str| {
        worker::js_sys::Reflect::get(v, &JsValue::from_str(name)).is_ok_and(|f| f.is_truthy())
    };
    let thrown = match e {
        worker::Error::UnknownJsError { original, .. } | worker::Error::Internal(original) => ThrownBy {
            message: &message,
            overloaded: flag(original, "overloaded"),
            retryable: flag(original, "retryable"),
            remote: flag(original, "remote"),
        },
        _ => ThrownBy { message: &message, ..ThrownBy::default() },
    };
    crate::core::classify_thrown(thrown)
}

/// The message of a JS error value.
pub fn js_error_text(e: &JsValue) -> String {
    if let Some(s) = e.as_string() {
        return s;
    }
    worker::js_sys::Reflect::get(e, &JsValue::from_str("message"))
        .ok()
        .and_then(|m| m.as_string())
        .unwrap_or_else(|| format!("{e:?}"))
}

/// The current time, ms since the epoch.
pub fn now_ms() -> u64 {
    worker::Date::now().as_millis()
}
