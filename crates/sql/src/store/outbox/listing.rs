//! Pages of one target's rows for an operator: the rows parked for it and
//! the rows still queued for it. Both read the rows' sizes first and then
//! only the bodies the page holds, so a page never holds more in memory
//! than it answers, and both are cut at
//! [`MAX_PAGE_BYTES`](crate::core::MAX_PAGE_BYTES) of rows (a larger row
//! alone).

use super::{int, Outbox, ParkedPage, ParkedRow, Sql, StoreError};
use crate::core::{MAX_PARKED_ROWS_PER_PAGE, MAX_QUEUED_ROWS_PER_PAGE};
use durable_relay_protocol::wire::{QueuedPage, QueuedRow};

/// The table a page lists, with what selects the target's live rows in it.
#[derive(Clone, Copy)]
enum List {
    /// `relay_parked`, leaving out the rows an operator discarded.
    Parked,
    /// `relay_outbox`, packs unpacked (a tombstone has no target, so never
    /// matches).
    Queued,
}

impl List {
    /// The `FROM ... WHERE` that selects the target's rows after a sequence.
    fn rows_of(self) -> String {
        match self {
            List::Parked => {
                "FROM relay_parked WHERE target = ? AND seq > ? AND discarded_at_ms IS NULL".into()
            }
            List::Queued => format!("FROM {} WHERE target = ? AND seq > ?", super::pack::QUEUED_ROWS),
        }
    }
}

/// One listed row as read: its sequence, commit time, due time and body.
type Listed = (u64, u64, u64, String);

impl<S: Sql> Outbox<S> {
    /// A page of `target`'s parked rows after `after`, ascending, at most
    /// `limit` (1..=[`MAX_PARKED_ROWS_PER_PAGE`]).
    pub fn parked_page(&self, target: &str, after: u64, limit: u32) -> Result<ParkedPage, StoreError> {
        let limit = limit.clamp(1, MAX_PARKED_ROWS_PER_PAGE);
        let stand_in = |seq, at_ms| ParkedRow { seq, at_ms, effects: "0".into() };
        let size = |seq, at_ms, _| crate::core::json_bytes(&stand_in(seq, at_ms));
        let (rows, next) = self.row_page(List::Parked, target, after, limit, size)?;
        let rows =
            rows.into_iter().map(|(seq, at_ms, _, effects)| ParkedRow { seq, at_ms, effects }).collect();
        Ok(ParkedPage { target: target.to_owned(), rows, next })
    }

    /// A page of the rows still queued for `target` after `after`, in the
    /// order it receives them, at most `limit` (1..=[`MAX_QUEUED_ROWS_PER_PAGE`]).
    /// A delivered row this instance keeps for the next enqueue is removed
    /// first, so it is never listed as queued. Its `source` is left for
    /// the caller, which knows the object's name.
    pub fn queued_page(&self, target: &str, after: u64, limit: u32) -> Result<QueuedPage, StoreError> {
        let limit = limit.clamp(1, MAX_QUEUED_ROWS_PER_PAGE);
        let stand_in = |seq, at_ms, due_ms| QueuedRow { seq, at_ms, due_ms, effects: "0".into() };
        let size = |seq, at_ms, due_ms| crate::core::json_bytes(&stand_in(seq, at_ms, due_ms));
        let (rows, next) = self.row_page(List::Queued, target, after, limit, size)?;
        let rows = rows
            .into_iter()
            .map(|(seq, at_ms, due_ms, effects)| QueuedRow { seq, at_ms, due_ms, effects })
            .collect();
        Ok(QueuedPage { source: String::new(), target: target.to_owned(), rows, next })
    }

    /// The rows of one page of `list` and the `after` of the next page.
    /// `size` answers a row's encoded bytes with a one-byte body.
    fn row_page(
        &self,
        list: List,
        target: &str,
        after: u64,
        limit: u32,
        size: impl Fn(u64, u64, u64) -> u64,
    ) -> Result<(Vec<Listed>, Option<u64>), StoreError> {
        self.flush_delivered()?;
        let sizes = self.sql.rows(
            &format!(
                "SELECT seq, at_ms, MAX(COALESCE(due_ms, 0), at_ms), length(CAST(body AS BLOB)) {} ORDER BY seq LIMIT ?",
                list.rows_of()
            ),
            vec![target.into(), int(after), int(u64::from(limit) + 1)],
        )?;
        let sizes = sizes
            .iter()
            .map(|r| Ok((r.u64(0)?, (size(r.u64(0)?, r.u64(1)?, r.u64(2)?) + r.u64(3)?).saturating_sub(1))))
            .collect::<Result<Vec<_>, StoreError>>()?;
        let (page, more) = crate::core::cut_page(sizes, limit, |(_, bytes)| *bytes);
        let Some(&(last, _)) = page.last() else { return Ok((Vec::new(), None)) };
        let rows = self.sql.rows(
            &format!(
                "SELECT seq, at_ms, MAX(COALESCE(due_ms, 0), at_ms), body {} AND seq <= ? ORDER BY seq",
                list.rows_of()
            ),
            vec![target.into(), int(after), int(last)],
        )?;
        let rows = rows
            .iter()
            .map(|r| Ok((r.u64(0)?, r.u64(1)?, r.u64(2)?, r.text(3)?)))
            .collect::<Result<Vec<Listed>, StoreError>>()?;
        Ok((rows, more.then_some(last)))
    }
}
