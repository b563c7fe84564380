//! The pieces of a request line every route reads, so every route refuses
//! bad input the same way: the path's segments (percent-decoded), names
//! (validated), sequence numbers and page limits (in range), query
//! parameters (unknown or repeated ones refused) and the 404 for a line no
//! operation matches. The relay's own routes ([`crate::routes`]) and a
//! Worker's extra ones (the reference Worker's front door, directory and
//! console) both parse with these.

#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]
#![deny(clippy::unreachable, clippy::todo, clippy::unimplemented)]

use url::Url;

use crate::core::{ErrorCode, Layout, Name, MAX_KEY_BYTES, MAX_PARTITIONS, SEQ_MAX};
use crate::refusal::Refusal;

/// The 404 for a request line no operation matches.
pub fn no_route(method: &str, url: &Url) -> Refusal {
    Refusal::new(404, ErrorCode::NoRoute, format!("no route for {method} {}", url.path()))
}

/// A path's segments, percent-decoded (`/a/b` is `["a", "b"]`; `/` is
/// `[]`). Callers that build paths with `encodeURIComponent` send `x%3A1`
/// for the name `x:1`; both spellings name the same object. A segment whose
/// escapes do not decode to UTF-8 is kept as sent, so name validation refuses
/// it for its `%`.
pub fn segments(url: &Url) -> Vec<String> {
    url.path().trim_start_matches('/').split('/').filter(|s| !s.is_empty()).map(percent_decode).collect()
}

/// Decodes `%XX` escapes; text without a valid escape comes back unchanged.
fn percent_decode(segment: &str) -> String {
    if !segment.contains('%') {
        return segment.to_owned();
    }
    let bytes = segment.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        let hex = |j: usize| bytes.get(j).and_then(|c| char::from(*c).to_digit(16));
        match (b, hex(i + 1), hex(i + 2)) {
            (b'%', Some(hi), Some(lo)) => {
                out.push(u8::try_from(hi * 16 + lo).unwrap_or(b'%'));
                i += 3;
            }
            _ => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).unwrap_or_else(|_| segment.to_owned())
}

/// The segments as string slices, for matching.
pub fn refs(segments: &[String]) -> Vec<&str> {
    segments.iter().map(String::as_str).collect()
}

/// Validates a name taken from the path; `code` names the refusal.
pub fn name(segment: &str, code: ErrorCode) -> Result<Name, Refusal> {
    Name::new(segment).map_err(|e| Refusal::bad_request(code, format!("{segment:?}: {e}")))
}

/// The query's parameters, each of `allowed` at most once; anything else is
/// refused. Returns values in the order of `allowed`.
pub fn params<const N: usize>(url: &Url, allowed: [&'static str; N]) -> Result<[Option<String>; N], Refusal> {
    let mut out: [Option<String>; N] = std::array::from_fn(|_| None);
    for (k, v) in url.query_pairs() {
        let Some(i) = allowed.iter().position(|a| *a == k) else {
            return Err(Refusal::bad_request(
                ErrorCode::InvalidQuery,
                format!("unknown query parameter {k:?}"),
            ));
        };
        let slot = out.get_mut(i).ok_or_else(|| Refusal::internal("query slot"))?;
        if slot.replace(v.into_owned()).is_some() {
            return Err(Refusal::bad_request(
                ErrorCode::InvalidQuery,
                format!("query parameter {k:?} given twice"),
            ));
        }
    }
    Ok(out)
}

/// A sequence number `0..=SEQ_MAX` from text.
pub(crate) fn seq(text: &str, code: ErrorCode) -> Result<u64, Refusal> {
    decimal(text)
        .and_then(|t| t.parse::<u64>().ok())
        .filter(|s| *s <= SEQ_MAX)
        .ok_or_else(|| Refusal::bad_request(code, format!("{text:?} is not a sequence number 0..=2^53-1")))
}

/// `text` when it is written in decimal digits only: Rust's integer parse
/// also takes a leading `+`, which the documented grammar does not.
fn decimal(text: &str) -> Option<&str> {
    (!text.is_empty() && text.bytes().all(|b| b.is_ascii_digit())).then_some(text)
}

/// A page size `1..=max`, defaulting to `max`.
pub fn limit(text: Option<String>, max: u32) -> Result<u32, Refusal> {
    let Some(text) = text else { return Ok(max) };
    decimal(&text).and_then(|t| t.parse::<u32>().ok()).filter(|n| (1..=max).contains(n)).ok_or_else(|| {
        Refusal::bad_request(ErrorCode::InvalidLimit, format!("limit must be 1..={max}, got {text:?}"))
    })
}

/// A key bound for listings: at most [`MAX_KEY_BYTES`].
pub(crate) fn key_bound(text: Option<String>, param: &str) -> Result<String, Refusal> {
    let text = text.unwrap_or_default();
    if text.len() > MAX_KEY_BYTES as usize {
        return Err(Refusal::bad_request(
            ErrorCode::InvalidQuery,
            format!("{param} is {} bytes; keys are at most {MAX_KEY_BYTES}", text.len()),
        ));
    }
    Ok(text)
}

/// A layout in a path: a partition count `1..=MAX_PARTITIONS`, or `plain`.
pub(crate) fn layout(text: &str) -> Result<Layout, Refusal> {
    if text == "plain" {
        return Ok(Layout::Plain);
    }
    let count = text.parse::<u32>().ok().filter(|v| (1..=MAX_PARTITIONS).contains(v));
    count.map(Layout::Count).ok_or_else(|| {
        Refusal::bad_request(
            ErrorCode::InvalidPartition,
            format!("{text:?}: a layout is a count 1..={MAX_PARTITIONS} or plain"),
        )
    })
}

/// Refuses any query parameter.
pub fn no_query(url: &Url) -> Result<(), Refusal> {
    params(url, []).map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_decimal_digits_only() {
        assert_eq!(limit(Some("5".into()), 10).unwrap(), 5);
        for bad in ["+5", "-5", " 5", "5 ", "", "0x5", "5.0"] {
            assert_eq!(limit(Some(bad.into()), 10).unwrap_err().code, ErrorCode::InvalidLimit, "{bad:?}");
            assert_eq!(seq(bad, ErrorCode::InvalidSeq).unwrap_err().code, ErrorCode::InvalidSeq, "{bad:?}");
        }
        assert_eq!(seq("007", ErrorCode::InvalidSeq).unwrap(), 7, "leading zeros are still decimal");
    }

    #[test]
    fn a_bad_escape_stays_as_sent() {
        assert_eq!(percent_decode("%41%"), "A%");
        assert_eq!(percent_decode("%4"), "%4");
    }
}
