//! A source's identity at its targets: the id of the source's Durable
//! Object, beside its name.
//!
//! A target keeps one watermark per source. Names alone collide wherever
//! rows can meet: two source classes (or two Workers) may each hold an
//! object named `default`, and both send their row 1 to the same target.
//! Keyed by name alone, the target would take the second row 1 for a
//! duplicate and the row would be lost while both sources report it
//! delivered. An object's id differs across namespaces, so a target keys
//! its watermarks by (name, id).
//!
//! The id is what `state.id().to_string()` answers in workerd: exactly
//! [`SOURCE_ID_CHARS`] lowercase hexadecimal digits. Nothing else is
//! accepted, so one object always has one spelling.

#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]
#![deny(clippy::unreachable, clippy::todo, clippy::unimplemented)]

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::limits::SOURCE_ID_CHARS;

/// A source object's id, as its targets key its watermark.
///
/// Invariant: exactly [`SOURCE_ID_CHARS`] characters, each in `[0-9a-f]`.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SourceId(String);

/// Why a string is not a valid [`SourceId`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SourceIdError {
    /// The id is not [`SOURCE_ID_CHARS`] characters long; carries its
    /// length in bytes (saturated at `u32::MAX`).
    Length(u32),
    /// The id has a character outside `[0-9a-f]`.
    BadChar(char),
    /// The field is `null`. No build of the relay sends that: one older
    /// than ids omits the field, every later one sends its id. Taken for a
    /// sender without an id, a `null` would apply against its name's legacy
    /// watermark (or the one an identified sender took over), so it is
    /// refused rather than guessed at.
    Null,
}

impl fmt::Display for SourceIdError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SourceIdError::Length(n) => write!(
                f,
                "source_id is {n} bytes; a Durable Object id is {SOURCE_ID_CHARS} lowercase hex digits \
                 (SOURCE_ID_CHARS)"
            ),
            SourceIdError::BadChar(c) => {
                write!(f, "source_id has character {c:?}; a Durable Object id is lowercase hex digits")
            }
            SourceIdError::Null => f.write_str(
                "source_id is null; a sender without an id omits the field, any other sends its id",
            ),
        }
    }
}

impl std::error::Error for SourceIdError {}

impl SourceId {
    /// Validates and wraps `s`.
    pub fn new(s: impl Into<String>) -> Result<SourceId, SourceIdError> {
        let s = s.into();
        if let Some(c) = s.chars().find(|c| !matches!(c, '0'..='9' | 'a'..='f')) {
            return Err(SourceIdError::BadChar(c));
        }
        if s.len() != SOURCE_ID_CHARS as usize {
            return Err(SourceIdError::Length(u32::try_from(s.len()).unwrap_or(u32::MAX)));
        }
        Ok(SourceId(s))
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// A stand-in id for the object `name` of the class (or namespace)
    /// `namespace` outside workerd (the simulator, native tests, the
    /// storage conformance suite): the hex SHA-256 of both, length-prefixed.
    /// The same pair always gets the same id; two namespaces' objects of
    /// one name get different ones, as workerd's ids do.
    pub fn derive(namespace: &str, name: &str) -> SourceId {
        use sha2::{Digest, Sha256};
        let mut hash = Sha256::new();
        for part in [namespace, name] {
            hash.update((part.len() as u64).to_be_bytes());
            hash.update(part.as_bytes());
        }
        // 32 bytes are SOURCE_ID_CHARS hex digits.
        SourceId(hash.finalize().iter().map(|b| format!("{b:02x}")).collect())
    }
}

const _: () = assert!(SOURCE_ID_CHARS == 2 * 32, "a SHA-256 in hex is an id");

impl fmt::Display for SourceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for SourceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.0)
    }
}

impl Serialize for SourceId {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for SourceId {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<SourceId, D::Error> {
        let s = String::deserialize(d)?;
        SourceId::new(s).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_id_is_exactly_its_length_of_lowercase_hex() {
        let id = "0123456789abcdef".repeat(4);
        assert_eq!(SourceId::new(id.clone()).unwrap().as_str(), id);
        let n = SOURCE_ID_CHARS as usize;
        assert_eq!(SourceId::new("a".repeat(n - 1)), Err(SourceIdError::Length(SOURCE_ID_CHARS - 1)));
        assert_eq!(SourceId::new("a".repeat(n + 1)), Err(SourceIdError::Length(SOURCE_ID_CHARS + 1)));
        assert_eq!(SourceId::new(""), Err(SourceIdError::Length(0)));
        assert_eq!(SourceId::new("A".repeat(n)), Err(SourceIdError::BadChar('A')));
        assert_eq!(SourceId::new(format!("{}g", "a".repeat(n - 1))), Err(SourceIdError::BadChar('g')));
        assert_eq!(SourceId::new("é".repeat(n / 2)), Err(SourceIdError::BadChar('é')));
    }

    #[test]
    fn a_derived_id_is_valid_stable_and_apart_per_namespace() {
        let a = SourceId::derive("RelaySource", "default");
        assert_eq!(SourceId::new(a.as_str()), Ok(a.clone()));
        assert_eq!(SourceId::derive("RelaySource", "default"), a);
        assert_ne!(SourceId::derive("OtherSource", "default"), a);
        assert_ne!(SourceId::derive("RelaySourc", "edefault"), a, "parts are length-prefixed");
    }

    #[test]
    fn deserialization_validates() {
        assert!(serde_json::from_str::<SourceId>(&format!("\"{}\"", "f".repeat(64))).is_ok());
        assert!(serde_json::from_str::<SourceId>("\"xyz\"").is_err());
    }
}
