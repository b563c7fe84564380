//! Validated partition names: the Durable Object name of a source or target.
//!
//! A name is what `idFromName` receives, what the target's watermark table is
//! keyed by, and what appears in logs and URLs, so it is restricted to a
//! small, printable, URL-safe alphabet and a bounded length.

#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]
#![deny(clippy::unreachable, clippy::todo, clippy::unimplemented)]

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::limits::MAX_NAME_BYTES;

/// The prefix of a target name that addresses an HTTPS endpoint the
/// operator configured (`endpoint:<name>`) instead of a Durable Object: a
/// producer names an endpoint, never a URL, so no row can make the relay
/// fetch an address of its choosing.
pub const ENDPOINT_PREFIX: &str = "endpoint:";

/// A source or target object name.
///
/// Invariant: 1..=[`MAX_NAME_BYTES`] bytes, each in `[A-Za-z0-9._:-]`, not
/// only dots.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Name(String);

/// Why a string is not a valid [`Name`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NameError {
    /// The name is empty.
    Empty,
    /// The name is longer than [`MAX_NAME_BYTES`]; carries its length.
    TooLong(u32),
    /// The name has a character outside `[A-Za-z0-9._:-]`.
    BadChar(char),
    /// The name is only dots (`.`, `..`): URL paths rewrite such a segment,
    /// so the object could never be addressed through one.
    Dots,
}

impl fmt::Display for NameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NameError::Empty => write!(f, "name is empty"),
            NameError::TooLong(n) => {
                write!(f, "name is {n} bytes; the limit is {MAX_NAME_BYTES}")
            }
            NameError::BadChar(c) => {
                write!(f, "name has character {c:?}; allowed are letters, digits and . _ : -")
            }
            NameError::Dots => write!(f, "name is only dots, which URL paths rewrite"),
        }
    }
}

impl std::error::Error for NameError {}

fn allowed(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '-')
}

impl Name {
    /// Validates and wraps `s`.
    pub fn new(s: impl Into<String>) -> Result<Name, NameError> {
        let s = s.into();
        if s.is_empty() {
            return Err(NameError::Empty);
        }
        if s.len() > MAX_NAME_BYTES as usize {
            return Err(NameError::TooLong(u32::try_from(s.len()).unwrap_or(u32::MAX)));
        }
        if let Some(c) = s.chars().find(|c| !allowed(*c)) {
            return Err(NameError::BadChar(c));
        }
        if s.bytes().all(|b| b == b'.') {
            return Err(NameError::Dots);
        }
        Ok(Name(s))
    }

    /// The name as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The endpoint name this target name carries after `endpoint:`, if it
    /// carries the prefix. The rest may be empty (`endpoint:`): no endpoint
    /// has that name, so such a row is refused as an unknown endpoint.
    pub fn endpoint(&self) -> Option<&str> {
        self.0.strip_prefix(ENDPOINT_PREFIX)
    }
}

impl fmt::Display for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.0)
    }
}

impl Serialize for Name {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for Name {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Name, D::Error> {
        let s = String::deserialize(d)?;
        Name::new(s).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn name_accepts_the_alphabet_up_to_the_length_limit() {
        assert!(Name::new("orders-1.eu:shard_7").is_ok());
        assert!(Name::new("a".repeat(MAX_NAME_BYTES as usize)).is_ok());
    }

    #[test]
    fn name_rejects_empty_long_and_foreign_characters() {
        assert_eq!(Name::new(""), Err(NameError::Empty));
        assert_eq!(
            Name::new("a".repeat(MAX_NAME_BYTES as usize + 1)),
            Err(NameError::TooLong(MAX_NAME_BYTES + 1))
        );
        assert_eq!(Name::new("a/b"), Err(NameError::BadChar('/')));
        assert_eq!(Name::new("a b"), Err(NameError::BadChar(' ')));
        assert_eq!(Name::new("é"), Err(NameError::BadChar('é')));
        assert_eq!(Name::new("."), Err(NameError::Dots));
        assert_eq!(Name::new(".."), Err(NameError::Dots));
        assert!(Name::new("..a").is_ok());
    }

    #[test]
    fn only_the_prefix_makes_an_endpoint_target() {
        assert_eq!(Name::new("endpoint:orders-hook").unwrap().endpoint(), Some("orders-hook"));
        assert_eq!(Name::new("endpoint:").unwrap().endpoint(), Some(""));
        assert_eq!(Name::new("endpoints:x").unwrap().endpoint(), None);
        assert_eq!(Name::new("x:endpoint:y").unwrap().endpoint(), None);
        assert_eq!(Name::new("orders").unwrap().endpoint(), None);
    }

    #[test]
    fn name_deserialization_validates() {
        assert!(serde_json::from_str::<Name>("\"ok\"").is_ok());
        assert!(serde_json::from_str::<Name>("\"not ok\"").is_err());
    }
}
