//! Every limit the relay enforces, as a named constant, and the per-fire budget.
//!
//! The limits and defaults live here, but for the few a module keeps beside
//! the rule they bound (partitions, dedup claims, the reference Worker's).
//! Names end in their unit. The Worker presets (`WORKER_*`) keep their
//! established names and values. Every limit is tested at and past its edge.
//! The limits table of docs/limits.md is written from these constants: its
//! text is the first sentence of each doc comment, so that sentence should
//! say what the constant bounds. The per-fire budget, [`RelayBudget`], is
//! built from these constants in the `budget` submodule and re-exported here.

/// Largest sequence number the relay will allocate: JavaScript's
/// `Number.MAX_SAFE_INTEGER`, so a sequence survives a round trip through JSON
/// in a JS caller and through SQLite's INTEGER as bound by workerd.
pub const SEQ_MAX: u64 = (1 << 53) - 1;

/// Most targets an older version's `rs` lists as blocked. A cycle no
/// longer adds to that list: a failing target's own record defers it, so
/// any number of failing targets can be passed over.
pub const MAX_BLOCKED_TARGETS: usize = 32;

/// A scan cycle spends at most `targets_per_fire / RETRY_SHARE_DIVISOR`
/// retries (at least one) on failing targets that do not answer: half a
/// fire's target slots. A retry that answers spends nothing.
pub const RETRY_SHARE_DIVISOR: u32 = 2;

/// Rows older than this raise the lag metric.
pub const RELAY_LAG_BOUND_MS: u64 = 60_000;

/// Worker Paid relay targets attempted per fire.
pub const WORKER_PAID_RELAY_TARGETS: u32 = 32;
/// Worker Free relay targets attempted per fire.
pub const WORKER_FREE_RELAY_TARGETS: u32 = 8;
/// Worker Paid relay fires per alarm.
pub const WORKER_PAID_RELAY_FIRES: u32 = 8;
/// Worker Free relay fires per alarm.
pub const WORKER_FREE_RELAY_FIRES: u32 = 2;
/// Target calls allowed per target per fire. With one call per
/// batch, the second call carries a target's next batch in the same fire.
pub const WORKER_RELAY_CALLS_PER_TARGET: u32 = 2;
/// Subrequests one invocation may make on Workers Free. DO calls count.
pub const WORKER_FREE_SUBREQUESTS: u32 = 50;
/// Subrequests one invocation may make on Workers Paid (the default cap).
pub const WORKER_PAID_SUBREQUESTS: u32 = 10_000;

/// Default base rows per fire.
pub const DEFAULT_ROWS_PER_FIRE: u32 = 256;
/// Default targets per fire outside the Worker presets.
pub const DEFAULT_TARGETS_PER_FIRE: u32 = 16;
/// A fire inspects at most this many times its row budget.
pub const WINDOW_ROWS_PER_BUDGET_ROW: u32 = 4;
/// Upper bound for a configured row budget: the window (4x) stays far below
/// what one isolate can decode within its 128 MB.
pub const MAX_ROWS_PER_FIRE: u32 = 4_096;
/// Upper bound for a configured target budget.
pub const MAX_TARGETS_PER_FIRE: u32 = 1_024;
/// Upper bound for configured calls per target per fire.
pub const MAX_CALLS_PER_TARGET: u32 = 16;
/// Upper bound for configured fires per alarm: an alarm must finish well
/// inside its 15-minute wall clock.
pub const MAX_FIRES_PER_ALARM: u32 = 64;
/// Work units (see [`crate::cpu`]) one Workers Free alarm may spend before
/// it settles and re-arms, sized from measurement to Free's 10 ms of CPU:
/// in local workerd an alarm samples about 5 ms of its own plus about 0.017
/// ms per unit (`node bench/profile.mjs --calibrate`), so 200 units, plus
/// the one call round a fire always finishes (up to about 80 more), stay
/// under 10 ms. A Free alarm therefore reads at most 200 rows; a longer
/// backlog goes out in alarms that run back to back.
pub const WORKER_FREE_WORK_PER_ALARM: u32 = 200;
/// Work units one Workers Paid alarm may spend: the Free figure scaled to
/// Paid's 30 s of CPU per invocation (3,000 times Free's 10 ms), which no
/// alarm within Paid's row and subrequest budgets comes near.
pub const WORKER_PAID_WORK_PER_ALARM: u32 = 600_000;
/// Upper bound for a configured work budget per alarm: the Free figure
/// scaled to the 5 minutes of CPU a Paid Worker can be configured to.
pub const MAX_WORK_PER_ALARM: u32 = 6_000_000;
/// Most times a retried alarm's budget is halved: the platform retries a
/// failed alarm up to six times, so the sixth retry runs the smallest fire.
pub const MAX_RETRY_HALVINGS: u32 = 6;
/// Alarms a source keeps the halvings of a retry that fitted before it
/// tries one step larger: a fire the CPU limit killed would be killed again
/// at full size, so a source whose full fire does not fit wastes one
/// invocation in this many instead of one in two or three.
pub const RETRY_HALVING_KEPT_ALARMS: u32 = 16;

/// Bytes of row bodies one fire reads. Keeps a fire's decoded window well
/// inside an isolate's 128 MB even when rows approach [`MAX_ROW_BYTES`].
/// The first row is always read, so a fire reads at most this plus one row.
pub const MAX_FIRE_BYTES: u32 = 4 * 1024 * 1024;

/// Rows in one target call. Twice the base row budget, so one call carries
/// at least 256 rows whenever a backlog to one target allows it.
pub const MAX_BATCH_ROWS: u32 = 512;
/// Encoded bytes in one target call (row bodies plus per-row framing).
pub const MAX_BATCH_BYTES: u32 = 1024 * 1024;
/// Effects (puts plus deletes) in one target call: the target applies them
/// in one synchronous block, one statement each.
pub const MAX_BATCH_EFFECTS: u32 = 4_096;
/// Framing added per row in a target call, counted against
/// [`MAX_BATCH_BYTES`]: `{"seq":N,"effects":` and `}` plus a comma is at most
/// 36 bytes for a 16-digit `N`; 40 leaves room.
pub const BATCH_ROW_FRAMING_BYTES: u32 = 40;
/// Framing of a whole target call:
/// `{"source":"<name>","source_id":"<id>","rows":[` and `]}`.
pub const BATCH_HEADER_BYTES: u32 = 192;

/// Bytes in one key (UTF-8).
pub const MAX_KEY_BYTES: u32 = 512;
/// Bytes in one value's compact JSON encoding.
pub const MAX_VALUE_BYTES: u32 = 64 * 1024;
/// Puts plus deletes in one row.
pub const MAX_EFFECTS_PER_ROW: u32 = 64;
/// Bytes in one row's encoded body. A row of this size plus its framing
/// fits one target batch, so every accepted row can be delivered.
pub const MAX_ROW_BYTES: u32 = MAX_BATCH_BYTES - BATCH_ROW_FRAMING_BYTES;
/// Rows in one enqueue request.
pub const MAX_ROWS_PER_ENQUEUE: u32 = 256;
/// Encoded row bytes in one enqueue request.
pub const MAX_ENQUEUE_BYTES: u32 = 1024 * 1024;

/// Back-off after the first fire that delivers nothing.
pub const RETRY_BACKOFF_MS: u64 = 1_000;
/// Longest back-off; consecutive idle fires double the wait up to here.
pub const RETRY_BACKOFF_MAX_MS: u64 = 60_000;

// ---- names, keys and values -------------------------------------------------

/// Longest source or target name, in bytes (characters `A-Z a-z 0-9 . _ : -`).
pub const MAX_NAME_BYTES: u32 = 64;

/// Length of a source's id at its targets: a Durable Object id as workerd
/// spells it, lowercase hexadecimal digits.
pub const SOURCE_ID_CHARS: u32 = 64;

/// Deepest nesting of arrays and objects inside one value: `1` is depth 0,
/// `[1]` depth 1. Far beyond real documents, and it keeps every envelope the
/// relay wraps around a value (an enqueue adds 5 levels, a target batch 6)
/// well inside serde_json's fixed recursion limit of 128.
pub const MAX_VALUE_DEPTH: u32 = 64;

/// Nesting an enqueue request adds around a value:
/// `{"rows":[{"puts":[["k", value]]}]}`.
pub const ENQUEUE_ENVELOPE_DEPTH: u32 = 5;

/// Nesting a target batch adds around a value:
/// `{"rows":[{"effects":{"puts":[["k", value]]}}]}`.
pub const BATCH_ENVELOPE_DEPTH: u32 = 6;

// ---- admission: idempotency and backpressure --------------------------------

/// Longest idempotency key, in bytes.
pub const MAX_IDEMPOTENCY_KEY_BYTES: u32 = 128;

/// Default bound on rows waiting at a source (queued plus parked).
pub const DEFAULT_MAX_QUEUED_ROWS: u64 = 100_000;

/// Default bound on body bytes waiting at a source (queued plus parked).
pub const DEFAULT_MAX_QUEUED_BYTES: u64 = 128 * 1024 * 1024;

/// Largest configurable bound on waiting rows.
pub const MAX_QUEUED_ROWS_LIMIT: u64 = 10_000_000;

/// Largest configurable bound on waiting bytes: 4 GiB, well inside a
/// Durable Object's 10 GB.
pub const MAX_QUEUED_BYTES_LIMIT: u64 = 4 * 1024 * 1024 * 1024;

/// `Retry-After` sent with a 429, in seconds.
pub const BACKPRESSURE_RETRY_AFTER_S: u32 = 5;

// ---- retention: dedup records and discarded rows ----------------------------

/// How long keys are remembered by default: 24 hours.
pub const DEFAULT_DEDUP_HORIZON_MS: u64 = 24 * 60 * 60 * 1_000;

/// Shortest configurable horizon (dedup or discard): one second, short
/// enough for tests to watch a key expire.
pub const MIN_DEDUP_HORIZON_MS: u64 = 1_000;

/// Longest configurable horizon (dedup or discard): 30 days.
pub const MAX_DEDUP_HORIZON_MS: u64 = 30 * 24 * 60 * 60 * 1_000;

/// Expired records deleted per prune step; an alarm runs at most
/// [`PRUNE_STEPS_PER_ALARM`] steps.
pub const PRUNE_BATCH_ROWS: u32 = 500;

/// Prune steps per alarm, bounding its work.
pub const PRUNE_STEPS_PER_ALARM: u32 = 4;

/// An idle source wakes to prune at most this often, so records expiring
/// at many different times cost one alarm per interval, not one each.
pub const PRUNE_INTERVAL_MS: u64 = 60 * 60 * 1_000;

/// How long discarded parked rows are kept (for audit) by default: 7 days.
pub const DEFAULT_DISCARD_HORIZON_MS: u64 = 7 * 24 * 60 * 60 * 1_000;

// ---- the Worker shell: requests, pages, target calls ---------------------------

/// Largest request body the relay reads, in bytes. An enqueue of
/// [`MAX_ENQUEUE_BYTES`] of rows fits with room for JSON spacing and escapes.
pub const MAX_REQUEST_BYTES: u32 = 2 * 1024 * 1024;
/// Longest bearer token, in bytes, a front door compares (configured or
/// presented). Every comparison runs over exactly this many bytes, so its
/// time depends on neither token's length; 256 bytes leaves room for any
/// generated secret (a 32-byte key is 64 hex characters).
pub const MAX_BEARER_TOKEN_BYTES: u32 = 256;
/// Deepest nesting a control body (test faults, operator options) may
/// have: they are flat objects.
pub const MAX_CONTROL_BODY_DEPTH: u32 = 4;
/// Most parked rows one page returns.
pub const MAX_PARKED_ROWS_PER_PAGE: u32 = 500;
/// Most queued rows one page of `GET /queued` returns: as many as a page
/// of parked rows, both cut at [`MAX_PAGE_BYTES`](crate::MAX_PAGE_BYTES)
/// first when the rows are large.
pub const MAX_QUEUED_ROWS_PER_PAGE: u32 = 500;
/// Most target records (parked or failing) one page of `GET /parked`
/// returns, and its default: a long outage can leave thousands, and one
/// page reads only its own.
pub const MAX_TARGETS_PER_PAGE: u32 = 200;
/// Parked targets, and failing targets, a status names (each list): status
/// reads one page of each, so its cost and size stay bounded however many
/// records a source keeps; `targets_truncated` says when more exist.
pub const STATUS_TARGETS: u32 = 50;
/// Up to how many dedup records and kept discarded rows a status counts:
/// a count reads every row it counts, so past this status answers this
/// number, meaning "at least".
pub const STATUS_COUNT_MAX: u32 = 1_000;
/// Bytes of a W3C `traceparent` (version 00): carried in the row body, so
/// it counts towards [`MAX_ROW_BYTES`] with its 12 bytes of framing.
pub const TRACEPARENT_BYTES: u32 = 55;
/// Distinct `traceparent`s one alarm's log line names (the rest are
/// counted, not listed), so a busy alarm's line stays small.
pub const MAX_TRACES_PER_LOG: u32 = 16;
/// Longest a row may be delayed, ms (24 hours): a delayed row holds back
/// the later rows of its target and the source's `relay_watermark`, so the
/// delay is bounded like every other wait. `delay_ms` and `not_before_ms`
/// past it are refused with `delay_too_long`.
pub const MAX_DELAY_MS: u64 = 86_400_000;
/// How long after its time a target's hold is still inherited by its new
/// rows, ms (1 hour): it keeps due times non-decreasing within a target even
/// when a scan cycle's clock lags the enqueue's, up to this much.
pub const HOLD_GRACE_MS: u64 = 3_600_000;
/// Most keys one listing returns.
pub const MAX_KEYS_PER_PAGE: u32 = 1_000;
/// Most sources one directory page returns (`GET /v1/sources`). A console
/// reads each listed source's status with one request, so a page stays
/// small enough to refresh every few seconds.
pub const MAX_SOURCES_PER_PAGE: u32 = 100;
/// Default and recommended concurrent target calls in one fire: Workers
/// allow six simultaneous outgoing connections per invocation.
pub const DEFAULT_MAX_IN_FLIGHT: u32 = 6;
/// Upper bound for a configured in-flight limit.
pub const MAX_IN_FLIGHT: u32 = 32;
/// How long one target call may take by default before the fire counts it
/// failed. The call may still apply afterwards; the target's watermark makes
/// the redelivery harmless, exactly as for a lost reply.
pub const DEFAULT_CALL_TIMEOUT_MS: u64 = 30_000;
/// Shortest configurable call timeout.
pub const MIN_CALL_TIMEOUT_MS: u64 = 100;
/// Longest configurable call timeout: an alarm has 15 minutes in all.
pub const MAX_CALL_TIMEOUT_MS: u64 = 120_000;
/// How far past an in-turn enqueue its safety-net alarm is armed, ms. The
/// enqueue's own invocation delivers its rows; the alarm, armed in the
/// enqueue's turn so a crash loses nothing, delivers what that delivery did
/// not record because the platform ended the invocation first (its CPU
/// limit, an eviction, an isolate restart). Such rows are sent again by the
/// next enqueue's own delivery, which reads whatever is queued, or by this
/// alarm when no enqueue comes: so this is how long rows left by a cut-off
/// wait at most, a rare event, while a live stream pays one `setAlarm` (one
/// row written) per this long to keep the net ahead of it. Five seconds
/// (the platform's own retry of a failed alarm waits 2 s, then 4, 8...)
/// makes that cost one row written per 5 s per source, where 1 s cost one
/// per second: 0.25 more rows written per row at 4 rows a second, 0.05 at
/// 20. One arming serves a stream of enqueues this
/// long; an alarm that finds the rows delivered removes the one kept for
/// the next enqueue (one write), or, while the stream goes on, only arms
/// itself again (see [`IN_TURN_KEPT_ALARMS_MAX`]). While the delivery runs
/// longer, the alarm is kept ahead of it by
/// [`in_turn_lease_ms`](crate::schedule::in_turn_lease_ms).
pub const IN_TURN_ALARM_GRACE_MS: u64 = 5_000;
/// Consecutive alarms that keep a delivered row in the outbox for the
/// next enqueue to write over, while enqueues keep coming (see the
/// source's alarm): each re-arms the safety net, the one write a live
/// stream needs per [`IN_TURN_ALARM_GRACE_MS`] anyway, and skips the row's
/// removal. The next alarm past it runs in full (removes the row, prunes),
/// so a stream that never pauses is pruned about once a minute.
pub const IN_TURN_KEPT_ALARMS_MAX: u32 = 12;
/// How long an alarm defers to a running in-turn delivery of its object,
/// counted from the start of that delivery's latest run, ms. Within it the
/// alarm delivers nothing, so a target never has two of the source's
/// requests awaited at once. Past it the delivery is taken for stuck (its
/// invocation's promises never settle) and the alarm delivers beside it:
/// rows keep moving, and the targets' watermarks and an endpoint's
/// deduplication make the overlap harmless. Two calls of the longest
/// timeout: what one run's calls to one target take at most on the Free
/// preset.
pub const IN_TURN_DEFER_MAX_MS: u64 = 2 * MAX_CALL_TIMEOUT_MS;
/// How long a source sends batches without its id to a target that
/// refused one (a target older than ids, see [`crate::peers`]), ms: then it
/// tries the id again. A deploy releases new code to objects within
/// minutes (an active object keeps its old code for up to 5 minutes by
/// default), so twice that finds most upgraded; a target script deployed
/// on its own schedule costs one more call every this long until it is.
pub const PRE_ID_TARGET_MEMORY_MS: u64 = 10 * 60_000;
/// Targets older than ids one source object remembers at once (see
/// [`PRE_ID_TARGET_MEMORY_MS`]): past it, the one that refused longest ago
/// is tried with the id again, at the cost of one call. A Paid alarm calls
/// at most 256 targets, so this covers four alarms' worth.
pub const PRE_ID_TARGETS_MAX: u32 = 1024;
/// Halvings of the source's budget for an in-turn delivery (see
/// [`RelayBudget::for_retry`]): it shares its invocation's CPU with the
/// enqueue that started it, so it runs half an alarm's rows and work, and
/// one fire.
pub const IN_TURN_HALVINGS: u32 = 1;
/// Deliveries one in-turn delivery runs at most: each after the first is
/// asked for by an enqueue that arrived while the one before ran. Past it,
/// rows still waiting are left to the alarm (armed for now).
pub const IN_TURN_RUNS_MAX: u32 = 64;
/// Largest configurable `park_after_failed_cycles`.
pub const MAX_PARK_AFTER_FAILED_CYCLES: u32 = 1_000;
/// Longest configurable coalescing wait (`RELAY_COALESCE_MS`): rows that
/// arrive while a source is busy wait at most this long to share a call.
pub const MAX_COALESCE_MS: u64 = 1_000;
/// How long the platform waits before retrying an alarm whose handler
/// threw (it retries a few times with growing waits, then drops the alarm).
pub const PLATFORM_ALARM_RETRY_MS: u64 = 2_000;

const _: () = assert!(MAX_ROW_BYTES + BATCH_ROW_FRAMING_BYTES <= MAX_BATCH_BYTES);
const _: () = assert!(MAX_NAME_BYTES + SOURCE_ID_CHARS + 48 <= BATCH_HEADER_BYTES);
const _: () = assert!(MAX_EFFECTS_PER_ROW <= MAX_BATCH_EFFECTS);
const _: () = assert!(MAX_ROW_BYTES <= MAX_FIRE_BYTES);
const _: () = assert!(RETRY_BACKOFF_MS <= RETRY_BACKOFF_MAX_MS);
const _: () = assert!(IN_TURN_ALARM_GRACE_MS <= TARGET_RETRY_BACKOFF_MAX_MS);

mod budget;

pub use budget::{BudgetError, RelayBudget};

/// Longest a failing target waits between retries: long enough that an
/// overloaded target is called at most every few seconds per source, short
/// enough that a target that comes back is reached within seconds.
pub const TARGET_RETRY_BACKOFF_MAX_MS: u64 = 10_000;

/// Longest pause a target may ask for (an endpoint's `Retry-After`): a
/// longer one is cut to this, so no answer can hold a target's rows back
/// for longer than an hour at a time.
pub const MAX_RETRY_AFTER_MS: u64 = 3_600_000;

/// How long a target that failed `failed_cycles` consecutive cycles (1 for
/// the first) is passed over before a cycle calls it again: doubles from
/// [`RETRY_BACKOFF_MS`] up to [`TARGET_RETRY_BACKOFF_MAX_MS`].
pub fn target_retry_backoff_ms(failed_cycles: u32) -> u64 {
    retry_backoff_ms(failed_cycles).min(TARGET_RETRY_BACKOFF_MAX_MS)
}

/// Back-off before the next fire after `idle_fires` consecutive fires that
/// delivered nothing (1 for the first): doubles from [`RETRY_BACKOFF_MS`]
/// up to [`RETRY_BACKOFF_MAX_MS`].
pub fn retry_backoff_ms(idle_fires: u32) -> u64 {
    let doublings = idle_fires.saturating_sub(1).min(16);
    RETRY_BACKOFF_MS.saturating_mul(1u64 << doublings).min(RETRY_BACKOFF_MAX_MS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failing_targets_back_off_doubles_to_ten_seconds() {
        assert_eq!(target_retry_backoff_ms(1), RETRY_BACKOFF_MS);
        assert_eq!(target_retry_backoff_ms(4), 8_000);
        assert_eq!(target_retry_backoff_ms(5), TARGET_RETRY_BACKOFF_MAX_MS, "at the cap");
        assert_eq!(target_retry_backoff_ms(u32::MAX), TARGET_RETRY_BACKOFF_MAX_MS);
    }

    #[test]
    fn backoff_doubles_from_base_and_caps() {
        assert_eq!(retry_backoff_ms(0), RETRY_BACKOFF_MS);
        assert_eq!(retry_backoff_ms(1), RETRY_BACKOFF_MS);
        assert_eq!(retry_backoff_ms(2), 2 * RETRY_BACKOFF_MS);
        assert_eq!(retry_backoff_ms(3), 4 * RETRY_BACKOFF_MS);
        assert_eq!(retry_backoff_ms(7), RETRY_BACKOFF_MAX_MS);
        assert_eq!(retry_backoff_ms(u32::MAX), RETRY_BACKOFF_MAX_MS);
    }
}
