//! The targets binding a [`RelaySource`](super::RelaySource) calls through, checked:
//! a binding that is missing, or is not a Durable Object namespace, is
//! refused with a message naming it and the Durable Object bindings the
//! Worker does have.

#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]
#![deny(clippy::unreachable, clippy::todo, clippy::unimplemented)]

use worker::Env;

use crate::core::ErrorCode;
use crate::http::RelayError;

/// The Durable Object namespace bound as `binding`, or 500
/// `bad_configuration` naming it and the Durable Object bindings `env` has.
pub(super) fn target_namespace(env: &Env, binding: &str) -> Result<worker::ObjectNamespace, RelayError> {
    env.durable_object(binding).map_err(|_| {
        let object: &worker::wasm_bindgen::JsValue = env.as_ref();
        let found = worker::js_sys::Reflect::get(object, &binding.into()).ok().filter(|v| !v.is_undefined());
        let kind = found.map(|v| constructor_name(&v));
        let message = missing_binding(binding, kind.as_deref(), &durable_object_bindings(object));
        RelayError::new(500, ErrorCode::BadConfiguration, message)
    })
}

/// What made `value`: `DurableObjectNamespace` for a Durable Object
/// binding, `String` for a variable, `null` for null.
fn constructor_name(value: &worker::wasm_bindgen::JsValue) -> String {
    if !value.is_object() {
        return value.js_typeof().as_string().unwrap_or_default();
    }
    String::from(worker::js_sys::Object::from(value.clone()).constructor().name())
}

/// The names of `env`'s Durable Object namespace bindings, in `env`'s
/// order.
fn durable_object_bindings(env: &worker::wasm_bindgen::JsValue) -> Vec<String> {
    let Some(object) = worker::wasm_bindgen::JsCast::dyn_ref::<worker::js_sys::Object>(env) else {
        return Vec::new();
    };
    worker::js_sys::Object::keys(object)
        .iter()
        .filter_map(|key| {
            let value = worker::js_sys::Reflect::get(env, &key).ok()?;
            let namespace = value.is_object() && constructor_name(&value) == DURABLE_OBJECT_NAMESPACE;
            namespace.then(|| key.as_string()).flatten()
        })
        .collect()
}

/// The constructor name the runtime gives a Durable Object namespace
/// binding (what `Env::durable_object` checks for).
const DURABLE_OBJECT_NAMESPACE: &str = "DurableObjectNamespace";

/// The refusal of target binding `binding`: `found` is what `env` holds
/// under that name (its constructor's name), if anything; `bindings` are
/// the Durable Object bindings it does have.
fn missing_binding(binding: &str, found: Option<&str>, bindings: &[String]) -> String {
    let what = match found {
        None => "env has no binding of that name".to_owned(),
        Some(kind) => format!("env holds a {kind} under that name, not a {DURABLE_OBJECT_NAMESPACE}"),
    };
    let have = if bindings.is_empty() {
        "env has no Durable Object bindings".to_owned()
    } else {
        format!("env's Durable Object bindings: {}", bindings.join(", "))
    };
    format!("the targets binding {binding:?} is not a Durable Object namespace ({what}); {have}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_binding_is_named_with_the_bindings_env_has() {
        let have = ["CUSTOMERS".to_owned(), "ORDERS".to_owned()];
        let message = missing_binding("CUSTOMERZ", None, &have);
        assert_eq!(
            message,
            "the targets binding \"CUSTOMERZ\" is not a Durable Object namespace (env has no binding of \
             that name); env's Durable Object bindings: CUSTOMERS, ORDERS"
        );
    }

    #[test]
    fn a_binding_of_another_kind_says_what_it_is() {
        let message = missing_binding("RELAY_PLAN", Some("string"), &[]);
        assert!(message.contains("holds a string under that name"), "{message}");
        assert!(message.ends_with("env has no Durable Object bindings"), "{message}");
    }
}
