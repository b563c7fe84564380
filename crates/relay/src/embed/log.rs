//! The per-alarm log lines an embedding writes: the `relay_alarm` line
//! with the alarm's figures (and any of your own; `relay_delivery` for an
//! in-turn delivery, which an enqueue's invocation ran), and the warnings
//! for a parked target or a row past the lag bound.

#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]
#![deny(clippy::unreachable, clippy::todo, clippy::unimplemented)]

use crate::config::AlarmLog;
use crate::core::RELAY_LAG_BOUND_MS;
use crate::driver::AlarmSummary;
use crate::work::{self, Level};

/// The per-alarm log lines: one `relay_alarm` with the figures, one
/// `relay_target_parked` per target parked, and `relay_lag_exceeded` when a
/// row older than the lag bound was seen.
pub fn log_alarm(summary: &AlarmSummary) {
    log_alarm_with(summary, serde_json::Map::new());
}

/// [`log_alarm`], with figures of your own (`figures`) added to the
/// `relay_alarm` line's `alarm` object beside the relay's.
pub fn log_alarm_with(summary: &AlarmSummary, figures: serde_json::Map<String, serde_json::Value>) {
    log_alarm_as(summary, figures, AlarmLog::Every);
}

/// Whether an alarm is worth its `relay_alarm` line under `mode` (see
/// [`AlarmLog`]).
pub fn alarm_is_logged(summary: &AlarmSummary, mode: AlarmLog) -> bool {
    let failing = summary.subrequests > 0 && summary.rows_delivered == 0;
    mode == AlarmLog::Every
        || !summary.parked.is_empty()
        || summary.conflicts > 0
        || summary.lag_exceeded
        || summary.traced_rows > 0
        || failing
}

/// [`log_alarm_with`] under `mode` (`RELAY_ALARM_LOG`): the `relay_alarm`
/// line only when [`alarm_is_logged`]; the warnings always.
pub fn log_alarm_as(
    summary: &AlarmSummary,
    figures: serde_json::Map<String, serde_json::Value>,
    mode: AlarmLog,
) {
    if !alarm_is_logged(summary, mode) {
        log_warnings(summary);
        return;
    }
    let event = if summary.in_turn { "relay_delivery" } else { "relay_alarm" };
    if figures.is_empty() {
        work::log_json(Level::Info, &serde_json::json!({"event": event, "alarm": summary}));
    } else {
        let mut alarm = serde_json::to_value(summary).unwrap_or(serde_json::Value::Null);
        if let Some(fields) = alarm.as_object_mut() {
            fields.extend(figures);
        }
        work::log_json(Level::Info, &serde_json::json!({"event": event, "alarm": alarm}));
    }
    log_warnings(summary);
}

/// The warnings of an alarm: a target it parked, a row past the lag bound.
fn log_warnings(summary: &AlarmSummary) {
    for (target, rows, reason) in &summary.parked {
        work::log_json(
            Level::Warn,
            &serde_json::json!({"event": "relay_target_parked", "source": summary.source, "target": target,
                "rows": rows, "reason": reason}),
        );
    }
    if summary.lag_exceeded {
        work::log_json(
            Level::Warn,
            &serde_json::json!({"event": "relay_lag_exceeded", "source": summary.source, "bound_ms": RELAY_LAG_BOUND_MS}),
        );
    }
}
