//! What a partitioned logical source answers as one source at the reference
//! Worker's front door (and to `PartitionedClient` in the Rust library):
//! its status summed over its objects and its pages of parked targets
//! merged, each record naming the object that holds it.

use serde::{Deserialize, Serialize};

use super::router::Settling;
use super::source::{SourceStatus, TargetReport};
use crate::core::{Part, PartitionMap};

/// A parked or failing target of one object of a logical source.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionTarget {
    /// The object that holds it.
    pub partition: Part,
    /// Its record there.
    #[serde(flatten)]
    pub report: TargetReport,
}

/// A page of a logical source's parked and failing targets: every
/// object's record of each name, in name order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogicalTargetPage {
    /// The records, by name and then object.
    pub targets: Vec<PartitionTarget>,
    /// The `after` of the next page, when anything follows.
    pub next: Option<String>,
}

/// One object's status in its logical source's.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PartitionStatus {
    /// Which object.
    pub partition: Part,
    /// Its name (`logical:index`, or the logical name).
    pub source: String,
    /// What keeps the last change from settling here (only while one
    /// settles): targets it holds rows for whose home is another object,
    /// and at the plain object the keys its plain enqueues recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settling: Option<Settling>,
    /// Its own status.
    pub status: SourceStatus,
}

/// A logical source's status: sums and extremes over its objects.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct LogicalStatus {
    /// The logical source's name.
    pub source: String,
    /// The map it is routed by.
    pub map: PartitionMap,
    /// Every counter, summed.
    #[serde(flatten)]
    pub totals: Totals,
    /// The oldest queued row's age over the objects, ms.
    pub oldest_row_age_ms: Option<u64>,
    /// Whether any object's oldest row is past the lag bound.
    pub lag_exceeded: bool,
    /// The minimum over the objects.
    pub relay_watermark: u64,
    /// While a change settles (`map.from` set): whether no object still
    /// holds rows for a target whose home moved, nor (the plain object)
    /// keys a retry must find, so `from` may be dropped under a new epoch.
    /// Also `false`, with no `from`, while the plain object holds rows a map
    /// without the plain layout left there: that map is refused to every
    /// enqueue until they leave.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resize_settled: Option<bool>,
    /// While a change settles: the earliest time it can have settled, ms
    /// (when the plain object's last key expires), if that is later than now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settles_at_ms: Option<u64>,
    /// Each object's own: every object of the map's layouts, and the plain
    /// object of a map that does not list it while it still holds rows.
    pub partitions: Vec<PartitionStatus>,
}

/// The counters a logical source's status sums over its objects: every
/// counter an object's status has, under the same name.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[allow(missing_docs)]
pub struct Totals {
    pub queued_rows: u64,
    pub queued_bytes: u64,
    pub parked_rows: u64,
    pub parked_bytes: u64,
    pub enqueued_rows: u64,
    pub delivered_rows: u64,
    pub alarms: u64,
    pub fires: u64,
    pub subrequests: u64,
    pub conflicts: u64,
    pub dedup_hits: u64,
    pub rejected_full: u64,
    pub lag_breaches: u64,
    pub sql_rows_written: u64,
    pub rows_written_today: u64,
    pub rows_written_projected_today: u64,
    pub dedup_records: u64,
    pub discarded_rows: u64,
}

impl Totals {
    /// Adds one object's counters.
    pub fn add(&mut self, s: &SourceStatus) {
        self.queued_rows += s.queued_rows;
        self.queued_bytes += s.queued_bytes;
        self.parked_rows += s.parked_rows;
        self.parked_bytes += s.parked_bytes;
        self.enqueued_rows += s.enqueued_rows;
        self.delivered_rows += s.delivered_rows;
        self.alarms += s.alarms;
        self.fires += s.fires;
        self.subrequests += s.subrequests;
        self.conflicts += s.conflicts;
        self.dedup_hits += s.dedup_hits;
        self.rejected_full += s.rejected_full;
        self.lag_breaches += s.lag_breaches;
        self.sql_rows_written += s.sql_rows_written;
        self.rows_written_today += s.rows_written_today;
        self.rows_written_projected_today += s.rows_written_projected_today;
        self.dedup_records += s.dedup_records;
        self.discarded_rows += s.discarded_rows;
    }
}
