//! The relay engine, with no I/O: rows and limits, the `rs` scan state, fire
//! planning and settling, the target-side apply rules, enqueue admission,
//! the alarm rules and the persisted encodings. Nothing here awaits or
//! touches storage: shells (the `durable-relay` library's store and driver,
//! over Durable Object SQLite in workerd and over a native SQLite in the
//! simulator) read, call targets, and feed the results back in. This crate
//! has no `worker` dependency, so the compiler keeps it that way.
//!
//! Every limit and default is in [`limits`].

#![deny(unsafe_code)]

pub mod admission;
pub mod adoption;
pub mod alarm;
pub mod apply;
pub mod codes;
pub mod cpu;
pub mod daily;
pub mod dedup;
pub mod delay;
pub mod enqueue;
pub mod fire;
pub mod json;
pub mod keys;
pub mod limits;
pub mod name;
pub mod page;
pub mod partition;
pub mod peers;
pub mod request;
pub mod row;
pub mod scan;
pub mod schedule;
pub mod settle;
pub mod source_id;
pub mod trace;
pub mod watermark;

pub use admission::{admit, check, due_list, Admission, AdmissionInput, AppendPlan, Checked};
pub use adoption::{
    check_routed, check_unrouted, decide_activate, decide_prepare, Adoption, Holdings, Prepared,
};
pub use alarm::{AlarmRun, AlarmTotals};
pub use apply::{
    decode_request, encode_request, plan_apply, ApplyError, ApplyPlan, ApplyReply, ApplyRequest, ApplyRow,
    NoHook, PutDecodeError, RelayHook, Sender,
};
pub use codes::ErrorCode;
pub use cpu::{call_work, read_work, CpuGauge, WORK_PER_CALL, WORK_PER_KIB, WORK_PER_ROW};
pub use daily::{
    next_utc_day_ms, projected_for_day, seconds_until_next_utc_day, utc_date, utc_day, DAY_MS,
    PROJECTION_MIN_ELAPSED_MS, UNWRITTEN_COUNTS_MAX_AGE_MS, WORKER_FREE_ROWS_WRITTEN_PER_DAY,
};
pub use dedup::{content_digest, decide, Dedup, DedupRecord};
pub use delay::{Delay, DelayError};
pub use enqueue::{
    encode_rows, plan_encoded, plan_enqueue, unknown_endpoint, Capacity, EncodedRows, EnqueueError,
    EnqueuePlan, EnqueueRefusal, EnqueueRow, KeyError,
};
pub use fire::{
    begin, classify_thrown, Begun, CallOutcome, Failing, Failure, Fire, FireStart, RelayPolicy, TargetCall,
    ThrownBy, WindowQuery,
};
pub use json::ValueError;
pub use keys::{
    decide_key, decide_routed, decide_seal, key_live, KeyRecord, KeyVerdict, RoutedRecord, Taken, Ticket,
};
pub use limits::*;
pub use name::{Name, NameError, ENDPOINT_PREFIX};
pub use page::{
    cut_page, json_bytes, PageBuilder, MAX_PAGE_BYTES, MAX_WATERMARKS_PER_PAGE, PAGE_ENVELOPE_BYTES,
};
pub use partition::{
    home, key_home, part_of, partition_name, partition_of, Fence, Layout, Part, PartitionError, PartitionMap,
    Route, KEY_HOMES, MAX_PARTITIONS, MAX_UNSETTLED_LAYOUTS,
};
pub use peers::{refuses_source_id, without_source_id, PreIdTargets};
pub use request::{decode_enqueue, decode_json, EnqueueRequest, RequestError};
pub use row::{CorruptRow, Effects, JsonValue, QueuedRow, RowError, StoredRow};
pub use scan::{CorruptScan, ScanState};
pub use schedule::{AlarmKnown, PrunePlan};
pub use settle::{Checkpoint, DeleteRange, FireReport, Settlement, TargetChanges, Wake};
pub use source_id::{SourceId, SourceIdError};
pub use trace::{TraceError, Traceparent};
pub use watermark::{delivered_through, owed_head, relay_watermark, Head};

#[cfg(test)]
mod fire_tests;
