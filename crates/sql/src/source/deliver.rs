//! The source's deliveries: the run an alarm and an in-turn delivery share
//! (the driver's fires, then the next wake-up, the back-off, the daily
//! write limit's sleep), and the in-turn delivery itself.
//!
//! An in-turn delivery runs in the invocation of the enqueue that asked for
//! it, after the enqueue's reply, so a row reaches its target without an
//! alarm of its own. The alarm stays the safety net: the enqueue armed it
//! in its own turn (so a crash loses nothing), [`IN_TURN_ALARM_GRACE_MS`]
//! later, and the delivery leaves it there when it took every row. The
//! platform may end the invocation at any moment (its CPU limit, an
//! eviction, an isolate restart), taking the delivery and this instance's
//! memory with it before the delivery records anything, so the alarm is
//! all that brings those rows back: while the delivery runs it is kept
//! within a lease of the moment the delivery last heard anything
//! ([`in_turn_lease_ms`]). Each call that comes back brings it within
//! [`IN_TURN_ALARM_GRACE_MS`] of now before the run goes on to record the
//! call, and an alarm that comes while the delivery awaits re-arms it by as
//! long as the delivery has awaited (see [`Relay::alarm`]). Rows a cut-off
//! delivery leaves are so due within that of the moment it last heard
//! anything, or sooner, with the next enqueue's own delivery.
//!
//! One delivery runs at a time per instance, so a target never has two of
//! the source's requests awaited at once: an enqueue that asks while an
//! in-turn delivery runs makes it run once more; one that comes while the
//! alarm runs asks for none and arms the next alarm for now; an alarm that
//! comes while an in-turn delivery runs defers to it (see [`Relay::alarm`];
//! past [`IN_TURN_DEFER_MAX_MS`](crate::core::IN_TURN_DEFER_MAX_MS) it
//! takes that delivery for stuck and delivers). What one instance cannot
//! order, a request still in flight after its timeout or its object's
//! restart, the checkpoint's guard and the targets' watermarks keep
//! effect-once and in order (the sequence explorer runs every such
//! interleaving and checks all three).

use super::*;
use crate::core::schedule::in_turn_lease_ms;
use crate::core::{CallOutcome, RelayBudget, IN_TURN_ALARM_GRACE_MS};
use crate::core::{IN_TURN_HALVINGS, IN_TURN_RUNS_MAX};
use crate::driver::AlarmOptions;

/// Which delivery runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Run {
    /// The platform's alarm, its `retry_count`th retry (0: not a retry).
    Alarm { retry_count: u32 },
    /// An in-turn delivery, after an enqueue's reply.
    InTurn,
}

impl Run {
    /// The limits this run goes with, from the source's `options` and the
    /// halvings a fitted retry `kept`: an alarm's retry halves by its count
    /// and what was kept beyond it; an in-turn delivery runs
    /// [`IN_TURN_HALVINGS`] more than an alarm, in one fire.
    fn options(self, mut options: AlarmOptions, kept: KeptHalvings) -> AlarmOptions {
        options.budget = match self {
            Run::Alarm { retry_count } => options.budget.for_retry(kept.halvings.saturating_sub(retry_count)),
            Run::InTurn => RelayBudget {
                fires_per_alarm: 1,
                ..options.budget.for_retry(kept.halvings.saturating_add(IN_TURN_HALVINGS))
            },
        };
        options
    }
}

impl<S: Sql, A: AlarmStore> Relay<S, A> {
    /// Delivers what the outbox holds in the caller's invocation: call it
    /// after an enqueue's reply (not before: the reply must not wait for the
    /// targets). Runs one fire at half an alarm's budget, arms the alarm as
    /// the fire decided (sooner for rows left, never later than it is), and
    /// answers what each run did. Runs only when an enqueue since the last
    /// one committed rows due now (a delayed row waits for the alarm); while
    /// another in-turn delivery of this instance runs, that one runs again
    /// when it ends, and this answers none; while this instance's alarm
    /// runs, this answers none (the enqueue armed the next alarm for now).
    /// Without [`SourceConfig::in_turn`] it does nothing: the alarm
    /// delivers.
    pub async fn deliver(
        &self,
        targets: &impl Targets,
        now: &dyn Fn() -> u64,
        observer: &impl FireObserver,
    ) -> Result<Vec<AlarmSummary>, AlarmFailure> {
        if !self.config.get().in_turn || !self.asked.get() || self.delivering.get() || self.firing.get() {
            return Ok(Vec::new());
        }
        let _one = Running::start(&self.delivering);
        let mut runs = Vec::new();
        for n in 1..=IN_TURN_RUNS_MAX {
            if self.firing.get() {
                // An alarm took this delivery for stuck: the rest is its.
                break;
            }
            self.asked.set(false);
            self.run_started_ms.set(now());
            self.heard_ms.set(now());
            let summary = self.run(Run::InTurn, targets, now, observer).await?;
            let again = self.runs_again(&summary);
            runs.push(summary);
            if !again {
                break;
            }
            if n == IN_TURN_RUNS_MAX {
                // The last run left its rows to a run that will not come.
                let armed = self.arm_at(now()).await;
                armed.map_err(|e| AlarmFailure { error: AlarmError::Store(e), retry_at_ms: None })?;
            }
        }
        // What asked during the last run it took, or the alarm it armed takes.
        self.asked.set(false);
        Ok(runs)
    }

    /// Runs one delivery: the driver's fires against `targets`, then arms
    /// the next wake-up. On a storage error it arms a back-off first and
    /// then fails, so the caller may throw; but when the platform refused a
    /// write for the account's daily allowance it arms the alarm at 00:00
    /// UTC and answers a summary with `write_limited` set (and no figures
    /// of the fires it lost), since the platform's own retries, seconds
    /// apart, would only meet the same refusal and then drop the alarm.
    pub(super) async fn run(
        &self,
        run: Run,
        targets: &impl Targets,
        now: &dyn Fn() -> u64,
        observer: &impl FireObserver,
    ) -> Result<AlarmSummary, AlarmFailure> {
        assert!(run != Run::InTurn || !self.firing.get(), "an in-turn run never starts beside an alarm");
        let _alarm = matches!(run, Run::Alarm { .. }).then(|| Running::start(&self.firing));
        if run != Run::InTurn {
            // An enqueue hands its rows to the delivery it asks for only.
            self.outbox.forget_handover();
        }
        let started = now();
        let counted = matches!(run, Run::Alarm { .. });
        let ran = match run {
            Run::Alarm { .. } => self.fires(run, targets, now, observer).await,
            Run::InTurn => self.fires(run, &Heard { relay: self, targets, now }, now, observer).await,
        };
        match ran {
            Ok(summary) => self.settled(run, summary, now).await,
            // Writes come back with the next UTC day, not sooner.
            Err(AlarmError::Store(e)) if e.is_write_limit() => {
                let at = next_utc_day_ms(now());
                let host_alarm = counted && self.take_host_alarm(now());
                match self.arm_at(at).await {
                    Ok(()) => Ok(AlarmSummary { host_alarm, ..self.write_limited(started, at, now()) }),
                    Err(_) => Err(AlarmFailure { error: AlarmError::Store(e), retry_at_ms: None }),
                }
            }
            Err(error) => {
                // Do not rely on the platform's few retries: back off ourselves.
                let failures = self.alarm_failures.get().saturating_add(1);
                self.alarm_failures.set(failures);
                let at = now().saturating_add(retry_backoff_ms(failures));
                // A host time already due waits with the back-off: the
                // next alarm that succeeds reports it.
                let retry_at_ms = self.arm(Some(at), at).await.ok().map(|()| at);
                Err(AlarmFailure { error, retry_at_ms })
            }
        }
    }

    /// The driver's fires of one run against `targets`, under the limits
    /// this run goes with.
    async fn fires(
        &self,
        run: Run,
        targets: &impl Targets,
        now: &dyn Fn() -> u64,
        observer: &impl FireObserver,
    ) -> Result<AlarmSummary, AlarmError> {
        let near_limit = self.near_limit.borrow().clone();
        let signal = |work: u64| near_limit.as_ref().is_some_and(|f| f(work));
        let options = run.options(self.config.get().alarm, self.kept.get());
        let (retry_count, counted) = match run {
            Run::Alarm { retry_count } => (retry_count, true),
            Run::InTurn => (0, false),
        };
        let (outbox, name, id) = (&self.outbox, &self.name, &self.id);
        let targets = crate::peers::Negotiated { targets, pre_id: &self.pre_id, id, now };
        run_alarm(outbox, name, id, &options, &targets, now, observer, (retry_count, counted), &signal).await
    }

    /// After a run's fires: the figures it keeps, the next wake-up armed,
    /// the host's time reported (by an alarm only), counts written.
    async fn settled(
        &self,
        run: Run,
        mut summary: AlarmSummary,
        now: &dyn Fn() -> u64,
    ) -> Result<AlarmSummary, AlarmFailure> {
        self.alarm_failures.set(0);
        if let Run::Alarm { retry_count } = run {
            self.kept.set(self.kept.get().after(retry_count, summary.cpu_cut));
        }
        let config = self.config.get();
        if summary.rows_delivered > 0 {
            self.last_delivery_ms.set(Some(now()));
        }
        summary.next_in_ms = coalesced(
            summary.next_in_ms,
            summary.queued_rows,
            config.alarm.budget.rows_per_fire,
            config.coalesce_ms,
        );
        summary.in_turn = run == Run::InTurn;
        summary.host_alarm = matches!(run, Run::Alarm { .. }) && self.take_host_alarm(now());
        // Rows an in-turn delivery that runs again will take need no alarm
        // of their own: the enqueues that asked for it armed the safety net.
        let follows = run == Run::InTurn && self.runs_again(&summary);
        let relay_due = summary.next_in_ms.filter(|_| !follows).map(|delay| now().saturating_add(delay));
        let armed = self.arm(relay_due, 0).await;
        armed.map_err(|e| AlarmFailure { error: AlarmError::Store(e), retry_at_ms: None })?;
        // Counts waiting too long are written now (one row); if that
        // fails they wait for the next chance, and the alarm stands.
        let _ = self.outbox.write_counts(now(), UNWRITTEN_COUNTS_MAX_AGE_MS);
        Ok(summary)
    }
}

impl<S: Sql, A: AlarmStore> Relay<S, A> {
    /// When the alarm must be due, at the latest, for rows owed at `now_ms`:
    /// [`IN_TURN_ALARM_GRACE_MS`] on, or while an in-turn delivery runs, the
    /// lease the wait since it last heard anything has earned (see
    /// [`in_turn_lease_ms`]).
    pub(super) fn lease_at(&self, now_ms: u64) -> u64 {
        let waited_ms = match self.delivering.get() {
            true => now_ms.saturating_sub(self.heard_ms.get()),
            false => 0,
        };
        now_ms.saturating_add(in_turn_lease_ms(waited_ms))
    }

    /// Whether an in-turn delivery that ended as `summary` says runs again:
    /// an enqueue asked while it ran, rows wait, and it was not cut short
    /// for CPU (then the alarm, armed for now, takes the rest).
    fn runs_again(&self, summary: &AlarmSummary) -> bool {
        self.asked.get() && !summary.cpu_cut && summary.queued_rows > 0
    }
}

/// The targets of an in-turn run: each call, once it comes back, counts as
/// news, and brings the alarm within [`IN_TURN_ALARM_GRACE_MS`] of now
/// before the run goes on to record what it did. An invocation cut off
/// between the call and the run's checkpoint so leaves its rows due
/// [`IN_TURN_ALARM_GRACE_MS`] after the answer or the failure at the
/// latest, however long the call took (the alarms that came meanwhile moved
/// the alarm out as the wait grew). Writes nothing when the alarm is
/// already that early: a call answered within that much of the enqueue
/// never does.
struct Heard<'a, S, A, T> {
    /// The relay whose alarm keeps the lease.
    relay: &'a Relay<S, A>,
    /// The targets the run calls.
    targets: &'a T,
    /// The clock.
    now: &'a dyn Fn() -> u64,
}

impl<S: Sql, A: AlarmStore, T: Targets> Targets for Heard<'_, S, A, T> {
    async fn apply(&self, target: &Name, body: String) -> CallOutcome {
        let outcome = self.targets.apply(target, body).await;
        let now = (self.now)();
        self.relay.heard_ms.set(now);
        // Should the write fail, the alarm is unknown, and the run's own
        // arming after its checkpoint writes it afresh.
        let _ = self.relay.arm_at(now.saturating_add(IN_TURN_ALARM_GRACE_MS)).await;
        outcome
    }
}
