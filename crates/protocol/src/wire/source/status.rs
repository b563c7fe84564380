//! A source's status (`GET /status`'s reply) and the settings it reports:
//! occupancy against the backpressure bounds, and the alarm limits and
//! operating settings the source runs with. The settings are the storage
//! crate's inputs too (the driver runs under [`AlarmOptions`], the outbox
//! under [`OutboxSettings`]); they are defined here, as plain data, because
//! the status reply carries them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

#[cfg(doc)]
use crate::core::{projected_for_day, MAX_IN_FLIGHT, WORKER_FREE_ROWS_WRITTEN_PER_DAY};
use crate::core::{
    Name, RelayBudget, RelayPolicy, ScanState, DEFAULT_DEDUP_HORIZON_MS, DEFAULT_DISCARD_HORIZON_MS,
    DEFAULT_MAX_QUEUED_BYTES, DEFAULT_MAX_QUEUED_ROWS,
};

/// Occupancy against the backpressure bounds.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct CapacityReport {
    /// Rows waiting (queued plus parked).
    pub rows: u64,
    /// Body bytes waiting.
    pub bytes: u64,
    /// Bound on rows.
    pub max_rows: u64,
    /// Bound on bytes.
    pub max_bytes: u64,
    /// The larger of the two ratios, in percent.
    pub percent_full: f64,
}

/// What a status read reports (also the wire form of `GET /status`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SourceStatus {
    /// The source.
    pub source: String,
    /// The source object's id: with the name, what its targets key its
    /// watermark by (`GET .../watermarks` lists both). Absent from a relay
    /// older than ids.
    #[serde(default)]
    pub source_id: Option<String>,
    /// Last allocated sequence (the engine's `os`; pre-release builds
    /// named the field `os`, which is still read).
    #[serde(alias = "os")]
    pub last_seq: u64,
    /// Rows in the outbox.
    pub queued_rows: u64,
    /// Body bytes in the outbox.
    pub queued_bytes: u64,
    /// Rows parked (not discarded).
    pub parked_rows: u64,
    /// Body bytes parked.
    pub parked_bytes: u64,
    /// Rows ever enqueued.
    pub enqueued_rows: u64,
    /// Rows ever delivered.
    pub delivered_rows: u64,
    /// Alarms, fires, target calls (subrequests) and lost checkpoints.
    pub alarms: u64,
    /// Fires run.
    pub fires: u64,
    /// Target calls made; each is one subrequest.
    pub subrequests: u64,
    /// Checkpoints that lost their guard.
    pub conflicts: u64,
    /// Keyed enqueues answered as duplicates.
    pub dedup_hits: u64,
    /// Enqueues refused as full.
    pub rejected_full: u64,
    /// Fires that saw a row older than the lag bound.
    pub lag_breaches: u64,
    /// SQLite rows written by the relay, and per delivered row.
    pub sql_rows_written: u64,
    /// SQLite rows this source wrote in the current UTC day
    /// (`rows_written_day`), counts not yet written included. The Free
    /// allowance is the account's, shared by every object.
    #[serde(default)]
    pub rows_written_today: u64,
    /// The UTC date `rows_written_today` counts (`YYYY-MM-DD`).
    #[serde(default)]
    pub rows_written_day: String,
    /// What the day's rate so far projects for the whole UTC day (see
    /// [`projected_for_day`]).
    #[serde(default)]
    pub rows_written_projected_today: u64,
    /// The Workers Free allowance the projection compares with
    /// ([`WORKER_FREE_ROWS_WRITTEN_PER_DAY`]),
    /// per account.
    #[serde(default)]
    pub rows_written_free_limit: u64,
    /// `sql_rows_written / delivered_rows`, once anything was delivered.
    pub sql_rows_written_per_delivered_row: Option<f64>,
    /// The scan cycle's persisted state (the engine's `rs`, the field's
    /// name in pre-release builds), `None` when absent or corrupt.
    #[serde(alias = "rs")]
    pub scan_state: Option<ScanState>,
    /// Whether the stored scan state failed to decode (`rs_corrupt` in
    /// pre-release builds).
    #[serde(alias = "rs_corrupt")]
    pub scan_state_corrupt: bool,
    /// Failing targets whose rows are passed over now: their retry is not
    /// due yet (see `TargetReport::retry_at_ms`), by name; among the
    /// failing targets listed.
    pub blocked_targets: Vec<Name>,
    /// Parked targets and their parked rows: the first
    /// [`STATUS_TARGETS`](crate::core::STATUS_TARGETS) by name.
    pub parked_targets: BTreeMap<String, u64>,
    /// Failing (not parked) targets and their consecutive failed cycles:
    /// the first [`STATUS_TARGETS`](crate::core::STATUS_TARGETS) by name.
    pub failing_targets: BTreeMap<String, u32>,
    /// Whether more parked or failing targets exist than the two lists
    /// name: page them all with `GET /parked`.
    #[serde(default)]
    pub targets_truncated: bool,
    /// Age of the oldest owed (queued or parked) row, ms.
    pub oldest_row_age_ms: Option<u64>,
    /// Whether that row is past the lag bound.
    pub lag_exceeded: bool,
    /// The commit-time lower bound of the owed rows.
    pub relay_watermark: u64,
    /// Occupancy against the backpressure bounds.
    pub capacity: CapacityReport,
    /// Dedup records remembered, counted up to
    /// [`STATUS_COUNT_MAX`](crate::core::STATUS_COUNT_MAX) (which then
    /// means "at least").
    pub dedup_records: u64,
    /// Discarded rows still kept, counted up to
    /// [`STATUS_COUNT_MAX`](crate::core::STATUS_COUNT_MAX).
    pub discarded_rows: u64,
    /// When expired records were last pruned (0: never).
    pub last_prune_ms: u64,
    /// The last alarm's figures.
    pub last_alarm: Option<serde_json::Value>,
    /// The stored alarm after this read, ms since the epoch.
    pub alarm_at_ms: Option<u64>,
    /// Whether this read re-armed a dropped alarm, or one moved later than
    /// the relay and its host need.
    pub rearmed: bool,
    /// The alarm limits and operating settings in force.
    pub config: SourceConfig,
}

/// A source's configuration: its alarm limits and operating settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceConfig {
    /// Fires, targets, calls, rows, and concurrent calls per alarm.
    pub alarm: AlarmOptions,
    /// Parking, backpressure and retention.
    pub settings: OutboxSettings,
    /// How long rows that arrive while the source is delivering wait to
    /// share calls, ms (0: never wait). A source that was idle delivers a
    /// lone row at once either way. At most
    /// [`MAX_COALESCE_MS`](crate::core::MAX_COALESCE_MS).
    #[serde(default)]
    pub coalesce_ms: u64,
    /// Whether an enqueue starts delivering its rows in its own invocation,
    /// after its reply (see `Relay::deliver`), instead of waiting for an
    /// alarm. The alarm stays armed as the safety net, but
    /// [`IN_TURN_ALARM_GRACE_MS`](crate::core::IN_TURN_ALARM_GRACE_MS) later
    /// (kept that close while the delivery runs), for
    /// rows a delivery the platform cut off did not record. Off where
    /// `coalesce_ms` asks rows to wait.
    #[serde(default)]
    pub in_turn: bool,
    /// Whether an enqueue of several rows stores them as one packed row
    /// (one row written for the request, where each row cost one), which
    /// every build from the one that added it reads. A build before that
    /// one cannot run on storage holding a pack, and refuses it; the
    /// Worker's configuration turns it on unless told (`RELAY_PACK_ROWS`),
    /// and a peer that does not send it is taken to store rows plainly.
    #[serde(default)]
    pub pack_rows: bool,
}

/// The limits one alarm runs under.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AlarmOptions {
    /// Fires, targets, calls and rows.
    pub budget: RelayBudget,
    /// Concurrent target calls within a fire, 1..=[`MAX_IN_FLIGHT`].
    pub max_in_flight: u32,
}

/// A source's operating settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutboxSettings {
    /// When to park failing targets.
    pub policy: RelayPolicy,
    /// Backpressure bound on waiting rows (queued plus parked).
    pub max_rows: u64,
    /// Backpressure bound on waiting body bytes.
    pub max_bytes: u64,
    /// How long idempotency keys are remembered, ms.
    pub dedup_horizon_ms: u64,
    /// How long discarded parked rows are kept, ms.
    pub discard_horizon_ms: u64,
}

impl Default for OutboxSettings {
    fn default() -> Self {
        OutboxSettings {
            policy: RelayPolicy::default(),
            max_rows: DEFAULT_MAX_QUEUED_ROWS,
            max_bytes: DEFAULT_MAX_QUEUED_BYTES,
            dedup_horizon_ms: DEFAULT_DEDUP_HORIZON_MS,
            discard_horizon_ms: DEFAULT_DISCARD_HORIZON_MS,
        }
    }
}
