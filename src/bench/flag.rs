//! The `RELAY_BENCH` switch. `on` enables the benchmark routes, the
//! target's arrival log and the queue consumer; `off` or unset disables
//! them. `on` is refused when `RELAY_ENV` is `production` or unset, so a
//! production deployment can never expose them. Parsing is pure, so it is
//! tested natively.

use durable_relay::core::ErrorCode;
use worker::Env;

use durable_relay::http::RelayError;

/// The variable that turns the benchmark plumbing on.
pub const BENCH_VAR: &str = "RELAY_BENCH";

/// Whether the benchmark plumbing is on, from a variable lookup.
pub fn bench_enabled(get: impl Fn(&str) -> Option<String>) -> Result<bool, String> {
    let on = match get(BENCH_VAR).as_deref().map(str::trim) {
        None | Some("off") => false,
        Some("on") => true,
        Some(other) => return Err(format!("{BENCH_VAR}: {other:?} is not on or off")),
    };
    let production = get("RELAY_ENV").is_none_or(|e| e.trim() == "production");
    if on && production {
        return Err(format!(
            "{BENCH_VAR}: the benchmark routes are refused when RELAY_ENV is production (or unset)"
        ));
    }
    Ok(on)
}

/// [`bench_enabled`] over a Worker's variables; a bad value is a 500
/// `bad_configuration`, as for the relay's own variables.
pub fn enabled(env: &Env) -> Result<bool, RelayError> {
    bench_enabled(durable_relay::vars::reader(env))
        .map_err(|m| RelayError::new(500, ErrorCode::BadConfiguration, m))
}

/// Refuses with 403 `bench_disabled` unless the switch is on.
pub fn require(env: &Env) -> Result<(), RelayError> {
    if enabled(env)? {
        Ok(())
    } else {
        Err(RelayError::new(
            403,
            ErrorCode::BenchDisabled,
            format!("the benchmark routes are off ({BENCH_VAR})"),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(vars: &[(&str, &str)]) -> Result<bool, String> {
        bench_enabled(|k| vars.iter().find(|(name, _)| *name == k).map(|(_, v)| v.to_string()))
    }

    #[test]
    fn off_unless_asked_for() {
        assert_eq!(parse(&[]), Ok(false));
        assert_eq!(parse(&[("RELAY_BENCH", "off")]), Ok(false));
        assert_eq!(parse(&[("RELAY_BENCH", "on"), ("RELAY_ENV", "test")]), Ok(true));
    }

    #[test]
    fn refused_in_production_and_on_bad_values() {
        assert!(parse(&[("RELAY_BENCH", "on")]).is_err(), "unset env is production");
        assert!(parse(&[("RELAY_BENCH", "on"), ("RELAY_ENV", "production")]).is_err());
        assert!(parse(&[("RELAY_BENCH", "yes"), ("RELAY_ENV", "test")]).is_err());
        assert_eq!(parse(&[("RELAY_BENCH", "off"), ("RELAY_ENV", "production")]), Ok(false));
    }
}
