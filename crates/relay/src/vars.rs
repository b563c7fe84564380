//! The Worker's variables and secrets, read once per isolate.
//!
//! Reading a variable crosses the JS/wasm boundary several times (the
//! lookup, the type checks, the string copy), and the relay reads about
//! twenty of them to build its configuration and check a bearer token, on
//! every request and alarm. A deployment's variables and secrets cannot
//! change under a running isolate (changing one deploys a new version,
//! which runs in new isolates), so the first answer for a name is kept.

use std::cell::RefCell;
use std::collections::BTreeMap;

thread_local! {
    /// Every name looked up so far, with what it held (`None`: unset).
    static SEEN: RefCell<BTreeMap<String, Option<String>>> = const { RefCell::new(BTreeMap::new()) };
}

/// The text of the secret or variable `name` (a secret first), or `None`
/// when neither is set.
pub fn text(env: &worker::Env, name: &str) -> Option<String> {
    if let Some(seen) = SEEN.with(|s| s.borrow().get(name).cloned()) {
        return seen;
    }
    let value =
        env.secret(name).map(|s| s.to_string()).or_else(|_| env.var(name).map(|v| v.to_string())).ok();
    SEEN.with(|s| s.borrow_mut().insert(name.to_owned(), value.clone()));
    value
}
