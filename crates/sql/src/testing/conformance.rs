//! One storage suite, run unchanged on every [`Sql`] backend: natively over
//! SQLite (`tests/conformance.rs`) and over `DoSql` (the `durable-relay` crate) in
//! workerd (the reference Worker's test build serves it; see
//! `tests/e2e/conformance.test.mjs`). The relay's write-cost figures are
//! measured natively, where `SqliteSql` counts SQLite's `total_changes`,
//! while Durable Objects bill what their cursor reports as `rowsWritten`.
//! The two agree on tables whose primary key is the row id or that are
//! `WITHOUT ROWID` with no other index (the outbox, the state row, the
//! inbox's keys and watermarks: every row a plain stream writes); Durable
//! Objects also count each index entry and each schema change. This suite
//! records both per statement, so where they differ is written down.
//!
//! It has two parts:
//! - [`Check`]s of the interface's promises: values round-trip, each kind of
//!   statement reports the rows it wrote, a failed transaction leaves
//!   nothing, nested transactions roll back only their own part, a SQL
//!   error is an error and not a panic;
//! - a trace of every statement a fixed script of relay operations issues
//!   (enqueue, duplicate, delayed row, alarm with a failing target, status,
//!   parked pages, redrive, discard, the inbox's reads, partition adoption
//!   and claims, the audit), each with its calls, rows written and rows
//!   returned. Both backends must give the same trace; the native test
//!   also pins it to a recorded file, so a change in the SQL's cost shows
//!   in review.
//!
//! Run it on a database with nothing of the relay in it.

use std::cell::{Cell, RefCell};

use serde::{Deserialize, Serialize};

use crate::core::{
    CallOutcome, EnqueueRow, Failure, Fence, KeyVerdict, Name, NoHook, Part, PartitionMap, RelayBudget,
    DEFAULT_MAX_IN_FLIGHT, SEQ_MAX,
};
use crate::driver::{AlarmOptions, NoObserver, Targets};
use crate::source::{Relay, SourceConfig};
use crate::store::inbox::Inbox;
use crate::store::outbox::{OutboxSettings, RoutedKey};
use crate::store::{int, Rows, Sql, SqlValue, StoreError};
use crate::testing::MemoryAlarm;

/// The clock the script starts at, ms since the epoch: fixed, so every
/// backend computes the same due times.
pub const SCRIPT_START_MS: u64 = 1_800_000_000_000;

/// One promise of the interface, and whether it held.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Check {
    /// What was checked.
    pub name: String,
    /// Why it failed; `None` when it held.
    pub failure: Option<String>,
}

/// One distinct statement the script issued.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatementCost {
    /// The statement's text, whitespace collapsed.
    pub sql: String,
    /// Times it ran.
    pub calls: u32,
    /// Rows it wrote, summed over its calls, as the backend reported them.
    pub rows_written: u64,
    /// Rows it returned, summed over its calls.
    pub rows_returned: u64,
}

/// What the suite found on one backend.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Report {
    /// The interface's promises.
    pub checks: Vec<Check>,
    /// The script's statements, in order of first use.
    pub statements: Vec<StatementCost>,
    /// Rows written by the whole script.
    pub rows_written: u64,
    /// Why the script stopped early, if it did.
    pub script_error: Option<String>,
}

impl Report {
    /// Whether every check held and the script ran to its end.
    pub fn passed(&self) -> bool {
        self.script_error.is_none() && self.checks.iter().all(|c| c.failure.is_none())
    }
}

/// Runs the whole suite on `sql`, a database with nothing of the relay in it.
pub async fn run<S: Sql + Clone>(sql: S) -> Report {
    let tables = "SELECT COUNT(*) FROM sqlite_master WHERE name LIKE 'relay%' OR name LIKE 'conformance%'";
    match sql.first(tables, vec![]).map(|r| r.map(|r| r.u64(0))) {
        Ok(Some(Ok(0))) => {}
        found => {
            let script_error =
                Some(format!("the database must hold nothing of the relay's or the suite's: {found:?}"));
            return Report { script_error, ..Report::default() };
        }
    }
    let mut report = Report { checks: checks(&sql), ..Report::default() };
    let traced = Traced::new(sql);
    if let Err(e) = script(&traced).await {
        report.script_error = Some(e);
    }
    report.statements = traced.costs();
    report.rows_written = report.statements.iter().map(|s| s.rows_written).sum();
    report
}

// ---- the interface's promises ----------------------------------------------

/// One promise's test: `Err` says how it failed.
type Case<S> = fn(&S) -> Result<(), String>;

fn checks<S: Sql>(sql: &S) -> Vec<Check> {
    let cases: [(&str, Case<S>); 6] = [
        ("values round-trip", values_round_trip),
        ("each statement reports the rows it wrote", rows_written),
        ("a failed transaction leaves nothing", failed_transaction),
        ("a nested failure rolls back only its own part", nested_rollback),
        ("an outer failure rolls back the inner part too", outer_rollback),
        ("bad SQL is an error, and a transaction it breaks leaves nothing", bad_sql),
    ];
    cases.iter().map(|(name, case)| Check { name: (*name).into(), failure: case(sql).err() }).collect()
}

fn sql_err(e: StoreError) -> String {
    e.to_string()
}

fn count<S: Sql>(sql: &S, table: &str) -> Result<u64, String> {
    let row = sql.first(&format!("SELECT COUNT(*) FROM {table}"), vec![]).map_err(sql_err)?;
    row.ok_or("COUNT(*) returned no row")?.u64(0).map_err(sql_err)
}

fn expect<T: PartialEq + std::fmt::Debug>(what: &str, got: T, want: T) -> Result<(), String> {
    if got == want {
        Ok(())
    } else {
        Err(format!("{what}: got {got:?}, expected {want:?}"))
    }
}

fn values_round_trip<S: Sql>(sql: &S) -> Result<(), String> {
    sql.run("CREATE TABLE conformance_values (id INTEGER PRIMARY KEY, v)", vec![]).map_err(sql_err)?;
    let texts = ["", "plain", "é ☃ 😀", "{\"json\":[1,2.5,null]}", "quote ' and \\\\ backslash"];
    let ints = [0, 1, 4_294_967_296, SEQ_MAX];
    for (id, t) in (1u64..).zip(texts) {
        sql.run("INSERT INTO conformance_values VALUES (?, ?)", vec![int(id), t.into()]).map_err(sql_err)?;
    }
    for (id, v) in (100u64..).zip(ints) {
        sql.run("INSERT INTO conformance_values VALUES (?, ?)", vec![int(id), int(v)]).map_err(sql_err)?;
    }
    sql.run("INSERT INTO conformance_values VALUES (200, NULL)", vec![]).map_err(sql_err)?;
    for (id, t) in (1u64..).zip(texts) {
        let row =
            sql.first("SELECT v FROM conformance_values WHERE id = ?", vec![int(id)]).map_err(sql_err)?;
        let got = row.ok_or("no row")?.opt_text(0).map_err(sql_err)?;
        expect(&format!("text {t:?}"), got.as_deref(), Some(t))?;
    }
    for (id, v) in (100u64..).zip(ints) {
        let row =
            sql.first("SELECT v FROM conformance_values WHERE id = ?", vec![int(id)]).map_err(sql_err)?;
        expect(&format!("integer {v}"), row.ok_or("no row")?.opt_u64(0).map_err(sql_err)?, Some(v))?;
    }
    let row = sql.first("SELECT v FROM conformance_values WHERE id = 200", vec![]).map_err(sql_err)?;
    expect("NULL", row.ok_or("no row")?.0, vec![SqlValue::Null])
}

fn rows_written<S: Sql>(sql: &S) -> Result<(), String> {
    let written = |q: &str| sql.exec(q, vec![]).map(|r: Rows| r.written).map_err(sql_err);
    written("CREATE TABLE conformance_rows (k TEXT PRIMARY KEY, v INTEGER) WITHOUT ROWID")?;
    written("CREATE TABLE conformance_indexed (id INTEGER PRIMARY KEY, v INTEGER)")?;
    written("CREATE INDEX conformance_by_v ON conformance_indexed (v)")?;
    expect(
        "INSERT of 3 rows",
        written("INSERT INTO conformance_rows VALUES ('a', 1), ('b', 2), ('c', 3)")?,
        3,
    )?;
    expect("UPDATE of 2 rows", written("UPDATE conformance_rows SET v = v + 10 WHERE v < 3")?, 2)?;
    expect("UPDATE of no row", written("UPDATE conformance_rows SET v = 0 WHERE k = 'zz'")?, 0)?;
    expect("DELETE of 1 row", written("DELETE FROM conformance_rows WHERE k = 'c'")?, 1)?;
    expect("SELECT", written("SELECT * FROM conformance_rows")?, 0)?;
    let upsert = "INSERT INTO conformance_rows VALUES ('a', 5) ON CONFLICT (k) DO UPDATE SET v = excluded.v";
    expect("upsert of an existing row", written(upsert)?, 1)?;
    expect(
        "INSERT OR IGNORE of a duplicate",
        written("INSERT OR IGNORE INTO conformance_rows VALUES ('a', 9)")?,
        0,
    )?;
    // SQLite's change count counts table rows only; Durable Objects bill
    // every b-tree row written, an index's entries too. Either is a count
    // of this statement's own writes; the recorded costs say which each
    // backend gives for each of the relay's statements.
    let one_or_with_index = |what: &str, got: u32| match got {
        1 | 2 => Ok(()),
        _ => Err(format!("{what}: got {got}, expected 1 (table rows) or 2 (with the index's)")),
    };
    one_or_with_index(
        "INSERT into an indexed table",
        written("INSERT INTO conformance_indexed VALUES (1, 7)")?,
    )?;
    one_or_with_index("DELETE from an indexed table", written("DELETE FROM conformance_indexed")?)
}

fn failed_transaction<S: Sql>(sql: &S) -> Result<(), String> {
    sql.run("CREATE TABLE conformance_tx (v INTEGER)", vec![]).map_err(sql_err)?;
    let r: Result<(), StoreError> = sql.transaction(|| {
        sql.run("INSERT INTO conformance_tx VALUES (1), (2)", vec![])?;
        Err(StoreError::Guard("the body refuses"))
    });
    expect("the body's own error", r, Err(StoreError::Guard("the body refuses")))?;
    expect("rows after the rollback", count(sql, "conformance_tx")?, 0)?;
    sql.transaction(|| sql.run("INSERT INTO conformance_tx VALUES (3)", vec![]).map(|_| ()))
        .map_err(sql_err)?;
    expect("rows after a commit", count(sql, "conformance_tx")?, 1)
}

fn nested_rollback<S: Sql>(sql: &S) -> Result<(), String> {
    sql.run("CREATE TABLE conformance_nested (v INTEGER)", vec![]).map_err(sql_err)?;
    let inner_result = RefCell::new(None);
    sql.transaction(|| {
        sql.run("INSERT INTO conformance_nested VALUES (1)", vec![])?;
        let inner: Result<(), StoreError> = sql.transaction(|| {
            sql.run("INSERT INTO conformance_nested VALUES (2)", vec![])?;
            Err(StoreError::Guard("inner"))
        });
        *inner_result.borrow_mut() = Some(inner);
        sql.run("INSERT INTO conformance_nested VALUES (3)", vec![]).map(|_| ())
    })
    .map_err(sql_err)?;
    expect("the inner error", inner_result.into_inner(), Some(Err(StoreError::Guard("inner"))))?;
    let rows = sql.rows("SELECT v FROM conformance_nested ORDER BY v", vec![]).map_err(sql_err)?;
    let values = rows.iter().map(|r| r.u64(0)).collect::<Result<Vec<_>, _>>().map_err(sql_err)?;
    expect("rows kept", values, vec![1, 3])
}

fn outer_rollback<S: Sql>(sql: &S) -> Result<(), String> {
    sql.run("CREATE TABLE conformance_outer (v INTEGER)", vec![]).map_err(sql_err)?;
    let r: Result<(), StoreError> = sql.transaction(|| {
        sql.transaction(|| sql.run("INSERT INTO conformance_outer VALUES (1)", vec![]).map(|_| ()))?;
        Err(StoreError::Aborted("outer".into()))
    });
    expect("the outer error", r, Err(StoreError::Aborted("outer".into())))?;
    expect("rows after the outer rollback", count(sql, "conformance_outer")?, 0)
}

fn bad_sql<S: Sql>(sql: &S) -> Result<(), String> {
    if sql.exec("SELEC nothing", vec![]).is_ok() {
        return Err("a syntax error was accepted".into());
    }
    sql.run("CREATE TABLE conformance_unique (k TEXT PRIMARY KEY)", vec![]).map_err(sql_err)?;
    let r: Result<(), StoreError> = sql.transaction(|| {
        sql.run("INSERT INTO conformance_unique VALUES ('a')", vec![])?;
        sql.run("INSERT INTO conformance_unique VALUES ('a')", vec![]).map(|_| ())
    });
    match r {
        Err(StoreError::Sql(_)) => {}
        other => return Err(format!("a constraint violation answered {other:?}, not a SQL error")),
    }
    expect("rows after the violation", count(sql, "conformance_unique")?, 0)
}

// ---- the relay's statements --------------------------------------------------

/// A store that records what each distinct statement cost.
#[derive(Clone)]
struct Traced<S> {
    inner: S,
    costs: std::rc::Rc<RefCell<Vec<StatementCost>>>,
}

impl<S: Sql> Traced<S> {
    fn new(inner: S) -> Traced<S> {
        Traced { inner, costs: Default::default() }
    }

    fn costs(&self) -> Vec<StatementCost> {
        self.costs.borrow().clone()
    }
}

impl<S: Sql> Sql for Traced<S> {
    fn exec(&self, query: &str, params: Vec<SqlValue>) -> Result<Rows, StoreError> {
        let rows = self.inner.exec(query, params)?;
        let text = query.split_whitespace().collect::<Vec<_>>().join(" ");
        let mut costs = self.costs.borrow_mut();
        let at = match costs.iter().position(|c| c.sql == text) {
            Some(at) => at,
            None => {
                costs.push(StatementCost { sql: text, ..StatementCost::default() });
                costs.len() - 1
            }
        };
        if let Some(cost) = costs.get_mut(at) {
            cost.calls += 1;
            cost.rows_written += u64::from(rows.written);
            cost.rows_returned += rows.rows.len() as u64;
        }
        Ok(rows)
    }

    fn transaction<T>(&self, body: impl FnMut() -> Result<T, StoreError>) -> Result<T, StoreError> {
        self.inner.transaction(body)
    }
}

/// Targets applied in process: `good` through an inbox on the same
/// database, every other target failing transiently.
struct LocalTargets<'a, S> {
    inbox: &'a Inbox<S>,
    good: Name,
}

impl<S: Sql> Targets for LocalTargets<'_, S> {
    async fn apply(&self, target: &Name, body: String) -> CallOutcome {
        if *target != self.good {
            return CallOutcome::Failed(Failure::Transient("the script's failing target".into()));
        }
        match self.inbox.apply_body(&body, &NoHook) {
            Ok(r) => CallOutcome::Applied { watermark: r.watermark, applied: r.applied },
            Err(e) => CallOutcome::Failed(Failure::Transient(format!("{e:?}"))),
        }
    }
}

fn name(s: &str) -> Result<Name, String> {
    Name::new(s).map_err(|e| format!("{s:?}: {e}"))
}

fn rows_for(target: &Name, n: u64) -> Vec<EnqueueRow> {
    (0..n).map(|i| EnqueueRow::to(target.clone()).put(format!("k{i}"), serde_json::json!(i))).collect()
}

/// The fixed script: every operation the relay offers, on one source
/// (`conformance:0`, so it is also partition 0 of `conformance`) whose
/// good target's inbox is on the same database.
async fn script<S: Sql + Clone>(sql: &S) -> Result<(), String> {
    let e = |e: &dyn std::fmt::Display| e.to_string();
    let clock = Cell::new(SCRIPT_START_MS);
    let now = || clock.get();
    let (good, bad) = (name("good")?, name("bad")?);
    let mut settings = OutboxSettings::default();
    settings.policy.park_after_failed_cycles = Some(1);
    let alarm = AlarmOptions { budget: RelayBudget::FREE, max_in_flight: DEFAULT_MAX_IN_FLIGHT };
    let config = SourceConfig { alarm, settings, coalesce_ms: 0, in_turn: false, pack_rows: false };
    let id = crate::core::SourceId::derive("conformance", "conformance:0");
    let relay = Relay::open(name("conformance:0")?, id, sql.clone(), MemoryAlarm::default(), config)
        .map_err(|x| e(&x))?;
    let inbox = Inbox::open(sql.clone()).map_err(|x| e(&x))?;
    let targets = LocalTargets { inbox: &inbox, good: good.clone() };

    let mut rows = rows_for(&good, 3);
    rows.extend(rows_for(&bad, 2));
    relay.enqueue(now(), Some("key-1"), &rows).await.map_err(|x| e(&x))?;
    relay.enqueue(now(), Some("key-1"), &rows).await.map_err(|x| e(&x))?;
    let delayed = vec![EnqueueRow::to(good.clone())
        .put("later", serde_json::json!(true))
        .delayed(crate::core::Delay::For(60_000))];
    relay.enqueue(now(), None, &delayed).await.map_err(|x| e(&x))?;
    for _ in 0..2 {
        clock.set(clock.get() + 1_000);
        relay.alarm(&targets, &now, &NoObserver).await.map_err(|x| e(&x.error))?;
    }
    clock.set(clock.get() + 61_000);
    relay.alarm(&targets, &now, &NoObserver).await.map_err(|x| e(&x.error))?;

    relay.status(now()).await.map_err(|x| e(&x))?;
    relay.targets("", 10).map_err(|x| e(&x))?;
    relay.parked_page(&bad, 0, 10).map_err(|x| e(&x))?;
    relay.delivered_through(3).map_err(|x| e(&x))?;
    relay.relay_watermark(now()).map_err(|x| e(&x))?;
    relay.redrive(&bad, now()).await.map_err(|x| e(&x))?;
    relay.discard(&bad, now()).map_err(|x| e(&x))?;

    inbox.keys("k", "", 10).map_err(|x| e(&x))?;
    inbox.watermarks().map_err(|x| e(&x))?;
    let after = Name::new("nobody").map_err(|x| x.to_string())?;
    inbox.watermarks_page(None, 10).map_err(|x| e(&x))?;
    inbox.watermarks_page(Some((&after, None)), 10).map_err(|x| e(&x))?;
    inbox.totals().map_err(|x| e(&x))?;
    inbox.forget_watermark("nobody").map_err(|x| e(&x))?;

    let map = PartitionMap::new(2, 1);
    let refused = |x: crate::store::outbox::EnqueueFailure| format!("{x:?}");
    relay.prepare(now(), &map).map_err(refused)?;
    relay.activate(now(), &map).map_err(refused)?;
    let digest = "0".repeat(64);
    let verdict = relay.record_key(now(), "key-2", &digest, &[Part::Index(0)]).map_err(refused)?;
    let ticket = match verdict {
        KeyVerdict::Fresh(t) | KeyVerdict::Retry { ticket: t, .. } => t,
    };
    relay.settling(&map, now()).map_err(|x| e(&x))?;
    let home =
        (0u32..).map(|i| format!("t{i}")).find(|t| Name::new(t).is_ok_and(|n| crate::core::home(&n, 2) == 0));
    let home = name(&home.unwrap_or_default())?;
    let key = RoutedKey { key: "key-2", digest: &digest, ticket };
    relay.enqueue_routed(now(), Some(key), &rows_for(&home, 1), Fence::of(&map)).await.map_err(refused)?;
    let next = crate::core::Ticket { attempt: ticket.attempt + 1, ..ticket };
    relay.seal(now(), "key-2", &digest, next).map_err(refused)?;

    relay.outbox().audit().map_err(|x| e(&x))?.map_err(|b| format!("the outbox audit failed: {b}"))?;
    Ok(())
}
