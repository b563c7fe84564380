//! The relay engine, with no I/O: rows and limits, the `rs` scan state, fire
//! planning and settling, the target-side apply rules, enqueue planning and
//! the persisted encodings. Nothing here awaits; shells (the Workers runtime
//! in `worker`, the simulator in `sim`) read and write storage and call
//! targets, and feed the results back in.

pub mod alarm;
pub mod apply;
pub mod dedup;
pub mod enqueue;
pub mod fire;
pub mod json;
pub mod limits;
pub mod name;
pub mod request;
pub mod row;
pub mod scan;
pub mod settle;
pub mod watermark;

pub use alarm::{AlarmRun, AlarmTotals};
pub use apply::{
    decode_request, encode_request, plan_apply, ApplyError, ApplyPlan, ApplyReply, ApplyRequest, ApplyRow,
    NoHook, RelayHook,
};
pub use dedup::{content_digest, decide, Dedup, DedupRecord};
pub use enqueue::{
    encode_rows, plan_encoded, plan_enqueue, Capacity, EncodedRows, EnqueueError, EnqueuePlan,
    EnqueueRefusal, EnqueueRow, BACKPRESSURE_RETRY_AFTER_S, DEFAULT_MAX_QUEUED_BYTES,
    DEFAULT_MAX_QUEUED_ROWS,
};
pub use fire::{begin, Begun, CallOutcome, Failure, Fire, FireStart, RelayPolicy, TargetCall, WindowQuery};
pub use json::{ValueError, MAX_VALUE_DEPTH};
pub use limits::*;
pub use name::{Name, NameError, MAX_NAME_BYTES};
pub use request::{decode_enqueue, decode_json, EnqueueRequest, RequestError};
pub use row::{CorruptRow, Effects, JsonValue, QueuedRow, RowError, StoredRow};
pub use scan::{CorruptScan, ScanState};
pub use settle::{Checkpoint, DeleteRange, FireReport, Settlement, Wake};
pub use watermark::{delivered_through, relay_watermark, Head};

#[cfg(test)]
mod fire_tests;
