//! The start of a fire: what the shell read, the cycle the fire continues
//! or starts ([`begin`]), and the window of rows it reads ([`WindowQuery`]).

use std::collections::BTreeMap;

use crate::cpu::WORK_PER_ROW;
use crate::fire::retry::{standing, Failing, Retries, Standing, Turn};
use crate::limits::{BudgetError, RelayBudget, MAX_FIRE_BYTES};
use crate::name::Name;
use crate::scan::{CorruptScan, ScanState};

/// What the shell read before a fire, and the fire's limits.
#[derive(Clone, Debug)]
pub struct FireStart {
    /// This source's name; sent to targets so they key their watermark.
    pub source: Name,
    /// The source's last allocated sequence, as read.
    pub os: u64,
    /// The stored `rs` text exactly as read (`None` if absent). The
    /// checkpoint is guarded on it.
    pub rs_text: Option<String>,
    /// Clock reading for lag checks, ms since the epoch.
    pub now_ms: u64,
    /// Per-fire limits.
    pub budget: RelayBudget,
    /// Target calls the enclosing alarm still allows.
    pub calls_left: u32,
    /// When to park a failing target.
    pub policy: RelayPolicy,
    /// The records of failing (not parked) targets: at least those of every
    /// target in the fire's window, which the shell reads with the window.
    pub failing: BTreeMap<Name, Failing>,
    /// The endpoints (`endpoint:<name>`, by name) configured to take many
    /// rows in one request; every other endpoint gets one row per call.
    pub batched_endpoints: std::collections::BTreeSet<String>,
}

/// What the relay does with targets that keep failing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RelayPolicy {
    /// Park a target after this many consecutive cycles in which its
    /// delivery failed. `None` (the default) retries every cycle forever,
    /// as the relay always did. A permanent error parks a target at once either way.
    pub park_after_failed_cycles: Option<u32>,
}

/// The effective scan state for a fire and the rows it should read.
#[derive(Clone, Debug)]
pub struct Begun {
    /// What the shell read.
    pub start: FireStart,
    /// The cycle this fire continues or starts.
    pub scan: ScanState,
    /// Whether this fire starts a new cycle.
    pub new_cycle: bool,
    /// Set when the stored `rs` did not decode; the fire restarts the cycle.
    pub corrupt_rs: Option<CorruptScan>,
    /// Which rows to read.
    pub window: WindowQuery,
}

impl Begun {
    /// Most target calls this fire may make.
    pub fn calls_cap(&self) -> u32 {
        self.start.budget.calls_per_fire().min(self.start.calls_left)
    }

    /// Of window rows given as `(seq, target, due_ms)` ascending, the last
    /// one whose body this fire needs: a row of one of the first
    /// [`calls_cap`] distinct targets that are neither passed over (failing
    /// and not retried, see [`retry`](crate::fire::retry)) nor held (their
    /// first row not due), a failing target counting only while the retries
    /// the fire began with last. No other row can be sent by this fire
    /// (selection is in first-sequence order, costs a call, and spends the
    /// fire's retries in the same order), so a shell may read the rows after it
    /// without their bodies. A selectable target's held rows are read too:
    /// its watermark may already cover them (a call that applied before a
    /// lost checkpoint), and a row leaving the outbox must carry its size
    /// for the queued-bytes gauge.
    ///
    /// [`calls_cap`]: Begun::calls_cap
    pub fn bodies_through<'a>(&self, rows: impl Iterator<Item = (u64, &'a str, u64)>) -> Option<u64> {
        let cap = self.calls_cap() as usize;
        let mut retries = Retries::new(&self.scan, &self.start.budget);
        let mut seen: BTreeMap<&str, bool> = BTreeMap::new();
        let mut selectable_targets = 0usize;
        let mut last = None;
        for (seq, target, due_ms) in rows {
            let selectable = match seen.get(target) {
                Some(&selectable) => selectable,
                None => {
                    let name = Name::new(target).ok();
                    let standing = name
                        .as_ref()
                        .map_or(Standing::Passed, |n| standing(&self.scan, &self.start.failing, n));
                    let retry_at =
                        || name.as_ref().and_then(|n| self.start.failing.get(n)).map(Failing::retry_at_ms);
                    let selectable = standing != Standing::Passed
                        && self.scan.is_due(due_ms)
                        && selectable_targets < cap
                        && (standing != Standing::Retry
                            || retries.take(retry_at().unwrap_or(0)) == Turn::Call);
                    selectable_targets += usize::from(selectable);
                    seen.insert(target, selectable);
                    selectable
                }
            };
            if selectable {
                last = Some(seq);
            }
        }
        last
    }
}

/// Starts a fire: decides the cycle and the window to read. A budget
/// outside its ranges (a caller's configuration) is refused, not trusted.
pub fn begin(start: FireStart) -> Result<Begun, BudgetError> {
    start.budget.validate()?;
    let (stored, corrupt_rs) = match start.rs_text.as_deref().map(ScanState::decode) {
        None => (None, None),
        Some(Ok(scan)) => (Some(scan), None),
        Some(Err(e)) => (None, Some(e)),
    };
    let (scan, new_cycle) = match stored {
        Some(scan) if !scan.is_complete() => (scan, false),
        previous => {
            let mut scan = ScanState::new_cycle(start.os, previous.as_ref());
            scan.clock_ms = start.now_ms;
            (scan, true)
        }
    };
    assert!(scan.cycle_end <= start.os, "rs cycle_end {} is past os {}", scan.cycle_end, start.os);
    let window = WindowQuery {
        after: scan.cursor,
        through: scan.cycle_end,
        rows_max: start.budget.window_rows(),
        bytes_max: MAX_FIRE_BYTES,
    };
    Ok(Begun { start, scan, new_cycle, corrupt_rs, window })
}

/// The slice of the outbox one fire reads: rows with
/// `after < seq <= through`, ascending, bounded in count and bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WindowQuery {
    /// Exclusive lower bound: the cursor.
    pub after: u64,
    /// Inclusive upper bound: the cycle end.
    pub through: u64,
    /// Most rows to inspect.
    pub rows_max: u32,
    /// Most body bytes to read (the first row is always read).
    pub bytes_max: u32,
}

impl WindowQuery {
    /// This window cut to the rows that `work_left` work units can read
    /// ([`WORK_PER_ROW`] each), but always one at least, so a fire whose
    /// alarm spent its work still moves its source forward.
    pub fn within_work(self, work_left: u64) -> WindowQuery {
        let rows = u32::try_from(work_left / WORK_PER_ROW).unwrap_or(u32::MAX).max(1);
        WindowQuery { rows_max: self.rows_max.min(rows), ..self }
    }

    /// How many size entries a shell should read: one past `rows_max`, so
    /// that [`take`](Self::take) can tell whether the window is exhausted.
    pub fn probe_rows(&self) -> u32 {
        self.rows_max.saturating_add(1)
    }

    /// Given `(seq, bytes)` of the first [`probe_rows`](Self::probe_rows)
    /// rows in range (ascending), how many to read and whether they are
    /// all the rows left in the range.
    pub fn take(&self, sizes: &[(u64, u32)]) -> (usize, bool) {
        let mut total: u64 = 0;
        for (i, (seq, bytes)) in sizes.iter().enumerate() {
            assert!(*seq > self.after && *seq <= self.through, "row {seq} outside the window");
            if i > 0 {
                assert!(sizes[i - 1].0 < *seq, "window sizes are not ascending");
            }
            if i == self.rows_max as usize {
                return (i, false);
            }
            if i > 0 && total + u64::from(*bytes) > u64::from(self.bytes_max) {
                return (i, false);
            }
            total += u64::from(*bytes);
        }
        (sizes.len(), true)
    }
}
