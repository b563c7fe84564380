//! The relay's alarm on the Workers runtime: [`DoAlarm`], the one store
//! every arming goes through, kept in the object's own alarm or, for a host
//! that owns that alarm, in the host's scheduler ([`HostAlarm`]).

use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use worker::State;

use crate::core::ErrorCode;
use crate::http::RelayError;
use crate::source::AlarmStore;
use crate::store::StoreError;

use super::js_error_text;

/// A Durable Object's alarm, or the scheduler its host keeps it with
/// ([`HostAlarm`]): every arming of a relay goes through this one store,
/// so a host that owns the alarm (a framework running its own job queue
/// from `alarm()`) hands the relay its scheduler instead of losing the
/// relay's wake-ups to its own.
pub struct DoAlarm {
    /// Where the alarm is kept.
    kept: AlarmKept,
}

/// Where a [`DoAlarm`] keeps its time.
enum AlarmKept {
    /// The object's own alarm (`ctx.storage`).
    Storage(worker::Storage),
    /// The host's scheduler.
    Host(HostAlarm),
}

impl DoAlarm {
    /// The alarm of the object whose state this is.
    pub fn new(state: &State) -> DoAlarm {
        DoAlarm { kept: AlarmKept::Storage(state.storage()) }
    }

    /// The relay's alarm kept by the host's `scheduler` instead of the
    /// object's own alarm.
    pub fn host(scheduler: HostAlarm) -> DoAlarm {
        DoAlarm { kept: AlarmKept::Host(scheduler) }
    }
}

impl AlarmStore for DoAlarm {
    async fn get(&self) -> Result<Option<u64>, StoreError> {
        let storage = match &self.kept {
            AlarmKept::Storage(storage) => storage,
            AlarmKept::Host(host) => return host.get().await,
        };
        let at = storage.get_alarm().await.map_err(|e| StoreError::Sql(e.to_string()))?;
        Ok(at.map(|t| t.max(0) as u64))
    }

    async fn set(&self, at_ms: u64) -> Result<(), StoreError> {
        let storage = match &self.kept {
            AlarmKept::Storage(storage) => storage,
            AlarmKept::Host(host) => return host.set(at_ms).await,
        };
        let when = worker::js_sys::Date::new(&JsValue::from_f64(at_ms as f64));
        storage
            .set_alarm(worker::ScheduledTime::new(when))
            .await
            // Setting an alarm writes a row: it meets the daily limit too.
            .map_err(|e| StoreError::from_platform(e.to_string()))
    }

    async fn delete(&self) -> Result<(), StoreError> {
        match &self.kept {
            AlarmKept::Storage(storage) => {
                storage.delete_alarm().await.map_err(|e| StoreError::Sql(e.to_string()))
            }
            AlarmKept::Host(host) => host.delete().await,
        }
    }

    fn moved(&self, warning: &serde_json::Value) {
        crate::work::log_json(crate::work::Level::Warn, warning);
    }
}

/// The three methods a host scheduler has, by the names JavaScript calls
/// them: the shape of `ctx.storage`'s `getAlarm`, `setAlarm` and
/// `deleteAlarm`, without the prefix.
const HOST_ALARM_METHODS: [&str; 3] = ["get", "set", "delete"];

/// A JavaScript object that keeps the relay's alarm time in place of the
/// object's own alarm: `get()` answers the time (ms since the epoch) or
/// `null`, `set(ms)` replaces it, `delete()` clears it; each may answer a
/// promise. A framework that owns the object's alarm (the Agents SDK's
/// Lifecycle) supplies one that keeps the time as a job of its queue, and
/// runs the relay's alarm when that job comes due.
#[derive(Clone)]
pub struct HostAlarm {
    /// The object the methods are called on (their `this`).
    object: JsValue,
    /// `get()`.
    get: worker::js_sys::Function,
    /// `set(ms)`.
    set: worker::js_sys::Function,
    /// `delete()`.
    delete: worker::js_sys::Function,
    /// The option it was given as, named in what it is refused for.
    option: &'static str,
}

impl HostAlarm {
    /// `object` as a scheduler, given as the option `option`; refused, 500
    /// `bad_configuration` naming the option and what is wrong, unless it
    /// is an object whose `get`, `set` and `delete` are functions. Checked
    /// as the relay is configured, so a malformed one stops the object
    /// from starting instead of every alarm failing.
    pub fn new(object: JsValue, option: &'static str) -> Result<HostAlarm, RelayError> {
        let refuse = |what: String| {
            RelayError::new(
                500,
                ErrorCode::BadConfiguration,
                format!(
                    "{option} {what}: it must be an object with get(), set(ms) and delete() methods, \
                     like ctx.storage's getAlarm, setAlarm and deleteAlarm"
                ),
            )
        };
        if !object.is_object() {
            return Err(refuse(format!("is {}", type_name(&object))));
        }
        let method = |name: &str| {
            let value = worker::js_sys::Reflect::get(&object, &name.into()).unwrap_or(JsValue::UNDEFINED);
            value
                .dyn_into::<worker::js_sys::Function>()
                .map_err(|v| refuse(format!("has {name} = {}", type_name(&v))))
        };
        let [get, set, delete] = HOST_ALARM_METHODS;
        Ok(HostAlarm { get: method(get)?, set: method(set)?, delete: method(delete)?, object, option })
    }

    /// Calls `method` with `args`, awaiting the answer when it is a promise
    /// (any thenable); a throw or a rejection is a store error naming the
    /// method.
    async fn call(
        &self,
        method: &worker::js_sys::Function,
        name: &str,
        args: &worker::js_sys::Array,
    ) -> Result<JsValue, StoreError> {
        let failed = |e: JsValue| {
            StoreError::from_platform(format!("{}.{name}() failed: {}", self.option, js_error_text(&e)))
        };
        let answer = method.apply(&self.object, args).map_err(failed)?;
        let thenable = answer.is_object()
            && worker::js_sys::Reflect::get(&answer, &"then".into()).is_ok_and(|then| then.is_function());
        if !thenable {
            return Ok(answer);
        }
        let promise = worker::js_sys::Promise::resolve(&answer);
        worker::wasm_bindgen_futures::JsFuture::from(promise).await.map_err(failed)
    }

    /// The time kept (ms since the epoch), or none.
    async fn get(&self) -> Result<Option<u64>, StoreError> {
        let at = self.call(&self.get, "get", &worker::js_sys::Array::new()).await?;
        if at.is_null() || at.is_undefined() {
            return Ok(None);
        }
        match at.as_f64() {
            Some(ms) if ms.is_finite() => Ok(Some(ms.max(0.0) as u64)),
            _ => Err(StoreError::Sql(format!(
                "{}.get() answered {}, not a time in ms since the epoch or null",
                self.option,
                type_name(&at)
            ))),
        }
    }

    /// Keeps `at_ms`, replacing any other time.
    async fn set(&self, at_ms: u64) -> Result<(), StoreError> {
        let args = worker::js_sys::Array::of1(&JsValue::from_f64(at_ms as f64));
        self.call(&self.set, "set", &args).await.map(|_| ())
    }

    /// Clears the time kept.
    async fn delete(&self) -> Result<(), StoreError> {
        self.call(&self.delete, "delete", &worker::js_sys::Array::new()).await.map(|_| ())
    }
}

/// What a JavaScript value is, for a message: its type, or `null`.
fn type_name(value: &JsValue) -> String {
    if value.is_null() {
        return "null".into();
    }
    value.js_typeof().as_string().unwrap_or_else(|| "a value".into())
}
