//! The delivery explorer's promise of time: whenever no delivery of the
//! source runs (none was started, each ended, or the object restarted
//! under them), every row it still owes is next attempted no later than
//! the safety net's time, so the alarm it left armed must be due by then:
//! [`IN_TURN_ALARM_GRACE_MS`] from now (a recorded failure's first
//! back-off, [`RETRY_BACKOFF_MS`], is shorter), or the retry time of a
//! failing target whose every row waits for it, if later. What an in-turn
//! delivery cut off before it recorded anything leaves is held to the same
//! bound.

use crate::core::{StoredRow, IN_TURN_ALARM_GRACE_MS, RETRY_BACKOFF_MS};
use crate::sim::{name, stored_rows, Sim};
use crate::store::outbox::TargetFilter;

/// Most target records one check reads: every scenario has fewer targets.
const TARGETS_READ_MAX: u32 = 100;

/// The latest time `source`'s alarm may be due at `now_ms` for the rows it
/// owes, granting at least `first_ms` from now (the first back-off, or the
/// lease an in-turn delivery cut off while it awaited had earned), or
/// `None` when it owes none: the earliest of its rows' times, each its
/// failing target's retry time or else now, and no earlier than that.
pub(crate) fn due_by(sim: &Sim, source: &str, now_ms: u64, first_ms: u64) -> Result<Option<u64>, String> {
    let src = sim.world.source(&name(source));
    let rows: Vec<StoredRow> = stored_rows(src.relay.sql(), crate::store::outbox::pack::QUEUED_ROWS, "")
        .map_err(|e| e.to_string())?;
    let failing = src.relay.outbox().target_reports(TargetFilter::Failing, "", TARGETS_READ_MAX);
    let failing = failing.map_err(|e| e.to_string())?.targets;
    let retry_at = |target: &str| failing.iter().find(|t| t.target == target).and_then(|t| t.retry_at_ms);
    let earliest = rows.iter().map(|r| retry_at(&r.target).unwrap_or(now_ms)).min();
    Ok(earliest.map(|at| at.max(now_ms.saturating_add(first_ms))))
}

/// Whether `source`'s alarm is due in time for what it owes at `now_ms`
/// (see [`due_by`]); the breach, said, if not.
pub(crate) fn in_time(sim: &Sim, source: &str, now_ms: u64, first_ms: u64) -> Result<(), String> {
    let Some(due) = due_by(sim, source, now_ms, first_ms)? else { return Ok(()) };
    match sim.alarm_at(source) {
        Some(at) if at <= due => Ok(()),
        alarm => Err(format!(
            "rows {:?} are owed by {due} (now {now_ms}), but the alarm is {}",
            sim.queued(source),
            alarm.map_or("not armed".into(), |at| format!("at {at}, {} ms late", at - due)),
        )),
    }
}

/// The explorer's check after each step: in time, granting the safety
/// net's time ([`IN_TURN_ALARM_GRACE_MS`]), at least the first back-off.
pub(super) fn owed_in_time(sim: &Sim, source: &str) -> Result<(), String> {
    in_time(sim, source, sim.now_ms(), IN_TURN_ALARM_GRACE_MS.max(RETRY_BACKOFF_MS))
}
