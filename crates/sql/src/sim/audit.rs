//! The relay's invariants, checked over a simulated world. Property tests
//! run this after every fire.
//!
//! For every (source, target) pair, leaving out rows an operator discarded:
//! - order and exactly-once: what the target applied (its apply log) is a
//!   prefix of what was enqueued for it, in sequence order, nothing twice;
//! - nothing lost: every enqueued row not yet applied is queued or parked;
//! - the watermark is the last applied sequence (or, before any, the one
//!   the target held when its source was adopted mid-flight), so it is
//!   never past an undelivered older row;
//! - no row was sent to its target before the time it asked for
//!   (`not_before_ms` or `delay_ms`), judged from the request itself.
//!
//! And every source's outbox passes its own audit on its real tables
//! (counters against the tables, parked targets with nothing queued, the
//! `rs` invariant); see `Outbox::audit`.

use std::collections::BTreeSet;

use super::world::World;
use crate::core::Name;
use crate::store::Sql;

pub(super) fn audit(world: &World) -> Result<(), String> {
    let seed = world.seed;
    if let Some(early) = world.early.borrow().first() {
        return Err(format!("{early} (seed {seed})"));
    }
    let enqueued = world.enqueued.borrow().clone();
    let discarded = world.discarded.borrow().clone();
    let mut waiting_at: std::collections::BTreeMap<Name, BTreeSet<u64>> = std::collections::BTreeMap::new();
    for ((source, target), sent) in &enqueued {
        let ctx = || format!("source {source} target {target} (seed {seed})");
        let kept = |seq: &u64| !discarded.contains(&(source.clone(), *seq));
        let expected: Vec<u64> = sent.iter().copied().filter(kept).collect();
        let (all_applied, watermark) = target_view(world, target, source)?;
        let applied: Vec<u64> = all_applied.iter().copied().filter(kept).collect();
        if applied.len() > expected.len() || applied[..] != expected[..applied.len()] {
            return Err(format!(
                "{}: applied {} is not a prefix of enqueued {}",
                ctx(),
                head(&applied),
                head(&expected)
            ));
        }
        if !waiting_at.contains_key(source) {
            waiting_at.insert(source.clone(), waiting(world, source)?);
        }
        let waiting = waiting_at.get(source).cloned().unwrap_or_default();
        if let Some(lost) = expected[applied.len()..].iter().find(|s| !waiting.contains(s)) {
            return Err(format!("{}: row {lost} was neither applied nor kept", ctx()));
        }
        let adopted = world.adopted_watermarks.borrow().get(&(source.clone(), target.clone())).copied();
        if watermark != all_applied.last().copied().or(adopted).unwrap_or(0) {
            return Err(format!("{}: watermark {watermark} is not the last applied row", ctx()));
        }
        if let Some(older) = expected.get(applied.len()) {
            if watermark >= *older {
                return Err(format!("{}: watermark {watermark} passes undelivered row {older}", ctx()));
            }
        }
    }
    for (name, src) in world.sources.borrow().iter() {
        let relay = &src.relay;
        match relay.outbox().audit() {
            Ok(Ok(())) => {}
            Ok(Err(breach)) => return Err(format!("source {name} (seed {seed}): {breach}")),
            Err(e) => return Err(format!("source {name} (seed {seed}): audit read failed: {e}")),
        }
    }
    Ok(())
}

/// `target`'s apply log for the simulated source `source` and its
/// watermark for it, by the source's name and id.
fn target_view(world: &World, target: &Name, source: &Name) -> Result<(Vec<u64>, u64), String> {
    let (name, id) = world.identity(source);
    let targets = world.targets.borrow();
    let Some(t) = targets.get(target) else { return Ok((Vec::new(), 0)) };
    let applied = t.tables.applied(name.as_str(), Some(&id)).map_err(|e| e.to_string())?;
    let watermark = t.inbox.watermark(&name, Some(&id)).map_err(|e| e.to_string())?;
    Ok((applied, watermark))
}

/// Sequences `source` still holds: queued, or parked and not discarded.
fn waiting(world: &World, source: &Name) -> Result<BTreeSet<u64>, String> {
    let sources = world.sources.borrow();
    let Some(src) = sources.get(source) else { return Ok(BTreeSet::new()) };
    let relay = &src.relay;
    let rows = relay
        .sql()
        .rows(
            &format!(
                "SELECT seq FROM {} UNION ALL SELECT seq FROM relay_parked WHERE discarded_at_ms IS NULL",
                crate::store::outbox::pack::QUEUED_ROWS
            ),
            vec![],
        )
        .map_err(|e| e.to_string())?;
    rows.iter().map(|r| r.u64(0).map_err(|e| e.to_string())).collect()
}

fn head(seqs: &[u64]) -> String {
    if seqs.len() <= 12 {
        return format!("{seqs:?}");
    }
    format!("{:?}.. ({} in all)", &seqs[..12], seqs.len())
}
