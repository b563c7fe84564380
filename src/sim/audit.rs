//! The relay's invariants, checked over a simulated world. Property tests
//! call this after every fire.
//!
//! For every (source, target) pair, leaving out rows an operator discarded:
//! - order and exactly-once: what the target applied is a prefix of what
//!   was enqueued for it, in sequence order, with nothing twice;
//! - nothing lost: every enqueued row not yet applied is queued or parked;
//! - the watermark is the last applied sequence, so it is never past an
//!   undelivered older row.
//!
//! For every source with an active cycle: every queued row at or below the
//! cursor has its target in `blocked`. A parked target has no queued rows.

use super::Sim;

pub(super) fn audit(sim: &Sim) -> Result<(), String> {
    for ((source, target), enqueued) in &sim.enqueued {
        let kept = |seq: &u64| !sim.discarded_seqs.contains(&(source.clone(), *seq));
        let expected: Vec<u64> = enqueued.iter().copied().filter(kept).collect();
        let expected = &expected;
        let all_applied = sim.applied(target.as_str(), source.as_str());
        let applied: Vec<u64> = all_applied.iter().copied().filter(kept).collect();
        let ctx = || format!("source {source} target {target} (seed {})", sim.seed());
        if applied.len() > expected.len() || applied[..] != expected[..applied.len()] {
            return Err(format!(
                "{}: applied {:?} is not a prefix of enqueued {:?}",
                ctx(),
                head(&applied),
                head(expected)
            ));
        }
        let src = &sim.sources[source];
        if let Some(lost) = expected[applied.len()..]
            .iter()
            .find(|s| !src.outbox.contains_key(s) && !src.parked.contains_key(s))
        {
            return Err(format!("{}: row {lost} was neither applied nor kept", ctx()));
        }
        let watermark = sim.watermark(target.as_str(), source.as_str());
        if watermark != all_applied.last().copied().unwrap_or(0) {
            return Err(format!("{}: watermark {watermark} is not the last applied row", ctx()));
        }
        if let Some(older) = expected.get(applied.len()) {
            if watermark >= *older {
                return Err(format!("{}: watermark {watermark} passes undelivered row {older}", ctx()));
            }
        }
    }
    for (source, src) in &sim.sources {
        for (t, record) in &src.targets {
            if record.parked.is_some() && src.outbox.values().any(|r| r.target == t.as_str()) {
                return Err(format!(
                    "source {source} (seed {}): parked target {t} has queued rows",
                    sim.seed()
                ));
            }
        }
        let Some(scan) = sim.rs(source.as_str()) else {
            continue;
        };
        if scan.is_complete() {
            continue;
        }
        for row in src.outbox.range(..=scan.cursor).map(|(_, r)| r) {
            let target = crate::core::Name::new(row.target.clone()).map_err(|e| e.to_string())?;
            if !scan.is_blocked(&target) {
                return Err(format!(
                    "source {source} (seed {}): row {} at or below cursor {} but {} is not blocked",
                    sim.seed(),
                    row.seq,
                    scan.cursor,
                    row.target
                ));
            }
        }
    }
    Ok(())
}

fn head(seqs: &[u64]) -> String {
    if seqs.len() <= 12 {
        return format!("{seqs:?}");
    }
    format!("{:?}.. ({} in all)", &seqs[..12], seqs.len())
}
