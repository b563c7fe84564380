//! The delivery explorer: every interleaving, up to a bound, of one
//! source's enqueues, the in-turn deliveries they start, its platform
//! alarm, its target calls and restarts of its object, each run over the
//! shipped [`Relay`](crate::Relay), driver and SQL, and checked: every row
//! reaches its target once in effect, in sequence order, and none is left.
//!
//! Each delivery (in-turn or the alarm's) runs as a real future whose
//! every target call waits as a message until the explorer chooses what
//! happens to it. The plain schedule delivers the oldest call of the
//! oldest delivery and answers it; when none waits, the next enqueue
//! comes (and starts its in-turn delivery); then the sequence stops. Each
//! other choice is a *deviation*, at most [`Bounds::deviations`] a
//! sequence:
//!
//! - a later call arrives first;
//! - a call applies and its reply is lost, or it times out unapplied and
//!   may still arrive later (or never);
//! - the next enqueue comes while deliveries are under way;
//! - the platform's alarm fires (whenever one is stored), beside an
//!   in-turn delivery if one runs;
//! - the object restarts: its deliveries die with it, their calls still in
//!   flight, and an alarm handler it was running is retried.
//!
//! At each leaf the world settles (late calls are lost, live deliveries end
//! on the plain schedule, alarms drain) and the promises are checked,
//! with two more checked as the sequence runs: no call goes to a target
//! while a live delivery of the source still awaits another call to it
//! (one request in flight per source and target; a call given up on by
//! timeout or by a restart no longer counts, since nothing awaits it); and
//! whenever no delivery runs, every row still owed is due by its back-off
//! (see `timely.rs`), however the deliveries before ended. An
//! endpoint target (`endpoint:e1`) is a receiver that keeps the highest
//! sequence it took per source; its answer names the one row it was sent
//! and nothing more, so what holds for it is the endpoint promise: every
//! row arrives, the first arrivals in order, duplicates harmless.

use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};

pub use scenarios::{delivery_scenarios, DeliveryScenario, Releases};

use super::wire::{Wire, WireTargets};
use super::{Applied, Bounds, Recorder};
use crate::core::{CallOutcome, EnqueueRow, Failure, RelayBudget};
use crate::driver::NoObserver;
use crate::sim::world::{source_config, SimSource};
use crate::sim::Release;
use crate::sim::{name, targets::call, Sim};
use deploy::Side;

/// The source every scenario enqueues at.
const SOURCE: &str = "s";
/// The budget every delivery runs under, but for its rows per call (the
/// scenario's).
const BUDGET: RelayBudget = RelayBudget::FREE;
/// The endpoint target of the endpoint scenario: its receiver keeps the
/// highest sequence it took per source, and its answer tells the relay of
/// the one row it was sent and nothing more (see `sim::targets::call`).
const ENDPOINT: &str = "endpoint:e1";
/// Alarms the world may run while it settles.
const SETTLE_ALARMS_MAX: u32 = 100;

/// A running delivery: an in-turn one or the platform's alarm.
struct Delivery {
    id: u32,
    alarm: bool,
    future: Pin<Box<dyn Future<Output = String>>>,
}

/// One choice of the explorer.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Action {
    /// Call `id` arrives, applies, and is answered.
    Answer(u64),
    /// Call `id` applies and its reply is lost.
    LoseReply(u64),
    /// Call `id` times out before it arrives; it may arrive later.
    TimeOut(u64),
    /// Late call `id` arrives (no delivery waits for it).
    Arrive(u64),
    /// The next enqueue, which starts an in-turn delivery.
    Enqueue,
    /// The platform's alarm fires.
    Alarm,
    /// The object restarts.
    Restart,
    /// A release is deployed to one side (see `deploy.rs`).
    Deploy(Side, Release),
    /// Minutes pass: what a source remembers of an older target expires.
    Later,
    /// The sequence ends.
    Stop,
}

/// One run of a sequence.
struct Run<'a> {
    scenario: &'a DeliveryScenario,
    sim: Sim,
    wire: Rc<Wire>,
    deliveries: Vec<Delivery>,
    next_delivery: u32,
    enqueued: usize,
    /// Values each target must apply, in order.
    expected: std::collections::BTreeMap<String, Vec<u64>>,
    applied: Applied,
    deviations: u32,
    stopped: bool,
    script: Vec<String>,
    /// The releases each side runs now (`None`: this release throughout).
    releases: Option<Releases>,
    /// The first step after which, with no delivery running, a row owed
    /// was not due by its back-off.
    late: Option<String>,
}

impl<'a> Run<'a> {
    fn new(scenario: &'a DeliveryScenario) -> Run<'a> {
        let mut sim = Sim::new(1);
        sim.world.recycle.set(true);
        sim.world.in_turn.set(true);
        let applied: Applied = Rc::default();
        for t in ["t1", "t2", ENDPOINT] {
            sim.set_hook(t, Box::new(Recorder { target: t.into(), applied: applied.clone() }));
        }
        let mut run = Run {
            scenario,
            sim,
            wire: Rc::default(),
            deliveries: Vec::new(),
            next_delivery: 0,
            enqueued: 0,
            expected: Default::default(),
            applied,
            deviations: 0,
            stopped: false,
            script: Vec::new(),
            releases: None,
            late: None,
        };
        run.configure();
        run.start_on(scenario.releases);
        run
    }

    /// The scenario's budget.
    fn budget(&self) -> RelayBudget {
        RelayBudget { batch_rows: self.scenario.batch_rows, ..BUDGET }
    }

    fn source(&self) -> Rc<SimSource> {
        self.sim.world.source(&name(SOURCE))
    }

    /// Gives the (new) instance the explored budget, delivering in turn.
    #[allow(clippy::expect_used, reason = "the budget is a valid constant")]
    fn configure(&self) {
        let config = source_config(self.budget(), Default::default(), 0, true);
        self.source().relay.set_config(config).expect("a valid budget");
        let endpoint = ENDPOINT.trim_start_matches("endpoint:").to_owned();
        self.source().relay.set_endpoints([endpoint].into(), Default::default());
    }

    fn alarm_running(&self) -> bool {
        self.deliveries.iter().any(|d| d.alarm)
    }

    /// Every action allowed now, the plain schedule's first.
    fn enabled(&self, bounds: &Bounds) -> Vec<Action> {
        let live = self.wire.live();
        let more = self.enqueued < self.scenario.enqueues.len();
        let default = match (live.first(), more) {
            (Some(&id), _) => Action::Answer(id),
            (None, true) => Action::Enqueue,
            (None, false) => Action::Stop,
        };
        let mut all = vec![default.clone()];
        if self.deviations >= bounds.deviations {
            return all;
        }
        let mut others: Vec<Action> = live.iter().map(|&id| Action::Answer(id)).collect();
        others.extend(live.iter().map(|&id| Action::LoseReply(id)));
        others.extend(live.iter().map(|&id| Action::TimeOut(id)));
        others.extend(self.wire.late().into_iter().map(Action::Arrive));
        if more {
            others.push(Action::Enqueue);
        }
        if self.source().alarm.get().is_some() && !self.alarm_running() {
            others.push(Action::Alarm);
        }
        others.push(Action::Restart);
        others.extend(self.deploys());
        all.extend(others.into_iter().filter(|a| *a != default));
        all
    }

    /// Takes `action`, then lets every live delivery run as far as it can.
    fn apply(&mut self, action: &Action, deviation: bool) {
        self.deviations += u32::from(deviation);
        self.sim.advance(1);
        let line = match action {
            Action::Answer(id) => self.answer(*id, true),
            Action::LoseReply(id) => self.answer(*id, false),
            Action::TimeOut(id) => self.time_out(*id),
            Action::Arrive(id) => self.answer(*id, false),
            Action::Enqueue => self.enqueue(),
            Action::Alarm => self.alarm(),
            Action::Restart => self.restart(),
            Action::Deploy(side, release) => self.deploy(*side, *release),
            Action::Later => self.later(),
            Action::Stop => {
                self.stopped = true;
                "stop".into()
            }
        };
        self.script.push(format!("{:>3}. {line}", self.script.len() + 1));
        self.poll();
        if self.deliveries.is_empty() && self.late.is_none() {
            let late = timely::owed_in_time(&self.sim, SOURCE).err();
            self.late = late.map(|e| format!("after step {}: {e}", self.script.len()));
        }
    }

    /// Call `id` arrives and applies; its delivery hears the outcome, or
    /// (`heard` false) that the reply was lost.
    fn answer(&mut self, id: u64, heard: bool) -> String {
        let Some(c) = self.wire.take(id) else { return format!("call {id} is gone") };
        let outcome = call(&self.sim.world, &c.target, &c.body);
        let text = format!("call {id} to {} applies: {}", c.target, outcome_text(&outcome));
        let told = if heard { outcome } else { CallOutcome::Failed(Failure::Transient("reply lost".into())) };
        c.slot.put(told);
        if heard || c.delivery.is_none() {
            text
        } else {
            format!("{text}; the reply is lost")
        }
    }

    /// Call `id` times out: its delivery gives up on it, and it stays in
    /// flight as a late call.
    fn time_out(&mut self, id: u64) -> String {
        let mut calls = self.wire.calls.borrow_mut();
        let Some(c) = calls.iter_mut().find(|c| c.id == id) else { return format!("call {id} is gone") };
        c.delivery = None;
        c.slot.put(CallOutcome::Failed(Failure::Transient("timed out".into())));
        format!("call {id} to {} times out, still in flight", c.target)
    }

    /// The next enqueue commits, then starts its in-turn delivery.
    #[allow(clippy::panic, reason = "the simulator's store does not fail; a failure is a bug")]
    fn enqueue(&mut self) -> String {
        let targets = self.scenario.enqueues.get(self.enqueued).cloned().unwrap_or_default();
        self.enqueued += 1;
        let mut rows = Vec::new();
        for t in &targets {
            let list = self.expected.entry((*t).to_string()).or_default();
            let value = self.enqueued as u64 * 10 + list.len() as u64;
            list.push(value);
            rows.push(EnqueueRow::to(name(t)).put("v", serde_json::json!(value)));
        }
        let seqs = self.sim.enqueue(SOURCE, rows).unwrap_or_else(|e| panic!("enqueue: {e}"));
        self.start(false);
        format!("enqueue {seqs:?} to {targets:?}; its delivery starts")
    }

    /// The platform's alarm fires: it is cleared and its handler starts.
    fn alarm(&mut self) -> String {
        self.source().alarm.set(None);
        self.start(true);
        "the alarm fires".into()
    }

    /// Starts a delivery on the current instance.
    fn start(&mut self, alarm: bool) {
        let id = self.next_delivery;
        self.next_delivery += 1;
        let (src, world) = (self.source(), self.sim.world.clone());
        let targets = WireTargets { wire: self.wire.clone(), delivery: id, world: world.clone() };
        let future: Pin<Box<dyn Future<Output = String>>> = Box::pin(async move {
            let now = || world.now();
            if alarm {
                match src.relay.alarm(&targets, &now, &NoObserver).await {
                    Ok(s) => format!("alarm: {} rows delivered", s.rows_delivered),
                    Err(f) => {
                        // The platform retries a handler that threw.
                        src.alarm.set(Some(src.alarm.get().unwrap_or(world.now())));
                        format!("alarm failed: {}", f.error)
                    }
                }
            } else {
                match src.relay.deliver(&targets, &now, &NoObserver).await {
                    Ok(runs) => format!("in-turn: {} runs", runs.len()),
                    Err(f) => format!("in-turn failed: {}", f.error),
                }
            }
        });
        self.deliveries.push(Delivery { id, alarm, future });
    }

    /// The object restarts: its deliveries die, their calls stay in flight,
    /// and an alarm it was running is retried.
    fn restart(&mut self) -> String {
        let alarm_ran = self.alarm_running();
        let dead: Vec<u32> = self.deliveries.drain(..).map(|d| d.id).collect();
        for c in self.wire.calls.borrow_mut().iter_mut() {
            if c.delivery.is_some_and(|d| dead.contains(&d)) {
                c.delivery = None;
            }
        }
        self.sim.restart_source(SOURCE);
        self.configure();
        let src = self.source();
        if alarm_ran && src.alarm.get().is_none() {
            src.alarm.set(Some(self.sim.now_ms()));
        }
        format!("the object restarts ({} deliveries die)", dead.len())
    }

    /// Polls every live delivery until none can go on.
    fn poll(&mut self) {
        let waker = futures::task::noop_waker();
        let mut cx = Context::from_waker(&waker);
        loop {
            let mut ended = None;
            for (i, d) in self.deliveries.iter_mut().enumerate() {
                if let Poll::Ready(text) = d.future.as_mut().poll(&mut cx) {
                    ended = Some((i, format!("     delivery {} ends: {text}", d.id)));
                    break;
                }
            }
            let Some((i, text)) = ended else { return };
            self.deliveries.remove(i);
            self.script.push(text);
        }
    }

    /// Lets the world settle, then checks every promise.
    fn settle(&mut self) -> Result<(), String> {
        for id in self.wire.late() {
            self.wire.take(id);
        }
        while let Some(&id) = self.wire.live().first() {
            self.apply(&Action::Answer(id), false);
        }
        if !self.deliveries.is_empty() {
            return Err("a delivery waits with no call in flight".into());
        }
        let mut alarms = 0;
        while !self.sim.queued(SOURCE).is_empty() {
            let Some(at) = self.sim.alarm_at(SOURCE) else {
                return Err(format!("rows {:?} wait and no alarm is armed", self.sim.queued(SOURCE)));
            };
            if alarms >= SETTLE_ALARMS_MAX {
                return Err(format!("rows still wait after {alarms} alarms"));
            }
            self.sim.world.clock.set(self.sim.now_ms().max(at));
            self.sim.run_alarm(SOURCE, self.budget());
            alarms += 1;
        }
        self.script.push(format!("     settle: {alarms} alarms"));
        self.check()
    }

    /// Every row applied once, in order, none lost; never two calls to one
    /// target awaited at once; never a row owed past its back-off.
    fn check(&self) -> Result<(), String> {
        if let Some(late) = &self.late {
            return Err(late.clone());
        }
        if let Some(overlap) = self.wire.overlap.borrow().as_ref() {
            return Err(overlap.clone());
        }
        let applied = self.applied.borrow();
        for (target, want) in &self.expected {
            let got: Vec<u64> =
                applied.get(target).map(|l| l.iter().map(|(v, _, _)| *v).collect()).unwrap_or_default();
            if &got != want {
                return Err(format!("{target} applied {got:?}, owed {want:?} once each in order"));
            }
        }
        self.sim.audit()
    }
}

fn outcome_text(o: &CallOutcome) -> String {
    match o {
        CallOutcome::Applied { watermark, applied } => format!("applied {applied}, watermark {watermark}"),
        CallOutcome::Failed(f) => format!("failed: {f:?}"),
        CallOutcome::Throttled { failure, retry_after_ms } => {
            format!("throttled {retry_after_ms} ms: {failure:?}")
        }
    }
}

/// What an exploration found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DeliveriesExplored {
    /// Sequences run to their end and checked.
    pub sequences: u64,
    /// The longest sequence, in actions.
    pub longest: usize,
    /// The first breach: its script and the choices that replay it.
    pub breach: Option<String>,
}

/// Runs every sequence of `scenario` within `bounds`, depth first; stops at
/// the first breach or after `max_sequences`.
pub fn explore_deliveries(
    scenario: &DeliveryScenario,
    bounds: &Bounds,
    max_sequences: u64,
) -> DeliveriesExplored {
    let mut found = DeliveriesExplored::default();
    let mut work: Vec<Vec<usize>> = vec![Vec::new()];
    while let Some(prefix) = work.pop() {
        if found.sequences >= max_sequences {
            break;
        }
        let mut run = Run::new(scenario);
        for &c in &prefix {
            let actions = run.enabled(bounds);
            let Some(action) = actions.get(c) else { break };
            run.apply(action, c > 0);
        }
        let mut choices = prefix.clone();
        while !run.stopped {
            let actions = run.enabled(bounds);
            for i in (1..actions.len()).rev() {
                let mut next = choices.clone();
                next.push(i);
                work.push(next);
            }
            choices.push(0);
            run.apply(&actions[0], false);
        }
        let outcome = run.settle();
        found.sequences += 1;
        found.longest = found.longest.max(run.script.len());
        if let Err(breach) = outcome {
            let list: Vec<String> = choices.iter().map(usize::to_string).collect();
            found.breach = Some(format!(
                "scenario {}: {breach}\nreplay: RELAY_EXPLORE_REPLAY={}:{}\n{}",
                scenario.name,
                scenario.name,
                list.join(","),
                run.script.join("\n")
            ));
            break;
        }
    }
    found
}

/// Runs the one sequence `choices` names and answers its script, or the
/// breach it found.
pub fn replay_deliveries(
    scenario: &DeliveryScenario,
    bounds: &Bounds,
    choices: &[usize],
) -> Result<String, String> {
    let mut run = Run::new(scenario);
    for &c in choices {
        let actions = run.enabled(bounds);
        let action = actions.get(c).ok_or_else(|| format!("choice {c} of {}", actions.len()))?.clone();
        run.apply(&action, c > 0);
    }
    run.settle().map(|()| run.script.join("\n")).map_err(|b| format!("{b}\n{}", run.script.join("\n")))
}

#[cfg(test)]
mod cut_tests;
mod deploy;
mod scenarios;
#[cfg(test)]
mod tests;
mod timely;
