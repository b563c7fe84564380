//! What the relay's own code asks of the platform, counted per isolate:
//! SQL statements and the rows they read and write, the JSON bytes that
//! cross the object's HTTP edges, target calls, and log lines.
//!
//! These counts are what the benchmark's profile divides by the rows it
//! delivered (`bench/profile.mjs`). Unlike milliseconds they do not move
//! with the machine's load, so a change that saves a statement or a log
//! line shows as a change in the count. Counting is a handful of integer
//! additions per statement, so it is always on; the counts leave the
//! isolate only through the benchmark build's profile route.
//!
//! An isolate runs one request at a time between awaits, so the counters
//! are plain thread-local cells; they are totals since the isolate started,
//! and a reader takes the difference of two snapshots.
//!
//! Test builds also count runs per statement text; those counts are kept
//! for at most [`MAX_COUNTED_STATEMENTS`] texts, so a statement whose text
//! varies (a list of placeholders as long as its batch) cannot grow the
//! isolate's memory without bound.

use serde::Serialize;
use std::cell::Cell;

/// Totals since this isolate started. Every field only grows.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Work {
    /// SQL statements executed (each is one call into the runtime's SQLite).
    pub sql_statements: u64,
    /// Rows SQLite read for them (the platform's billed `rowsRead`).
    pub sql_rows_read: u64,
    /// Rows SQLite wrote for them (the platform's billed `rowsWritten`).
    pub sql_rows_written: u64,
    /// Rows the statements returned to wasm (each value crosses the boundary).
    pub sql_rows_returned: u64,
    /// Request and reply bodies read into wasm, bytes (JSON the relay then parses).
    pub json_bytes_in: u64,
    /// Request and reply bodies written from wasm, bytes (JSON the relay serialised).
    pub json_bytes_out: u64,
    /// Calls to another Durable Object (target calls, forwarded requests).
    pub stub_calls: u64,
    /// Rows targets applied for the first time (duplicates are not counted).
    pub rows_applied: u64,
    /// Log lines written.
    pub log_lines: u64,
    /// Log bytes written.
    pub log_bytes: u64,
}

thread_local! {
    static WORK: Cell<Work> = const { Cell::new(Work {
        sql_statements: 0, sql_rows_read: 0, sql_rows_written: 0, sql_rows_returned: 0,
        json_bytes_in: 0, json_bytes_out: 0, stub_calls: 0, rows_applied: 0, log_lines: 0, log_bytes: 0,
    }) };
}

/// Test builds: how many distinct statement texts are counted one by one.
/// The relay's statements are a few dozen texts (a batch's placeholder list
/// makes one text per batch size, up to a few hundred); past this bound a
/// new text is counted under [`OTHER_STATEMENTS`], so the counts stay a
/// few hundred KB at most however the texts vary.
#[cfg(feature = "testing")]
pub const MAX_COUNTED_STATEMENTS: u32 = 1_024;

/// Test builds: the key under which texts past [`MAX_COUNTED_STATEMENTS`]
/// are counted together.
#[cfg(feature = "testing")]
pub const OTHER_STATEMENTS: &str = "(other statements)";

#[cfg(feature = "testing")]
thread_local! {
    /// Test builds: how often each statement text ran, for the profile's
    /// list of statements per operation.
    static STATEMENTS: std::cell::RefCell<std::collections::BTreeMap<String, u64>> =
        const { std::cell::RefCell::new(std::collections::BTreeMap::new()) };
}

/// Test builds: how often each statement text has run in this isolate.
#[cfg(feature = "testing")]
pub fn statement_texts() -> std::collections::BTreeMap<String, u64> {
    STATEMENTS.with(|s| s.borrow().clone())
}

/// Test builds: counts one run of the statement `query`.
#[cfg(feature = "testing")]
pub fn statement_text(query: &str) {
    STATEMENTS.with(|s| count_text(&mut s.borrow_mut(), query));
}

/// Counts one run of `query` in `counts`: under its own text while fewer
/// than [`MAX_COUNTED_STATEMENTS`] texts are counted (or it is one of
/// them), else under [`OTHER_STATEMENTS`].
#[cfg(feature = "testing")]
fn count_text(counts: &mut std::collections::BTreeMap<String, u64>, query: &str) {
    if let Some(n) = counts.get_mut(query) {
        *n += 1;
    } else if counts.len() < MAX_COUNTED_STATEMENTS as usize {
        counts.insert(query.to_owned(), 1);
    } else {
        *counts.entry(OTHER_STATEMENTS.to_owned()).or_default() += 1;
    }
}

/// The totals so far.
pub fn snapshot() -> Work {
    WORK.with(Cell::get)
}

fn add(f: impl FnOnce(&mut Work)) {
    WORK.with(|w| {
        let mut work = w.get();
        f(&mut work);
        w.set(work);
    });
}

/// One statement ran: it read `read` rows, wrote `written` and returned `returned`.
pub fn statement(read: u32, written: u32, returned: u32) {
    add(|w| {
        w.sql_statements += 1;
        w.sql_rows_read += u64::from(read);
        w.sql_rows_written += u64::from(written);
        w.sql_rows_returned += u64::from(returned);
    });
}

/// A body of `bytes` was read into wasm.
pub fn body_in(bytes: usize) {
    add(|w| w.json_bytes_in += bytes as u64);
}

/// A body of `bytes` was written from wasm.
pub fn body_out(bytes: usize) {
    add(|w| w.json_bytes_out += bytes as u64);
}

/// A target applied `rows` rows for the first time.
pub fn applied(rows: u32) {
    add(|w| w.rows_applied += u64::from(rows));
}

/// A call to another Durable Object was sent.
pub fn stub_call() {
    add(|w| w.stub_calls += 1);
}

/// The console stream a log line goes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Level {
    /// `console.log`: figures and events.
    Info,
    /// `console.warn`: something an operator should look at.
    Warn,
    /// `console.error`: a failure.
    Error,
}

/// Writes `line` to the log at `level` and counts it. Every log line of the
/// relay and the reference Worker goes through here.
pub fn log(level: Level, line: &str) {
    add(|w| {
        w.log_lines += 1;
        w.log_bytes += line.len() as u64;
    });
    match level {
        Level::Info => worker::console_log!("{line}"),
        Level::Warn => worker::console_warn!("{line}"),
        Level::Error => worker::console_error!("{line}"),
    }
}

/// [`log`] of one JSON value, as one line.
pub fn log_json(level: Level, value: &serde_json::Value) {
    log(level, &value.to_string());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_add_up_and_only_grow() {
        let before = snapshot();
        statement(3, 2, 1);
        statement(0, 1, 0);
        body_in(10);
        body_out(7);
        stub_call();
        let after = snapshot();
        assert_eq!(after.sql_statements - before.sql_statements, 2);
        assert_eq!(after.sql_rows_read - before.sql_rows_read, 3);
        assert_eq!(after.sql_rows_written - before.sql_rows_written, 3);
        assert_eq!(after.sql_rows_returned - before.sql_rows_returned, 1);
        assert_eq!(after.json_bytes_in - before.json_bytes_in, 10);
        assert_eq!(after.json_bytes_out - before.json_bytes_out, 7);
        assert_eq!(after.stub_calls - before.stub_calls, 1);
    }

    #[cfg(feature = "testing")]
    #[test]
    fn statement_texts_are_counted_up_to_the_bound_then_together() {
        let mut counts = std::collections::BTreeMap::new();
        for n in 0..MAX_COUNTED_STATEMENTS {
            count_text(&mut counts, &format!("SELECT {n}"));
        }
        count_text(&mut counts, "SELECT 0");
        assert_eq!(
            counts.len(),
            MAX_COUNTED_STATEMENTS as usize,
            "every text within the bound has its own count"
        );
        assert_eq!(counts["SELECT 0"], 2, "a known text still counts once the bound is reached");
        count_text(&mut counts, "SELECT past the bound");
        count_text(&mut counts, "SELECT also past the bound");
        assert_eq!(counts.len(), MAX_COUNTED_STATEMENTS as usize + 1, "texts past the bound share one key");
        assert_eq!(counts[OTHER_STATEMENTS], 2);
        assert!(!counts.contains_key("SELECT past the bound"));
    }
}
