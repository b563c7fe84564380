//! A target object's `fetch` protocol, served from an [`Inbox`]: the
//! reference `RelayTarget` serves it, and so can an embedder's own target
//! object (with its own [`RelayHook`]).
//!
//! | method and path | reply |
//! | --- | --- |
//! | `POST /apply` | [`ApplyReply`]; 422 permanent, 503 transient (sources only) |
//! | `GET /keys?prefix=&after=&limit=` | a [`KeysPage`](crate::KeysPage): values as JSON, verbatim |
//! | `GET /watermarks?after=&limit=` | a [`WatermarkPage`](crate::WatermarkPage): `{"watermarks":[{"source","watermark",..}..],"next"}` |
//! | `DELETE /watermarks/{source}` | forgets that source's watermark (an operator act) |
//! | `GET /status` | an [`InboxTotals`](crate::InboxTotals) plus `sql_rows_written_per_applied_row` |
//!
//! An apply whose new rows carry trace context logs one `relay_apply` line
//! naming their `traceparent`s.

#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]
#![deny(clippy::unreachable, clippy::todo, clippy::unimplemented)]

use crate::core::ErrorCode;
use crate::work::{self, Level};
use worker::{Request, Response};

use crate::core::{decode_request, ApplyReply, ApplyRequest, RelayHook, MAX_TRACES_PER_LOG};
use crate::http::{json, read_body, RelayError};
use crate::protocol::wire::{Forgotten, TargetStatus};
use crate::routes::TargetOp;
use crate::store::inbox::{ApplyFailure, Inbox};
use crate::store::Sql;

/// Parses and serves one request of the target's protocol with `hook`.
pub async fn handle<S: Sql>(
    inbox: &Inbox<S>,
    req: &mut Request,
    hook: &impl RelayHook,
) -> Result<Response, RelayError> {
    let url = req.url().map_err(|e| RelayError::bad_request(ErrorCode::BadUrl, e.to_string()))?;
    let op = TargetOp::from_url(req.method().as_ref(), &url)?;
    serve(inbox, req, op, hook).await
}

/// Serves one parsed operation.
pub async fn serve<S: Sql>(
    inbox: &Inbox<S>,
    req: &mut Request,
    op: TargetOp,
    hook: &impl RelayHook,
) -> Result<Response, RelayError> {
    let internal = |e: worker::Error| RelayError::internal(e.to_string());
    match op {
        TargetOp::Apply => {
            let body = read_body(req).await?;
            let request = decode_request(&body).map_err(ApplyFailure::Rejected)?;
            let reply = inbox.apply(&request, hook)?;
            crate::work::applied(reply.applied);
            log_traced(&request, &reply);
            json(&reply).map_err(internal)
        }
        TargetOp::Keys { prefix, after, limit } => {
            json(&inbox.keys(&prefix, &after, limit)?).map_err(internal)
        }
        TargetOp::Status => {
            let t = inbox.totals()?;
            let per_row = (t.applied_rows > 0).then(|| t.sql_rows_written as f64 / t.applied_rows as f64);
            json(&TargetStatus {
                applied_rows: t.applied_rows,
                batches: t.batches,
                sql_rows_written: t.sql_rows_written,
                sql_rows_written_per_applied_row: per_row,
                sources: t.sources,
            })
            .map_err(internal)
        }
        TargetOp::Watermarks { after, limit } => {
            let after = after.as_ref().map(|a| (&a.source, a.source_id.as_ref()));
            json(&inbox.watermarks_page(after, limit)?).map_err(internal)
        }
        TargetOp::ForgetWatermark(source) => {
            let forgotten = inbox.forget_watermark(source.as_str())?;
            work::log_json(
                Level::Info,
                &serde_json::json!({"event": "relay_operator", "action": "forget_watermark",
                    "source": source.as_str(), "existed": forgotten}),
            );
            json(&Forgotten { source, forgotten }).map_err(internal)
        }
    }
}

/// The apply log line, for calls whose applied rows carry trace context:
/// `{"event":"relay_apply","source","rows","first_seq","last_seq","at_ms","traces"}`.
/// Duplicates are a prefix of a batch, so the applied rows are its last
/// `reply.applied`. Untraced calls log nothing (they are the common case).
fn log_traced(request: &ApplyRequest, reply: &ApplyReply) {
    let applied = request.rows.len().saturating_sub(reply.applied as usize);
    let rows = request.rows.get(applied..).unwrap_or_default();
    let mut traces: Vec<&str> = Vec::new();
    for t in rows.iter().filter_map(|r| r.effects.trace.as_ref()) {
        if traces.len() < MAX_TRACES_PER_LOG as usize && !traces.contains(&t.as_str()) {
            traces.push(t.as_str());
        }
    }
    if traces.is_empty() {
        return;
    }
    work::log_json(
        Level::Info,
        &serde_json::json!({"event": "relay_apply", "source": request.source.as_str(), "rows": rows.len(),
            "first_seq": rows.first().map(|r| r.seq), "last_seq": rows.last().map(|r| r.seq), "at_ms": super::now_ms(), "traces": traces}),
    );
}
