//! `RelayTarget`: the reference target Durable Object. It applies batches
//! from sources (only through its DO binding: the front door has no route
//! to `/apply`) and serves its keys and watermarks.
//!
//! | method and path | reply |
//! | --- | --- |
//! | `POST /apply` | [`ApplyReply`](crate::core::ApplyReply); 4xx permanent, 503 transient |
//! | `GET /keys?prefix=&after=&limit=` | `{"keys":[{"key","value"}..],"next":key?}` |
//! | `GET /watermarks` | `{"watermarks":[{"source","watermark",..}..]}` |
//! | `DELETE /watermarks/{source}` | forgets that source's watermark (operator act) |
//! | `GET /status` | rows applied, batches, SQLite rows written per applied row |
//! | `POST /faults` | test-only: `{"reject":bool,"permanent":bool,"delay_ms":n}` (503, 422 when permanent; delay before applying) |
//! | `GET /log?source=` | test-only: applied sequences in order |
//! | `/bench/...` | benchmark builds only (feature `bench`, `RELAY_BENCH=on`): see `super::bench::target` |

#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]
#![deny(clippy::unreachable, clippy::todo, clippy::unimplemented)]

use std::cell::OnceCell;

use serde::Deserialize;
use worker::{durable_object, wasm_bindgen, DurableObject, Env, Request, Response, State};

use super::config::RelayConfig;
use super::http::{json, parse_json, read_body, respond, HttpError};
use super::inbox::{ApplyFailure, ApplyLog, Inbox, KeysPage, TargetFaults};
use super::routes::TargetOp;
use super::storage::Db;
use crate::core::NoHook;

/// The reference target Durable Object.
#[durable_object]
pub struct RelayTarget {
    env: Env,
    db: Db,
    inbox: OnceCell<Inbox>,
    #[cfg(feature = "bench")]
    bench: OnceCell<super::bench::target::Arrivals>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FaultsBody {
    #[serde(default)]
    reject: bool,
    /// With `reject`: refuse as a permanent error (422), not a transient one.
    #[serde(default)]
    permanent: bool,
    /// Wait this long before applying, at most [`MAX_FAULT_DELAY_MS`].
    #[serde(default)]
    delay_ms: u64,
}

/// Longest injectable apply delay.
const MAX_FAULT_DELAY_MS: u64 = 60_000;

impl DurableObject for RelayTarget {
    fn new(state: State, env: Env) -> Self {
        let (_, db) = Db::from_state(state);
        RelayTarget {
            env,
            db,
            inbox: OnceCell::new(),
            #[cfg(feature = "bench")]
            bench: OnceCell::new(),
        }
    }

    async fn fetch(&self, mut req: Request) -> worker::Result<Response> {
        respond(self.route(&mut req).await)
    }
}

impl RelayTarget {
    fn inbox(&self) -> Result<&Inbox, HttpError> {
        if let Some(i) = self.inbox.get() {
            return Ok(i);
        }
        let inbox = Inbox::open(self.db.clone()).map_err(|e| HttpError::internal(e.to_string()))?;
        Ok(self.inbox.get_or_init(|| inbox))
    }

    fn faults_enabled(&self) -> Result<bool, HttpError> {
        RelayConfig::from_vars(|k| self.env.var(k).ok().map(|v| v.to_string()))
            .map(|c| c.faults)
            .map_err(|e| HttpError::new(500, "bad_configuration", e.to_string()))
    }

    async fn route(&self, req: &mut Request) -> Result<Response, HttpError> {
        let url = req.url().map_err(|e| HttpError::bad_request("bad_url", e.to_string()))?;
        let method = req.method().to_string();
        let inbox = self.inbox()?;
        let internal = |e: worker::Error| HttpError::internal(e.to_string());
        #[cfg(feature = "bench")]
        if url.path().starts_with(super::bench::TARGET_PREFIX) {
            super::bench::flag::require(&self.env)?;
            let arrivals = super::bench::target::arrivals(&self.bench, inbox.db())?;
            return super::bench::target::route(inbox, arrivals, req, &method, url.path()).await;
        }
        let op = TargetOp::from_url(&method, &url)?;
        if matches!(op, TargetOp::Faults | TargetOp::Log(_)) && !self.faults_enabled()? {
            return Err(HttpError::new(403, "faults_disabled", "test faults are off (RELAY_TEST_FAULTS)"));
        }
        let store = |e: super::storage::StoreError| HttpError::internal(e.to_string());
        match op {
            TargetOp::Apply => self.apply(req, inbox).await,
            TargetOp::Keys { prefix, after, limit } => {
                let keys = inbox.keys(&prefix, &after, limit).map_err(store)?;
                let next = (keys.len() as u32 == limit).then(|| keys.last().map(|k| k.key.clone())).flatten();
                json(&KeysPage { keys, next }).map_err(internal)
            }
            TargetOp::Status => {
                let (rows, batches, written) = inbox.totals().map_err(store)?;
                let per_row = (rows > 0).then(|| written as f64 / rows as f64);
                json(&serde_json::json!({
                    "applied_rows": rows, "batches": batches, "sql_rows_written": written,
                    "sql_rows_written_per_applied_row": per_row,
                    "sources": inbox.watermarks().map_err(store)?.len(),
                }))
                .map_err(internal)
            }
            TargetOp::ForgetWatermark(source) => {
                let forgot = inbox.forget_watermark(source.as_str()).map_err(store)?;
                worker::console_log!(
                    "{}",
                    serde_json::json!({"event": "relay_operator", "action": "forget_watermark",
                        "source": source.as_str(), "existed": forgot})
                );
                json(&serde_json::json!({"source": source, "forgotten": forgot})).map_err(internal)
            }
            TargetOp::Watermarks => {
                let w = inbox.watermarks().map_err(store)?;
                json(&serde_json::json!({"watermarks": w})).map_err(internal)
            }
            TargetOp::Faults => {
                let body: FaultsBody = parse_json(&read_body(req).await?)?;
                let reject = match (body.reject, body.permanent) {
                    (false, _) => 0,
                    (true, false) => 1,
                    (true, true) => 2,
                };
                if body.delay_ms > MAX_FAULT_DELAY_MS {
                    return Err(HttpError::bad_request(
                        "invalid_delay",
                        format!("delay_ms above {MAX_FAULT_DELAY_MS}"),
                    ));
                }
                let faults = TargetFaults { reject, delay_ms: body.delay_ms };
                inbox.set_faults(faults).map_err(store)?;
                json(&serde_json::json!({"ok": true})).map_err(internal)
            }
            TargetOp::Log(source) => {
                let seqs = inbox.applied_log(source.as_str()).map_err(store)?;
                json(&serde_json::json!({"source": source, "seqs": seqs})).map_err(internal)
            }
        }
    }

    /// `POST /apply`: a source's batch.
    async fn apply(&self, req: &mut Request, inbox: &Inbox) -> Result<Response, HttpError> {
        let internal = |e: worker::Error| HttpError::internal(e.to_string());
        let body = read_body(req).await?;
        if self.faults_enabled()? {
            let delay = inbox.faults().map_err(|e| HttpError::internal(e.to_string()))?.delay_ms;
            if delay > 0 {
                worker::Delay::from(std::time::Duration::from_millis(delay)).await;
            }
        }
        #[cfg(feature = "bench")]
        if super::bench::flag::enabled(&self.env)? {
            // Benchmark runs log every applied row with its arrival time.
            let arrivals = super::bench::target::arrivals(&self.bench, inbox.db())?;
            let hook = super::bench::target::ArrivalHook::new(arrivals);
            let reply = inbox.apply_body(&body, &hook).map_err(ApplyFailure::http)?;
            return json(&reply).map_err(internal);
        }
        let result = if self.faults_enabled()? {
            inbox.apply_body(&body, &ApplyLog { db: inbox.db().clone() })
        } else {
            inbox.apply_body(&body, &NoHook)
        };
        let reply = result.map_err(ApplyFailure::http)?;
        json(&reply).map_err(internal)
    }
}
