//! A fire's target calls: what one carries ([`TargetCall`]) and how it
//! ended ([`CallOutcome`], [`Failure`]).

use crate::name::Name;

/// How a target call ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CallOutcome {
    /// The target holds every row through `watermark` for this source;
    /// `applied` of the sent rows were new to it.
    Applied {
        /// The target's watermark for this source after the call.
        watermark: u64,
        /// Rows the call applied (the rest were duplicates).
        applied: u32,
    },
    /// The call failed; nothing can be assumed about the target.
    Failed(Failure),
    /// The call failed and the target said when to call again (an
    /// endpoint's `Retry-After`): it is not called before `retry_after_ms`
    /// from now, nor before its back-off, whichever is later.
    Throttled {
        /// Why, as for [`CallOutcome::Failed`].
        failure: Failure,
        /// How long to wait, ms; at most
        /// [`MAX_RETRY_AFTER_MS`](crate::limits::MAX_RETRY_AFTER_MS) is kept.
        retry_after_ms: u64,
    },
}

/// Why a target call failed, which decides what the fire does next.
///
/// | kind | retried | backs off | counts toward parking |
/// | --- | --- | --- | --- |
/// | `Interrupted` | once at once, in the same fire | if the retry fails too | no |
/// | `Overloaded` | not in this fire | yes | no |
/// | `Transient` | not in this fire | yes | yes |
/// | `Permanent` | no | - | parks at once |
///
/// Every retry is safe: a target applies a batch whole or not at all and
/// skips what its watermark covers, so a call that applied before failing
/// (a reset or a timeout after the apply) costs a duplicate-only call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Failure {
    /// The platform cut the call off for reasons of its own: the target
    /// was reset because its code was updated, or the connection was lost.
    /// Says nothing of the target's health.
    Interrupted(String),
    /// The target is overloaded: calling again soon would make it worse,
    /// but being busy is no reason to park it.
    Overloaded(String),
    /// Anything else worth retrying later: an exception the target threw,
    /// a 5xx answer, no answer in time.
    Transient(String),
    /// The target rejected the batch as invalid: retrying will not help.
    Permanent(String),
}

impl Failure {
    /// The message carried by any kind.
    pub fn message(&self) -> &str {
        match self {
            Failure::Interrupted(m)
            | Failure::Overloaded(m)
            | Failure::Transient(m)
            | Failure::Permanent(m) => m,
        }
    }

    /// Whether it counts toward parking the target.
    pub fn counts_toward_parking(&self) -> bool {
        matches!(self, Failure::Transient(_) | Failure::Permanent(_))
    }
}

/// What the platform says of an exception a call to an object threw: the
/// error's `overloaded`, `retryable` and `remote` properties (the last set
/// when the object's own code threw it) and its message.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ThrownBy<'a> {
    /// The error's message.
    pub message: &'a str,
    /// `error.overloaded`: the object cannot keep up; do not retry soon.
    pub overloaded: bool,
    /// `error.retryable`: the platform suggests a retry of an idempotent call.
    pub retryable: bool,
    /// `error.remote`: the object's own code threw it.
    pub remote: bool,
}

/// Messages of the platform's failures of a call, by what they mean (the
/// properties say the same when the runtime sets them; the messages also
/// classify an error that crossed a boundary without them).
const OVERLOADED_MESSAGES: [&str; 2] = ["is overloaded", "too many requests queued"];
/// See [`OVERLOADED_MESSAGES`].
const INTERRUPTED_MESSAGES: [&str; 2] = ["reset because its code was updated", "network connection lost"];

/// Classifies an exception a target call threw (see [`Failure`]).
pub fn classify_thrown(e: ThrownBy<'_>) -> Failure {
    let lower = e.message.to_ascii_lowercase();
    let says = |list: &[&str]| list.iter().any(|m| lower.contains(m));
    let message = e.message.to_owned();
    if e.overloaded || says(&OVERLOADED_MESSAGES) {
        Failure::Overloaded(message)
    } else if (e.retryable && !e.remote) || says(&INTERRUPTED_MESSAGES) {
        Failure::Interrupted(message)
    } else {
        Failure::Transient(message)
    }
}

/// One call to one target: a batch of that target's rows, ascending.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TargetCall {
    /// Which group (target) this is, for [`Fire::record`](crate::fire::Fire::record).
    pub group: u32,
    /// The target: the name of the Durable Object the row is delivered to.
    pub target: Name,
    /// Sequences in the batch, ascending.
    pub seqs: Vec<u64>,
    /// Body bytes plus framing in the batch.
    pub bytes: u32,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(e: ThrownBy<'_>) -> &'static str {
        match classify_thrown(e) {
            Failure::Interrupted(_) => "interrupted",
            Failure::Overloaded(_) => "overloaded",
            Failure::Transient(_) => "transient",
            Failure::Permanent(_) => "permanent",
        }
    }

    #[test]
    fn the_platforms_failures_are_classified_by_name_and_by_property() {
        let by = |message| ThrownBy { message, ..ThrownBy::default() };
        assert_eq!(kind(by("Durable Object reset because its code was updated.")), "interrupted");
        assert_eq!(kind(by("Network connection lost.")), "interrupted");
        assert_eq!(kind(by("Durable Object is overloaded. Too many requests queued.")), "overloaded");
        assert_eq!(kind(by("Durable Object is overloaded. Requests queued for too long.")), "overloaded");
        assert_eq!(kind(by("no answer within 15000 ms")), "transient");
        assert_eq!(kind(by("TypeError: x is undefined")), "transient");
        assert_eq!(
            kind(ThrownBy { overloaded: true, retryable: true, ..by("?") }),
            "overloaded",
            "never hammer"
        );
        assert_eq!(kind(ThrownBy { retryable: true, ..by("internal error") }), "interrupted");
        assert_eq!(
            kind(ThrownBy { retryable: true, remote: true, ..by("thrown by the target") }),
            "transient"
        );
    }

    #[test]
    fn only_the_targets_own_failures_count_toward_parking() {
        assert!(!Failure::Interrupted(String::new()).counts_toward_parking());
        assert!(!Failure::Overloaded(String::new()).counts_toward_parking());
        assert!(Failure::Transient(String::new()).counts_toward_parking());
        assert!(Failure::Permanent(String::new()).counts_toward_parking());
    }
}
