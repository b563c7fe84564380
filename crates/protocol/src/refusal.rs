//! [`Refusal`]: what the protocol answers a request line it cannot accept,
//! as data (an HTTP status, a stable [`ErrorCode`], a message naming the
//! problem). The Durable Object glue turns it into its `RelayError` and a
//! response; nothing here builds a response.

use crate::core::ErrorCode;

/// A request the protocol refuses: HTTP status, stable code, human message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// HTTP status: 4xx for the caller's mistakes, 500 for an impossible
    /// state of our own.
    pub status: u16,
    /// Stable machine-readable code.
    pub code: ErrorCode,
    /// What was wrong, naming the field or limit.
    pub message: String,
}

impl Refusal {
    /// A refusal with `status`, `code` and `message`.
    pub fn new(status: u16, code: ErrorCode, message: impl Into<String>) -> Refusal {
        Refusal { status, code, message: message.into() }
    }

    /// 400 with `code`.
    pub fn bad_request(code: ErrorCode, message: impl Into<String>) -> Refusal {
        Refusal::new(400, code, message)
    }

    /// 500: a state the parser holds impossible.
    pub fn internal(message: impl Into<String>) -> Refusal {
        Refusal::new(500, ErrorCode::Internal, message)
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}: {}", self.status, self.code, self.message)
    }
}

impl std::error::Error for Refusal {}
