//! Decoding the JSON bodies callers send, before anything is written: one
//! decode point per body, each refusing unknown fields and trailing input,
//! each failure a typed [`RequestError`] with a stable code.
//!
//! Only shapes and names are checked here; the row limits (effects, sizes,
//! values) are checked by [`encode_rows`](crate::enqueue::encode_rows) when
//! the enqueue is planned, still before any write.

#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]
#![deny(clippy::unreachable, clippy::todo, clippy::unimplemented)]

use crate::codes::ErrorCode;
use std::fmt;

use serde::de::DeserializeOwned;
use serde::Deserialize;

use crate::enqueue::EnqueueRow;
use crate::json::nesting_depth;
use crate::limits::{ENQUEUE_ENVELOPE_DEPTH, MAX_VALUE_DEPTH};
use crate::name::{Name, NameError};
use crate::row::JsonValue;

/// Why a request body was refused. Nothing was written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RequestError {
    /// The body is empty (or only whitespace).
    EmptyBody,
    /// The body is not JSON; carries serde_json's description.
    Malformed(String),
    /// The JSON has the wrong shape: a missing or unknown field, a wrong
    /// type; carries serde_json's description.
    Invalid(String),
    /// The body nests deeper than any valid request can.
    TooDeep {
        /// How deep it nests.
        depth: u32,
        /// The deepest nesting this body may have.
        max: u32,
    },
    /// Row `index` names an invalid target.
    Target {
        /// Position of the row in the request.
        index: u32,
        /// What is wrong with the name.
        error: NameError,
    },
}

impl RequestError {
    /// Stable machine-readable code.
    pub fn code(&self) -> ErrorCode {
        match self {
            RequestError::EmptyBody => ErrorCode::EmptyBody,
            RequestError::Malformed(_) => ErrorCode::MalformedJson,
            RequestError::Invalid(_) => ErrorCode::InvalidRequest,
            RequestError::TooDeep { .. } => ErrorCode::ValueTooDeep,
            RequestError::Target { .. } => ErrorCode::InvalidTarget,
        }
    }
}

impl fmt::Display for RequestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RequestError::EmptyBody => write!(f, "request body is empty; expected JSON"),
            RequestError::Malformed(e) => write!(f, "body is not JSON: {e}"),
            RequestError::Invalid(e) => write!(f, "invalid request: {e}"),
            RequestError::TooDeep { depth, max } => write!(
                f,
                "body nests {depth} levels deep; values may nest at most {MAX_VALUE_DEPTH} \
                 (MAX_VALUE_DEPTH), so this body at most {max}"
            ),
            RequestError::Target { index, error } => write!(f, "rows[{index}].target: {error}"),
        }
    }
}

impl std::error::Error for RequestError {}

/// Parses `text` as one `T`, refusing an empty body, a body nested deeper
/// than `depth_max`, malformed JSON and the wrong shape, each with its own
/// error.
pub fn decode_json<T: DeserializeOwned>(text: &str, depth_max: u32) -> Result<T, RequestError> {
    if text.trim().is_empty() {
        return Err(RequestError::EmptyBody);
    }
    let depth = nesting_depth(text);
    if depth > depth_max {
        return Err(RequestError::TooDeep { depth, max: depth_max });
    }
    serde_json::from_str(text).map_err(|e| {
        if e.is_syntax() || e.is_eof() {
            RequestError::Malformed(e.to_string())
        } else {
            RequestError::Invalid(e.to_string())
        }
    })
}

/// An enqueue as a caller sends it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EnqueueRequest {
    /// The rows, targets validated.
    pub rows: Vec<EnqueueRow>,
    /// The optional idempotency key (validated when the enqueue is planned).
    pub idempotency_key: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EnqueueBody {
    rows: Vec<WireRow>,
    #[serde(default)]
    idempotency_key: Option<String>,
}

/// A row as sent, before its target name is validated (so the error can
/// name the row).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WireRow {
    target: String,
    #[serde(default)]
    puts: Vec<(String, JsonValue)>,
    #[serde(default)]
    deletes: Vec<String>,
    #[serde(default)]
    not_before_ms: Option<u64>,
    #[serde(default)]
    delay_ms: Option<u64>,
}

/// Decodes an enqueue body:
/// `{"rows":[{"target","puts":[[key, value]..],"deletes":[key..],"not_before_ms"?,"delay_ms"?}..],"idempotency_key"?}`.
pub fn decode_enqueue(text: &str) -> Result<EnqueueRequest, RequestError> {
    let body: EnqueueBody = decode_json(text, MAX_VALUE_DEPTH + ENQUEUE_ENVELOPE_DEPTH)?;
    let rows = (0u32..)
        .zip(body.rows)
        .map(|(index, r)| {
            let target = Name::new(r.target).map_err(|error| RequestError::Target { index, error })?;
            Ok(EnqueueRow {
                target,
                puts: r.puts,
                deletes: r.deletes,
                trace: None,
                not_before_ms: r.not_before_ms,
                delay_ms: r.delay_ms,
            })
        })
        .collect::<Result<Vec<_>, RequestError>>()?;
    Ok(EnqueueRequest { rows, idempotency_key: body.idempotency_key })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_enqueue_body_decodes_with_its_key() {
        let r = decode_enqueue(r#"{"rows":[{"target":"t","puts":[["k",[1, 2]]]}],"idempotency_key":"x"}"#)
            .unwrap();
        assert_eq!(r.rows.len(), 1);
        assert_eq!(r.rows[0].puts[0].1.as_str(), "[1, 2]", "values are kept as sent until planning");
        assert_eq!(r.idempotency_key.as_deref(), Some("x"));
    }

    #[test]
    fn each_kind_of_bad_body_has_its_code() {
        let code = |t: &str| decode_enqueue(t).unwrap_err().code();
        assert_eq!(code(""), "empty_body");
        assert_eq!(code("  \n"), "empty_body");
        assert_eq!(code("{"), "malformed_json");
        assert_eq!(code(r#"{"rows":[]} x"#), "malformed_json");
        assert_eq!(code(r#"{"rows":5}"#), "invalid_request");
        assert_eq!(code(r#"{"rows":[],"x":1}"#), "invalid_request");
        assert_eq!(code(r#"{"rows":[{"target":"a b","deletes":["k"]}]}"#), "invalid_target");
    }

    #[test]
    fn body_nesting_is_checked_at_and_past_its_edge() {
        let max = MAX_VALUE_DEPTH + ENQUEUE_ENVELOPE_DEPTH;
        let n = MAX_VALUE_DEPTH as usize;
        let at =
            format!(r#"{{"rows":[{{"target":"t","puts":[["k",{}{}]]}}]}}"#, "[".repeat(n), "]".repeat(n));
        assert_eq!(nesting_depth(&at), max);
        assert!(decode_enqueue(&at).is_ok());
        let past = at.replacen("[[", "[[[", 1).replacen("]]", "]]]", 1);
        assert_eq!(decode_enqueue(&past), Err(RequestError::TooDeep { depth: max + 1, max }));
        let absurd = "[".repeat(200_000);
        assert_eq!(decode_enqueue(&absurd).unwrap_err().code(), "value_too_deep");
    }
}
