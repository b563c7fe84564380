//! CPU per invocation: work units the engine counts itself, and the gauge
//! that tells a fire to stop before the invocation's CPU runs out.
//!
//! The platform bounds CPU per invocation (10 ms on Workers Free) and kills
//! an invocation that goes past it; the platform then retries the alarm
//! with the same work. The relay cannot read its own CPU time in a Worker,
//! so it counts work units, a proxy proportional to what a fire spends:
//! rows read, body bytes read and sent, and target calls made. A
//! [`CpuGauge`] says "stop now" when the runtime's near-limit signal is
//! raised (workers-rs exposes one; the JavaScript side has none) or when
//! the alarm's work budget ([`RelayBudget::work_per_alarm`]) is spent. The
//! shell then settles what is done and re-arms at once: a cut is not an
//! error.
//!
//! [`RelayBudget::work_per_alarm`]: crate::limits::RelayBudget::work_per_alarm

/// Work units per row read from the outbox: decoding a row's metadata and
/// its body's JSON is the unit the others are measured against.
pub const WORK_PER_ROW: u64 = 1;

/// Work units per KiB of row bodies read, or of request bodies sent: parsing
/// and encoding JSON costs about as much per KiB as a small row does.
pub const WORK_PER_KIB: u64 = 1;

/// Work units per target call, besides its body: building the request,
/// the subrequest itself and decoding the reply cost about as much as
/// reading eight small rows.
pub const WORK_PER_CALL: u64 = 8;

/// Bytes in one KiB, the unit [`WORK_PER_KIB`] counts.
const KIB: u64 = 1024;

/// Work units for reading `rows` rows of `bytes` body bytes in all.
pub fn read_work(rows: u64, bytes: u64) -> u64 {
    rows.saturating_mul(WORK_PER_ROW).saturating_add(kib_work(bytes))
}

/// Work units for one target call whose body is `bytes` long.
pub fn call_work(bytes: u64) -> u64 {
    WORK_PER_CALL.saturating_add(kib_work(bytes))
}

fn kib_work(bytes: u64) -> u64 {
    (bytes / KIB).saturating_mul(WORK_PER_KIB)
}

/// Counts one invocation's work against its budget.
///
/// Invariant: once [`CpuGauge::cut`] answered true it always does, so a fire
/// that stopped never starts again in the same invocation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CpuGauge {
    /// Work units this invocation may spend.
    budget: u64,
    /// Work units spent so far.
    spent: u64,
    /// Whether the gauge has said "stop".
    cut: bool,
}

impl CpuGauge {
    /// A gauge for an invocation that may spend `budget` work units.
    pub fn new(budget: u64) -> CpuGauge {
        CpuGauge { budget, spent: 0, cut: false }
    }

    /// Counts `units` of work done.
    pub fn spend(&mut self, units: u64) {
        self.spent = self.spent.saturating_add(units);
    }

    /// Work units spent so far.
    pub fn spent(&self) -> u64 {
        self.spent
    }

    /// Work units left in the budget (0 once spent).
    pub fn left(&self) -> u64 {
        self.budget.saturating_sub(self.spent)
    }

    /// Whether to stop now: the runtime's near-limit signal (`near_limit`,
    /// `false` where the runtime has none) is raised, or the budget is
    /// spent. Sticky: once true, always true.
    pub fn cut(&mut self, near_limit: bool) -> bool {
        self.cut |= near_limit || self.spent >= self.budget;
        self.cut
    }

    /// Whether the gauge has said "stop".
    pub fn was_cut(&self) -> bool {
        self.cut
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn work_counts_rows_kib_and_calls() {
        assert_eq!(read_work(3, 0), 3 * WORK_PER_ROW);
        assert_eq!(read_work(1, 1023), WORK_PER_ROW, "under a KiB counts no KiB");
        assert_eq!(read_work(1, 2048), WORK_PER_ROW + 2 * WORK_PER_KIB);
        assert_eq!(call_work(100), WORK_PER_CALL);
        assert_eq!(call_work(1024), WORK_PER_CALL + WORK_PER_KIB);
        assert_eq!(read_work(u64::MAX, u64::MAX), u64::MAX, "saturates");
    }

    #[test]
    fn the_gauge_cuts_at_its_budget_or_on_the_signal_and_stays_cut() {
        let mut g = CpuGauge::new(10);
        g.spend(9);
        assert!(!g.cut(false), "one unit before the edge");
        assert_eq!(g.left(), 1);
        g.spend(1);
        assert!(g.cut(false), "at the edge");
        assert_eq!(g.left(), 0);
        let mut g = CpuGauge::new(10);
        assert!(g.cut(true), "the signal cuts with budget left");
        assert!(g.cut(false), "and the cut stays");
        assert!(g.was_cut());
        let mut g = CpuGauge::new(0);
        assert!(g.cut(false), "an empty budget cuts at once");
        let mut g = CpuGauge::new(5);
        g.spend(u64::MAX);
        assert!(g.cut(false));
        assert_eq!(g.left(), 0, "past the edge");
    }
}
