//! The storage suite (`testing::conformance`) on the native SQLite backend
//! the simulator and every native test run on. The same suite runs over
//! `DoSql` in workerd (`tests/e2e/conformance.test.mjs`). Both are held to
//! `tests/conformance.json`: every statement the relay's script issues, its
//! calls and rows returned (the same on both backends), and the rows it
//! wrote as each backend counts them (`rows_written_sqlite`,
//! `rows_written_durable_object`). After a deliberate change to the relay's
//! SQL, re-record: `RELAY_BLESS=1 cargo test -p durable-relay --features sim
//! --test conformance` for the native column, then `RELAY_BLESS=1 node --test
//! tests/e2e/conformance.test.mjs` for the Durable Object one.

use durable_relay_sql::sim::SqliteSql;
use durable_relay_sql::testing::conformance::{run, Report};
use serde::{Deserialize, Serialize};

const RECORDED: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/conformance.json");

/// One statement as recorded for both backends.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct Recorded {
    sql: String,
    calls: u32,
    rows_returned: u64,
    rows_written_sqlite: u64,
    /// `None` until the workerd run records it.
    rows_written_durable_object: Option<u64>,
}

fn native_report() -> Report {
    let sql = SqliteSql::memory().expect("an in-memory SQLite");
    futures::executor::block_on(run(sql))
}

fn recorded() -> Vec<Recorded> {
    let text = std::fs::read_to_string(RECORDED).unwrap_or_else(|_| "[]".into());
    serde_json::from_str(&text).expect("tests/conformance.json decodes")
}

#[test]
fn every_promise_of_the_sql_interface_holds_natively() {
    let report = native_report();
    for check in &report.checks {
        assert_eq!(check.failure, None, "{}", check.name);
    }
    assert_eq!(report.script_error, None);
    let n = report.statements.len();
    assert!(n >= 90, "the script reaches the relay's statements: {n}");
}

#[test]
fn the_relays_statements_cost_natively_what_was_recorded() {
    let report = native_report();
    let before = recorded();
    let now: Vec<Recorded> = report
        .statements
        .iter()
        .map(|s| Recorded {
            sql: s.sql.clone(),
            calls: s.calls,
            rows_returned: s.rows_returned,
            rows_written_sqlite: s.rows_written,
            rows_written_durable_object: before
                .iter()
                .find(|r| r.sql == s.sql && r.calls == s.calls && r.rows_returned == s.rows_returned)
                .and_then(|r| r.rows_written_durable_object),
        })
        .collect();
    if std::env::var("RELAY_BLESS").is_ok_and(|v| v == "1") {
        let text = serde_json::to_string_pretty(&now).expect("encode") + "\n";
        std::fs::write(RECORDED, text).expect("write tests/conformance.json");
        return;
    }
    for (i, (now, then)) in now.iter().zip(&before).enumerate() {
        assert_eq!(now, then, "statement {i} (after a deliberate change, re-record: see this file's header)");
    }
    assert_eq!(now.len(), before.len(), "statements issued (re-record: see this file's header)");
    assert!(
        before.iter().all(|r| r.rows_written_durable_object.is_some()),
        "every statement has its workerd count"
    );
}
