//! What an enqueue reads, in one statement: the state with its tail, the
//! outbox's newest slot (a tombstone the first row can take), each of the
//! rows' targets' records (parked, held, failing) and the key's dedup
//! record. Each statement is a call into the runtime, and in workerd the
//! call, not SQLite's work, is most of a statement's cost; so the reads a
//! lone row's enqueue needs are one call, and its write the other.

use std::collections::{BTreeMap, BTreeSet};

use super::ledger::{stored_and_tail_sql, FIRST_EXTRA_COLUMN};
use super::{int, Outbox, SourceState, Sql, StoreError};
use crate::core::{DedupRecord, EnqueueRow, Failing, Name};

/// The extra columns of the enqueue's read: the newest outbox row's target
/// (`''`: a tombstone), the records of the targets listed by the first
/// parameter (a JSON array of names) with holds live after the second, and
/// the dedup record of the key in the third (NULL: none).
static ENQUEUE_READ_SQL: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    stored_and_tail_sql(
        ", (SELECT target FROM relay_outbox ORDER BY seq DESC LIMIT 1), \
         (SELECT json_group_array(json_array(j.value, COALESCE(t.parked, 0), h.due_ms, t.failed_cycles, \
          t.last_failure_ms, t.retry_after_ms)) \
          FROM json_each(?) j LEFT JOIN relay_targets t ON t.target = j.value \
          LEFT JOIN relay_holds h ON h.target = j.value AND h.due_ms > ?), \
         (SELECT json_array(key, digest, first_seq, rows, at_ms, due_ms) FROM relay_dedup WHERE key = ?)",
    )
});

/// One target's record as the enqueue's read lists it: name, parked (0 or
/// 1), live hold's due time, failed cycles, last failure, asked pause.
type TargetRecord = (String, u64, Option<u64>, Option<u64>, Option<u64>, Option<u64>);

/// A dedup record as the enqueue's read lists it.
type DedupColumns = (String, String, u64, u32, u64, Option<String>);

/// What an enqueue knows before the core admits its rows.
#[derive(Clone, Debug)]
pub(crate) struct EnqueueView {
    /// The source's state.
    pub(crate) state: SourceState,
    /// Whether this object ever stored a partition map.
    pub(crate) map_stored: bool,
    /// The tombstone's sequence, when the outbox's newest row is one.
    pub(crate) tombstone: Option<u64>,
    /// The key's dedup record, if any.
    pub(crate) record: Option<DedupRecord>,
    /// The rows' targets that are parked.
    pub(crate) parked: BTreeSet<String>,
    /// The rows' targets with a live delay hold, and its due time.
    pub(crate) held: BTreeMap<String, u64>,
    /// The rows' targets that are failing (not parked), with their records.
    pub(crate) failing: BTreeMap<Name, Failing>,
}

fn corrupt(what: &str, e: serde_json::Error) -> StoreError {
    StoreError::Corrupt(format!("the enqueue's read of {what}: {e}"))
}

impl<S: Sql> Outbox<S> {
    /// Reads what an enqueue of `rows` under `key` needs at `now_ms`, in
    /// one statement. Reads rows in proportion to the rows' own targets,
    /// never to the records a source keeps.
    pub(crate) fn enqueue_view(
        &self,
        rows: &[EnqueueRow],
        key: Option<&str>,
        now_ms: u64,
    ) -> Result<EnqueueView, StoreError> {
        let targets: BTreeSet<&str> = rows.iter().map(|r| r.target.as_str()).collect();
        let list = serde_json::to_string(&targets).map_err(|e| corrupt("targets", e))?;
        let live_after = now_ms.saturating_sub(crate::core::HOLD_GRACE_MS);
        let params = vec![list.into(), int(live_after), key.into()];
        let (stored, tail, row) = self.stored_and_tail_with(&ENQUEUE_READ_SQL, params)?;
        let (state, map_stored) = self.state_of(stored, tail);
        let at = FIRST_EXTRA_COLUMN;
        let newest_is_tombstone = row.opt_text(at)?.is_some_and(|t| t.is_empty());
        let tombstone =
            newest_is_tombstone.then(|| row.opt_u64(FIRST_EXTRA_COLUMN - 3)).transpose()?.flatten();
        let records: Vec<TargetRecord> =
            serde_json::from_str(&row.text(at + 1)?).map_err(|e| corrupt("targets' records", e))?;
        let mut view = EnqueueView {
            state,
            map_stored,
            tombstone,
            record: dedup_of(row.opt_text(at + 2)?)?,
            parked: BTreeSet::new(),
            held: BTreeMap::new(),
            failing: BTreeMap::new(),
        };
        for (target, parked, hold, cycles, last, pause) in records {
            if let Some(due_ms) = hold {
                view.held.insert(target.clone(), due_ms);
            }
            match (parked, cycles) {
                (0, Some(cycles)) if cycles > 0 => {
                    // A stored name that no longer validates cannot be a row's target.
                    if let Ok(name) = Name::new(target.as_str()) {
                        let cycles = u32::try_from(cycles).unwrap_or(u32::MAX);
                        let f = Failing {
                            cycles,
                            last_failure_ms: last.unwrap_or(0),
                            retry_after_ms: pause.unwrap_or(0),
                        };
                        view.failing.insert(name, f);
                    }
                }
                (0, _) => {}
                _ => {
                    view.parked.insert(target);
                }
            }
        }
        Ok(view)
    }
}

/// The dedup record of the enqueue's read, from its JSON columns.
fn dedup_of(text: Option<String>) -> Result<Option<DedupRecord>, StoreError> {
    let Some(text) = text else { return Ok(None) };
    let (key, digest, first_seq, rows, at_ms, due): DedupColumns =
        serde_json::from_str(&text).map_err(|e| corrupt("the dedup record", e))?;
    let due_ms = match due {
        Some(list) => serde_json::from_str(&list).map_err(|e| corrupt("a dedup record's due times", e))?,
        None => Vec::new(),
    };
    Ok(Some(DedupRecord { key, digest, first_seq, rows, at_ms, due_ms }))
}
