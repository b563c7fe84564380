//! What a `write` closure given to
//! [`RelaySource::enqueue_with`](super::RelaySource::enqueue_with) fails
//! with, and what the enqueue then answers: the caller's own error is kept
//! as it was returned, apart from the relay's refusals, so the caller can
//! tell the two apart (and `?` still answers either as the HTTP API would).
//!
//! The closure's error is this one type, not a parameter, so a closure that
//! ends in `Ok(())` and uses `?` on a [`StoreError`] compiles as written.

use std::fmt;

use crate::core::ErrorCode;
use crate::http::RelayError;
use crate::store::outbox::EnqueueFailure;
use crate::store::StoreError;

/// Why your `write` closure failed; any failure rolls the enqueue back.
#[derive(Debug)]
pub enum WriteError {
    /// A statement on the object's database failed (what `?` on a
    /// [`StoreError`] gives).
    Store(StoreError),
    /// Your own failure, as you gave it to [`WriteError::new`]; read it back
    /// with [`WriteError::own`].
    Own(Box<dyn std::error::Error>),
}

impl WriteError {
    /// Your own failure: any error type, a `String` or a `&str`.
    pub fn new(error: impl Into<Box<dyn std::error::Error>>) -> WriteError {
        WriteError::Own(error.into())
    }

    /// Your own failure, when it is an `E`.
    pub fn own<E: std::error::Error + 'static>(&self) -> Option<&E> {
        match self {
            WriteError::Own(e) => e.downcast_ref::<E>(),
            WriteError::Store(_) => None,
        }
    }
}

impl From<StoreError> for WriteError {
    fn from(e: StoreError) -> WriteError {
        WriteError::Store(e)
    }
}

impl fmt::Display for WriteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WriteError::Store(e) => e.fmt(f),
            WriteError::Own(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for WriteError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            WriteError::Store(e) => Some(e),
            WriteError::Own(e) => Some(e.as_ref()),
        }
    }
}

/// Why [`RelaySource::enqueue_with`](super::RelaySource::enqueue_with) did
/// not commit: nothing it or your closure wrote remains.
///
/// ```
/// use durable_relay::prelude::*;
///
/// /// The shop's own rule: nothing is sold that is not in stock.
/// #[derive(Debug)]
/// struct OutOfStock;
///
/// impl std::fmt::Display for OutOfStock {
///     fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
///         f.write_str("out of stock")
///     }
/// }
///
/// impl std::error::Error for OutOfStock {}
///
/// async fn sell(relay: &RelaySource, in_stock: u64) -> Result<Response, RelayError> {
///     let row = row("warehouse-1")?.put("sold:sku-9", serde_json::json!(1));
///     let sold = relay
///         .enqueue_with(&[row], Enqueue::default(), |sql, _| {
///             if in_stock == 0 {
///                 return Err(WriteError::new(OutOfStock));
///             }
///             sql.run("UPDATE stock SET count = count - 1 WHERE sku = 'sku-9'", vec![])?;
///             Ok(())
///         })
///         .await;
///     match sold {
///         Ok((_, done)) => Ok(json(&done)?),
///         // Your own failure, told apart from the relay's refusals.
///         Err(EnqueueWithError::Write(e)) if e.own::<OutOfStock>().is_some() => {
///             Err(RelayError::new(409, ErrorCode::Aborted, "sku-9 is out of stock"))
///         }
///         Err(other) => Err(other.into()),
///     }
/// }
/// # fn main() {}
/// ```
#[derive(Debug)]
pub enum EnqueueWithError {
    /// The relay refused the enqueue or its storage failed, as the HTTP API
    /// answers it.
    Refused(RelayError),
    /// Your `write` closure failed, with the error it returned.
    Write(WriteError),
}

impl From<EnqueueFailure<WriteError>> for EnqueueWithError {
    fn from(e: EnqueueFailure<WriteError>) -> EnqueueWithError {
        match e {
            EnqueueFailure::Aborted(write) => EnqueueWithError::Write(write),
            EnqueueFailure::Refused(r) => EnqueueWithError::Refused(r.into()),
            EnqueueFailure::Store(s) => EnqueueWithError::Refused(s.into()),
        }
    }
}

impl From<RelayError> for EnqueueWithError {
    fn from(e: RelayError) -> EnqueueWithError {
        EnqueueWithError::Refused(e)
    }
}

impl From<EnqueueWithError> for RelayError {
    /// A refusal as it was; your own failure as 409 `aborted` with its
    /// message (the request conflicted with your rules).
    fn from(e: EnqueueWithError) -> RelayError {
        match e {
            EnqueueWithError::Refused(r) => r,
            EnqueueWithError::Write(w) => RelayError::new(409, ErrorCode::Aborted, w.to_string()),
        }
    }
}

impl fmt::Display for EnqueueWithError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EnqueueWithError::Refused(r) => write!(f, "{}: {}", r.code, r.message),
            EnqueueWithError::Write(w) => w.fmt(f),
        }
    }
}

impl std::error::Error for EnqueueWithError {}
