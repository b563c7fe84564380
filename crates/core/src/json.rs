//! Values as the relay carries them: the canonical JSON text of one value.
//!
//! A value put at a target must arrive exactly as its producer meant it, so
//! the relay never turns a value into numbers or maps of its own. It keeps
//! the JSON *text*, brought to one canonical spelling, so that equal content
//! has equal bytes (idempotency keys compare content by digest):
//!
//! - whitespace between tokens is removed;
//! - numbers are kept verbatim, digit for digit (`123456789012345678901234567890`,
//!   `0.10`, `1e400` and `-0` arrive as written); only their grammar is checked;
//! - strings are re-escaped minimally: `"` and `\` and the control characters
//!   below U+0020 are escaped (`\b \f \n \r \t` short, the rest as `\u00XX`),
//!   every other character is written as itself in UTF-8, so `"\u0041"` and
//!   `"A"` are one value and an escaped NUL stays a NUL;
//! - object members are sorted by the UTF-8 bytes of their decoded keys (JSON
//!   gives key order no meaning); an object naming one key twice is refused,
//!   since JSON leaves its meaning undefined;
//! - nesting is bounded by [`MAX_VALUE_DEPTH`], and lone UTF-16 surrogates
//!   (`"\ud800"`, which no UTF-8 text can hold) are refused.
//!
//! The parser is the only decoder between a caller's value bytes and storage,
//! so it returns a typed [`ValueError`] for every malformed input and has no
//! panicking path: it recurses at most [`MAX_VALUE_DEPTH`] levels and reads
//! bytes only through bounds-checked accessors.

#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]
#![deny(clippy::unreachable, clippy::todo, clippy::unimplemented)]

use crate::codes::ErrorCode;
use std::fmt;

use crate::limits::{BATCH_ENVELOPE_DEPTH, ENQUEUE_ENVELOPE_DEPTH, MAX_VALUE_DEPTH};

/// serde_json's recursion limit for one document (not configurable without
/// its `unbounded_depth` feature, which we do not want on untrusted input).
const SERDE_JSON_DEPTH_LIMIT: u32 = 128;

const _: () = assert!(MAX_VALUE_DEPTH + BATCH_ENVELOPE_DEPTH < SERDE_JSON_DEPTH_LIMIT);
const _: () = assert!(MAX_VALUE_DEPTH + ENQUEUE_ENVELOPE_DEPTH < SERDE_JSON_DEPTH_LIMIT);

/// Why a value's text is not acceptable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ValueError {
    /// Not JSON: carries the byte offset and what was expected there.
    Syntax {
        /// Byte offset of the problem.
        at: u32,
        /// What the parser expected or found.
        what: &'static str,
    },
    /// Nested deeper than [`MAX_VALUE_DEPTH`].
    TooDeep,
    /// An object names this key twice.
    DuplicateKey(String),
    /// A `\uXXXX` escape leaves a UTF-16 surrogate unpaired; carries the offset.
    LoneSurrogate(u32),
}

impl ValueError {
    /// Stable machine-readable code.
    pub fn code(&self) -> ErrorCode {
        match self {
            ValueError::Syntax { .. } => ErrorCode::InvalidValue,
            ValueError::TooDeep => ErrorCode::ValueTooDeep,
            ValueError::DuplicateKey(_) => ErrorCode::DuplicateObjectKey,
            ValueError::LoneSurrogate(_) => ErrorCode::LoneSurrogate,
        }
    }
}

impl fmt::Display for ValueError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ValueError::Syntax { at, what } => write!(f, "value is not JSON: {what} at byte {at}"),
            ValueError::TooDeep => {
                write!(f, "value nests arrays and objects deeper than {MAX_VALUE_DEPTH} (MAX_VALUE_DEPTH)")
            }
            ValueError::DuplicateKey(k) => write!(f, "an object in the value names key {k:?} twice"),
            ValueError::LoneSurrogate(at) => {
                write!(f, "a \\u escape at byte {at} is an unpaired UTF-16 surrogate")
            }
        }
    }
}

impl std::error::Error for ValueError {}

/// The canonical text of the one JSON value in `text` (surrounding
/// whitespace allowed); see the module doc for what canonical means.
pub fn canonical(text: &str) -> Result<String, ValueError> {
    let mut parser = Parser { bytes: text.as_bytes(), pos: 0 };
    let mut out = String::with_capacity(text.len());
    parser.skip_ws();
    parser.value(0, &mut out)?;
    parser.skip_ws();
    if parser.pos != parser.bytes.len() {
        return Err(parser.error("end of input after the value"));
    }
    Ok(out)
}

/// The deepest nesting of arrays and objects anywhere in `text`, counting
/// only brackets outside strings. Cheap (one pass, no allocation); used to
/// refuse absurdly nested documents before serde_json sees them. The text
/// need not be valid JSON.
pub fn nesting_depth(text: &str) -> u32 {
    let (mut depth, mut max, mut in_string, mut escaped) = (0u32, 0u32, false, false);
    for &b in text.as_bytes() {
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth = depth.saturating_add(1);
                max = max.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    max
}

struct Parser<'a> {
    bytes: &'a [u8],
    /// Invariant: `pos <= bytes.len()`.
    pos: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    fn next(&mut self) -> Option<u8> {
        let b = self.peek()?;
        self.pos += 1;
        Some(b)
    }

    fn error(&self, what: &'static str) -> ValueError {
        ValueError::Syntax { at: u32::try_from(self.pos).unwrap_or(u32::MAX), what }
    }

    fn skip_ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.pos += 1;
        }
    }

    fn expect(&mut self, byte: u8, what: &'static str) -> Result<(), ValueError> {
        if self.peek() == Some(byte) {
            self.pos += 1;
            Ok(())
        } else {
            Err(self.error(what))
        }
    }

    fn literal(&mut self, word: &'static str, out: &mut String) -> Result<(), ValueError> {
        let end = self.pos + word.len();
        if self.bytes.get(self.pos..end) != Some(word.as_bytes()) {
            return Err(self.error("a value (null, true, false, number, string, array or object)"));
        }
        self.pos = end;
        out.push_str(word);
        Ok(())
    }

    /// One value at nesting `depth` (containers around it).
    fn value(&mut self, depth: u32, out: &mut String) -> Result<(), ValueError> {
        match self.peek() {
            Some(b'{') => self.object(depth + 1, out),
            Some(b'[') => self.array(depth + 1, out),
            Some(b'"') => {
                let s = self.string()?;
                write_string(&s, out);
                Ok(())
            }
            Some(b'n') => self.literal("null", out),
            Some(b't') => self.literal("true", out),
            Some(b'f') => self.literal("false", out),
            Some(b'-' | b'0'..=b'9') => self.number(out),
            _ => Err(self.error("a value (null, true, false, number, string, array or object)")),
        }
    }

    fn array(&mut self, depth: u32, out: &mut String) -> Result<(), ValueError> {
        if depth > MAX_VALUE_DEPTH {
            return Err(ValueError::TooDeep);
        }
        self.expect(b'[', "[")?;
        out.push('[');
        self.skip_ws();
        if self.peek() == Some(b']') {
            self.pos += 1;
            out.push(']');
            return Ok(());
        }
        loop {
            self.skip_ws();
            self.value(depth, out)?;
            self.skip_ws();
            match self.next() {
                Some(b',') => out.push(','),
                Some(b']') => break,
                _ => return Err(self.error("',' or ']' in an array")),
            }
        }
        out.push(']');
        Ok(())
    }

    fn object(&mut self, depth: u32, out: &mut String) -> Result<(), ValueError> {
        if depth > MAX_VALUE_DEPTH {
            return Err(ValueError::TooDeep);
        }
        self.expect(b'{', "{")?;
        let mut members: Vec<(String, String)> = Vec::new();
        self.skip_ws();
        if self.peek() == Some(b'}') {
            self.pos += 1;
            out.push_str("{}");
            return Ok(());
        }
        loop {
            self.skip_ws();
            if self.peek() != Some(b'"') {
                return Err(self.error("a string key in an object"));
            }
            let key = self.string()?;
            self.skip_ws();
            self.expect(b':', "':' after an object key")?;
            self.skip_ws();
            let mut value = String::new();
            self.value(depth, &mut value)?;
            members.push((key, value));
            self.skip_ws();
            match self.next() {
                Some(b',') => {}
                Some(b'}') => break,
                _ => return Err(self.error("',' or '}' in an object")),
            }
        }
        write_object(members, out)
    }

    /// A string token, decoded.
    fn string(&mut self) -> Result<String, ValueError> {
        self.expect(b'"', "'\"'")?;
        let mut s = String::new();
        loop {
            let start = self.pos;
            while let Some(b) = self.peek() {
                if b == b'"' || b == b'\\' || b < 0x20 {
                    break;
                }
                self.pos += 1;
            }
            // The input is a &str and the run stops only at ASCII bytes, so
            // the run is whole UTF-8 characters.
            let run = self.bytes.get(start..self.pos).and_then(|r| std::str::from_utf8(r).ok());
            s.push_str(run.ok_or_else(|| self.error("UTF-8 text"))?);
            match self.next() {
                Some(b'"') => return Ok(s),
                Some(b'\\') => self.escape(&mut s)?,
                Some(_) => return Err(self.error("no raw control character in a string")),
                None => return Err(self.error("the end of a string")),
            }
        }
    }

    fn escape(&mut self, s: &mut String) -> Result<(), ValueError> {
        let c = match self.next() {
            Some(b'"') => '"',
            Some(b'\\') => '\\',
            Some(b'/') => '/',
            Some(b'b') => '\u{8}',
            Some(b'f') => '\u{c}',
            Some(b'n') => '\n',
            Some(b'r') => '\r',
            Some(b't') => '\t',
            Some(b'u') => self.unicode_escape()?,
            _ => return Err(self.error("a valid escape")),
        };
        s.push(c);
        Ok(())
    }

    /// The character of a `\uXXXX` escape (the `\u` already read), joining a
    /// surrogate pair written as two escapes.
    fn unicode_escape(&mut self) -> Result<char, ValueError> {
        let at = u32::try_from(self.pos.saturating_sub(2)).unwrap_or(u32::MAX);
        let first = self.hex4()?;
        if !(0xD800..0xE000).contains(&first) {
            return char::from_u32(first).ok_or(ValueError::LoneSurrogate(at));
        }
        if first >= 0xDC00 || self.bytes.get(self.pos..self.pos + 2) != Some(b"\\u") {
            return Err(ValueError::LoneSurrogate(at));
        }
        self.pos += 2;
        let second = self.hex4()?;
        if !(0xDC00..0xE000).contains(&second) {
            return Err(ValueError::LoneSurrogate(at));
        }
        let code = 0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00);
        char::from_u32(code).ok_or(ValueError::LoneSurrogate(at))
    }

    fn hex4(&mut self) -> Result<u32, ValueError> {
        let mut v = 0u32;
        for _ in 0..4 {
            let digit = self.next().and_then(|b| (b as char).to_digit(16));
            v = v * 16 + digit.ok_or_else(|| self.error("four hex digits after \\u"))?;
        }
        Ok(v)
    }

    /// A number, checked against the JSON grammar and copied verbatim.
    fn number(&mut self, out: &mut String) -> Result<(), ValueError> {
        let start = self.pos;
        if self.peek() == Some(b'-') {
            self.pos += 1;
        }
        match self.next() {
            Some(b'0') => {}
            Some(b'1'..=b'9') => self.digits(),
            _ => return Err(self.error("a digit")),
        }
        if self.peek() == Some(b'.') {
            self.pos += 1;
            self.one_or_more_digits()?;
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.pos += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.pos += 1;
            }
            self.one_or_more_digits()?;
        }
        let text = self.bytes.get(start..self.pos).and_then(|t| std::str::from_utf8(t).ok());
        out.push_str(text.ok_or_else(|| self.error("a number"))?);
        Ok(())
    }

    fn digits(&mut self) {
        while matches!(self.peek(), Some(b'0'..=b'9')) {
            self.pos += 1;
        }
    }

    fn one_or_more_digits(&mut self) -> Result<(), ValueError> {
        if !matches!(self.peek(), Some(b'0'..=b'9')) {
            return Err(self.error("a digit"));
        }
        self.digits();
        Ok(())
    }
}

/// Writes `{"k":v,...}` with members sorted by key bytes, refusing a key
/// named twice.
fn write_object(mut members: Vec<(String, String)>, out: &mut String) -> Result<(), ValueError> {
    members.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    if let Some(pair) = members.windows(2).find(|w| matches!(w, [a, b] if a.0 == b.0)) {
        let key = pair.first().map(|m| m.0.clone()).unwrap_or_default();
        return Err(ValueError::DuplicateKey(key));
    }
    out.push('{');
    for (i, (key, value)) in members.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        write_string(key, out);
        out.push(':');
        out.push_str(value);
    }
    out.push('}');
    Ok(())
}

/// Writes `s` as a JSON string with the minimal escapes.
pub fn write_string(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                out.push_str(&format!("\\u{:04x}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Writes JSON `text` into serde output as a value, not as a string, digit
/// for digit: for stored JSON text (a row's effects, a value). Serialise
/// such types with `serde_json::to_string` only: going through
/// `serde_json::Value` (as the `json!` macro does) would re-read every
/// number as an f64, and `json!` would panic on a number past f64's range.
pub fn verbatim_json<S: serde::Serializer>(text: &str, s: S) -> Result<S::Ok, S::Error> {
    let raw = serde_json::value::RawValue::from_string(text.to_owned()).map_err(serde::ser::Error::custom)?;
    serde::Serialize::serialize(&raw, s)
}

/// Reads a JSON value from serde input as its text, digit for digit: the
/// reading side of [`verbatim_json`].
pub fn verbatim_json_text<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    let raw: Box<serde_json::value::RawValue> = serde::Deserialize::deserialize(d)?;
    Ok(raw.get().to_owned())
}

#[cfg(test)]
mod tests;
