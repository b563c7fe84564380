//! The relay's invariants, checked over a simulated world. Property tests
//! call this after every fire.
//!
//! For every (source, target) pair:
//! - order and exactly-once: what the target applied is a prefix of what
//!   was enqueued for it, in sequence order, with nothing twice;
//! - nothing lost: every enqueued row not yet applied is still queued;
//! - the watermark is the last applied sequence, so it is never past an
//!   undelivered older row.
//!
//! For every source with an active cycle: every queued row at or below the
//! cursor has its target in `blocked`.

use super::Sim;

pub(super) fn audit(sim: &Sim) -> Result<(), String> {
    for ((source, target), expected) in &sim.enqueued {
        let applied = sim.applied(target.as_str(), source.as_str());
        let ctx = || format!("source {source} target {target} (seed {})", sim.seed());
        if applied.len() > expected.len() || applied[..] != expected[..applied.len()] {
            return Err(format!(
                "{}: applied {:?} is not a prefix of enqueued {:?}",
                ctx(),
                head(&applied),
                head(expected)
            ));
        }
        let queued = &sim.sources[source].outbox;
        if let Some(lost) = expected[applied.len()..]
            .iter()
            .find(|s| !queued.contains_key(s))
        {
            return Err(format!(
                "{}: row {lost} was neither applied nor kept",
                ctx()
            ));
        }
        let watermark = sim.watermark(target.as_str(), source.as_str());
        if watermark != applied.last().copied().unwrap_or(0) {
            return Err(format!(
                "{}: watermark {watermark} is not the last applied row",
                ctx()
            ));
        }
        if let Some(older) = expected.get(applied.len()) {
            if watermark >= *older {
                return Err(format!(
                    "{}: watermark {watermark} passes undelivered row {older}",
                    ctx()
                ));
            }
        }
    }
    for (source, src) in &sim.sources {
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
