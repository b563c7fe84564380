//! The apply call's batch on the wire, as both sides see it: its form
//! ([`ApplyRequest`] of [`ApplyRow`]s, answered by an [`ApplyReply`]), how a
//! source encodes it from its stored rows without re-encoding them, and how
//! a target decodes it and checks it against the batch and row limits
//! ([`ApplyError`] says why one is refused).

use crate::codes::ErrorCode;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::fire::TargetCall;
use crate::json::nesting_depth;
use crate::limits::{
    BATCH_ENVELOPE_DEPTH, MAX_BATCH_BYTES, MAX_BATCH_EFFECTS, MAX_BATCH_ROWS, MAX_VALUE_DEPTH, SEQ_MAX,
};
use crate::name::Name;
use crate::row::{Effects, QueuedRow};
use crate::source_id::{SourceId, SourceIdError};

/// One row in a target batch.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApplyRow {
    /// The source sequence.
    pub seq: u64,
    /// What to apply.
    pub effects: Effects,
}

impl ApplyRow {
    /// The row's puts whose keys start with `prefix`, in order, each as the
    /// rest of its key and its value read as a `T` of your own: what a hook
    /// that keeps its own tables reads. The first value that is not a `T`
    /// is an error naming its key.
    pub fn puts_under<T: serde::de::DeserializeOwned>(
        &self,
        prefix: &str,
    ) -> Result<Vec<(&str, T)>, PutDecodeError> {
        let mut out = Vec::new();
        for (key, value) in &self.effects.puts {
            let Some(rest) = key.strip_prefix(prefix) else { continue };
            let decoded = value.decode().map_err(|e| PutDecodeError {
                seq: self.seq,
                key: key.clone(),
                reason: e.to_string(),
            })?;
            out.push((rest, decoded));
        }
        Ok(out)
    }
}

/// A put whose value is not what [`ApplyRow::puts_under`] was asked to read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PutDecodeError {
    /// The row's source sequence.
    pub seq: u64,
    /// The put's whole key.
    pub key: String,
    /// What the JSON decoder said.
    pub reason: String,
}

impl fmt::Display for PutDecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "row {} put {:?}: {}", self.seq, self.key, self.reason)
    }
}

impl std::error::Error for PutDecodeError {}

/// A batch from one source to one target: the body of the apply call.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApplyRequest {
    /// The sending source's name.
    pub source: Name,
    /// The sending source's object id; with the name, keys the watermark.
    /// `None` from a sender older than ids.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_id: Option<SourceId>,
    /// Rows, strictly ascending by `seq`.
    pub rows: Vec<ApplyRow>,
}

/// A batch as it arrives, before its source id is validated (so a bad id
/// gets its own error).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WireRequest {
    /// The sending source's name.
    source: Name,
    /// The sending object's id as sent, validated into a [`SourceId`]:
    /// `None` when absent, `Some(None)` when `null` (refused: see
    /// [`SourceIdError::Null`]).
    #[serde(default, deserialize_with = "present")]
    source_id: Option<Option<String>>,
    /// Rows, checked by [`validate_request`].
    rows: Vec<ApplyRow>,
}

/// Reads a field that is present, keeping a `null` apart from an absent
/// field (which `#[serde(default)]` makes `None`).
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Option<String>>, D::Error> {
    Option::<String>::deserialize(d).map(Some)
}

/// The target's answer to an apply call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApplyReply {
    /// The target's watermark for the source after the call.
    pub watermark: u64,
    /// Rows applied by this call.
    pub applied: u32,
    /// Rows skipped as duplicates.
    pub duplicates: u32,
}

/// Encodes the batch for `call` from the fire's rows, embedding each stored
/// body verbatim:
/// `{"source":..,"source_id":..,"rows":[{"seq":N,"effects":BODY},..]}`.
/// `rows` are the fire's window, which holds every row of every call the
/// fire hands out (the fire's own state, not caller bytes).
#[allow(clippy::expect_used, reason = "a call's rows are in the fire's window: the engine built both")]
pub fn encode_request(source: &Name, id: &SourceId, call: &TargetCall, rows: &[QueuedRow]) -> String {
    let mut out = String::with_capacity(call.bytes as usize + crate::limits::BATCH_HEADER_BYTES as usize);
    // The alphabets of a name and an id need no JSON escapes.
    out.push_str(r#"{"source":""#);
    out.push_str(source.as_str());
    out.push_str(r#"","source_id":""#);
    out.push_str(id.as_str());
    out.push_str(r#"","rows":["#);
    let mut window = rows.iter();
    for (n, seq) in call.seqs.iter().enumerate() {
        let row = window.find(|r| r.seq == *seq).expect("every call row is in the window, ascending");
        assert_eq!(row.target, call.target, "row {seq} belongs to another target");
        if n > 0 {
            out.push(',');
        }
        out.push_str(r#"{"seq":"#);
        out.push_str(&seq.to_string());
        out.push_str(r#","effects":"#);
        out.push_str(&row.body);
        out.push('}');
    }
    out.push_str("]}");
    out
}

/// Why a target refuses a batch. All are permanent: resending the same
/// batch cannot succeed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApplyError {
    /// The batch did not decode.
    Malformed(String),
    /// The batch has no rows.
    Empty,
    /// The batch is over a batch limit; names the limit.
    TooLarge(&'static str),
    /// A sequence is zero, past [`SEQ_MAX`], or not above its predecessor.
    BadSequence(u64),
    /// A row's effects break a row limit.
    BadRow(u64, String),
    /// The source id is not a Durable Object id.
    BadSourceId(SourceIdError),
    /// The hook refused the batch.
    Hook(String),
}

impl ApplyError {
    /// Stable machine-readable code.
    pub fn code(&self) -> ErrorCode {
        match self {
            ApplyError::Malformed(_) => ErrorCode::MalformedBatch,
            ApplyError::Empty => ErrorCode::EmptyBatch,
            ApplyError::TooLarge(_) => ErrorCode::BatchTooLarge,
            ApplyError::BadSequence(_) => ErrorCode::BadSequence,
            ApplyError::BadRow(..) => ErrorCode::BadRow,
            ApplyError::BadSourceId(_) => ErrorCode::InvalidSourceId,
            ApplyError::Hook(_) => ErrorCode::HookRefused,
        }
    }
}

impl fmt::Display for ApplyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ApplyError::Malformed(e) => write!(f, "batch does not decode: {e}"),
            ApplyError::Empty => write!(f, "batch has no rows"),
            ApplyError::TooLarge(limit) => write!(f, "batch exceeds {limit}"),
            ApplyError::BadSequence(s) => {
                write!(f, "sequence {s} is out of range or not ascending")
            }
            ApplyError::BadRow(s, e) => write!(f, "row {s}: {e}"),
            ApplyError::BadSourceId(e) => e.fmt(f),
            ApplyError::Hook(e) => write!(f, "hook rejected the batch: {e}"),
        }
    }
}

impl std::error::Error for ApplyError {}

/// Decodes and validates a batch body.
pub fn decode_request(body: &str) -> Result<ApplyRequest, ApplyError> {
    // Framing is a small fraction of a batch; a body far past the limit is
    // refused before it is parsed.
    if body.len() > 2 * MAX_BATCH_BYTES as usize {
        return Err(ApplyError::TooLarge("MAX_BATCH_BYTES"));
    }
    let depth = nesting_depth(body);
    if depth > MAX_VALUE_DEPTH + BATCH_ENVELOPE_DEPTH {
        return Err(ApplyError::Malformed(format!("batch nests {depth} levels deep")));
    }
    let wire: WireRequest = serde_json::from_str(body).map_err(|e| ApplyError::Malformed(e.to_string()))?;
    let source_id = match wire.source_id {
        None => None,
        Some(None) => return Err(ApplyError::BadSourceId(SourceIdError::Null)),
        Some(Some(id)) => Some(SourceId::new(id).map_err(ApplyError::BadSourceId)?),
    };
    let request = ApplyRequest { source: wire.source, source_id, rows: wire.rows };
    validate_request(&request)?;
    Ok(request)
}

/// Checks a batch against the batch and row limits and sequence order.
pub fn validate_request(request: &ApplyRequest) -> Result<(), ApplyError> {
    if request.rows.is_empty() {
        return Err(ApplyError::Empty);
    }
    if request.rows.len() > MAX_BATCH_ROWS as usize {
        return Err(ApplyError::TooLarge("MAX_BATCH_ROWS"));
    }
    let effects = request.rows.iter().fold(0u32, |sum, r| sum.saturating_add(r.effects.count()));
    if effects > MAX_BATCH_EFFECTS {
        return Err(ApplyError::TooLarge("MAX_BATCH_EFFECTS"));
    }
    let mut previous = 0;
    for row in &request.rows {
        if row.seq == 0 || row.seq > SEQ_MAX || row.seq <= previous {
            return Err(ApplyError::BadSequence(row.seq));
        }
        previous = row.seq;
        row.effects.validate().map_err(|e| ApplyError::BadRow(row.seq, e.to_string()))?;
    }
    Ok(())
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    #[test]
    fn puts_under_reads_the_prefixed_puts_in_order_and_names_a_value_of_the_wrong_shape() {
        let value = |v: &str| crate::row::JsonValue::from_text(v).unwrap();
        let puts = vec![
            ("order:a".to_owned(), value("3")),
            ("note".to_owned(), value("\"x\"")),
            ("order:b".to_owned(), value("4")),
        ];
        let row = ApplyRow { seq: 7, effects: Effects { puts, ..Effects::default() } };
        assert_eq!(row.puts_under::<u64>("order:").unwrap(), vec![("a", 3), ("b", 4)]);
        assert_eq!(row.puts_under::<u64>("none:").unwrap(), vec![]);
        let e = row.puts_under::<u64>("").unwrap_err();
        assert_eq!((e.seq, e.key.as_str()), (7, "note"), "the first value that is not a u64");
        assert!(e.to_string().starts_with("row 7 put \"note\": "), "{e}");
    }
    use crate::row::JsonValue;

    fn row(seq: u64) -> ApplyRow {
        ApplyRow {
            seq,
            effects: Effects {
                puts: vec![(format!("k{seq}"), JsonValue::from_value(&seq.into()))],
                deletes: vec![],
                trace: None,
            },
        }
    }

    /// A batch from `s` of one row per sequence, each putting one key.
    pub(crate) fn request(seqs: &[u64]) -> ApplyRequest {
        ApplyRequest {
            source: Name::new("s").unwrap(),
            source_id: None,
            rows: seqs.iter().map(|s| row(*s)).collect(),
        }
    }

    #[test]
    fn batches_must_ascend_and_stay_in_range() {
        assert_eq!(validate_request(&request(&[])), Err(ApplyError::Empty));
        assert_eq!(validate_request(&request(&[2, 2])), Err(ApplyError::BadSequence(2)));
        assert_eq!(validate_request(&request(&[3, 1])), Err(ApplyError::BadSequence(1)));
        assert_eq!(validate_request(&request(&[0])), Err(ApplyError::BadSequence(0)));
        assert_eq!(validate_request(&request(&[SEQ_MAX + 1])), Err(ApplyError::BadSequence(SEQ_MAX + 1)));
        assert!(validate_request(&request(&[1, SEQ_MAX])).is_ok());
    }

    #[test]
    fn batch_row_count_is_checked_at_and_past_the_limit() {
        let seqs: Vec<u64> = (1..=u64::from(MAX_BATCH_ROWS)).collect();
        assert!(validate_request(&request(&seqs)).is_ok());
        let seqs: Vec<u64> = (1..=u64::from(MAX_BATCH_ROWS) + 1).collect();
        assert_eq!(validate_request(&request(&seqs)), Err(ApplyError::TooLarge("MAX_BATCH_ROWS")));
    }

    #[test]
    fn an_encoded_batch_stays_within_its_counted_bytes() {
        use crate::fire::TargetCall;
        use crate::limits::BATCH_HEADER_BYTES;
        use crate::row::QueuedRow;
        let name = Name::new("t".repeat(crate::MAX_NAME_BYTES as usize)).unwrap();
        let rows: Vec<QueuedRow> = (0..3)
            .map(|i| {
                let body = format!(r#"{{"puts":[["k",{i}]],"deletes":[]}}"#);
                let seq = SEQ_MAX - 2 + i;
                QueuedRow {
                    seq,
                    target: name.clone(),
                    at_ms: 0,
                    due_ms: 0,
                    bytes: body.len() as u32,
                    effects: 1,
                    body,
                    sendable: true,
                }
            })
            .collect();
        let bytes = rows.iter().map(|r| r.bytes + crate::BATCH_ROW_FRAMING_BYTES).sum();
        let call =
            TargetCall { group: 0, target: name.clone(), seqs: rows.iter().map(|r| r.seq).collect(), bytes };
        let id = SourceId::new("f".repeat(crate::SOURCE_ID_CHARS as usize)).unwrap();
        let wire = encode_request(&name, &id, &call, &rows);
        assert!(
            wire.len() as u32 <= bytes + BATCH_HEADER_BYTES,
            "{} > {}",
            wire.len(),
            bytes + BATCH_HEADER_BYTES
        );
        let decoded = decode_request(&wire).unwrap();
        assert_eq!(decoded.rows.len(), 3);
        assert_eq!(decoded.source_id, Some(id));
    }

    #[test]
    fn a_batch_without_an_id_decodes_and_a_bad_id_is_refused() {
        let body =
            |id: &str| format!(r#"{{"source":"s",{id}"rows":[{{"seq":1,"effects":{{"deletes":["k"]}}}}]}}"#);
        assert_eq!(decode_request(&body("")).unwrap().source_id, None, "a sender older than ids");
        let good = format!(r#""source_id":"{}","#, "a".repeat(64));
        assert!(decode_request(&body(&good)).unwrap().source_id.is_some());
        for bad in [r#""source_id":"","#, r#""source_id":"ABC","#, r#""source_id":"xyz","#] {
            let e = decode_request(&body(bad)).unwrap_err();
            assert_eq!(e.code(), "invalid_source_id", "{bad}");
            assert!(e.to_string().contains("source_id"), "the message names the field: {e}");
        }
        let long = format!(r#""source_id":"{}","#, "a".repeat(65));
        assert!(matches!(
            decode_request(&body(&long)),
            Err(ApplyError::BadSourceId(SourceIdError::Length(65)))
        ));
        assert!(matches!(decode_request(&body(r#""source_id":7,"#)), Err(ApplyError::Malformed(_))));
    }

    #[test]
    fn malformed_and_unknown_fields_are_refused() {
        assert!(matches!(decode_request("{"), Err(ApplyError::Malformed(_))));
        assert!(matches!(decode_request(r#"{"source":"s","rows":[],"x":1}"#), Err(ApplyError::Malformed(_))));
        assert!(matches!(
            decode_request(r#"{"source":"bad name","rows":[]}"#),
            Err(ApplyError::Malformed(_))
        ));
        assert!(matches!(
            decode_request(r#"{"source":"s","rows":[{"seq":1,"effects":{}}]}"#),
            Err(ApplyError::BadRow(1, _))
        ));
    }
}
