//! W3C trace context (`traceparent`) carried with rows, so one event can be
//! followed from the producer's request through the source's alarm to the
//! target's apply in Workers Logs. The relay only carries and logs it: it
//! stores the producer's value in the row body (no extra row write), sends
//! it with the row in the target batch, and names it in the source's
//! per-alarm log line and the target's apply log line.
//!
//! Accepted form (version 00 of the W3C Trace Context recommendation):
//! `00-<32 lowercase hex trace-id>-<16 lowercase hex parent-id>-<2 hex flags>`,
//! 55 bytes, with neither id all zeros. Anything else is refused with
//! `invalid_traceparent` before anything is written.

#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

use crate::codes::ErrorCode;
use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::limits::TRACEPARENT_BYTES;

/// A validated `traceparent` value.
///
/// Invariant: exactly [`TRACEPARENT_BYTES`] bytes of the version-00 form,
/// lowercase hex, trace-id and parent-id not all zeros.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Traceparent(String);

/// Why a `traceparent` is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TraceError {
    /// Not [`TRACEPARENT_BYTES`] bytes; carries the length.
    Length(u32),
    /// Not `vv-<32 hex>-<16 hex>-<2 hex>` in lowercase hex.
    Format,
    /// A version other than `00`.
    Version,
    /// An all-zero trace-id or parent-id (invalid by the recommendation).
    ZeroId,
}

impl TraceError {
    /// Stable machine-readable code.
    pub fn code(&self) -> ErrorCode {
        ErrorCode::InvalidTraceparent
    }
}

impl fmt::Display for TraceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TraceError::Length(n) => write!(f, "traceparent is {n} bytes; version 00 is {TRACEPARENT_BYTES}"),
            TraceError::Format => {
                write!(f, "traceparent is not 00-<32 hex>-<16 hex>-<2 hex> in lowercase hex")
            }
            TraceError::Version => write!(f, "traceparent version is not 00"),
            TraceError::ZeroId => write!(f, "traceparent has an all-zero trace-id or parent-id"),
        }
    }
}

impl std::error::Error for TraceError {}

fn lower_hex(s: &str) -> bool {
    s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

impl Traceparent {
    /// Validates `text` (see the module doc).
    pub fn parse(text: &str) -> Result<Traceparent, TraceError> {
        if text.len() != TRACEPARENT_BYTES as usize {
            return Err(TraceError::Length(u32::try_from(text.len()).unwrap_or(u32::MAX)));
        }
        let parts: Vec<&str> = text.split('-').collect();
        let [version, trace_id, parent_id, flags] = parts.as_slice() else { return Err(TraceError::Format) };
        let shape = [(version, 2), (trace_id, 32), (parent_id, 16), (flags, 2)];
        if !shape.iter().all(|(p, n)| p.len() == *n && lower_hex(p)) {
            return Err(TraceError::Format);
        }
        if *version != "00" {
            return Err(TraceError::Version);
        }
        if trace_id.bytes().all(|b| b == b'0') || parent_id.bytes().all(|b| b == b'0') {
            return Err(TraceError::ZeroId);
        }
        Ok(Traceparent(text.to_owned()))
    }

    /// The value as sent.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Traceparent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for Traceparent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Traceparent({})", self.0)
    }
}

impl Serialize for Traceparent {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for Traceparent {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Traceparent, D::Error> {
        let text = String::deserialize(d)?;
        Traceparent::parse(&text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn the_version_00_form_is_accepted_and_everything_else_refused() {
        assert_eq!(Traceparent::parse(GOOD).unwrap().as_str(), GOOD);
        assert_eq!(Traceparent::parse(""), Err(TraceError::Length(0)));
        assert_eq!(Traceparent::parse(&format!("{GOOD}0")), Err(TraceError::Length(56)));
        assert_eq!(Traceparent::parse(&GOOD.to_uppercase()), Err(TraceError::Format));
        assert_eq!(Traceparent::parse(&GOOD.replace('-', "_")), Err(TraceError::Format));
        assert_eq!(Traceparent::parse(&GOOD.replacen("00", "01", 1)), Err(TraceError::Version));
        assert_eq!(Traceparent::parse(&GOOD.replacen("00", "ff", 1)), Err(TraceError::Version));
        let zero_trace = format!("00-{}-00f067aa0ba902b7-01", "0".repeat(32));
        assert_eq!(Traceparent::parse(&zero_trace), Err(TraceError::ZeroId));
        let zero_parent = format!("00-4bf92f3577b34da6a3ce929d0e0e4736-{}-01", "0".repeat(16));
        assert_eq!(Traceparent::parse(&zero_parent), Err(TraceError::ZeroId));
        // 55 bytes but multi-byte characters: refused without slicing inside one.
        let odd = format!("00-{}-00f067aa0ba902b7-0", "é".repeat(16));
        assert_eq!(odd.len(), 54);
        assert!(Traceparent::parse(&format!("{odd}1")).is_err());
    }

    #[test]
    fn it_round_trips_through_json_and_refuses_bad_text_there_too() {
        let t = Traceparent::parse(GOOD).unwrap();
        let json = serde_json::to_string(&t).unwrap();
        assert_eq!(serde_json::from_str::<Traceparent>(&json).unwrap(), t);
        assert!(serde_json::from_str::<Traceparent>("\"00-x\"").is_err());
    }
}
