//! What a target's own code does with the rows it applies: the
//! [`OnApply`] hook an embedder writes, the [`HookError`] it answers with,
//! and [`KeysOnly`], the hook of a target that keeps the rows' keys only.
//!
//! The hook runs inside the apply's transaction: its writes and the
//! target's watermark commit together, a redelivered batch never reaches
//! it, and an error rolls the batch back (the source retries it, as after
//! any failed call).

use std::fmt;

use crate::core::{ApplyRow, Effects, PutDecodeError, RelayHook, Sender};
use crate::durable::DoSql;
use crate::store::StoreError;

/// What a target does with the rows it applies, inside the apply's
/// transaction: your writes and the target's watermark commit together, a
/// redelivered batch never reaches it, and an error rolls the batch back
/// (the source retries it, as after any failed call).
pub trait OnApply {
    /// Handles the new rows (in sequence order) that `source` sent: its
    /// name and its object's id, as the target keys its watermark. Keep
    /// anything per source by [`Sender::key`]: two classes or two Workers
    /// may each have an object of one name.
    fn on_apply(&self, sql: &DoSql, source: &Sender, rows: &[ApplyRow]) -> Result<(), HookError>;
}

/// A closure is a hook too, whatever error it answers with that becomes a
/// [`HookError`] (a `String`, a [`StoreError`], ...).
impl<F, E> OnApply for F
where
    F: Fn(&DoSql, &Sender, &[ApplyRow]) -> Result<(), E>,
    E: Into<HookError>,
{
    fn on_apply(&self, sql: &DoSql, source: &Sender, rows: &[ApplyRow]) -> Result<(), HookError> {
        self(sql, source, rows).map_err(Into::into)
    }
}

/// Why a hook refused a batch. The batch rolls back and the source
/// retries it, so the reason reaches the source's log and its failing
/// target's record. Every error a hook meets converts with `?`: a
/// statement's [`StoreError`], a value of the wrong shape
/// ([`PutDecodeError`], from [`ApplyRow::puts_under`]), or your own text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HookError {
    /// What went wrong, as the source's log shows it.
    pub reason: String,
}

impl fmt::Display for HookError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.reason)
    }
}

impl std::error::Error for HookError {}

impl From<String> for HookError {
    fn from(reason: String) -> HookError {
        HookError { reason }
    }
}

impl From<&str> for HookError {
    fn from(reason: &str) -> HookError {
        HookError { reason: reason.to_owned() }
    }
}

impl From<StoreError> for HookError {
    fn from(e: StoreError) -> HookError {
        HookError { reason: e.to_string() }
    }
}

impl From<PutDecodeError> for HookError {
    fn from(e: PutDecodeError) -> HookError {
        HookError { reason: e.to_string() }
    }
}

/// Applies nothing of its own: the target keeps the rows' keys only.
#[derive(Clone, Copy, Debug, Default)]
pub struct KeysOnly;

impl OnApply for KeysOnly {
    fn on_apply(&self, _: &DoSql, _: &Sender, _: &[ApplyRow]) -> Result<(), HookError> {
        Ok(())
    }
}

/// An [`OnApply`] as the inbox's hook, with the object's SQL handle.
pub(crate) struct Hook<'a, H> {
    /// The target object's SQL, the hook's to write with.
    pub(crate) sql: &'a DoSql,
    /// The embedder's hook.
    pub(crate) handler: &'a H,
}

impl<H: OnApply> RelayHook for Hook<'_, H> {
    fn extra_effects(&self, source: &Sender, rows: &[ApplyRow]) -> Result<Effects, String> {
        self.handler.on_apply(self.sql, source, rows).map_err(|e| e.reason)?;
        Ok(Effects::default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A hook body as an embedder writes it: every error meets `?`.
    fn body(store: Option<StoreError>, put: Option<PutDecodeError>) -> Result<(), HookError> {
        if let Some(e) = store {
            Err(e)?;
        }
        if let Some(e) = put {
            Err(e)?;
        }
        Err("refused by the hook".to_owned())?
    }

    #[test]
    fn every_error_a_hook_meets_converts_with_question_mark_and_keeps_its_reason() {
        let store = StoreError::Sql("no such table: loyalty_log".into());
        assert_eq!(body(Some(store.clone()), None).unwrap_err().reason, store.to_string());
        let put = PutDecodeError { seq: 3, key: "order:a".into(), reason: "invalid type".into() };
        assert_eq!(body(None, Some(put)).unwrap_err().to_string(), "row 3 put \"order:a\": invalid type");
        assert_eq!(body(None, None).unwrap_err(), HookError::from("refused by the hook"));
    }
}
