//! The benchmark's target side, inside `RelayTarget`.
//!
//! - An **arrival log** (`bench_arrivals`: source, seq, arrival time) that
//!   every system feeds the same way, so order, duplicates and per-target
//!   drain times are measured identically: the relay's apply path records
//!   the rows it applies through [`ArrivalHook`] (inside the apply
//!   transaction, after the watermark skip), and the Queues and direct
//!   paths record through `POST /bench/apply`.
//! - `POST /bench/apply` ([`BenchApply`] body): applies every row's effects
//!   unconditionally, with no watermark, in the order given, the way a
//!   Queues consumer or a direct writer would. It honours the test fault
//!   switch's `reject` (not its `delay_ms`), so W4's failing targets fail
//!   for every system.
//! - `GET /bench/stats`: the log summarised ([`TargetStats`]).
//!
//! The log and its counters are measurement overhead, paid equally by every
//! system, and are not counted in any "SQLite rows written" figure; only
//! `relay_kv` writes (and, for the relay, its watermark row) are.
//!
//! Schema (component `bench_target`, version 1):
//!
//! ```sql
//! bench_arrivals (source, seq, at_ms)        -- one row per arrival, in order
//! bench_counters (id = 1, calls, effect_rows_written)  -- bench apply calls
//! ```

use durable_relay::core::ErrorCode;
use std::cell::OnceCell;
use std::collections::{HashMap, HashSet};

use serde::{Deserialize, Serialize};
use worker::{Request, Response};

use super::wire::{BenchApply, BenchReply, MAX_BENCH_APPLY_ROWS};
use durable_relay::core::{ApplyRow, Effects, RelayHook, Sender};
use durable_relay::http::{json, read_body, RelayError};
use durable_relay::store::inbox::Inbox;
use durable_relay::store::{int, schema, Sql, SqlValue, StoreError};
use durable_relay::testing::TestTables;
use durable_relay::DoSql;

const COMPONENT: &str = "bench_target";

const MIGRATIONS: &[&[&str]] = &[&[
    "CREATE TABLE bench_arrivals (source TEXT NOT NULL, seq INTEGER NOT NULL, at_ms INTEGER NOT NULL)",
    "CREATE INDEX bench_arrivals_by_seq ON bench_arrivals (source, seq)",
    "CREATE TABLE bench_counters (id INTEGER PRIMARY KEY CHECK (id = 1), \
     calls INTEGER NOT NULL, effect_rows_written INTEGER NOT NULL)",
]];

/// Arrival rows per multi-row insert (three parameters each; SQLite in a
/// Durable Object binds at most 100).
const ARRIVALS_PER_STATEMENT: usize = 33;
/// Sequences per duplicate probe (one parameter each, plus the source).
const SEQS_PER_PROBE: usize = 99;

fn now_ms() -> u64 {
    worker::Date::now().as_millis()
}

/// How one call's rows arrived.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    /// First arrivals.
    pub first: u32,
    /// Rows seen before.
    pub duplicates: u32,
    /// First arrivals below the highest sequence already seen from their source.
    pub out_of_order: u32,
}

/// Classifies arrivals of `seqs` (in arrival order) from one source, given
/// the highest sequence seen before and which of them were seen before.
pub fn classify(max_before: Option<u64>, seen_before: &HashSet<u64>, seqs: &[u64]) -> Tally {
    let mut tally = Tally::default();
    let mut max = max_before;
    let mut seen_now = HashSet::new();
    for &seq in seqs {
        if seen_before.contains(&seq) || !seen_now.insert(seq) {
            tally.duplicates += 1;
            continue;
        }
        tally.first += 1;
        if max.is_some_and(|m| seq < m) {
            tally.out_of_order += 1;
        }
        max = Some(max.map_or(seq, |m| m.max(seq)));
    }
    tally
}

/// The arrival log of one target.
pub struct Arrivals {
    db: DoSql,
}

/// Opens (once per object) the arrival log in `cell`.
pub fn arrivals<'a>(cell: &'a OnceCell<Arrivals>, db: &DoSql) -> Result<&'a Arrivals, RelayError> {
    if let Some(a) = cell.get() {
        return Ok(a);
    }
    let opened = Arrivals::open(db.clone()).map_err(|e| RelayError::internal(e.to_string()))?;
    Ok(cell.get_or_init(|| opened))
}

impl Arrivals {
    /// Creates or migrates the log's tables.
    pub fn open(db: DoSql) -> Result<Arrivals, StoreError> {
        schema::migrate(&db, COMPONENT, MIGRATIONS)?;
        Ok(Arrivals { db })
    }

    /// Records `seqs` from `source` arriving at `at_ms`, in order.
    pub fn record(&self, source: &str, seqs: &[u64], at_ms: u64) -> Result<Tally, StoreError> {
        #[derive(Deserialize)]
        struct Max {
            m: Option<u64>,
        }
        #[derive(Deserialize)]
        struct Seq {
            seq: u64,
        }
        let max: Vec<Max> = self
            .db
            .rows_as("SELECT MAX(seq) AS m FROM bench_arrivals WHERE source = ?", vec![source.into()])?;
        let max_before = max.first().and_then(|m| m.m);
        let mut seen = HashSet::new();
        if max_before.is_some() {
            for chunk in seqs.chunks(SEQS_PER_PROBE) {
                let placeholders = vec!["?"; chunk.len()].join(", ");
                let mut params: Vec<SqlValue> = vec![source.into()];
                params.extend(chunk.iter().map(|s| int(*s)));
                let rows: Vec<Seq> = self.db.rows_as(
                    &format!("SELECT seq FROM bench_arrivals WHERE source = ? AND seq IN ({placeholders})"),
                    params,
                )?;
                seen.extend(rows.into_iter().map(|r| r.seq));
            }
        }
        for chunk in seqs.chunks(ARRIVALS_PER_STATEMENT) {
            let placeholders = vec!["(?, ?, ?)"; chunk.len()].join(", ");
            let params = chunk.iter().flat_map(|s| [source.into(), int(*s), int(at_ms)]).collect();
            self.db.run(
                &format!("INSERT INTO bench_arrivals (source, seq, at_ms) VALUES {placeholders}"),
                params,
            )?;
        }
        Ok(classify(max_before, &seen, seqs))
    }

    /// Summarises the log.
    pub fn stats(&self) -> Result<TargetStats, StoreError> {
        #[derive(Deserialize)]
        struct Arrival {
            source: String,
            seq: u64,
            at_ms: u64,
        }
        #[derive(Deserialize)]
        struct Counters {
            calls: u64,
            effect_rows_written: u64,
        }
        let log: Vec<Arrival> =
            self.db.rows_as("SELECT source, seq, at_ms FROM bench_arrivals ORDER BY rowid", vec![])?;
        let counters: Vec<Counters> =
            self.db.rows_as("SELECT calls, effect_rows_written FROM bench_counters WHERE id = 1", vec![])?;
        let mut stats = TargetStats {
            arrivals: log.len() as u64,
            bench_calls: counters.first().map_or(0, |c| c.calls),
            bench_effect_rows_written: counters.first().map_or(0, |c| c.effect_rows_written),
            ..TargetStats::default()
        };
        let mut max: HashMap<&str, u64> = HashMap::new();
        let mut seen: HashSet<(&str, u64)> = HashSet::new();
        for a in &log {
            if !seen.insert((a.source.as_str(), a.seq)) {
                stats.duplicates += 1;
                continue;
            }
            stats.first_arrivals.push(a.at_ms);
            stats.first_rows.push((a.source.clone(), a.seq, a.at_ms));
            let m = max.entry(a.source.as_str()).or_insert(a.seq);
            if a.seq < *m {
                stats.out_of_order += 1;
            }
            *m = (*m).max(a.seq);
        }
        stats.distinct = stats.first_arrivals.len() as u64;
        stats.first_arrivals.sort_unstable();
        stats.first_ms = stats.first_arrivals.first().copied();
        stats.last_ms = stats.first_arrivals.last().copied();
        stats.sources = max.len() as u32;
        Ok(stats)
    }

    fn count_call(&self, effect_rows_written: u32) -> Result<(), StoreError> {
        self.db.run(
            "INSERT INTO bench_counters (id, calls, effect_rows_written) VALUES (1, 1, ?) \
             ON CONFLICT(id) DO UPDATE SET calls = calls + 1, \
             effect_rows_written = effect_rows_written + excluded.effect_rows_written",
            vec![int(u64::from(effect_rows_written))],
        )?;
        Ok(())
    }
}

/// A target's arrival log, summarised.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct TargetStats {
    /// Rows that arrived, counting repeats.
    pub arrivals: u64,
    /// Distinct (source, seq) that arrived.
    pub distinct: u64,
    /// Arrivals of a (source, seq) seen before: rows applied twice or more.
    pub duplicates: u64,
    /// First arrivals below the highest sequence already seen from their source.
    pub out_of_order: u64,
    /// Sources seen.
    pub sources: u32,
    /// Earliest and latest first-arrival times, ms since the epoch.
    pub first_ms: Option<u64>,
    /// See `first_ms`.
    pub last_ms: Option<u64>,
    /// Every first-arrival time, ascending (for the rows-remaining curve).
    pub first_arrivals: Vec<u64>,
    /// Every first arrival as `[source, seq, at_ms]`, in arrival order: the
    /// driver pairs them with the enqueue replies' `at_ms` for end-to-end
    /// latency stamped on the server at both ends.
    pub first_rows: Vec<(String, u64, u64)>,
    /// `POST /bench/apply` calls served (Queues and direct writes).
    pub bench_calls: u64,
    /// SQLite rows those calls' effects wrote.
    pub bench_effect_rows_written: u64,
    /// Relay rows applied here, summed over sources' watermark rows.
    pub relay_applied_rows: u64,
    /// Relay apply calls that applied at least one row, summed likewise.
    pub relay_batches: u64,
    /// SQLite rows the relay's applies wrote (effects and watermark), summed likewise.
    pub relay_sql_rows_written: u64,
}

/// The relay's apply hook under the benchmark: records the rows the inbox
/// is about to apply (those past the watermark) and adds no effects.
pub struct ArrivalHook<'a> {
    arrivals: &'a Arrivals,
    at_ms: u64,
}

impl<'a> ArrivalHook<'a> {
    /// A hook recording into `arrivals`, stamped now.
    pub fn new(arrivals: &'a Arrivals) -> ArrivalHook<'a> {
        ArrivalHook { arrivals, at_ms: now_ms() }
    }
}

impl RelayHook for ArrivalHook<'_> {
    fn extra_effects(&self, source: &Sender, rows: &[ApplyRow]) -> Result<Effects, String> {
        let seqs: Vec<u64> = rows.iter().map(|r| r.seq).collect();
        self.arrivals.record(source.name.as_str(), &seqs, self.at_ms).map_err(|e| e.to_string())?;
        Ok(Effects::default())
    }
}

/// Applies a bench call unconditionally and records its arrivals, in one
/// transaction.
pub fn apply(
    inbox: &Inbox<DoSql>,
    tables: &TestTables<DoSql>,
    arrivals: &Arrivals,
    body: &str,
) -> Result<BenchReply, RelayError> {
    let unavailable = |m: String| RelayError::new(503, ErrorCode::Unavailable, m);
    // The test fault switch refuses bench calls as it refuses the relay's:
    // 1 transiently (503), 2 permanently (422).
    match tables.faults().map_err(|e| unavailable(e.to_string()))?.reject {
        0 => {}
        1 => return Err(unavailable("test fault: target rejects calls".into())),
        _ => {
            return Err(RelayError::new(
                422,
                ErrorCode::MalformedBatch,
                "test fault: target rejects calls as invalid",
            ))
        }
    }
    use durable_relay::core::{BATCH_ENVELOPE_DEPTH, MAX_VALUE_DEPTH};
    let call: BenchApply = durable_relay::core::decode_json(body, MAX_VALUE_DEPTH + BATCH_ENVELOPE_DEPTH)?;
    if call.rows.is_empty() || call.rows.len() > MAX_BENCH_APPLY_ROWS as usize {
        return Err(RelayError::bad_request(
            ErrorCode::InvalidRequest,
            format!("a bench apply call carries 1..={MAX_BENCH_APPLY_ROWS} rows"),
        ));
    }
    for (i, row) in call.rows.iter().enumerate() {
        row.effects.validate().map_err(|e| RelayError::bad_request(e.code(), format!("rows[{i}]: {e}")))?;
    }
    let at_ms = now_ms();
    let db = inbox.sql();
    db.transaction(|| {
        let written = durable_relay::store::inbox::write_effects(db, call.rows.iter().map(|r| &r.effects))?;
        // Arrivals per source, keeping the call's order within each source.
        let mut by_source: Vec<(&str, Vec<u64>)> = Vec::new();
        for row in &call.rows {
            match by_source.iter_mut().find(|(s, _)| *s == row.source.as_str()) {
                Some((_, seqs)) => seqs.push(row.seq),
                None => by_source.push((row.source.as_str(), vec![row.seq])),
            }
        }
        let mut reply = BenchReply {
            rows: call.rows.len() as u32,
            effect_rows_written: written,
            ..BenchReply::default()
        };
        for (source, seqs) in &by_source {
            let t = arrivals.record(source, seqs, at_ms)?;
            reply.first += t.first;
            reply.duplicates += t.duplicates;
            reply.out_of_order += t.out_of_order;
        }
        arrivals.count_call(written)?;
        Ok(reply)
    })
    .map_err(|e| unavailable(e.to_string()))
}

/// Serves the target's `/bench/...` routes.
pub async fn route(
    inbox: &Inbox<DoSql>,
    tables: &TestTables<DoSql>,
    arrivals: &Arrivals,
    req: &mut Request,
    method: &str,
    path: &str,
) -> Result<Response, RelayError> {
    let internal = |e: worker::Error| RelayError::internal(e.to_string());
    match (method, path) {
        ("POST", "/bench/apply") => {
            let body = read_body(req).await?;
            json(&apply(inbox, tables, arrivals, &body)?).map_err(internal)
        }
        ("GET", "/bench/stats") => {
            let store = |e: StoreError| RelayError::internal(e.to_string());
            let mut stats = arrivals.stats().map_err(store)?;
            for w in inbox.watermarks().map_err(store)? {
                stats.relay_applied_rows += w.applied_rows;
                stats.relay_batches += w.batches;
                stats.relay_sql_rows_written += w.sql_rows_written;
            }
            json(&stats).map_err(internal)
        }
        (m, p) => Err(RelayError::new(404, ErrorCode::NoRoute, format!("no route for {m} {p} on a target"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arrivals_are_classified_in_order() {
        let none = HashSet::new();
        assert_eq!(classify(None, &none, &[1, 2, 3]), Tally { first: 3, duplicates: 0, out_of_order: 0 });
        assert_eq!(classify(None, &none, &[3, 1, 2, 3]), Tally { first: 3, duplicates: 1, out_of_order: 2 });
        let seen: HashSet<u64> = [5].into();
        assert_eq!(classify(Some(5), &seen, &[4, 5, 6]), Tally { first: 2, duplicates: 1, out_of_order: 1 });
    }
}
