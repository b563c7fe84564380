//! The typed parameters of an operation's request line: how each one in a
//! path segment or in the query is read (with the error code and limit it
//! refuses with) and written back. An operation's declaration
//! ([`crate::operations`]) names one of these per parameter, so its parse
//! and its path are derived from the same choice and cannot disagree.
//!
//! A parameter here is a codec, not the value: the operation's field keeps
//! its plain type ([`Name`], `u64`, ...) and the codec says which refusal
//! a bad one gets, since the same type is refused differently in different
//! places (a target's name with `invalid_target`, a watermark's source with
//! `invalid_name`, a page's cursor with `invalid_query`).

#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]
#![deny(clippy::unreachable, clippy::todo, clippy::unimplemented)]

use url::form_urlencoded;

use crate::core::{ErrorCode, Layout, Name};
use crate::line::{key_bound, layout, limit, name, seq};
use crate::refusal::Refusal;
use crate::routes::WatermarkCursor;

/// A parameter that is a whole path segment (`{target}`).
pub(crate) trait PathParam {
    /// The operation field's type.
    type Value;
    /// The argument's type in the TypeScript method that sends it.
    const TS: &'static str;
    /// Reads the percent-decoded segment, refusing a bad one.
    fn parse(segment: &str) -> Result<Self::Value, Refusal>;
    /// Writes the segment back, as [`PathParam::parse`] reads it.
    fn write(value: &Self::Value) -> String;
    /// A value to check the round trip with, from `rng`.
    #[cfg(any(test, feature = "samples"))]
    fn sample(rng: &mut samples::Rng) -> Self::Value;
}

/// A query parameter (`?after=`): absent, or given once.
pub(crate) trait QueryParam {
    /// The operation field's type.
    type Value;
    /// The parameter's type in the TypeScript method that sends it.
    const TS: &'static str;
    /// The largest value it accepts, where it has one to tell a caller.
    const MAX: Option<u32> = None;
    /// Whether a request must give it (refused when absent).
    const REQUIRED: bool = false;
    /// Reads the parameter `key`'s value (`None`: not given), refusing a
    /// bad one.
    fn parse(key: &str, text: Option<String>) -> Result<Self::Value, Refusal>;
    /// The value's text in the query (already encoded), or `None` to leave
    /// the parameter out, as [`QueryParam::parse`] reads it.
    fn write(value: &Self::Value) -> Option<String>;
    /// A value to check the round trip with, from `rng`.
    #[cfg(any(test, feature = "samples"))]
    fn sample(rng: &mut samples::Rng) -> Self::Value;
}

/// A built path with its query: the `(key, text)` pairs that are given, in
/// order, after a `?` (none: no `?`).
pub(crate) fn with_query(path: String, pairs: &[(&str, Option<String>)]) -> String {
    let given: Vec<String> =
        pairs.iter().filter_map(|(key, text)| text.as_ref().map(|text| format!("{key}={text}"))).collect();
    if given.is_empty() {
        return path;
    }
    format!("{path}?{}", given.join("&"))
}

/// A target's name in the path, refused with `invalid_target`.
pub(crate) struct TargetName;

impl PathParam for TargetName {
    type Value = Name;
    const TS: &'static str = "string";
    fn parse(segment: &str) -> Result<Name, Refusal> {
        name(segment, ErrorCode::InvalidTarget)
    }
    fn write(value: &Name) -> String {
        value.to_string()
    }
    #[cfg(any(test, feature = "samples"))]
    fn sample(rng: &mut samples::Rng) -> Name {
        rng.name()
    }
}

/// Any other name in the path (a watermark's source), refused with
/// `invalid_name`.
pub(crate) struct PathName;

impl PathParam for PathName {
    type Value = Name;
    const TS: &'static str = "string";
    fn parse(segment: &str) -> Result<Name, Refusal> {
        name(segment, ErrorCode::InvalidName)
    }
    fn write(value: &Name) -> String {
        value.to_string()
    }
    #[cfg(any(test, feature = "samples"))]
    fn sample(rng: &mut samples::Rng) -> Name {
        rng.name()
    }
}

/// A sequence number in the path, refused with `invalid_seq`.
pub(crate) struct Seq;

impl PathParam for Seq {
    type Value = u64;
    const TS: &'static str = "number";
    fn parse(segment: &str) -> Result<u64, Refusal> {
        seq(segment, ErrorCode::InvalidSeq)
    }
    fn write(value: &u64) -> String {
        value.to_string()
    }
    #[cfg(any(test, feature = "samples"))]
    fn sample(rng: &mut samples::Rng) -> u64 {
        rng.seq()
    }
}

/// A layout in the path (a partition count or `plain`), refused with
/// `invalid_partition`.
pub(crate) struct PathLayout;

impl PathParam for PathLayout {
    type Value = Layout;
    const TS: &'static str = "string";
    fn parse(segment: &str) -> Result<Layout, Refusal> {
        layout(segment)
    }
    fn write(value: &Layout) -> String {
        value.to_string()
    }
    #[cfg(any(test, feature = "samples"))]
    fn sample(rng: &mut samples::Rng) -> Layout {
        rng.layout()
    }
}

/// A page's start after a name (none: from the first), refused with
/// `invalid_query`.
pub(crate) struct AfterName;

impl QueryParam for AfterName {
    type Value = Option<Name>;
    const TS: &'static str = "string";
    fn parse(_key: &str, text: Option<String>) -> Result<Option<Name>, Refusal> {
        text.map(|a| name(&a, ErrorCode::InvalidQuery)).transpose()
    }
    fn write(value: &Option<Name>) -> Option<String> {
        value.as_ref().map(Name::to_string)
    }
    #[cfg(any(test, feature = "samples"))]
    fn sample(rng: &mut samples::Rng) -> Option<Name> {
        rng.coin().then(|| rng.name())
    }
}

/// The target a listing is about, which a request must give, refused with
/// `invalid_target` (bad or absent).
pub(crate) struct QueryTarget;

impl QueryParam for QueryTarget {
    type Value = Name;
    const TS: &'static str = "string";
    const REQUIRED: bool = true;
    fn parse(key: &str, text: Option<String>) -> Result<Name, Refusal> {
        let text = text.ok_or_else(|| {
            Refusal::bad_request(ErrorCode::InvalidTarget, format!("query parameter {key:?} is required"))
        })?;
        name(&text, ErrorCode::InvalidTarget)
    }
    fn write(value: &Name) -> Option<String> {
        Some(form_urlencoded::byte_serialize(value.as_str().as_bytes()).collect())
    }
    #[cfg(any(test, feature = "samples"))]
    fn sample(rng: &mut samples::Rng) -> Name {
        rng.name()
    }
}

/// A page's start after a sequence number (absent: 0), refused with
/// `invalid_query`; always written.
pub(crate) struct AfterSeq;

impl QueryParam for AfterSeq {
    type Value = u64;
    const TS: &'static str = "number";
    fn parse(_key: &str, text: Option<String>) -> Result<u64, Refusal> {
        text.map_or(Ok(0), |a| seq(&a, ErrorCode::InvalidQuery))
    }
    fn write(value: &u64) -> Option<String> {
        Some(value.to_string())
    }
    #[cfg(any(test, feature = "samples"))]
    fn sample(rng: &mut samples::Rng) -> u64 {
        rng.seq()
    }
}

/// A page of a target's watermarks starts after this cursor (none: from the
/// first), refused with `invalid_query`.
pub(crate) struct AfterCursor;

impl QueryParam for AfterCursor {
    type Value = Option<WatermarkCursor>;
    const TS: &'static str = "string";
    fn parse(_key: &str, text: Option<String>) -> Result<Option<WatermarkCursor>, Refusal> {
        text.map(|a| WatermarkCursor::parse(&a)).transpose()
    }
    fn write(value: &Option<WatermarkCursor>) -> Option<String> {
        value.as_ref().map(WatermarkCursor::to_string)
    }
    #[cfg(any(test, feature = "samples"))]
    fn sample(rng: &mut samples::Rng) -> Option<WatermarkCursor> {
        rng.coin().then(|| rng.cursor())
    }
}

/// A key bound for listings (absent: empty), at most
/// [`MAX_KEY_BYTES`](crate::core::MAX_KEY_BYTES), refused with
/// `invalid_query`; always written, form-encoded, since a key may hold any
/// character.
pub(crate) struct KeyBound;

impl QueryParam for KeyBound {
    type Value = String;
    const TS: &'static str = "string";
    fn parse(key: &str, text: Option<String>) -> Result<String, Refusal> {
        key_bound(text, key)
    }
    fn write(value: &String) -> Option<String> {
        Some(form_urlencoded::byte_serialize(value.as_bytes()).collect())
    }
    #[cfg(any(test, feature = "samples"))]
    fn sample(rng: &mut samples::Rng) -> String {
        rng.key()
    }
}

/// A page size `1..=LIMIT` (absent: `LIMIT`), refused with
/// `invalid_limit`; always written.
pub(crate) struct Limit<const LIMIT: u32>;

impl<const LIMIT: u32> QueryParam for Limit<LIMIT> {
    type Value = u32;
    const TS: &'static str = "number";
    const MAX: Option<u32> = Some(LIMIT);
    fn parse(_key: &str, text: Option<String>) -> Result<u32, Refusal> {
        limit(text, LIMIT)
    }
    fn write(value: &u32) -> Option<String> {
        Some(value.to_string())
    }
    #[cfg(any(test, feature = "samples"))]
    fn sample(rng: &mut samples::Rng) -> u32 {
        1 + rng.edged(u64::from(LIMIT) - 1) as u32
    }
}

#[cfg(any(test, feature = "samples"))]
#[allow(
    clippy::unwrap_used,
    clippy::indexing_slicing,
    reason = "test values: every index is below its slice's length, every name built valid"
)]
pub(crate) mod samples {
    //! Seeded values for every parameter, for the round-trip property
    //! test: edges (0, the largest, the longest) as often as the middle.

    use crate::core::{
        Layout, Name, SourceId, MAX_KEY_BYTES, MAX_NAME_BYTES, MAX_PARTITIONS, SEQ_MAX, SOURCE_ID_CHARS,
    };
    use crate::routes::WatermarkCursor;

    /// A splitmix64 generator: small, seeded, the same on every platform.
    pub(crate) struct Rng(u64);

    impl Rng {
        /// A generator replaying `seed`.
        pub(crate) fn new(seed: u64) -> Rng {
            Rng(seed)
        }

        fn next(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        }

        /// `0..n` (`n` > 0).
        pub(crate) fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }

        /// Heads or tails.
        pub(crate) fn coin(&mut self) -> bool {
            self.next() & 1 == 1
        }

        /// One of `0..=max`, its edges a third of the time each.
        pub(crate) fn edged(&mut self, max: u64) -> u64 {
            match self.below(3) {
                0 => 0,
                1 => max,
                _ => self.below(max.saturating_add(1).max(1)),
            }
        }

        /// A valid name of 1..=MAX_NAME_BYTES characters.
        pub(crate) fn name(&mut self) -> Name {
            const ALPHABET: &[u8] = b"abcXYZ0189._:-";
            let len = 1 + self.edged(u64::from(MAX_NAME_BYTES) - 1);
            let mut text: String =
                (0..len).map(|_| char::from(ALPHABET[self.below(ALPHABET.len() as u64) as usize])).collect();
            if text.bytes().all(|b| b == b'.') {
                text.replace_range(0..1, "n");
            }
            Name::new(text).unwrap()
        }

        /// A sequence number `0..=SEQ_MAX`.
        pub(crate) fn seq(&mut self) -> u64 {
            self.edged(SEQ_MAX)
        }

        /// `plain` or a count `1..=MAX_PARTITIONS`.
        pub(crate) fn layout(&mut self) -> Layout {
            match self.coin() {
                true => Layout::Plain,
                false => Layout::Count(1 + self.edged(u64::from(MAX_PARTITIONS) - 1) as u32),
            }
        }

        /// A watermark cursor, with or without a source id.
        pub(crate) fn cursor(&mut self) -> WatermarkCursor {
            let source_id = self.coin().then(|| {
                let hex: String = (0..SOURCE_ID_CHARS)
                    .map(|_| char::from_digit(self.below(16) as u32, 16).unwrap())
                    .collect();
                SourceId::new(hex).unwrap()
            });
            WatermarkCursor { source: self.name(), source_id }
        }

        /// A key of 0..=MAX_KEY_BYTES bytes, with the characters a query
        /// must escape.
        pub(crate) fn key(&mut self) -> String {
            const CHARS: &[char] =
                &['a', 'Z', '0', ' ', '&', '=', '+', '%', '?', '#', '/', 'é', '😀', '\u{0}'];
            let budget = self.edged(u64::from(MAX_KEY_BYTES)) as usize;
            let mut key = String::new();
            loop {
                let c = CHARS[self.below(CHARS.len() as u64) as usize];
                if key.len() + c.len_utf8() > budget {
                    return key;
                }
                key.push(c);
            }
        }
    }
}
