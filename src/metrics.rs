//! One Workers Analytics Engine data point per alarm, when a `RELAY_METRICS`
//! dataset is bound (index: the source; blob1: the source, or for a
//! partition of a partitioned source its logical source, so one `GROUP BY
//! blob1` sums the partitions; blob2: the source object's own name;
//! doubles: fires, subrequests, rows delivered, rows applied, queued rows,
//! queued bytes, parked rows, oldest age ms, lag exceeded, dedup hits, 429s,
//! duration ms).

use durable_relay::store::Sql;
use durable_relay::work::{self, Level};
use durable_relay::{AlarmStore, AlarmSummary, Relay};
use worker::Env;

use crate::METRICS_BINDING;

/// Writes the alarm's data point; returns whether one was written (`false`
/// without the binding, or when the write failed, which is logged).
pub fn write<S: Sql, A: AlarmStore>(env: &Env, relay: &Relay<S, A>, s: &AlarmSummary) -> bool {
    let Ok(dataset) = env.analytics_engine(METRICS_BINDING) else {
        return false;
    };
    let state = relay.outbox().state().ok();
    let pending = relay.outbox().unwritten();
    let (hits, full) = state
        .map_or((0, 0), |st| (st.dedup_hits + pending.dedup_hits, st.rejected_full + pending.rejected_full));
    let logical = logical_name(env, &s.source);
    let point = worker::AnalyticsEngineDataPointBuilder::new()
        .indexes([s.source.as_str()])
        .add_blob(logical.as_str())
        .add_blob(s.source.as_str())
        .doubles([
            f64::from(s.fires),
            f64::from(s.subrequests),
            f64::from(s.rows_delivered),
            f64::from(s.rows_applied),
            s.queued_rows as f64,
            s.queued_bytes as f64,
            s.parked_rows as f64,
            s.oldest_row_age_ms.unwrap_or(0) as f64,
            f64::from(u8::from(s.lag_exceeded)),
            hits as f64,
            full as f64,
            s.duration_ms as f64,
        ])
        .build();
    match dataset.write_data_point(&point) {
        Ok(()) => true,
        Err(e) => {
            let error = e.to_string();
            work::log_json(Level::Warn, &serde_json::json!({"event": "relay_metrics_error", "error": error}));
            false
        }
    }
}

/// The logical source a partition belongs to (`orders` for `orders:2`, when
/// `orders` is partitioned), else the source itself.
fn logical_name(env: &Env, source: &str) -> String {
    let partitioned = durable_relay::core::Name::new(source)
        .ok()
        .zip(crate::config(env).ok())
        .is_some_and(|(name, config)| config.is_partition(&name));
    match source.rsplit_once(':') {
        Some((logical, _)) if partitioned => logical.to_owned(),
        _ => source.to_owned(),
    }
}
