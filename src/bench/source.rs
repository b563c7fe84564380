//! `BenchSource`: the source side of the two systems the relay is compared
//! with. It allocates sequences the way an outbox does (one SQLite row
//! written per enqueue request) and then, instead of storing rows:
//!
//! - `POST /direct`: calls every target synchronously before it answers
//!   (direct writes, the floor). Rows are grouped per target in request
//!   order, one call per target, distinct targets concurrently (at most
//!   [`BENCH_MAX_IN_FLIGHT`]). A failing target is retried after
//!   [`DIRECT_RETRY_MS`] until it answers, at most [`DIRECT_MAX_ATTEMPTS`]
//!   times: a synchronous writer cannot finish its write any other way.
//! - `POST /queue`: sends each row as one queue message, in send batches of
//!   at most [`QUEUE_SEND_BATCH_MESSAGES`] messages and
//!   [`QUEUE_SEND_BATCH_BYTES`] bytes (the Queues limits).
//! - `GET /status`: sequences, SQLite rows written, calls and sends.
//!
//! Both take the relay's enqueue body (`{"rows":[{"target","puts","deletes"}]}`)
//! and validate it with the relay's own enqueue planning.
//!
//! Schema (component `bench_source`, version 1):
//!
//! ```sql
//! bench_source (id = 1, os, sql_rows_written)   -- the allocation, counted
//! bench_source_counters (id = 1, requests, rows, target_calls, failed_calls, queue_sends)
//! ```

use durable_relay::core::ErrorCode;
use std::cell::OnceCell;
use std::time::Duration;

use futures::stream::{self, StreamExt};
use serde::Deserialize;
use worker::{
    durable_object, wasm_bindgen, BatchMessageBuilder, DurableObject, Env, MessageBuilder, Request, Response,
    State,
};

use super::wire::{call_apply, encode_apply, QueueRow};
use super::{flag, BENCH_MAX_IN_FLIGHT, BENCH_QUEUE_BINDING};
use crate::TARGET_BINDING;
use durable_relay::core::{plan_enqueue, Capacity, StoredRow};
use durable_relay::http::{json, read_body, respond, RelayError};
use durable_relay::store::{int, schema, Sql, StoreError};
use durable_relay::DoSql;

/// Wait before a direct writer retries a failed target call.
pub const DIRECT_RETRY_MS: u64 = 1_000;
/// Attempts a direct writer makes per target call before it gives up
/// (with [`DIRECT_RETRY_MS`], ten minutes).
pub const DIRECT_MAX_ATTEMPTS: u32 = 600;
/// Messages per queue send batch (the Queues limit).
pub const QUEUE_SEND_BATCH_MESSAGES: usize = 100;
/// Bytes of message bodies per queue send batch, under the Queues limit of
/// 256 KB with room for per-message overhead.
pub const QUEUE_SEND_BATCH_BYTES: usize = 200_000;
/// Largest row a queue message may carry (the Queues limit is 128 KB).
pub const QUEUE_MAX_MESSAGE_BYTES: usize = 120_000;

const COMPONENT: &str = "bench_source";

const MIGRATIONS: &[&[&str]] = &[&[
    "CREATE TABLE bench_source (id INTEGER PRIMARY KEY CHECK (id = 1), \
     os INTEGER NOT NULL, sql_rows_written INTEGER NOT NULL)",
    "CREATE TABLE bench_source_counters (id INTEGER PRIMARY KEY CHECK (id = 1), \
     requests INTEGER NOT NULL, rows INTEGER NOT NULL, target_calls INTEGER NOT NULL, \
     failed_calls INTEGER NOT NULL, queue_sends INTEGER NOT NULL)",
]];

/// The comparison systems' source Durable Object.
#[durable_object]
pub struct BenchSource {
    state: State,
    env: Env,
    db: DoSql,
    ready: OnceCell<()>,
}

/// A bench source's answer to an enqueue: what the relay's `Enqueued`
/// says, so the driver reads every system's reply the same way.
#[derive(serde::Serialize)]
struct Accepted {
    /// The sequences allocated, in request order (no holes at a bench source).
    seqs: Vec<u64>,
    /// When they were allocated, ms since the epoch: the start of the
    /// end-to-end latency the benchmark measures.
    at_ms: u64,
    /// Target calls made (direct writes).
    target_calls: u64,
    /// Target calls that failed and were retried (direct writes).
    failed_calls: u64,
    /// Queue send batches (Queues).
    queue_sends: u64,
}

impl Accepted {
    fn new(rows: &[StoredRow], work: &Work) -> Accepted {
        Accepted {
            seqs: rows.iter().map(|r| r.seq).collect(),
            at_ms: rows.first().map_or(0, |r| r.at_ms),
            target_calls: work.target_calls,
            failed_calls: work.failed_calls,
            queue_sends: work.queue_sends,
        }
    }
}

/// What one request did, added to the counters.
#[derive(Default)]
struct Work {
    rows: u64,
    target_calls: u64,
    failed_calls: u64,
    queue_sends: u64,
}

fn now_ms() -> u64 {
    worker::Date::now().as_millis()
}

fn store(e: StoreError) -> RelayError {
    RelayError::internal(e.to_string())
}

impl DurableObject for BenchSource {
    fn new(state: State, env: Env) -> Self {
        let db = DoSql::new(&state);
        BenchSource { state, env, db, ready: OnceCell::new() }
    }

    async fn fetch(&self, mut req: Request) -> worker::Result<Response> {
        respond(self.route(&mut req).await)
    }
}

impl BenchSource {
    fn open(&self) -> Result<(), RelayError> {
        if self.ready.get().is_none() {
            schema::migrate(&self.db, COMPONENT, MIGRATIONS).map_err(store)?;
            let _ = self.ready.set(());
        }
        Ok(())
    }

    fn name(&self) -> Result<String, RelayError> {
        self.state.id().name().ok_or_else(|| {
            RelayError::bad_request(ErrorCode::UnnamedSource, "address the source with idFromName(<name>)")
        })
    }

    async fn route(&self, req: &mut Request) -> Result<Response, RelayError> {
        flag::require(&self.env)?;
        self.open()?;
        let url = req.url().map_err(|e| RelayError::bad_request(ErrorCode::BadUrl, e.to_string()))?;
        let method = req.method().to_string();
        let internal = |e: worker::Error| RelayError::internal(e.to_string());
        match (method.as_str(), url.path()) {
            ("POST", "/direct") => {
                let rows = self.allocate(req).await?;
                let work = self.direct(&rows).await;
                self.count(&work)?;
                json(&Accepted::new(&rows, &work)).map_err(internal)
            }
            ("POST", "/queue") => {
                let rows = self.allocate(req).await?;
                let work = self.enqueue_messages(&rows).await?;
                self.count(&work)?;
                json(&Accepted::new(&rows, &work)).map_err(internal)
            }
            ("GET", "/status") => self.status(),
            (m, p) => Err(RelayError::new(
                404,
                ErrorCode::NoRoute,
                format!("no route for {m} {p} on a bench source"),
            )),
        }
    }

    /// Validates the body and allocates its sequences (one row written).
    async fn allocate(&self, req: &mut Request) -> Result<Vec<StoredRow>, RelayError> {
        let _ = self.name()?;
        let body = durable_relay::core::decode_enqueue(&read_body(req).await?)?;
        #[derive(Deserialize)]
        struct Os {
            os: u64,
        }
        let db = &self.db;
        let plan = db
            .transaction(|| {
                let os: Vec<Os> = db.rows_as("SELECT os FROM bench_source WHERE id = 1", vec![])?;
                let os = os.first().map_or(0, |o| o.os);
                // Nothing waits at a bench source (it keeps no rows), so
                // only the default bounds apply, as at an empty outbox.
                let capacity = Capacity::with_defaults(0, 0);
                let plan = match plan_enqueue(os, now_ms(), &body.rows, &capacity) {
                    Ok(p) => p,
                    Err(e) => return Ok(Err(e)),
                };
                db.run(
                    "INSERT INTO bench_source (id, os, sql_rows_written) VALUES (1, ?, 1) \
                     ON CONFLICT(id) DO UPDATE SET os = excluded.os, \
                     sql_rows_written = sql_rows_written + 1",
                    vec![int(plan.os)],
                )?;
                Ok(Ok(plan))
            })
            .map_err(store)?
            .map_err(|e| RelayError::new(400, e.code(), e.to_string()))?;
        Ok(plan.rows)
    }

    /// Calls each target once with its rows; retries failed targets.
    async fn direct(&self, rows: &[StoredRow]) -> Work {
        let mut work = Work { rows: rows.len() as u64, ..Work::default() };
        let Ok(namespace) = self.env.durable_object(TARGET_BINDING) else {
            return work;
        };
        let Ok(source) = self.name() else {
            return work;
        };
        let mut groups: Vec<(&str, Vec<&StoredRow>)> = Vec::new();
        for row in rows {
            match groups.iter_mut().find(|(t, _)| *t == row.target) {
                Some((_, g)) => g.push(row),
                None => groups.push((row.target.as_str(), vec![row])),
            }
        }
        let mut pending: Vec<usize> = (0..groups.len()).collect();
        for attempt in 1..=DIRECT_MAX_ATTEMPTS {
            let calls = pending.iter().map(|&g| {
                let (target, rows) = &groups[g];
                let body = encode_apply(rows.iter().map(|r| (source.as_str(), r.seq, r.body.as_str())));
                let namespace = &namespace;
                async move { (g, call_apply(namespace, target, body).await) }
            });
            let outcomes: Vec<_> =
                stream::iter(calls).buffer_unordered(BENCH_MAX_IN_FLIGHT as usize).collect().await;
            work.target_calls += outcomes.len() as u64;
            pending = outcomes.into_iter().filter(|(_, r)| r.is_err()).map(|(g, _)| g).collect();
            work.failed_calls += pending.len() as u64;
            if pending.is_empty() || attempt == DIRECT_MAX_ATTEMPTS {
                break;
            }
            worker::Delay::from(Duration::from_millis(DIRECT_RETRY_MS)).await;
        }
        work
    }

    /// Sends each row as one queue message.
    async fn enqueue_messages(&self, rows: &[StoredRow]) -> Result<Work, RelayError> {
        let internal = |e: worker::Error| RelayError::internal(e.to_string());
        let queue = self.env.queue(BENCH_QUEUE_BINDING).map_err(internal)?;
        let source = self.name()?;
        let mut work = Work { rows: rows.len() as u64, ..Work::default() };
        let mut batch: Vec<QueueRow> = Vec::new();
        let mut bytes = 0;
        for (i, row) in rows.iter().enumerate() {
            if row.body.len() > QUEUE_MAX_MESSAGE_BYTES {
                return Err(RelayError::bad_request(
                    ErrorCode::RowTooLarge,
                    format!("rows[{i}] is over the {QUEUE_MAX_MESSAGE_BYTES}-byte queue message limit"),
                ));
            }
        }
        for row in rows {
            let size = row.body.len() + row.target.len() + source.len() + 64;
            if batch.len() == QUEUE_SEND_BATCH_MESSAGES || bytes + size > QUEUE_SEND_BATCH_BYTES {
                send(&queue, std::mem::take(&mut batch)).await?;
                work.queue_sends += 1;
                bytes = 0;
            }
            bytes += size;
            batch.push(QueueRow {
                source: source.clone(),
                seq: row.seq,
                target: row.target.clone(),
                effects: row.body.clone(),
            });
        }
        if !batch.is_empty() {
            send(&queue, batch).await?;
            work.queue_sends += 1;
        }
        Ok(work)
    }

    /// Adds a request's work to the counters (measurement, not counted).
    fn count(&self, work: &Work) -> Result<(), RelayError> {
        self.db
            .run(
                "INSERT INTO bench_source_counters (id, requests, rows, target_calls, failed_calls, queue_sends) \
                 VALUES (1, 1, ?, ?, ?, ?) ON CONFLICT(id) DO UPDATE SET requests = requests + 1, \
                 rows = rows + excluded.rows, target_calls = target_calls + excluded.target_calls, \
                 failed_calls = failed_calls + excluded.failed_calls, \
                 queue_sends = queue_sends + excluded.queue_sends",
                vec![
                    int(work.rows),
                    int(work.target_calls),
                    int(work.failed_calls),
                    int(work.queue_sends),
                ],
            )
            .map_err(store)?;
        Ok(())
    }

    fn status(&self) -> Result<Response, RelayError> {
        #[derive(Deserialize, serde::Serialize, Default)]
        struct Allocation {
            os: u64,
            sql_rows_written: u64,
        }
        #[derive(Deserialize, serde::Serialize, Default)]
        struct Counters {
            requests: u64,
            rows: u64,
            target_calls: u64,
            failed_calls: u64,
            queue_sends: u64,
        }
        let allocation: Vec<Allocation> = self
            .db
            .rows_as("SELECT os, sql_rows_written FROM bench_source WHERE id = 1", vec![])
            .map_err(store)?;
        let counters: Vec<Counters> = self
            .db
            .rows_as(
                "SELECT requests, rows, target_calls, failed_calls, queue_sends \
                 FROM bench_source_counters WHERE id = 1",
                vec![],
            )
            .map_err(store)?;
        json(&serde_json::json!({
            "source": self.name()?,
            "allocation": allocation.into_iter().next().unwrap_or_default(),
            "counters": counters.into_iter().next().unwrap_or_default(),
        }))
        .map_err(|e| RelayError::internal(e.to_string()))
    }
}

async fn send(queue: &worker::Queue, rows: Vec<QueueRow>) -> Result<(), RelayError> {
    let messages: Vec<_> = rows.into_iter().map(|r| MessageBuilder::new(r).build()).collect();
    queue
        .send_batch(BatchMessageBuilder::new().messages(messages).build())
        .await
        .map_err(|e| RelayError::new(503, ErrorCode::QueueSendFailed, e.to_string()))
}
