//! The platform's CPU limit, simulated: the runtime's near-limit signal
//! raised after a number of work units, or the invocation killed there,
//! and the platform's count of an alarm's retries.
//!
//! Work is counted over the whole run (every invocation of every source),
//! so a test can place a fault at every point of a drain: "after K units"
//! means the K-th unit of the run, wherever it falls.

use std::cell::Cell;

/// A CPU fault the simulated runtime injects.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CpuFault {
    /// The near-limit signal is raised once the run has spent this many
    /// work units, and stays raised in every later invocation: each fire
    /// must cut and settle what it did.
    Signal(u64),
    /// The invocation that reaches this many work units of the run dies
    /// there, once: nothing since its last checkpoint stands (the store
    /// fails its next checkpoint), and the platform retries the alarm with
    /// its retry count one higher.
    Kill(u64),
    /// Every invocation dies once it has spent this many work units of its
    /// own, as the platform's per-invocation limit kills it: nothing since
    /// its last checkpoint stands, and the alarm is retried with its retry
    /// count one higher, each time it happens.
    Limit(u64),
}

/// The CPU state of a run.
#[derive(Default)]
pub(crate) struct SimCpu {
    /// The fault in force, if any.
    pub(crate) fault: Cell<Option<CpuFault>>,
    /// Work units spent by invocations that have ended.
    pub(crate) spent: Cell<u64>,
    /// Work units the invocation under way has reported so far.
    pub(crate) current: Cell<u64>,
    /// Whether the kill has happened (it happens once).
    pub(crate) killed: Cell<bool>,
    /// Whether the invocation under way reached a [`CpuFault::Limit`].
    pub(crate) limited: Cell<bool>,
    /// Invocations a [`CpuFault::Limit`] killed in the run.
    pub(crate) limit_kills: Cell<u32>,
}

impl SimCpu {
    /// Work units spent in the run, the invocation under way included.
    pub(crate) fn total(&self) -> u64 {
        self.spent.get() + self.current.get()
    }

    /// Ends the invocation under way, which spent `work` units in all.
    pub(crate) fn end_invocation(&self, work: u64) {
        self.spent.set(self.spent.get() + work.max(self.current.get()));
        self.current.set(0);
        self.limited.set(false);
    }

    /// Counts `work` units spent so far by the running invocation, and
    /// answers the fault's verdict on it: whether the near-limit signal is
    /// raised, and whether the invocation dies here (its source's next
    /// checkpoint must fail).
    pub(crate) fn observe(&self, work: u64) -> CpuVerdict {
        self.current.set(work);
        match self.fault.get() {
            None => CpuVerdict::default(),
            Some(CpuFault::Signal(k)) => CpuVerdict { near_limit: self.total() >= k, killed: false },
            Some(CpuFault::Kill(k)) if !self.killed.get() && self.total() >= k => {
                self.killed.set(true);
                CpuVerdict { near_limit: false, killed: true }
            }
            Some(CpuFault::Limit(k)) if !self.limited.get() && work >= k => {
                self.limited.set(true);
                self.limit_kills.set(self.limit_kills.get() + 1);
                CpuVerdict { near_limit: false, killed: true }
            }
            Some(CpuFault::Kill(_) | CpuFault::Limit(_)) => CpuVerdict::default(),
        }
    }
}

/// What a CPU fault makes of an invocation's work so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct CpuVerdict {
    /// The runtime's near-limit signal is raised.
    pub(crate) near_limit: bool,
    /// The invocation dies here: nothing since its last checkpoint stands.
    pub(crate) killed: bool,
}
