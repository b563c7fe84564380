//! Configuration from Worker variables (`[vars]` in wrangler.toml, or
//! `--var` on the command line). Parsing is pure, so it is tested natively.
//!
//! | variable | default | meaning |
//! | --- | --- | --- |
//! | `RELAY_PLAN` | `free` | `free` or `paid`: selects the budget preset and the subrequest cap |
//! | `RELAY_TARGETS_PER_FIRE` | preset | targets a fire may apply to |
//! | `RELAY_FIRES_PER_ALARM` | preset | fires per alarm |
//! | `RELAY_CALLS_PER_TARGET` | 2 | calls per target per fire |
//! | `RELAY_ROWS_PER_FIRE` | 256 | base rows per fire (a fire inspects 4x) |
//! | `RELAY_BATCH_ROWS` | 512 | rows per target call |
//! | `RELAY_SUBREQUESTS_PER_ALARM` | 50 / 10,000 | hard cap on target calls per alarm; never above the plan's |
//! | `RELAY_WORK_PER_ALARM` | 200 / 600,000 | work units (rows, KiB, calls) an alarm spends before it settles and re-arms, so it stays inside the invocation's CPU (1..=6,000,000) |
//! | `RELAY_MAX_IN_FLIGHT` | 6 | concurrent target calls in a fire |
//! | `RELAY_COALESCE_MS` | 0 | rows arriving while a source delivers wait this long to share calls (0..=1,000) |
//! | `RELAY_CALL_TIMEOUT_MS` | 30,000 | a target call unanswered this long counts as failed (100..=120,000) |
//! | `RELAY_PARK_AFTER_FAILED_CYCLES` | never | park a target after this many consecutive failed cycles (1..=1,000) |
//! | `RELAY_MAX_QUEUED_ROWS` | 100,000 | backpressure: rows waiting (queued plus parked) |
//! | `RELAY_MAX_QUEUED_BYTES` | 128 MiB | backpressure: body bytes waiting |
//! | `RELAY_DEDUP_HORIZON_MS` | 24 h | how long idempotency keys are remembered |
//! | `RELAY_DISCARD_HORIZON_MS` | 7 days | how long discarded parked rows are kept |
//! | `RELAY_ALARM_LOG` | `every` | `every`: one `relay_alarm` line per alarm; `notable`: only alarms that parked, conflicted, saw lag, delivered traced rows or called targets and delivered nothing |
//! | `RELAY_PARTITIONS` | none | JSON: logical source name to its [`PartitionMap`], e.g. `{"orders":{"partitions":4,"epoch":1}}` |
//! | `RELAY_ENDPOINTS` | none | JSON: endpoint name to its URL and secret (see [`crate::endpoint`]) |

use std::collections::BTreeMap;

use crate::core::{
    partition_of, EnqueueRefusal, Name, PartitionMap, RelayBudget, DEFAULT_CALL_TIMEOUT_MS,
    DEFAULT_MAX_IN_FLIGHT, MAX_BATCH_BYTES, MAX_CALL_TIMEOUT_MS, MAX_COALESCE_MS, MAX_DEDUP_HORIZON_MS,
    MAX_IN_FLIGHT, MAX_PARK_AFTER_FAILED_CYCLES, MAX_QUEUED_BYTES_LIMIT, MAX_QUEUED_ROWS_LIMIT,
    MIN_CALL_TIMEOUT_MS, MIN_DEDUP_HORIZON_MS, WORKER_FREE_SUBREQUESTS, WORKER_PAID_SUBREQUESTS,
};
use crate::driver::AlarmOptions;
use crate::source::SourceConfig;
use crate::store::outbox::OutboxSettings;
pub use crate::vars::ConfigError;

/// The Workers plan the relay budgets for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Plan {
    /// Workers Free: 50 subrequests per invocation.
    Free,
    /// Workers Paid: 10,000 subrequests per invocation by default.
    Paid,
}

impl Plan {
    /// The plan's preset budget.
    pub fn preset(self) -> RelayBudget {
        match self {
            Plan::Free => RelayBudget::FREE,
            Plan::Paid => RelayBudget::PAID,
        }
    }

    /// Subrequests one invocation may make on this plan.
    pub fn subrequest_cap(self) -> u32 {
        match self {
            Plan::Free => WORKER_FREE_SUBREQUESTS,
            Plan::Paid => WORKER_PAID_SUBREQUESTS,
        }
    }
}

/// The relay's configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RelayConfig {
    /// The plan.
    pub plan: Plan,
    /// The budget after overrides. Invariant: valid, and its calls per
    /// alarm never exceed the plan's subrequest cap.
    pub budget: RelayBudget,
    /// Concurrent target calls per fire, 1..=[`MAX_IN_FLIGHT`].
    pub max_in_flight: u32,
    /// Target call timeout, ms.
    pub call_timeout_ms: u64,
    /// Parking, backpressure and retention.
    pub settings: OutboxSettings,
    /// How long rows arriving while a source delivers wait to share calls.
    pub coalesce_ms: u64,
    /// Partitioned logical sources and their maps (each validated).
    pub partitions: BTreeMap<Name, PartitionMap>,
    /// Which alarms log their `relay_alarm` line.
    pub alarm_log: AlarmLog,
    /// Whether an enqueue delivers its rows in its own invocation, after
    /// its reply (`RELAY_IN_TURN`, `on` by default; see
    /// [`SourceConfig::in_turn`]).
    pub in_turn: bool,
    /// Whether a multi-row enqueue is stored as one packed row
    /// (`RELAY_PACK_ROWS`, `on` by default; see [`SourceConfig::pack_rows`]).
    pub pack_rows: bool,
    /// The HTTPS endpoints rows may be addressed to (`endpoint:<name>`).
    pub endpoints: crate::endpoint::Endpoints,
}

/// Which alarms log a `relay_alarm` line (`RELAY_ALARM_LOG`). The warnings
/// (a target parked, lag past the bound, an alarm that failed) are logged
/// either way.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum AlarmLog {
    /// Every alarm: one line per alarm, its figures in full.
    #[default]
    Every,
    /// Only alarms worth a look: one that parked a target, lost its
    /// checkpoint guard, saw a row past the lag bound, delivered traced
    /// rows, or called targets and delivered nothing. A busy source's
    /// routine alarms then write no log line (a log line per row at one
    /// row per alarm); its figures stay in its status and metrics.
    Notable,
}

fn number(get: &impl Fn(&str) -> Option<String>, var: &'static str) -> Result<Option<u32>, ConfigError> {
    Ok(ranged(get, var, 0, u64::from(u32::MAX))?.map(|v| v as u32))
}

/// A whole number within `min..=max`, if the variable is set.
fn ranged(
    get: &impl Fn(&str) -> Option<String>,
    var: &'static str,
    min: u64,
    max: u64,
) -> Result<Option<u64>, ConfigError> {
    let Some(text) = get(var) else { return Ok(None) };
    let v = text
        .trim()
        .parse::<u64>()
        .map_err(|_| ConfigError { var, message: format!("{text:?} is not a whole number") })?;
    if v < min || v > max {
        return Err(ConfigError { var, message: format!("must be within {min}..={max}, got {v}") });
    }
    Ok(Some(v))
}

/// The variables that override the budget, in the order of the fields
/// `from_vars` pairs them with. Each is `RELAY_` and its field's name.
const BUDGET_VARS: [&str; 7] = [
    "RELAY_TARGETS_PER_FIRE",
    "RELAY_FIRES_PER_ALARM",
    "RELAY_CALLS_PER_TARGET",
    "RELAY_ROWS_PER_FIRE",
    "RELAY_BATCH_ROWS",
    "RELAY_SUBREQUESTS_PER_ALARM",
    "RELAY_WORK_PER_ALARM",
];

/// The variable that sets a budget field, so a refusal names what to fix.
fn budget_var(field: &str) -> &'static str {
    BUDGET_VARS
        .into_iter()
        .find(|var| var.strip_prefix("RELAY_").is_some_and(|f| f.eq_ignore_ascii_case(field)))
        .unwrap_or("RELAY_PLAN")
}

/// Parking, backpressure and retention settings.
fn settings(get: &impl Fn(&str) -> Option<String>) -> Result<OutboxSettings, ConfigError> {
    let mut s = OutboxSettings::default();
    let park = ranged(get, "RELAY_PARK_AFTER_FAILED_CYCLES", 1, u64::from(MAX_PARK_AFTER_FAILED_CYCLES))?;
    s.policy.park_after_failed_cycles = park.map(|v| v as u32);
    if let Some(v) = ranged(get, "RELAY_MAX_QUEUED_ROWS", 1, MAX_QUEUED_ROWS_LIMIT)? {
        s.max_rows = v;
    }
    let min_bytes = u64::from(MAX_BATCH_BYTES);
    if let Some(v) = ranged(get, "RELAY_MAX_QUEUED_BYTES", min_bytes, MAX_QUEUED_BYTES_LIMIT)? {
        s.max_bytes = v;
    }
    let (lo, hi) = (MIN_DEDUP_HORIZON_MS, MAX_DEDUP_HORIZON_MS);
    if let Some(v) = ranged(get, "RELAY_DEDUP_HORIZON_MS", lo, hi)? {
        s.dedup_horizon_ms = v;
    }
    if let Some(v) = ranged(get, "RELAY_DISCARD_HORIZON_MS", lo, hi)? {
        s.discard_horizon_ms = v;
    }
    Ok(s)
}

/// Most partitioned logical sources `RELAY_PARTITIONS` may name.
pub const MAX_PARTITIONED_SOURCES: usize = 256;

/// `RELAY_PARTITIONS`: a JSON object of logical source names to maps.
fn partitions(get: &impl Fn(&str) -> Option<String>) -> Result<BTreeMap<Name, PartitionMap>, ConfigError> {
    const VAR: &str = "RELAY_PARTITIONS";
    let Some(text) = get(VAR).filter(|t| !t.trim().is_empty()) else { return Ok(BTreeMap::new()) };
    let bad = |message: String| ConfigError { var: VAR, message };
    let maps: BTreeMap<Name, PartitionMap> =
        serde_json::from_str(&text).map_err(|e| bad(format!("not an object of partition maps: {e}")))?;
    if maps.len() > MAX_PARTITIONED_SOURCES {
        return Err(bad(format!("{} sources; at most {MAX_PARTITIONED_SOURCES}", maps.len())));
    }
    for (logical, map) in &maps {
        map.validate(logical).map_err(|e| bad(e.to_string()))?;
        if logical.as_str().contains(':') {
            return Err(bad(format!(
                "{logical}: a partitioned source's name has no ':' (partitions are name:index)"
            )));
        }
    }
    Ok(maps)
}

impl RelayConfig {
    /// The partition map of `source`, if it is a partitioned logical source.
    pub fn partition_map(&self, source: &Name) -> Option<&PartitionMap> {
        self.partitions.get(source)
    }

    /// Whether `source` names one partition of a partitioned logical source
    /// (`logical:index`).
    pub fn is_partition(&self, source: &Name) -> bool {
        partition_of(source).is_some_and(|(logical, _)| self.partitions.contains_key(&logical))
    }

    /// Why an enqueue that did not come through the router may not be taken
    /// at `source`: it is a partitioned logical source's own object, or one
    /// of its partitions. Every entry (the front door, RPC, a DO stub) meets
    /// this check at the source object itself.
    pub fn unrouted_refusal(&self, source: &Name) -> Option<EnqueueRefusal> {
        if self.partitions.contains_key(source) {
            return Some(EnqueueRefusal::PartitionedSource { source: source.to_string(), plain_at_ms: None });
        }
        self.is_partition(source).then(|| EnqueueRefusal::PartitionEnqueue { source: source.to_string() })
    }

    /// The source's part: alarm limits and operating settings.
    pub fn source(&self) -> SourceConfig {
        SourceConfig {
            alarm: AlarmOptions { budget: self.budget, max_in_flight: self.max_in_flight },
            settings: self.settings,
            coalesce_ms: self.coalesce_ms,
            in_turn: self.in_turn,
            pack_rows: self.pack_rows,
        }
    }

    /// Reads the configuration from a Worker's variables (`[vars]`, or
    /// `--var`).
    pub fn from_env(env: &worker::Env) -> Result<RelayConfig, ConfigError> {
        RelayConfig::from_vars(crate::vars::reader(env))
    }

    /// Reads the configuration through `get` (a variable lookup).
    pub fn from_vars(get: impl Fn(&str) -> Option<String>) -> Result<RelayConfig, ConfigError> {
        let plan = match get("RELAY_PLAN").as_deref().map(str::trim) {
            None | Some("free") => Plan::Free,
            Some("paid") => Plan::Paid,
            Some(other) => {
                return Err(ConfigError {
                    var: "RELAY_PLAN",
                    message: format!("{other:?} is not free or paid"),
                })
            }
        };
        let mut budget = plan.preset();
        let fields = [
            &mut budget.targets_per_fire,
            &mut budget.fires_per_alarm,
            &mut budget.calls_per_target,
            &mut budget.rows_per_fire,
            &mut budget.batch_rows,
            &mut budget.subrequests_per_alarm,
            &mut budget.work_per_alarm,
        ];
        for (var, field) in BUDGET_VARS.into_iter().zip(fields) {
            if let Some(v) = number(&get, var)? {
                *field = v;
            }
        }
        budget.validate().map_err(|e| ConfigError { var: budget_var(e.field), message: e.to_string() })?;
        if budget.subrequests_per_alarm > plan.subrequest_cap() {
            return Err(ConfigError {
                var: "RELAY_SUBREQUESTS_PER_ALARM",
                message: format!(
                    "{} exceeds the {:?} plan's {} subrequests per invocation",
                    budget.subrequests_per_alarm,
                    plan,
                    plan.subrequest_cap()
                ),
            });
        }
        let max_in_flight = number(&get, "RELAY_MAX_IN_FLIGHT")?.unwrap_or(DEFAULT_MAX_IN_FLIGHT);
        if max_in_flight == 0 || max_in_flight > MAX_IN_FLIGHT {
            return Err(ConfigError {
                var: "RELAY_MAX_IN_FLIGHT",
                message: format!("must be within 1..={MAX_IN_FLIGHT}, got {max_in_flight}"),
            });
        }
        let call_timeout_ms =
            ranged(&get, "RELAY_CALL_TIMEOUT_MS", MIN_CALL_TIMEOUT_MS, MAX_CALL_TIMEOUT_MS)?
                .unwrap_or(DEFAULT_CALL_TIMEOUT_MS);
        let alarm_log = match get("RELAY_ALARM_LOG").as_deref().map(str::trim) {
            None | Some("every") => AlarmLog::Every,
            Some("notable") => AlarmLog::Notable,
            Some(other) => {
                return Err(ConfigError {
                    var: "RELAY_ALARM_LOG",
                    message: format!("must be `every` or `notable`, got {other:?}"),
                })
            }
        };
        Ok(RelayConfig {
            plan,
            budget,
            max_in_flight,
            call_timeout_ms,
            settings: settings(&get)?,
            partitions: partitions(&get)?,
            coalesce_ms: ranged(&get, "RELAY_COALESCE_MS", 0, MAX_COALESCE_MS)?.unwrap_or(0),
            alarm_log,
            in_turn: switch(&get, "RELAY_IN_TURN", true)?,
            pack_rows: switch(&get, "RELAY_PACK_ROWS", true)?,
            endpoints: crate::endpoint::endpoints(&get, call_timeout_ms)?,
        })
    }
}

/// A switch variable, `on` or `off`; the parameter `on` is its value when unset.
fn switch(get: &impl Fn(&str) -> Option<String>, var: &'static str, on: bool) -> Result<bool, ConfigError> {
    match get(var).as_deref().map(str::trim) {
        None => Ok(on),
        Some("on") => Ok(true),
        Some("off") => Ok(false),
        Some(other) => Err(ConfigError { var, message: format!("must be `on` or `off`, got {other:?}") }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::Layout;
    use std::collections::HashMap;

    fn parse(vars: &[(&str, &str)]) -> Result<RelayConfig, ConfigError> {
        let map: HashMap<String, String> = vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        RelayConfig::from_vars(|k| map.get(k).cloned())
    }

    #[test]
    fn partitioned_sources_are_read_and_checked() {
        let c = parse(&[("RELAY_PARTITIONS", r#"{"orders":{"partitions":4,"epoch":2,"from":2}}"#)]).unwrap();
        let orders = Name::new("orders").unwrap();
        assert_eq!(
            c.partition_map(&orders),
            Some(&PartitionMap { partitions: Layout::Count(4), epoch: 2, from: vec![Layout::Count(2)] })
        );
        assert!(c.is_partition(&Name::new("orders:3").unwrap()));
        assert!(!c.is_partition(&Name::new("orders:x").unwrap()));
        assert!(!c.is_partition(&Name::new("other:1").unwrap()));
        assert!(parse(&[]).unwrap().partitions.is_empty());
        for bad in [
            r#"{"orders":{"partitions":65,"epoch":1}}"#,
            r#"{"orders":{"partitions":2,"epoch":0}}"#,
            r#"{"orders":{"partitions":2}}"#,
            r#"{"orders":{"partitions":2,"epoch":1,"ttl":5}}"#,
            r#"{"a:b":{"partitions":2,"epoch":1}}"#,
            r#"{"bad name":{"partitions":2,"epoch":1}}"#,
            r#"["orders"]"#,
            "4",
        ] {
            let e = parse(&[("RELAY_PARTITIONS", bad)]).unwrap_err();
            assert_eq!(e.var, "RELAY_PARTITIONS", "{bad}");
        }
        let many: String = (0..=MAX_PARTITIONED_SOURCES)
            .map(|i| format!(r#""s{i}":{{"partitions":1,"epoch":1}}"#))
            .collect::<Vec<_>>()
            .join(",");
        assert!(parse(&[("RELAY_PARTITIONS", &format!("{{{many}}}"))]).is_err(), "past the limit");
        let at_limit: String = (0..MAX_PARTITIONED_SOURCES)
            .map(|i| format!(r#""s{i}":{{"partitions":1,"epoch":1}}"#))
            .collect::<Vec<_>>()
            .join(",");
        let c = parse(&[("RELAY_PARTITIONS", &format!("{{{at_limit}}}"))]).unwrap();
        assert_eq!(c.partitions.len(), MAX_PARTITIONED_SOURCES, "at the limit");
    }

    #[test]
    fn plans_select_the_seed_presets() {
        assert_eq!(parse(&[]).unwrap().budget, RelayBudget::FREE);
        assert_eq!(parse(&[("RELAY_PLAN", "paid")]).unwrap().budget, RelayBudget::PAID);
        assert_eq!(parse(&[("RELAY_PLAN", "gold")]).unwrap_err().var, "RELAY_PLAN");
    }

    #[test]
    fn overrides_apply_and_are_validated() {
        let c = parse(&[("RELAY_TARGETS_PER_FIRE", "12"), ("RELAY_CALLS_PER_TARGET", "1")]).unwrap();
        assert_eq!((c.budget.targets_per_fire, c.budget.calls_per_target), (12, 1));
        assert!(parse(&[("RELAY_TARGETS_PER_FIRE", "0")]).is_err());
        assert_eq!(parse(&[("RELAY_FIRES_PER_ALARM", "x")]).unwrap_err().var, "RELAY_FIRES_PER_ALARM");
    }

    #[test]
    fn the_subrequest_cap_never_exceeds_the_plan_at_or_past_its_edge() {
        assert!(parse(&[("RELAY_SUBREQUESTS_PER_ALARM", "50")]).is_ok());
        let work = |v: &str| parse(&[("RELAY_WORK_PER_ALARM", v)]);
        assert_eq!(work("1").unwrap().budget.work_per_alarm, 1, "at the lower edge");
        assert_eq!(
            work(&crate::core::MAX_WORK_PER_ALARM.to_string()).unwrap().budget.work_per_alarm,
            crate::core::MAX_WORK_PER_ALARM
        );
        assert_eq!(work("0").unwrap_err().var, "RELAY_WORK_PER_ALARM");
        assert_eq!(
            work(&(crate::core::MAX_WORK_PER_ALARM + 1).to_string()).unwrap_err().var,
            "RELAY_WORK_PER_ALARM"
        );
        assert_eq!(work("lots").unwrap_err().var, "RELAY_WORK_PER_ALARM");
        assert_eq!(parse(&[]).unwrap().budget.work_per_alarm, RelayBudget::FREE.work_per_alarm);
        let e = parse(&[("RELAY_SUBREQUESTS_PER_ALARM", "51")]).unwrap_err();
        assert_eq!(e.var, "RELAY_SUBREQUESTS_PER_ALARM");
        assert!(parse(&[("RELAY_PLAN", "paid"), ("RELAY_SUBREQUESTS_PER_ALARM", "10000")]).is_ok());
        assert!(parse(&[("RELAY_PLAN", "paid"), ("RELAY_SUBREQUESTS_PER_ALARM", "10001")]).is_err());
    }

    #[test]
    fn a_budget_past_its_bound_is_refused_naming_its_variable() {
        for var in [
            "RELAY_TARGETS_PER_FIRE",
            "RELAY_FIRES_PER_ALARM",
            "RELAY_CALLS_PER_TARGET",
            "RELAY_ROWS_PER_FIRE",
            "RELAY_BATCH_ROWS",
        ] {
            assert_eq!(parse(&[(var, "0")]).unwrap_err().var, var);
            assert_eq!(parse(&[(var, "100000")]).unwrap_err().var, var);
        }
    }

    #[test]
    fn call_timeout_is_bounded() {
        assert_eq!(parse(&[]).unwrap().call_timeout_ms, DEFAULT_CALL_TIMEOUT_MS);
        assert!(parse(&[("RELAY_CALL_TIMEOUT_MS", "100")]).is_ok());
        assert!(parse(&[("RELAY_CALL_TIMEOUT_MS", "99")]).is_err());
        assert!(parse(&[("RELAY_CALL_TIMEOUT_MS", "120001")]).is_err());
    }

    #[test]
    fn coalescing_is_off_by_default_and_bounded() {
        assert_eq!(parse(&[]).unwrap().alarm_log, AlarmLog::Every, "every alarm logs unless told");
        assert_eq!(parse(&[("RELAY_ALARM_LOG", "notable")]).unwrap().alarm_log, AlarmLog::Notable);
        assert_eq!(parse(&[("RELAY_ALARM_LOG", "every")]).unwrap().alarm_log, AlarmLog::Every);
        assert_eq!(parse(&[("RELAY_ALARM_LOG", "some")]).unwrap_err().var, "RELAY_ALARM_LOG");
        assert_eq!(parse(&[]).unwrap().coalesce_ms, 0);
        assert_eq!(parse(&[("RELAY_COALESCE_MS", "1000")]).unwrap().coalesce_ms, 1_000);
        assert_eq!(parse(&[("RELAY_COALESCE_MS", "1001")]).unwrap_err().var, "RELAY_COALESCE_MS");
    }

    #[test]
    fn switches_default_and_refuse_other_words() {
        let source = |vars: &[(&str, &str)]| parse(vars).unwrap().source();
        assert!(source(&[]).in_turn, "an enqueue delivers in its own invocation unless told");
        assert!(!source(&[("RELAY_IN_TURN", "off")]).in_turn);
        assert!(source(&[("RELAY_IN_TURN", " on ")]).in_turn);
        assert_eq!(parse(&[("RELAY_IN_TURN", "yes")]).unwrap_err().var, "RELAY_IN_TURN");
        assert!(source(&[]).pack_rows, "the release this one replaces reads packs");
        assert!(!source(&[("RELAY_PACK_ROWS", "off")]).pack_rows);
        assert_eq!(parse(&[("RELAY_PACK_ROWS", "1")]).unwrap_err().var, "RELAY_PACK_ROWS");
    }

    #[test]
    fn in_flight_is_bounded() {
        assert_eq!(parse(&[]).unwrap().max_in_flight, DEFAULT_MAX_IN_FLIGHT);
        assert!(parse(&[("RELAY_MAX_IN_FLIGHT", "32")]).is_ok());
        assert!(parse(&[("RELAY_MAX_IN_FLIGHT", "33")]).is_err());
        assert!(parse(&[("RELAY_MAX_IN_FLIGHT", "0")]).is_err());
    }

    #[test]
    fn operating_settings_parse_at_and_past_their_edges() {
        let c = parse(&[]).unwrap().settings;
        assert_eq!(c, OutboxSettings::default());
        assert_eq!(c.policy.park_after_failed_cycles, None, "never park by default");
        let c = parse(&[("RELAY_PARK_AFTER_FAILED_CYCLES", "3"), ("RELAY_MAX_QUEUED_ROWS", "10")]).unwrap();
        assert_eq!(c.settings.policy.park_after_failed_cycles, Some(3));
        assert_eq!(c.settings.max_rows, 10);
        assert!(parse(&[("RELAY_PARK_AFTER_FAILED_CYCLES", "0")]).is_err());
        assert!(parse(&[("RELAY_PARK_AFTER_FAILED_CYCLES", "1000")]).is_ok());
        assert!(parse(&[("RELAY_PARK_AFTER_FAILED_CYCLES", "1001")]).is_err());
        assert!(parse(&[("RELAY_MAX_QUEUED_BYTES", "1048576")]).is_ok());
        assert!(parse(&[("RELAY_MAX_QUEUED_BYTES", "1048575")]).is_err(), "must admit one full batch");
        assert!(parse(&[("RELAY_DEDUP_HORIZON_MS", "1000")]).is_ok());
        assert!(parse(&[("RELAY_DEDUP_HORIZON_MS", "999")]).is_err());
        assert!(parse(&[("RELAY_DISCARD_HORIZON_MS", "2592000001")]).is_err());
    }
}
