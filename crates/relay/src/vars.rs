//! The Worker's variables and secrets, read once per isolate.
//!
//! Reading a variable crosses the JS/wasm boundary several times (the
//! lookup, the type checks, the string copy), and the relay reads about
//! twenty of them to build its configuration and check a bearer token, on
//! every request and alarm. A deployment's variables and secrets cannot
//! change under a running isolate (changing one deploys a new version,
//! which runs in new isolates), so the first answer for a name is kept.
//!
//! The answers are kept for one `env` object: an embedder may hand the
//! relay an object of its own (a copy of `env` with other variables, for a
//! second class in the same Worker), and a different object, compared by
//! identity, starts the cache again.
//!
//! The relay reads a fixed set of names, but an embedder may look up names
//! of its own through [`text`], so at most [`MAX_KEPT_VARIABLES`] answers
//! are kept: a name past the bound is read from `env` every time instead,
//! and the isolate's memory does not grow with the names asked for.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::fmt;

use wasm_bindgen::JsValue;

/// A variable with a bad value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// The variable.
    pub var: &'static str,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.var, self.message)
    }
}

/// How many names' answers are kept per `env` object: several times the
/// twenty-odd names the relay reads, so an embedder's own names fit too,
/// while a caller asking for ever new names cannot grow the isolate's
/// memory past a few tens of KB (names and values are short strings).
pub const MAX_KEPT_VARIABLES: u32 = 256;

/// The `env` object the answers came from, and every name looked up in it
/// with what it held (`None`: unset).
struct Seen {
    env: JsValue,
    names: BTreeMap<String, Option<String>>,
}

thread_local! {
    static SEEN: RefCell<Option<Seen>> = const { RefCell::new(None) };
}

/// The text of the secret or variable `name` (a secret first), or `None`
/// when neither is set.
pub fn text(env: &worker::Env, name: &str) -> Option<String> {
    reader(env)(name)
}

/// A lookup of many names in `env`, checking once that the kept answers
/// are `env`'s (one call across the boundary) rather than at every name.
pub fn reader(env: &worker::Env) -> impl Fn(&str) -> Option<String> + '_ {
    let object: &JsValue = env.as_ref();
    SEEN.with(|s| {
        let mut seen = s.borrow_mut();
        let same = seen.as_ref().is_some_and(|kept| worker::js_sys::Object::is(&kept.env, object));
        if !same {
            *seen = Some(Seen { env: object.clone(), names: BTreeMap::new() });
        }
    });
    move |name| lookup(env, name)
}

/// `name` from the kept answers (which [`reader`] made `env`'s), or read
/// and kept.
fn lookup(env: &worker::Env, name: &str) -> Option<String> {
    let kept = SEEN.with(|s| s.borrow().as_ref().and_then(|k| k.names.get(name).cloned()));
    if let Some(value) = kept {
        return value;
    }
    let value =
        env.secret(name).map(|s| s.to_string()).or_else(|_| env.var(name).map(|v| v.to_string())).ok();
    SEEN.with(|s| {
        if let Some(kept) = s.borrow_mut().as_mut() {
            keep(&mut kept.names, name, &value);
        }
    });
    value
}

/// Keeps `name`'s answer in `names` unless [`MAX_KEPT_VARIABLES`] are kept
/// already; returns whether it was kept.
fn keep(names: &mut BTreeMap<String, Option<String>>, name: &str, value: &Option<String>) -> bool {
    if names.len() >= MAX_KEPT_VARIABLES as usize {
        return false;
    }
    names.insert(name.to_owned(), value.clone());
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_answers_up_to_the_bound_and_no_more() {
        let mut names = BTreeMap::new();
        for n in 0..MAX_KEPT_VARIABLES {
            assert!(
                keep(&mut names, &format!("NAME_{n}"), &Some(n.to_string())),
                "name {n} is within the bound"
            );
        }
        assert_eq!(names.len(), MAX_KEPT_VARIABLES as usize);
        assert!(!keep(&mut names, "ONE_TOO_MANY", &None), "the name past the bound is not kept");
        assert_eq!(names.len(), MAX_KEPT_VARIABLES as usize);
        assert!(!names.contains_key("ONE_TOO_MANY"));
        assert_eq!(names.get("NAME_0"), Some(&Some("0".to_owned())), "earlier answers stay kept");
    }
}
