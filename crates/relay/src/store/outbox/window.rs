//! What a fire reads: `os`, the stored `rs`, the failing targets, then the
//! window of rows after the cursor.
//!
//! The window is read in two steps so a fire never reads bodies it cannot
//! send: first every row's sequence, target, time and size (which cut the
//! window at its row and byte bounds, and tell which rows belong to targets
//! this fire can reach), then the bodies of those rows only.

use super::{int, Outbox, Sql, StoreError};
use crate::core::{Begun, FireStart, Name, RelayBudget, StoredRow};

/// One window row without its body.
struct Meta {
    seq: u64,
    target: String,
    at_ms: u64,
    due_ms: u64,
    bytes: u32,
}

impl<S: Sql> Outbox<S> {
    /// Reads what a fire of `source` needs before it begins.
    pub fn fire_start(
        &self,
        source: &Name,
        budget: RelayBudget,
        calls_left: u32,
        now_ms: u64,
    ) -> Result<FireStart, StoreError> {
        let state = self.state()?;
        Ok(FireStart {
            source: source.clone(),
            os: state.os,
            rs_text: state.rs,
            now_ms,
            budget,
            calls_left,
            policy: self.settings().policy,
            failing: self.failing()?,
        })
    }

    /// Reads the begun fire's window: its rows, ascending, with bodies only
    /// for the rows the fire can send, and whether they are all the rows left
    /// up to the cycle end.
    pub fn read_window(&self, begun: &Begun) -> Result<(Vec<StoredRow>, bool), StoreError> {
        let w = begun.window;
        let rows = self.sql.rows(
            "SELECT seq, target, at_ms, bytes, due_ms FROM relay_outbox WHERE seq > ? AND seq <= ? AND target != '' \
             ORDER BY seq LIMIT ?",
            vec![int(w.after), int(w.through), int(u64::from(w.probe_rows()))],
        )?;
        let mut meta = rows
            .iter()
            .map(|r| {
                Ok(Meta {
                    seq: r.u64(0)?,
                    target: r.text(1)?,
                    at_ms: r.u64(2)?,
                    bytes: r.u32(3)?,
                    due_ms: r.u64(4)?,
                })
            })
            .collect::<Result<Vec<_>, StoreError>>()?;
        let sizes: Vec<(u64, u32)> = meta.iter().map(|m| (m.seq, m.bytes)).collect();
        let (take, exhausted) = w.take(&sizes);
        meta.truncate(take);
        let through = begun.bodies_through(meta.iter().map(|m| (m.seq, m.target.as_str(), m.due_ms)));
        let mut bodies = match through {
            None => Vec::new(),
            Some(last) => self.bodies_between(w.after, last)?,
        }
        .into_iter()
        .peekable();
        let window = meta
            .into_iter()
            .map(|m| {
                let body = bodies.next_if(|(seq, _)| *seq == m.seq).map(|(_, b)| b).unwrap_or_default();
                StoredRow { seq: m.seq, target: m.target, at_ms: m.at_ms, due_ms: m.due_ms, body }
            })
            .collect();
        Ok((window, exhausted))
    }

    /// `(seq, body)` of rows with `after < seq <= last`, ascending.
    fn bodies_between(&self, after: u64, last: u64) -> Result<Vec<(u64, String)>, StoreError> {
        let rows = self.sql.rows(
            "SELECT seq, body FROM relay_outbox WHERE seq > ? AND seq <= ? AND target != '' ORDER BY seq",
            vec![int(after), int(last)],
        )?;
        rows.iter().map(|r| Ok((r.u64(0)?, r.text(1)?))).collect()
    }
}
