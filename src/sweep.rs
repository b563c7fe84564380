//! The scheduled sweep: no source keeps rows with no alarm to deliver them.
//!
//! The platform gives up on an alarm after its retries fail (six, with
//! back-off), and a source that then gets no traffic would keep its rows
//! forever: only an enqueue or a status read sets the alarm again. Each run
//! of the Worker's Cron Trigger takes the next page of the source directory
//! ([`crate::directory`] keeps the cursor) and asks each source on it to
//! re-arm (`POST /rearm`, [`durable_relay::Relay::rearm`]), which reads the
//! state row and the alarm and sets it only when rows are queued and none
//! is set. A run costs one directory call (the cursor row and one page of
//! names read) plus one call per source on the page, so it fits the Free
//! plan's 50 subrequests; a round over N sources takes
//! `ceil(N / SWEEP_SOURCES_PER_RUN)` runs.

use durable_relay::work::{self, Level};
use futures::future::join_all;
use serde::Serialize;
use worker::{Env, ObjectNamespace};

use durable_relay::durable::StubCall;
use durable_relay::http::RelayError;
use durable_relay::routes::SourceOp;
use durable_relay::Rearmed;

use crate::directory::SweepPage;
use crate::routes::DirectoryOp;
use crate::SOURCE_BINDING;

/// Sources one run checks: with the directory call, 33 subrequests, inside
/// the Free plan's 50 per invocation.
pub const SWEEP_SOURCES_PER_RUN: u32 = 32;
/// Source calls one run keeps in flight: Workers allow six simultaneous
/// outgoing connections per invocation.
pub const SWEEP_IN_FLIGHT: usize = 6;

/// What one run did: logged as one JSON line (`"event":"relay_sweep"`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct SweepReport {
    /// Sources checked.
    pub sources: u32,
    /// Sources whose alarm it set again.
    pub rearmed: u32,
    /// Sources whose check failed (the next round checks them again).
    pub failed: u32,
    /// Rows queued at the sources it re-armed.
    pub rows_rearmed: u64,
    /// Whether this run ended a round over the directory.
    pub round_complete: bool,
    /// Rows the directory read for the page.
    pub directory_rows_read: u64,
    /// Rows the sources read, when they report it (test builds'
    /// `x-relay-rows-read`).
    pub source_rows_read: Option<u64>,
}

/// Runs one sweep: the next page of the directory, each source asked to
/// re-arm. Without a directory bound there is nothing to sweep.
pub async fn run(env: &Env) -> Result<SweepReport, RelayError> {
    let internal = |e: worker::Error| RelayError::internal(e.to_string());
    let op = DirectoryOp::Sweep { limit: SWEEP_SOURCES_PER_RUN };
    let Some(mut resp) = crate::directory::call(env, &op).await? else {
        return Ok(SweepReport { round_complete: true, ..SweepReport::default() });
    };
    if resp.status_code() != 200 {
        return Err(RelayError::internal(format!("the directory answered {}", resp.status_code())));
    }
    let page: SweepPage = resp.json().await.map_err(internal)?;
    let namespace = env.durable_object(SOURCE_BINDING).map_err(internal)?;
    let mut report = SweepReport {
        round_complete: page.round_complete,
        directory_rows_read: page.rows_read,
        ..SweepReport::default()
    };
    for chunk in page.sources.chunks(SWEEP_IN_FLIGHT) {
        for checked in join_all(chunk.iter().map(|name| rearm(&namespace, name))).await {
            report.add(checked);
        }
    }
    Ok(report)
}

/// One source's answer: what it did and the rows it read, if it says.
type Checked = Result<(Rearmed, Option<u64>), String>;

/// Asks the source `name` to re-arm.
async fn rearm(namespace: &ObjectNamespace, name: &str) -> Checked {
    let mut resp =
        StubCall::source(&SourceOp::Rearm).send_to(namespace, name).await.map_err(|e| e.to_string())?;
    if resp.status_code() != 200 {
        return Err(format!("{name} answered {}", resp.status_code()));
    }
    let read = resp.headers().get("x-relay-rows-read").ok().flatten().and_then(|v| v.parse().ok());
    let rearmed: Rearmed = resp.json().await.map_err(|e| e.to_string())?;
    Ok((rearmed, read))
}

impl SweepReport {
    /// Counts one source's answer.
    fn add(&mut self, checked: Checked) {
        self.sources += 1;
        match checked {
            Ok((r, read)) => {
                if r.rearmed {
                    self.rearmed += 1;
                    self.rows_rearmed += r.queued_rows;
                }
                if let Some(read) = read {
                    self.source_rows_read = Some(self.source_rows_read.unwrap_or(0) + read);
                }
            }
            Err(e) => {
                self.failed += 1;
                work::log_json(Level::Warn, &serde_json::json!({"event": "relay_sweep_error", "error": e}));
            }
        }
    }
}
