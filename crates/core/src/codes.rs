//! Every error code the relay answers with, as one enum: the `code` of
//! every `{"error":{"code","message"}}` body, of every RPC error, and of
//! the Rust client's `RelayError`. The engine's own refusals name theirs
//! with it, so a code the wire does not list cannot be answered.

use std::fmt;

macro_rules! codes {
    ($($variant:ident => $text:literal: $doc:literal,)*) => {
        /// A stable machine-readable error code.
        #[derive(Clone, Debug, PartialEq, Eq, Hash)]
        pub enum ErrorCode {
            $(#[doc = $doc] $variant,)*
            /// A code this build does not know (a newer relay's).
            Other(String),
        }

        impl ErrorCode {
            /// Every known code.
            pub const ALL: &'static [ErrorCode] = &[$(ErrorCode::$variant,)*];

            /// The code as it appears on the wire.
            pub fn as_str(&self) -> &str {
                match self {
                    $(ErrorCode::$variant => $text,)*
                    ErrorCode::Other(s) => s,
                }
            }

            /// The code as a `'static` string, when this build knows it.
            pub fn as_static_str(&self) -> Option<&'static str> {
                match self {
                    $(ErrorCode::$variant => Some($text),)*
                    ErrorCode::Other(_) => None,
                }
            }

            /// What the code means, as its documentation says (none for a
            /// code this build does not know).
            pub fn doc(&self) -> Option<&'static str> {
                match self {
                    $(ErrorCode::$variant => Some($doc),)*
                    ErrorCode::Other(_) => None,
                }
            }

            /// The code for `text` (unknown codes become [`ErrorCode::Other`]).
            pub fn parse(text: &str) -> ErrorCode {
                match text {
                    $($text => ErrorCode::$variant,)*
                    other => ErrorCode::Other(other.to_owned()),
                }
            }
        }
    };
}

codes! {
    EmptyBody => "empty_body": "The request body is empty.",
    MalformedJson => "malformed_json": "The body is not JSON.",
    InvalidRequest => "invalid_request": "The JSON has the wrong shape (a missing or unknown field, a wrong type).",
    InvalidUtf8 => "invalid_utf8": "The body is not UTF-8.",
    UnreadableBody => "unreadable_body": "The body could not be read.",
    BodyTooLarge => "body_too_large": "The body is over MAX_REQUEST_BYTES (413).",
    NoRows => "no_rows": "An enqueue without rows.",
    TooManyRows => "too_many_rows": "More than MAX_ROWS_PER_ENQUEUE rows.",
    RequestTooLarge => "request_too_large": "The rows encode to more than MAX_ENQUEUE_BYTES (413).",
    InvalidTarget => "invalid_target": "A target name is invalid.",
    InvalidName => "invalid_name": "A source or target name in the path is invalid.",
    RowWithoutEffects => "row_without_effects": "A row with no puts and no deletes.",
    TooManyEffects => "too_many_effects": "More than MAX_EFFECTS_PER_ROW effects in a row.",
    EmptyKey => "empty_key": "An empty key.",
    KeyTooLong => "key_too_long": "A key over MAX_KEY_BYTES.",
    ValueTooLarge => "value_too_large": "A value over MAX_VALUE_BYTES.",
    ValueTooDeep => "value_too_deep": "A value (or body) nested deeper than MAX_VALUE_DEPTH allows.",
    InvalidValue => "invalid_value": "A value is not JSON (from the npm package: a JavaScript value JSON cannot carry exactly, such as `NaN`, `undefined` or a `Date`; the message names its path).",
    DuplicateObjectKey => "duplicate_object_key": "An object in a value names a key twice.",
    LoneSurrogate => "lone_surrogate": "A string in a value holds an unpaired UTF-16 surrogate.",
    DuplicateKey => "duplicate_key": "A row names a key twice.",
    RowTooLarge => "row_too_large": "A row cannot fit one target batch.",
    SequenceExhausted => "sequence_exhausted": "The source allocated its last sequence (507).",
    OutboxFull => "outbox_full": "The outbox is at its backpressure bound (429, Retry-After).",
    InvalidIdempotencyKey => "invalid_idempotency_key": "The idempotency key is empty or too long.",
    IdempotencyConflict => "idempotency_conflict": "The idempotency key was used for other rows (409).",
    Aborted => "aborted": "An embedder's own writes refused the enqueue (409).",
    AsyncCallback => "async_callback": "A callback given to the npm package (`writes`, `onApply`, `onPut`, `onDelete`) returned a promise: callbacks run inside a synchronous transaction, so the call is refused and writes nothing (400; at a target the apply fails as `hook_refused` and the source retries it).",
    InvalidSeq => "invalid_seq": "A sequence in the path is not 0..=2^53-1.",
    InvalidLimit => "invalid_limit": "A page limit is out of range.",
    InvalidQuery => "invalid_query": "An unknown, repeated or out-of-range query parameter.",
    NoRoute => "no_route": "No such route (404).",
    BadUrl => "bad_url": "The URL did not parse.",
    Unauthorized => "unauthorized": "A missing or wrong bearer token (401).",
    UnnamedSource => "unnamed_source": "A source addressed by a unique id instead of a name.",
    InvalidSource => "invalid_source": "A source object's name is invalid.",
    MalformedBatch => "malformed_batch": "A target batch does not decode (422).",
    EmptyBatch => "empty_batch": "A target batch without rows (422).",
    BatchTooLarge => "batch_too_large": "A target batch over its limits (422).",
    BadSequence => "bad_sequence": "A target batch's sequences are out of range or not ascending (422).",
    BadRow => "bad_row": "A row in a target batch is invalid (422).",
    InvalidSourceId => "invalid_source_id": "A target batch's source_id is not a Durable Object id (422).",
    HookRefused => "hook_refused": "The target's hook refused a batch (503, retried).",
    Unavailable => "unavailable": "The target is unavailable (503, retried).",
    BadConfiguration => "bad_configuration": "A configuration variable is invalid (500).",
    Internal => "internal": "A storage or runtime failure (500).",
    FaultsDisabled => "faults_disabled": "A test-only route in a build or environment without them.",
    InvalidDelay => "invalid_delay": "A test fault delay out of range.",
    SourceNotEmpty => "source_not_empty": "A source still holds queued or parked rows, so it cannot be retired (409).",
    InvalidTraceparent => "invalid_traceparent": "A traceparent that is not W3C version 00 (400).",
    ConflictingDelay => "conflicting_delay": "A row with both not_before_ms and delay_ms (400).",
    StaleEpoch => "stale_epoch": "A partition refused a router with an older partition map (409; routers reload and retry).",
    InvalidGate => "invalid_gate": "A gated enqueue for more than one target (400; a router's bug).",
    TargetMoved => "target_moved": "A moving target's old partition released it (409; routers send it to the new one).",
    InvalidPartition => "invalid_partition": "A partition header, count or index out of range (400).",
    PartitionedSource => "partitioned_source": "A per-partition read at a partitioned logical source (400; address the partition, logical:index).",
    UnknownEndpoint => "unknown_endpoint": "A row addressed to an endpoint (endpoint:NAME) that RELAY_ENDPOINTS does not configure (400).",
    PartitionEnqueue => "partition_enqueue": "An enqueue addressed to one partition of a partitioned source (400; enqueue at the logical source).",
    DelayTooLong => "delay_too_long": "A row asked to wait longer than MAX_DELAY_MS (400).",
    NoDirectory => "no_directory": "The Worker has no source directory bound (RELAY_DIRECTORY) (501).",
    BenchDisabled => "bench_disabled": "A benchmark route while the benchmark switch is off (403; benchmark builds only).",
    QueueSendFailed => "queue_send_failed": "The benchmark's Queues producer could not send (503; benchmark builds only).",
    EpochNotAdopted => "epoch_not_adopted": "A partition has not adopted the router's partition map (409; the router adopts it and retries).",
    UnsettledLayout => "unsettled_layout": "A partition map would strand rows, or keys, an object holds (409; keep every layout not yet settled in from).",
    MisroutedRow => "misrouted_row": "A routed row for a target the partition is no home of (400; a router's bug).",
    MapChanged => "map_changed": "Another partition map under an epoch an object adopted one under (409; raise the epoch with every change of the map).",
    Superseded => "superseded": "A newer attempt of the same keyed request took over (409; retry it to read what was committed).",
    ForbiddenScope => "forbidden_scope": "A valid bearer token whose scope does not cover the route (403; the message names the scope needed).",
    DailyWriteLimit => "daily_write_limit": "The platform refused a write: the account's daily allowance of SQLite rows written (Workers Free: 100,000) is used up; nothing was written (503, Retry-After: the seconds until 00:00 UTC, when it resets).",
}

impl PartialEq<&str> for ErrorCode {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl PartialEq<ErrorCode> for &str {
    fn eq(&self, other: &ErrorCode) -> bool {
        *self == other.as_str()
    }
}

impl serde::Serialize for ErrorCode {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> serde::Deserialize<'de> for ErrorCode {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(ErrorCode::parse(&String::deserialize(d)?))
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_round_trips_and_unknown_codes_are_kept() {
        for code in ErrorCode::ALL {
            assert_eq!(&ErrorCode::parse(code.as_str()), code);
        }
        assert_eq!(ErrorCode::parse("from_the_future"), ErrorCode::Other("from_the_future".into()));
    }
}
