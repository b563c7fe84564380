//! The Standard Webhooks signature a request to an endpoint carries:
//! `v1,` and the base64 of HMAC-SHA256 over `id.timestamp.body`, keyed by
//! the endpoint's secret. Receivers verify it with the convention's own
//! libraries, and deduplicate on the id.

use std::fmt;

use base64::alphabet::STANDARD as ALPHABET;
use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig, STANDARD};
use base64::engine::DecodePaddingMode;
use base64::Engine;
use hmac::{Hmac, Mac};
use sha2::Sha256;

/// The prefix Standard Webhooks writes a signing secret with (`whsec_` and
/// its base64); a secret without it is read as the base64 alone.
pub const SECRET_PREFIX: &str = "whsec_";

/// Fewest bytes a decoded secret may have: Standard Webhooks' floor, 192 bits.
pub const MIN_SECRET_BYTES: u32 = 24;

/// Most bytes a decoded secret may have: Standard Webhooks' ceiling, 512 bits.
pub const MAX_SECRET_BYTES: u32 = 64;

/// Base64 that takes a secret with or without its `=` padding, as the
/// convention's libraries do between them.
const SECRET_BASE64: GeneralPurpose = GeneralPurpose::new(
    &ALPHABET,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// An endpoint's decoded signing key.
///
/// Invariant: [`MIN_SECRET_BYTES`]..=[`MAX_SECRET_BYTES`] bytes. Its
/// `Debug` never shows the bytes, so a configuration can be logged.
#[derive(Clone, PartialEq, Eq)]
pub struct SigningKey(Vec<u8>);

impl fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SigningKey([redacted; {} bytes])", self.0.len())
    }
}

/// Why a secret cannot sign. Never carries the secret.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SecretError {
    /// The text after `whsec_` is not base64.
    NotBase64,
    /// The decoded secret has this many bytes, outside the convention's range.
    Length(u32),
}

impl fmt::Display for SecretError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SecretError::NotBase64 => write!(f, "the secret is not {SECRET_PREFIX} and base64"),
            SecretError::Length(n) => write!(
                f,
                "the secret decodes to {n} bytes; it must be {MIN_SECRET_BYTES}..={MAX_SECRET_BYTES} (whsec_ and base64 of random bytes)"
            ),
        }
    }
}

impl std::error::Error for SecretError {}

/// Reads a secret written as the convention writes it (`whsec_` and base64).
pub fn parse_secret(text: &str) -> Result<SigningKey, SecretError> {
    let b64 = text.trim().strip_prefix(SECRET_PREFIX).unwrap_or(text.trim());
    let bytes = SECRET_BASE64.decode(b64).map_err(|_| SecretError::NotBase64)?;
    let len = u32::try_from(bytes.len()).unwrap_or(u32::MAX);
    if !(MIN_SECRET_BYTES..=MAX_SECRET_BYTES).contains(&len) {
        return Err(SecretError::Length(len));
    }
    Ok(SigningKey(bytes))
}

/// The `webhook-id` of a source's row: stable across every retry, so a
/// receiver deduplicates on it. Built from the source object's id (hex)
/// and the sequence, never from the source's name, which may hold a `.`,
/// the separator of the signed text.
pub fn message_id(source_id: &str, seq: u64) -> String {
    format!("msg_{source_id}_{seq}")
}

/// The `webhook-id` of a batch of a source's rows, `first` to `last`. A
/// retry may carry more rows than the first attempt, so a receiver of
/// batches deduplicates on each row's `source` and `seq`, not on this.
pub fn batch_id(source_id: &str, first: u64, last: u64) -> String {
    format!("msg_{source_id}_{first}-{last}")
}

/// The `webhook-signature` of one attempt: each key's [`signature`],
/// separated by a space (a receiver accepts the request when one of them
/// is by a secret it knows), `timestamp_s` being the attempt's time in
/// seconds since the epoch.
pub fn signatures(keys: &[SigningKey], id: &str, timestamp_s: u64, body: &str) -> String {
    let each: Vec<String> = keys.iter().map(|key| signature(key, id, timestamp_s, body)).collect();
    each.join(" ")
}

/// One key's signature of `body` sent as `id` at `timestamp_s`: `v1,`
/// and the base64 of HMAC-SHA256 over `id.timestamp.body`.
pub fn signature(key: &SigningKey, id: &str, timestamp_s: u64, body: &str) -> String {
    // A key of any length is valid for HMAC; the invariant bounds it anyway.
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(&key.0) else {
        unreachable!("HMAC takes a key of any length")
    };
    mac.update(id.as_bytes());
    mac.update(b".");
    mac.update(timestamp_s.to_string().as_bytes());
    mac.update(b".");
    mac.update(body.as_bytes());
    format!("v1,{}", STANDARD.encode(mac.finalize().into_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The convention's published vectors (its reference libraries' tests).
    #[test]
    fn signatures_match_the_conventions_published_vectors() {
        let key = parse_secret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
        let sig = signature(&key, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1_614_265_330, r#"{"test": 2432232314}"#);
        assert_eq!(sig, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
        let key = parse_secret("whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD").unwrap();
        let body = r#"{"email":"test@example.com","username":"test_user"}"#;
        let sig = signature(&key, "msg_27UH4WbU6Z5A5EzD8u03UvzRbpk", 1_649_367_553, body);
        assert_eq!(sig, "v1,tZ1I4/hDygAJgO5TYxiSd6Sd0kDW6hPenDe+bTa3Kkw=");
    }

    #[test]
    fn any_change_to_the_signed_text_changes_the_signature() {
        let key = parse_secret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
        let base = signature(&key, "msg_a_1", 10, "{}");
        assert_ne!(base, signature(&key, "msg_a_2", 10, "{}"));
        assert_ne!(base, signature(&key, "msg_a_1", 11, "{}"));
        assert_ne!(base, signature(&key, "msg_a_1", 10, "{ }"));
        let other = parse_secret("whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD").unwrap();
        assert_ne!(base, signature(&other, "msg_a_1", 10, "{}"));
    }

    #[test]
    fn secrets_are_read_with_or_without_prefix_and_padding_within_their_length() {
        let padded = parse_secret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
        assert_eq!(parse_secret("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap(), padded);
        // 25 bytes: base64 with one `=` of padding, and without it.
        let b64 = STANDARD.encode([7u8; 25]);
        assert!(b64.ends_with('='));
        assert_eq!(parse_secret(&b64).unwrap(), parse_secret(b64.trim_end_matches('=')).unwrap());
        assert_eq!(parse_secret(&STANDARD.encode([1u8; 23])), Err(SecretError::Length(23)));
        assert!(parse_secret(&STANDARD.encode([1u8; 64])).is_ok());
        assert_eq!(parse_secret(&STANDARD.encode([1u8; 65])), Err(SecretError::Length(65)));
        assert_eq!(parse_secret("whsec_not base64!"), Err(SecretError::NotBase64));
        assert_eq!(parse_secret(""), Err(SecretError::Length(0)));
    }

    #[test]
    fn a_key_never_shows_in_debug_output() {
        let key = parse_secret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
        let shown = format!("{key:?}");
        assert!(!shown.contains("MfKQ") && shown.contains("redacted"), "{shown}");
    }

    #[test]
    fn message_ids_hold_no_separator() {
        let id = message_id(&"ab".repeat(32), u64::from(u32::MAX) * 4);
        assert!(!id.contains('.'));
        assert_eq!(id, format!("msg_{}_{}", "ab".repeat(32), u64::from(u32::MAX) * 4));
        assert_eq!(batch_id("ab", 3, 9), "msg_ab_3-9");
    }
}
