//! HTTP plumbing: JSON replies, the `{ "error": { "code", "message" } }`
//! body every refusal carries, the HTTP status of every refusal the core and
//! the store return (statuses live here, not in the core), bounded body
//! reads, and bearer-token checks.

#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]
#![deny(clippy::unreachable, clippy::todo, clippy::unimplemented)]

use serde::Serialize;
use worker::{Request, Response};

use crate::core::{
    ApplyError, EnqueueError, EnqueueRefusal, ErrorCode, RequestError, BACKPRESSURE_RETRY_AFTER_S,
    MAX_BEARER_TOKEN_BYTES, MAX_CONTROL_BODY_DEPTH, MAX_REQUEST_BYTES,
};
use crate::protocol::Refusal;
use crate::store::inbox::ApplyFailure;
use crate::store::outbox::EnqueueFailure;
use crate::store::StoreError;

/// A refusal or failure with the relay's code: what a handler answers
/// (an HTTP status, a stable code, a message naming the problem, and a
/// `Retry-After` when waiting helps), and what the Rust client reads back
/// from a reply. One type on both sides of the wire, named as the
/// JavaScript packages name theirs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelayError {
    /// HTTP status (4xx for the caller's mistakes, 5xx for ours).
    pub status: u16,
    /// Stable machine-readable code.
    pub code: ErrorCode,
    /// What was wrong, naming the field or limit.
    pub message: String,
    /// Seconds for a `Retry-After` header (with 429 and 503).
    pub retry_after_s: Option<u32>,
}

/// [`RelayError`] under the name handlers' signatures used before the two
/// were one: the same type, kept so code written against it still builds.
#[deprecated(note = "the same type as `RelayError`: write `RelayError`")]
pub type HttpError = RelayError;

impl std::fmt::Display for RelayError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}: {}", self.status, self.code, self.message)
    }
}

impl std::error::Error for RelayError {}

impl RelayError {
    /// A refusal with `status`, `code` and `message`.
    pub fn new(status: u16, code: ErrorCode, message: impl Into<String>) -> RelayError {
        RelayError { status, code, message: message.into(), retry_after_s: None }
    }

    /// 400 with `code`.
    pub fn bad_request(code: ErrorCode, message: impl Into<String>) -> RelayError {
        RelayError::new(400, code, message)
    }

    /// 500 for a storage or runtime failure.
    pub fn internal(message: impl Into<String>) -> RelayError {
        RelayError::new(500, ErrorCode::Internal, message)
    }

    /// Adds a `Retry-After` of `seconds`.
    pub fn retry_after(mut self, seconds: u32) -> RelayError {
        self.retry_after_s = Some(seconds);
        self
    }

    /// The JSON body.
    pub fn body(&self) -> String {
        serde_json::json!({ "error": { "code": self.code, "message": self.message } }).to_string()
    }

    /// As a response.
    pub fn response(&self) -> worker::Result<Response> {
        let headers = json_headers();
        if let Some(s) = self.retry_after_s {
            headers.set("retry-after", &s.to_string())?;
        }
        Ok(Response::ok(self.body())?.with_status(self.status).with_headers(headers))
    }
}

/// Headers of a JSON reply.
pub fn json_headers() -> worker::Headers {
    let headers = worker::Headers::new();
    let _ = headers.set("content-type", "application/json");
    headers
}

/// A 200 JSON response.
pub fn json<T: Serialize>(value: &T) -> worker::Result<Response> {
    let text = serde_json::to_string(value).map_err(|e| worker::Error::RustError(e.to_string()))?;
    crate::work::body_out(text.len());
    Ok(Response::ok(text)?.with_headers(json_headers()))
}

/// Stored JSON text written into a response verbatim (see
/// [`core::json::verbatim_json`](crate::core::json::verbatim_json)).
pub use crate::core::json::verbatim_json;

/// Turns a handler's result into a response.
pub fn respond(result: Result<Response, RelayError>) -> worker::Result<Response> {
    match result {
        Ok(r) => Ok(r),
        Err(e) => e.response(),
    }
}

/// Reads the body as UTF-8 text, refusing bodies over `MAX_REQUEST_BYTES`
/// (by `Content-Length` first, then by what actually arrived).
pub async fn read_body(req: &mut Request) -> Result<String, RelayError> {
    let too_large = |n: u64| {
        RelayError::new(
            413,
            ErrorCode::BodyTooLarge,
            format!("body is {n} bytes; the limit is {MAX_REQUEST_BYTES}"),
        )
    };
    if let Ok(Some(len)) = req.headers().get("content-length") {
        if let Ok(n) = len.parse::<u64>() {
            if n > u64::from(MAX_REQUEST_BYTES) {
                return Err(too_large(n));
            }
        }
    }
    let bytes =
        req.bytes().await.map_err(|e| RelayError::bad_request(ErrorCode::UnreadableBody, e.to_string()))?;
    if bytes.len() as u64 > u64::from(MAX_REQUEST_BYTES) {
        return Err(too_large(bytes.len() as u64));
    }
    crate::work::body_in(bytes.len());
    String::from_utf8(bytes).map_err(|_| RelayError::bad_request(ErrorCode::InvalidUtf8, "body is not UTF-8"))
}

/// Parses a small JSON control body into `T`, naming the problem on failure.
pub fn parse_json<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, RelayError> {
    Ok(crate::core::decode_json(text, MAX_CONTROL_BODY_DEPTH)?)
}

impl From<RelayError> for worker::Error {
    /// A refusal thrown out of a handler (an alarm, say): the runtime sees
    /// its status, code and message as text. Answer a request with
    /// [`respond`] instead, to keep its status.
    fn from(e: RelayError) -> Self {
        worker::Error::RustError(format!("{} {}: {}", e.status, e.code, e.message))
    }
}

impl From<worker::Error> for RelayError {
    /// A runtime failure: 500 `internal`.
    fn from(e: worker::Error) -> Self {
        RelayError::internal(e.to_string())
    }
}

impl From<Refusal> for RelayError {
    /// A request line the protocol refused, with its status and code.
    fn from(r: Refusal) -> Self {
        RelayError::new(r.status, r.code, r.message)
    }
}

impl From<RequestError> for RelayError {
    fn from(e: RequestError) -> Self {
        RelayError::bad_request(e.code(), e.to_string())
    }
}

impl From<EnqueueRefusal> for RelayError {
    /// 400, but 413 for a request too large, 409 for a reused key or a
    /// partition map that cannot be used (yet), 429
    /// (with `Retry-After`) for a full outbox, 507 when sequences run out.
    fn from(e: EnqueueRefusal) -> Self {
        let status = match &e {
            EnqueueRefusal::Invalid(EnqueueError::TooManyBytes(_)) => 413,
            EnqueueRefusal::Invalid(EnqueueError::OutboxFull { .. }) => 429,
            EnqueueRefusal::Invalid(EnqueueError::SequenceExhausted) => 507,
            EnqueueRefusal::Invalid(_)
            | EnqueueRefusal::Key(_)
            | EnqueueRefusal::GateTargets
            | EnqueueRefusal::Misrouted { .. }
            | EnqueueRefusal::PartitionEnqueue { .. }
            | EnqueueRefusal::UnknownEndpoint { .. }
            | EnqueueRefusal::PartitionedSource { plain_at_ms: None, .. } => 400,
            EnqueueRefusal::Conflict { .. }
            | EnqueueRefusal::StaleEpoch { .. }
            | EnqueueRefusal::EpochNotAdopted { .. }
            | EnqueueRefusal::UnsettledLayout { .. }
            | EnqueueRefusal::PlainKeys { .. }
            | EnqueueRefusal::MapChanged { .. }
            | EnqueueRefusal::Superseded { .. }
            | EnqueueRefusal::PartitionedSource { plain_at_ms: Some(_), .. } => 409,
        };
        let error = RelayError::new(status, e.code(), e.to_string());
        if status == 429 {
            error.retry_after(BACKPRESSURE_RETRY_AFTER_S)
        } else {
            error
        }
    }
}

impl From<StoreError> for RelayError {
    /// A 500, but the platform's refusal of a write past the account's daily
    /// allowance is a 503 `daily_write_limit` whose `Retry-After` is the wait
    /// until 00:00 UTC (by the wall clock), when writes come back.
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::WriteLimit(_) => RelayError::write_limit(&e, wall_clock_ms()),
            e => RelayError::internal(e.to_string()),
        }
    }
}

impl RelayError {
    /// 503 `daily_write_limit` for `e` at `now_ms`, with `Retry-After` the
    /// seconds until the next UTC day.
    pub fn write_limit(e: &StoreError, now_ms: u64) -> RelayError {
        let message = format!(
            "{e}: the account's rows written for today are used up (Workers Free allows {} a day); \
             nothing was written; writes come back at 00:00 UTC",
            crate::core::WORKER_FREE_ROWS_WRITTEN_PER_DAY
        );
        RelayError::new(503, ErrorCode::DailyWriteLimit, message)
            .retry_after(crate::core::seconds_until_next_utc_day(now_ms))
    }
}

/// The wall clock, ms since the epoch: the runtime's `Date.now()` in wasm,
/// the system clock natively.
pub fn wall_clock_ms() -> u64 {
    #[cfg(target_arch = "wasm32")]
    {
        worker::js_sys::Date::now() as u64
    }
    #[cfg(not(target_arch = "wasm32"))]
    {
        let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
        since.map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
    }
}

impl<E: std::fmt::Display> From<EnqueueFailure<E>> for RelayError {
    /// A refusal keeps its 4xx; the caller's own aborted writes are a 409
    /// `aborted` (the request conflicted with the caller's rules); storage
    /// failures are a 500.
    fn from(e: EnqueueFailure<E>) -> Self {
        match e {
            EnqueueFailure::Refused(r) => r.into(),
            EnqueueFailure::Store(s) => s.into(),
            EnqueueFailure::Aborted(a) => RelayError::new(409, ErrorCode::Aborted, a.to_string()),
        }
    }
}

impl From<ApplyFailure> for RelayError {
    /// What a source reads: 422 for a batch that can never apply (the
    /// source parks its target), 503 for a transient failure (retried); a
    /// hook refusal is transient, since the hook's policy may change.
    fn from(e: ApplyFailure) -> Self {
        match e {
            ApplyFailure::Rejected(e @ ApplyError::Hook(_)) => {
                RelayError::new(503, ErrorCode::HookRefused, e.to_string())
            }
            ApplyFailure::Rejected(e) => RelayError::new(422, e.code(), e.to_string()),
            ApplyFailure::Hook(m) => RelayError::new(503, ErrorCode::HookRefused, m),
            ApplyFailure::Unavailable(m) => RelayError::new(503, ErrorCode::Unavailable, m),
        }
    }
}

/// Compares two byte strings in time that depends only on their lengths.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Whether two bearer tokens are equal, reading exactly
/// [`MAX_BEARER_TOKEN_BYTES`] bytes of each (zeros past its end) whatever
/// their lengths, so the time reveals neither length; a token longer than
/// that equals nothing.
pub fn constant_time_eq_token(a: &[u8], b: &[u8]) -> bool {
    let width = MAX_BEARER_TOKEN_BYTES as usize;
    let byte = |s: &[u8], i: usize| s.get(i).copied().unwrap_or(0);
    let diff = (0..width).fold(a.len() ^ b.len(), |acc, i| acc | usize::from(byte(a, i) ^ byte(b, i)));
    diff == 0 && a.len() <= width
}

/// The 401 every bearer refusal is.
fn unauthorized(message: &str) -> RelayError {
    RelayError::new(401, ErrorCode::Unauthorized, message)
}

/// The token of `Authorization: Bearer <token>`, trimmed; 401 for a
/// missing or malformed header.
fn presented_token(header: Option<&str>) -> Result<&str, RelayError> {
    let value = header.ok_or_else(|| unauthorized("missing Authorization: Bearer <token>"))?;
    let token = value
        .strip_prefix("Bearer ")
        .ok_or_else(|| unauthorized("Authorization must be 'Bearer <token>'"))?;
    Ok(token.trim())
}

/// Which of `lists` hold the request's bearer token: 401 when none does.
/// The token is compared with every entry of every list, each over the
/// same [`MAX_BEARER_TOKEN_BYTES`], without stopping at a match, so the
/// time reveals neither which list nor which position matched. An empty
/// entry matches nothing, so an unset secret admits nobody.
pub fn match_bearer<S: AsRef<[u8]>, const N: usize>(
    header: Option<&str>,
    lists: [&[S]; N],
) -> Result<[bool; N], RelayError> {
    let token = presented_token(header)?.as_bytes();
    let holds = |list: &[S]| {
        list.iter().fold(false, |found, entry| {
            let entry = entry.as_ref();
            found | std::hint::black_box(!entry.is_empty() & constant_time_eq_token(token, entry))
        })
    };
    let found = lists.map(holds);
    if found.contains(&true) {
        Ok(found)
    } else {
        Err(unauthorized("wrong token"))
    }
}

/// Checks `Authorization: Bearer <token>` against `expected` (one token;
/// [`match_bearer`] checks several).
pub fn check_bearer(header: Option<&str>, expected: &str) -> Result<(), RelayError> {
    match_bearer(header, [&[expected]]).map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_daily_write_refusal_is_a_503_that_retries_at_midnight_utc() {
        let e = StoreError::from_platform(crate::store::PLATFORM_WRITE_LIMIT_MESSAGE.into());
        // 2026-12-02T17:30:00Z: 6 h 30 min before the next UTC day.
        let refusal = RelayError::write_limit(&e, 1_796_232_600_000);
        assert_eq!((refusal.status, refusal.code.as_str()), (503, "daily_write_limit"));
        assert_eq!(refusal.retry_after_s, Some(23_400));
        assert!(refusal.message.contains(crate::store::PLATFORM_WRITE_LIMIT_MESSAGE), "{}", refusal.message);
        let through = RelayError::from(EnqueueFailure::<String>::Store(e));
        assert_eq!(through.code, ErrorCode::DailyWriteLimit, "an enqueue's storage failure");
        assert!(through.retry_after_s.is_some_and(|s| (1..=86_400).contains(&s)));
        let other = RelayError::from(StoreError::Sql("disk I/O error".into()));
        assert_eq!((other.status, other.retry_after_s), (500, None), "other storage failures stay 500");
    }

    #[test]
    fn bearer_tokens_are_checked() {
        assert!(check_bearer(Some("Bearer s3cret"), "s3cret").is_ok());
        assert_eq!(check_bearer(None, "s3cret").unwrap_err().status, 401);
        assert_eq!(check_bearer(Some("Bearer nope"), "s3cret").unwrap_err().status, 401);
        assert_eq!(check_bearer(Some("s3cret"), "s3cret").unwrap_err().status, 401);
        assert_eq!(
            check_bearer(Some("Bearer "), "").unwrap_err().status,
            401,
            "an unset secret admits nobody"
        );
    }

    #[test]
    fn bearer_tokens_match_any_list_and_name_every_list_holding_them() {
        let producers = ["p1".to_owned(), "p2".to_owned()];
        let readers = ["r".to_owned()];
        let operators = ["r".to_owned(), "o".to_owned()];
        let lists = [&producers[..], &readers[..], &operators[..]];
        assert_eq!(match_bearer(Some("Bearer p2"), lists), Ok([true, false, false]), "the second of two");
        assert_eq!(match_bearer(Some("Bearer p1"), lists), Ok([true, false, false]), "the first of two");
        assert_eq!(match_bearer(Some("Bearer  o "), lists), Ok([false, false, true]), "trimmed");
        assert_eq!(match_bearer(Some("Bearer r"), lists), Ok([false, true, true]), "every list holding it");
        for header in
            [None, Some("Bearer p3"), Some("Bearer "), Some("p1"), Some("Bearer p"), Some("Bearer p1x")]
        {
            assert_eq!(match_bearer(header, lists).unwrap_err().status, 401, "{header:?}");
        }
        let none: [&[String]; 0] = [];
        assert_eq!(match_bearer(Some("Bearer p1"), none).unwrap_err().code, ErrorCode::Unauthorized);
    }

    #[test]
    fn an_empty_entry_admits_nobody_not_even_an_empty_token() {
        let lists: [&[&str]; 2] = [&[""], &["", " "]];
        assert_eq!(match_bearer(Some("Bearer "), lists).unwrap_err().status, 401);
        assert_eq!(match_bearer(Some("Bearer  "), lists).unwrap_err().status, 401);
        assert_eq!(check_bearer(Some("Bearer"), "").unwrap_err().status, 401);
    }

    #[test]
    fn tokens_compare_equal_up_to_the_longest_token_and_never_past_it() {
        let max = MAX_BEARER_TOKEN_BYTES as usize;
        let at = "a".repeat(max);
        let past = "a".repeat(max + 1);
        assert!(constant_time_eq_token(at.as_bytes(), at.as_bytes()), "at the limit");
        assert!(!constant_time_eq_token(past.as_bytes(), past.as_bytes()), "past the limit");
        assert!(!constant_time_eq_token(at.as_bytes(), past.as_bytes()));
        assert!(!constant_time_eq_token(b"abc", b"abc\0"), "a zero byte is not padding");
        assert!(!constant_time_eq_token(b"abc", b"abd"));
        assert!(constant_time_eq_token(b"", b""));
        assert!(check_bearer(Some(&format!("Bearer {at}")), &at).is_ok());
        assert_eq!(check_bearer(Some(&format!("Bearer {past}")), &past).unwrap_err().status, 401);
    }

    #[test]
    fn constant_time_eq_compares_contents_and_lengths() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"abcd"));
    }

    #[test]
    fn json_problems_are_named() {
        assert_eq!(parse_json::<serde_json::Value>("").unwrap_err().code, "empty_body");
        assert_eq!(parse_json::<serde_json::Value>("{").unwrap_err().code, "malformed_json");
        #[derive(serde::Deserialize, Debug)]
        #[serde(deny_unknown_fields)]
        #[allow(dead_code)]
        struct T {
            a: u32,
        }
        assert_eq!(parse_json::<T>(r#"{"a":1,"b":2}"#).unwrap_err().code, "invalid_request");
        assert_eq!(parse_json::<T>(r#"{"a":"x"}"#).unwrap_err().code, "invalid_request");
    }
}
