//! The target's and the source's test switches, as the reference Worker's
//! test build serves them: a target's fault switch and the JSON bodies that
//! set it, the applied-sequence log and the hook that writes it, and the
//! seeding of failing and parked targets; all under their own schema
//! component (`relay_testing`), never in a production schema.

use std::cell::Cell;

use serde::{Deserialize, Serialize};

use crate::core::{ApplyRow, Effects, RelayHook, Sender, SourceId};
use crate::store::{int, schema, Sql, StoreError};

/// A target's fault switch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TargetFaults {
    /// 0 applies, 1 refuses transiently (503), 2 refuses permanently (422).
    pub reject: u32,
    /// Wait this long before applying (so a source's call times out while
    /// the apply still happens, as with a lost reply).
    pub delay_ms: u64,
    /// The platform failure the next calls throw (see [`Thrown`]), and how
    /// many calls still throw it.
    pub throw: Option<Thrown>,
    /// Calls still to throw `throw`.
    pub throw_times: u32,
    /// Whether a throwing call applies its batch first.
    pub throw_after_apply: bool,
}

/// A platform failure a test target throws from its `fetch`, with the
/// platform's own message, so the source's call fails the way it would
/// in production and is classified by the shipped code.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Thrown {
    /// "Durable Object reset because its code was updated."
    CodeUpdated,
    /// "Network connection lost."
    NetworkLost,
    /// "Durable Object is overloaded."
    Overloaded,
}

impl Thrown {
    /// The platform's message.
    pub fn message(self) -> &'static str {
        match self {
            Thrown::CodeUpdated => "Durable Object reset because its code was updated.",
            Thrown::NetworkLost => "Network connection lost.",
            Thrown::Overloaded => "Durable Object is overloaded. Too many requests queued.",
        }
    }

    fn code(self) -> u32 {
        match self {
            Thrown::CodeUpdated => 1,
            Thrown::NetworkLost => 2,
            Thrown::Overloaded => 3,
        }
    }

    fn from_code(code: u32) -> Option<Thrown> {
        [Thrown::CodeUpdated, Thrown::NetworkLost, Thrown::Overloaded].into_iter().find(|t| t.code() == code)
    }
}

/// Most calls one fault request makes throw.
pub const MAX_THROW_TIMES: u32 = 100;

/// Longest injectable apply delay.
pub const MAX_FAULT_DELAY_MS: u64 = 60_000;
/// Most synthetic watermarks one `seed_watermarks` request writes: enough
/// for several pages of [`MAX_WATERMARKS_PER_PAGE`](crate::core::MAX_WATERMARKS_PER_PAGE)
/// in one request, few enough that the request stays quick.
pub const MAX_SEED_WATERMARKS: u32 = 5_000;

/// `POST /faults` at a target: `{"reject":bool,"permanent":bool,"delay_ms":n,"seed_watermarks":n}`.
#[derive(Clone, Copy, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TargetFaultsBody {
    /// Refuse calls.
    #[serde(default)]
    pub reject: bool,
    /// With `reject`: refuse as a permanent error (422), not a transient one.
    #[serde(default)]
    pub permanent: bool,
    /// Wait this long before applying, at most [`MAX_FAULT_DELAY_MS`].
    #[serde(default)]
    pub delay_ms: u64,
    /// Throw this platform failure from the next `times` calls.
    #[serde(default)]
    pub throw: Option<Thrown>,
    /// How many calls throw (default 1), at most [`MAX_THROW_TIMES`].
    #[serde(default)]
    pub times: Option<u32>,
    /// Whether a throwing call applies its batch first.
    #[serde(default)]
    pub after_apply: bool,
    /// Write this many synthetic source watermarks (sources `seed00000`..,
    /// each with an id), at most [`MAX_SEED_WATERMARKS`], so a test can give
    /// a target thousands of sources without running them.
    #[serde(default)]
    pub seed_watermarks: u32,
}

impl TargetFaultsBody {
    /// Writes the body's `seed_watermarks` synthetic watermarks into
    /// `inbox`, in one transaction: source `seed{i:05}` with a derived id at
    /// watermark `i + 1`.
    pub fn seed<S: Sql>(&self, inbox: &crate::store::inbox::Inbox<S>) -> Result<(), StoreError> {
        inbox.sql().transaction(|| {
            for i in 0..self.seed_watermarks.min(MAX_SEED_WATERMARKS) {
                let source = format!("seed{i:05}");
                let id = SourceId::derive("seed", &source);
                inbox.set_watermark(&source, Some(&id), u64::from(i) + 1)?;
            }
            Ok(())
        })
    }

    /// The switch this body asks for, or why it cannot be set.
    pub fn faults(&self) -> Result<TargetFaults, String> {
        if self.delay_ms > MAX_FAULT_DELAY_MS {
            return Err(format!("delay_ms above {MAX_FAULT_DELAY_MS}"));
        }
        let reject = match (self.reject, self.permanent) {
            (false, _) => 0,
            (true, false) => 1,
            (true, true) => 2,
        };
        let throw_times = if self.throw.is_some() { self.times.unwrap_or(1) } else { 0 };
        if throw_times > MAX_THROW_TIMES {
            return Err(format!("times above {MAX_THROW_TIMES}"));
        }
        if self.seed_watermarks > MAX_SEED_WATERMARKS {
            return Err(format!("seed_watermarks above {MAX_SEED_WATERMARKS}"));
        }
        Ok(TargetFaults {
            reject,
            delay_ms: self.delay_ms,
            throw: self.throw,
            throw_times,
            throw_after_apply: self.after_apply,
        })
    }
}

/// `POST /faults` at a source: `{"crash_checkpoints":n,"drop_alarm":bool,"refuse_writes":bool}`.
#[derive(Clone, Copy, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SourceFaultsBody {
    /// Fail this many checkpoints after the target calls.
    #[serde(default)]
    pub crash_checkpoints: u32,
    /// Delete the stored alarm, as the platform does after failed retries.
    #[serde(default)]
    pub drop_alarm: bool,
    /// Refuse every write from now on with the platform's error for an
    /// account past its daily rows-written allowance; `false` (the default
    /// of every fault request) lets writes through again.
    #[serde(default)]
    pub refuse_writes: bool,
    /// Hold the next retire this long between its emptiness check and its
    /// directory call, ms (at most 10,000), so a test can land an enqueue
    /// in that gap every time rather than one try in ten.
    #[serde(default)]
    pub retire_delay_ms: u32,
    /// Make the next this many alarms throw before doing anything, so the
    /// platform retries them (with `alarmInfo.retryCount` counting up): at
    /// most [`MAX_FAILED_ALARMS`], the platform's own retry limit.
    #[serde(default)]
    pub fail_alarms: u32,
    /// Write this many failing-target records (`seeded-f00000`, ...), each
    /// after one failed cycle, as a long outage of many targets leaves
    /// them: at most [`MAX_SEEDED_TARGETS`].
    #[serde(default)]
    pub seed_failing_targets: u32,
    /// Write this many parked-target records (`seeded-p00000`, ...) with
    /// no parked rows: at most [`MAX_SEEDED_TARGETS`].
    #[serde(default)]
    pub seed_parked_targets: u32,
}

/// Most alarms one fault request makes fail: the platform retries a failed
/// alarm six times, and one more failure would leave the test with no alarm.
pub const MAX_FAILED_ALARMS: u32 = 6;

/// Most target records one fault request seeds.
pub const MAX_SEEDED_TARGETS: u32 = 20_000;

/// Writes `failing` failing and `parked` parked target records in one
/// statement each, as a checkpoint would have left them at `now_ms` (a
/// parked target's rows are none here). Refused past [`MAX_SEEDED_TARGETS`].
pub fn seed_target_records(sql: &impl Sql, failing: u32, parked: u32, now_ms: u64) -> Result<(), StoreError> {
    if failing.max(parked) > MAX_SEEDED_TARGETS {
        return Err(StoreError::Sql(format!("at most {MAX_SEEDED_TARGETS} seeded targets")));
    }
    for (n, prefix, cycles, is_parked) in [(failing, "seeded-f", 1, 0), (parked, "seeded-p", 0, 1)] {
        if n == 0 {
            continue;
        }
        sql.run(
            "WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i + 1 < ?) \
             INSERT INTO relay_targets (target, failed_cycles, parked, reason, first_failure_ms, \
             last_failure_ms, last_error) SELECT printf('%s%05d', ?, i), ?, ?, 'seeded', ?, ?, 'seeded' FROM n \
             WHERE true ON CONFLICT(target) DO NOTHING",
            vec![int(u64::from(n)), prefix.into(), int(cycles), int(is_parked), int(now_ms), int(now_ms)],
        )?;
    }
    Ok(())
}

/// Longest test delay of a retire, ms.
pub const MAX_RETIRE_DELAY_MS: u32 = 10_000;

const COMPONENT: &str = "relay_testing";

const MIGRATIONS: &[&[&str]] = &[
    &[
        "CREATE TABLE relay_test_faults (id INTEGER PRIMARY KEY CHECK (id = 1), reject INTEGER NOT NULL, \
         delay_ms INTEGER NOT NULL)",
        "CREATE TABLE relay_apply_log (source TEXT NOT NULL, seq INTEGER NOT NULL)",
    ],
    // Version 2: the platform failures a target throws.
    &[
        "ALTER TABLE relay_test_faults ADD COLUMN throw INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE relay_test_faults ADD COLUMN throw_times INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE relay_test_faults ADD COLUMN throw_after_apply INTEGER NOT NULL DEFAULT 0",
    ],
    // Version 3: the sender's object id beside its name ('' when unknown).
    &["ALTER TABLE relay_apply_log ADD COLUMN source_id TEXT NOT NULL DEFAULT ''"],
];

/// A target's test tables.
pub struct TestTables<S> {
    sql: S,
    /// The fault switch as last read or written. Only this object writes
    /// it, so after the first read every apply can skip the statement, as
    /// a target without test plumbing would.
    faults: Cell<Option<TargetFaults>>,
}

impl<S: Sql> TestTables<S> {
    /// Opens the test tables, creating them on first use.
    pub fn open(sql: S) -> Result<TestTables<S>, StoreError> {
        schema::migrate(&sql, COMPONENT, MIGRATIONS)?;
        Ok(TestTables { sql, faults: Cell::new(None) })
    }

    /// The fault switch.
    pub fn faults(&self) -> Result<TargetFaults, StoreError> {
        if let Some(f) = self.faults.get() {
            return Ok(f);
        }
        let f = self.read_faults()?;
        self.faults.set(Some(f));
        Ok(f)
    }

    fn read_faults(&self) -> Result<TargetFaults, StoreError> {
        let row = self.sql.first(
            "SELECT reject, delay_ms, throw, throw_times, throw_after_apply FROM relay_test_faults WHERE id = 1",
            vec![],
        )?;
        row.map_or(Ok(TargetFaults::default()), |r| {
            Ok(TargetFaults {
                reject: r.u32(0)?,
                delay_ms: r.u64(1)?,
                throw: Thrown::from_code(r.u32(2)?),
                throw_times: r.u32(3)?,
                throw_after_apply: r.u64(4)? != 0,
            })
        })
    }

    /// Sets the fault switch.
    pub fn set_faults(&self, f: TargetFaults) -> Result<(), StoreError> {
        self.sql.run(
            "INSERT INTO relay_test_faults (id, reject, delay_ms, throw, throw_times, throw_after_apply) \
             VALUES (1, ?, ?, ?, ?, ?) ON CONFLICT(id) DO UPDATE SET reject = excluded.reject, \
             delay_ms = excluded.delay_ms, throw = excluded.throw, throw_times = excluded.throw_times, \
             throw_after_apply = excluded.throw_after_apply",
            vec![
                int(u64::from(f.reject)),
                int(f.delay_ms),
                int(u64::from(f.throw.map_or(0, Thrown::code))),
                int(u64::from(f.throw_times)),
                int(u64::from(f.throw_after_apply)),
            ],
        )?;
        self.faults.set(Some(f));
        Ok(())
    }

    /// Takes one throw of the armed platform failure, if any is left: the
    /// failure and whether to apply first.
    pub fn take_throw(&self) -> Result<Option<(Thrown, bool)>, StoreError> {
        let f = self.faults()?;
        let Some(thrown) = f.throw.filter(|_| f.throw_times > 0) else { return Ok(None) };
        self.sql.run("UPDATE relay_test_faults SET throw_times = throw_times - 1 WHERE id = 1", vec![])?;
        self.faults.set(Some(TargetFaults { throw_times: f.throw_times - 1, ..f }));
        Ok(Some((thrown, f.throw_after_apply)))
    }

    /// The sequences from the source named `source` in the apply log, in
    /// application order: from every sender of that name when `id` is
    /// `None`, else from the one whose object id is `id`, with those its
    /// name's legacy watermark took before any identified sender claimed it
    /// (what the object sent while it, or the target, ran a release older
    /// than ids).
    pub fn applied(&self, source: &str, id: Option<&SourceId>) -> Result<Vec<u64>, StoreError> {
        let rows = match id {
            None => self.sql.rows(
                "SELECT seq FROM relay_apply_log WHERE source = ? ORDER BY rowid",
                vec![source.into()],
            )?,
            Some(id) => self.sql.rows(
                "SELECT seq FROM relay_apply_log WHERE source = ? AND source_id IN (?, '') ORDER BY rowid",
                vec![source.into(), id.as_str().into()],
            )?,
        };
        rows.iter().map(|r| r.u64(0)).collect()
    }

    /// The hook that logs every applied row under its sender's name and id.
    pub fn log_hook(&self) -> ApplyLog<S>
    where
        S: Clone,
    {
        ApplyLog { sql: self.sql.clone() }
    }
}

/// A hook that records every applied row, in application order, in
/// `relay_apply_log` under its sender's name and id (`''` for a sender
/// without one), inside the apply transaction.
pub struct ApplyLog<S> {
    /// The target's database.
    sql: S,
}

/// Log rows per multi-row insert (three parameters each).
const LOG_ROWS_PER_STATEMENT: usize = 33;

impl<S: Sql> RelayHook for ApplyLog<S> {
    fn extra_effects(&self, sender: &Sender, rows: &[ApplyRow]) -> Result<Effects, String> {
        let (source, id) = (&sender.name, sender.id.as_ref().map_or("", SourceId::as_str));
        for chunk in rows.chunks(LOG_ROWS_PER_STATEMENT) {
            let placeholders = vec!["(?, ?, ?)"; chunk.len()].join(", ");
            let params = chunk.iter().flat_map(|r| [source.as_str().into(), id.into(), int(r.seq)]).collect();
            self.sql
                .run(
                    &format!("INSERT INTO relay_apply_log (source, source_id, seq) VALUES {placeholders}"),
                    params,
                )
                .map_err(|e| e.to_string())?;
        }
        Ok(Effects::default())
    }
}
