//! The sequence explorer: every sequence of events at a partitioned
//! logical source up to a small bound, each run over the shipped router,
//! objects and SQL, each checked against the promises (listed in `check.rs`).
//!
//! A [`Scenario`] fixes the logical source's configurations (in the order an
//! operator deploys them: plain, or a partition map), the requests producers
//! send, and the targets. The explorer then enumerates, depth first, every
//! sequence of these actions:
//!
//! - a producer sends the next request, or retries one it sent (an
//!   *attempt*: a router of its own, under the configuration of the moment);
//! - a router takes its next step: one of its calls arrives at its object
//!   and runs there in one transaction, and the router reads the reply;
//! - a router crashes between two steps; each call it had sent may still
//!   arrive later, or be lost;
//! - the operator deploys the next configuration;
//! - an object's alarm delivers what it holds.
//!
//! Unbounded, interleavings explode, so the explorer bounds how far a
//! sequence may stray from a plain schedule (the idea of delay-bounded
//! search): by default a router runs on until it ends, and when none runs,
//! the scenario's next event (a send or a deploy, in the scenario's order)
//! happens. Any other choice, whether a crash, another router's step, a
//! retry, an alarm, a lost router's late call, or the next event cutting in
//! while a router runs, is a *deviation*, and a sequence may make at most
//! [`Bounds::deviations`] of them. Within that bound every sequence is run.
//! At each leaf the world settles (calls still in flight are lost, alarms
//! drain, every keyed request that was never answered is retried to the end)
//! and every promise is checked.
//!
//! A failing sequence is printed as a script (one line per action) with its
//! choices, which [`replay`] runs again.

pub(crate) mod check;
pub mod deliveries;
pub(crate) mod net;
mod scenario;
mod wire;

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;

pub use scenario::{scenarios, Bounds, Event, Request, Scenario};

use crate::core::{ApplyRow, Effects, Name, RelayBudget, RelayHook, Sender};
use crate::sim::Sim;
use net::{Network, Outcome, Router, RouterId};

/// The values each target applied, in order, with the object and sequence
/// each came from.
pub(crate) type Applied = Rc<RefCell<BTreeMap<String, Vec<(u64, String, u64)>>>>;

/// Records the value of key `v` of every row a target applies.
pub(crate) struct Recorder {
    pub(crate) target: String,
    pub(crate) applied: Applied,
}

impl RelayHook for Recorder {
    fn extra_effects(&self, sender: &Sender, rows: &[ApplyRow]) -> Result<Effects, String> {
        let source = &sender.name;
        let mut applied = self.applied.borrow_mut();
        let list = applied.entry(self.target.clone()).or_default();
        for r in rows {
            for (k, v) in &r.effects.puts {
                if k == "v" {
                    let value = v.as_str().parse().map_err(|e| format!("{e}"))?;
                    list.push((value, source.to_string(), r.seq));
                }
            }
        }
        Ok(Effects::default())
    }
}

/// One choice of the explorer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Action {
    /// Router `id` takes its next step: its oldest call arrives.
    Step(RouterId),
    /// Router `id` crashes.
    Crash(RouterId),
    /// A crashed router's call `msg` arrives after all (one that never
    /// arrives is lost when the world settles).
    Arrive(u64),
    /// The scenario's next event: a request is sent for the first time, or
    /// the next configuration is deployed.
    Next,
    /// The sequence ends here (the plain schedule's last choice).
    Stop,
    /// Request `i` is sent again.
    Retry(usize),
    /// The object's alarm runs.
    Alarm(Name),
}

/// One attempt of a request.
#[derive(Debug)]
pub(crate) struct Attempt {
    pub(crate) request: usize,
    /// The step it started at.
    pub(crate) started: u32,
    /// The step it ended at, and how.
    pub(crate) ended: Option<(u32, Outcome)>,
    pub(crate) crashed: bool,
    /// Sent while the world settled, after the explored sequence.
    pub(crate) settling: bool,
}

/// One run of a sequence.
pub(crate) struct Run<'a> {
    pub(crate) scenario: &'a Scenario,
    pub(crate) sim: Sim,
    net: Rc<Network>,
    logical: Name,
    config: usize,
    routers: BTreeMap<RouterId, Router>,
    current: Option<RouterId>,
    pub(crate) attempts: Vec<Attempt>,
    /// Requests sent, in the scenario's order.
    sent: usize,
    /// The scenario's events that happened.
    events: usize,
    /// Deviations from the plain schedule so far.
    deviations: u32,
    /// Whether the sequence chose to end.
    stopped: bool,
    pub(crate) step: u32,
    pub(crate) applied: Applied,
    pub(crate) script: Vec<String>,
}

/// The budget an alarm runs under.
const ALARM_BUDGET: RelayBudget = RelayBudget::FREE;

/// Alarms the world may run while it settles: far more than any scenario needs.
const SETTLE_ALARMS_MAX: u32 = 1_000;

impl<'a> Run<'a> {
    fn new(scenario: &'a Scenario) -> Run<'a> {
        let sim = Sim::new(1);
        // One run at a time, each opening the same objects: reuse their databases.
        sim.world.recycle.set(true);
        let mut sim = sim;
        let applied: Applied = Rc::default();
        for t in &scenario.targets {
            sim.set_hook(t, Box::new(Recorder { target: t.clone(), applied: applied.clone() }));
        }
        let logical = crate::sim::name(scenario.logical);
        Run {
            scenario,
            sim,
            net: Rc::default(),
            logical,
            config: 0,
            routers: BTreeMap::new(),
            current: None,
            attempts: Vec::new(),
            sent: 0,
            events: 0,
            deviations: 0,
            stopped: false,
            step: 0,
            applied,
            script: Vec::new(),
        }
    }

    /// The router that last stepped, if it can go on.
    fn running(&self) -> Option<RouterId> {
        self.current.filter(|r| self.routers.contains_key(r))
    }

    /// Every action allowed now, the plain schedule's first: a running
    /// router's next step; else the oldest live router's; else the
    /// scenario's next event. The rest are deviations, allowed while
    /// `bounds` leaves any.
    pub(crate) fn enabled(&self, bounds: &Bounds) -> Vec<Action> {
        let next_event = self.events < self.scenario.script.len();
        let default = match (self.running(), self.routers.keys().next()) {
            (Some(r), _) | (None, Some(&r)) => Some(Action::Step(r)),
            (None, None) if next_event => Some(Action::Next),
            (None, None) => Some(Action::Stop),
        };
        let mut all: Vec<Action> = default.iter().cloned().collect();
        if self.deviations >= bounds.deviations {
            return all;
        }
        let mut others = Vec::new();
        others.extend(self.routers.keys().map(|r| Action::Step(*r)));
        others.extend(self.routers.keys().map(|r| Action::Crash(*r)));
        others.extend(self.orphans().into_iter().map(Action::Arrive));
        if next_event {
            others.push(Action::Next);
        }
        // Only a keyed request may be sent again as the same request:
        // without a key, a second send is a second request by contract.
        let keyed = (0..self.sent).filter(|&i| self.scenario.requests[i].key.is_some());
        others.extend(keyed.map(Action::Retry));
        others.extend(self.holding().into_iter().map(Action::Alarm));
        all.extend(others.into_iter().filter(|a| Some(a) != default.as_ref()));
        all
    }

    /// Messages of routers that no longer run.
    fn orphans(&self) -> Vec<u64> {
        let live: Vec<RouterId> = self.routers.keys().copied().collect();
        let mut ids = Vec::new();
        for r in 0..self.attempts.len() as RouterId {
            if !live.contains(&r) {
                ids.extend(self.net.of(r));
            }
        }
        ids.sort_unstable();
        ids
    }

    /// Objects with queued rows.
    fn holding(&self) -> Vec<Name> {
        let sources = self.sim.world.sources.borrow();
        sources
            .iter()
            .filter(|(_, s)| s.relay.outbox().state().is_ok_and(|st| st.queued_rows > 0))
            .map(|(n, _)| n.clone())
            .collect()
    }

    /// Takes `action`; checks what must hold after every step.
    pub(crate) fn apply(&mut self, action: &Action, deviation: bool) -> Result<(), String> {
        if deviation {
            self.deviations += 1;
        }
        self.step += 1;
        self.sim.advance(1);
        let line = match action {
            Action::Step(r) => self.take_step(*r),
            Action::Crash(r) => {
                self.routers.remove(r);
                if let Some(a) = self.attempts.get_mut(*r as usize) {
                    a.crashed = true;
                }
                format!("router {r} crashes")
            }
            Action::Arrive(id) => {
                let label = self.net.label(*id);
                if let Some(m) = self.net.take(*id) {
                    net::deliver(&self.sim.world, m);
                }
                format!("the lost router's {label} arrives")
            }
            Action::Next => self.next_event(),
            Action::Stop => {
                self.stopped = true;
                "stop".into()
            }
            Action::Retry(i) => self.begin(*i, false),
            Action::Alarm(n) => {
                let report = self.sim.run_alarm(n.as_str(), ALARM_BUDGET);
                format!("alarm of {n}: {} rows delivered", report.totals.rows_delivered)
            }
        };
        self.script.push(format!("{:>3}. {line}", self.step));
        check::single_holder(self)
    }

    /// The scenario's next event.
    fn next_event(&mut self) -> String {
        let event = self.scenario.script.get(self.events).copied();
        self.events += 1;
        match event {
            Some(Event::Send) => {
                self.sent += 1;
                self.begin(self.sent - 1, false)
            }
            Some(Event::Deploy) => {
                self.config += 1;
                format!("deploy {}", self.scenario.config_text(self.config))
            }
            None => "no event left".into(),
        }
    }

    /// Starts an attempt of request `i` under the current configuration.
    fn begin(&mut self, i: usize, settling: bool) -> String {
        let id = self.attempts.len() as RouterId;
        let request = &self.scenario.requests[i];
        let map = self.scenario.configs[self.config].clone();
        let rows = request.rows(i);
        let router =
            net::start(&self.net, id, &self.logical, map, request.key.clone(), rows, self.sim.now_ms());
        self.attempts.push(Attempt { request: i, started: self.step, ended: None, crashed: false, settling });
        self.routers.insert(id, router);
        self.current = Some(id);
        let what = if settling { "settling retry" } else { "attempt" };
        let line = format!(
            "{what} {id}: request {i} ({}) under {}",
            request.label,
            self.scenario.config_text(self.config)
        );
        self.poll(id).map_or(line.clone(), |end| format!("{line}; {end}"))
    }

    /// Router `r`'s next step: its oldest call arrives; then it reads the reply.
    fn take_step(&mut self, r: RouterId) -> String {
        let Some(&id) = self.net.of(r).first() else { return format!("router {r} has nothing to send") };
        let label = self.net.label(id);
        if let Some(m) = self.net.take(id) {
            net::deliver(&self.sim.world, m);
        }
        self.current = Some(r);
        let line = format!("router {r}: {label}");
        self.poll(r).map_or(line.clone(), |end| format!("{line}; {end}"))
    }

    /// Polls router `r`; records its outcome when it ended.
    fn poll(&mut self, r: RouterId) -> Option<String> {
        let router = self.routers.get_mut(&r)?;
        let outcome = net::poll(router)?;
        self.routers.remove(&r);
        let text = match &outcome {
            Ok(done) => format!("answered (duplicate: {}) at {:?}", done.duplicate, done.positions),
            Err(f) => format!("refused: {} (committed {:?})", f.error, f.committed),
        };
        if let Some(a) = self.attempts.get_mut(r as usize) {
            a.ended = Some((self.step, outcome));
        }
        Some(text)
    }

    /// Lets the world settle after the explored sequence: lost calls stay
    /// lost; alarms drain; every keyed request no attempt answered is
    /// retried to its end under the last configuration; alarms drain again.
    fn settle(&mut self) -> Result<(), String> {
        for id in self.orphans() {
            self.net.take(id);
        }
        self.drain()?;
        let unanswered: Vec<usize> = (0..self.sent)
            .filter(|&i| self.scenario.requests[i].key.is_some())
            .filter(|&i| !self.attempts.iter().any(|a| a.request == i && matches!(a.ended, Some((_, Ok(_))))))
            .collect();
        for i in unanswered {
            self.step += 1;
            let line = self.begin(i, true);
            self.script.push(format!("{:>3}. {line}", self.step));
            let r = self.attempts.len() as RouterId - 1;
            while self.routers.contains_key(&r) {
                self.step += 1;
                let line = self.take_step(r);
                self.script.push(format!("{:>3}. {line}", self.step));
            }
        }
        self.drain()
    }

    /// Runs the alarms of the objects that hold rows, each when it falls
    /// due, until none holds any. Only those: an idle object's prune wake
    /// is a day away, and running it would expire every key.
    fn drain(&mut self) -> Result<(), String> {
        let mut alarms = 0u32;
        loop {
            let holding = self.holding();
            let Some(first) = holding.first() else { break };
            if alarms >= SETTLE_ALARMS_MAX {
                return Err(format!("everything drains: {first} still holds rows after {alarms} alarms"));
            }
            let Some(at) = self.sim.alarm_at(first.as_str()) else {
                return Err(format!("everything drains: {first} holds rows and no alarm"));
            };
            self.sim.world.clock.set(self.sim.now_ms().max(at));
            self.sim.run_alarm(first.as_str(), ALARM_BUDGET);
            alarms += 1;
        }
        self.script.push(format!("     settle: {alarms} alarms"));
        Ok(())
    }
}

/// What an exploration found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Explored {
    /// Sequences run to their end and checked.
    pub sequences: u64,
    /// The longest sequence, in actions.
    pub longest: u32,
    /// The first breach: its script and choices.
    pub breach: Option<String>,
}

/// Runs every sequence of `scenario` within `bounds`, depth first, and stops
/// at the first breach (or after `max_sequences`).
pub fn explore(scenario: &Scenario, bounds: &Bounds, max_sequences: u64) -> Explored {
    let mut found = Explored::default();
    let mut work: Vec<Vec<usize>> = vec![Vec::new()];
    while let Some(prefix) = work.pop() {
        if found.sequences >= max_sequences {
            break;
        }
        let mut run = Run::new(scenario);
        let mut choices = prefix.clone();
        let mut outcome = Ok(());
        for &c in &prefix {
            let actions = run.enabled(bounds);
            outcome = actions
                .get(c)
                .map_or(Err("a choice past the enabled actions".into()), |a| run.apply(a, c > 0));
            if outcome.is_err() {
                break;
            }
        }
        while outcome.is_ok() && !run.stopped {
            let actions = run.enabled(bounds);
            for i in (1..actions.len()).rev() {
                let mut next = choices.clone();
                next.push(i);
                work.push(next);
            }
            choices.push(0);
            outcome = run.apply(&actions[0], false);
        }
        let outcome = outcome.and_then(|()| run.settle()).and_then(|()| check::promises(&run));
        found.sequences += 1;
        found.longest = found.longest.max(run.step);
        if let Err(breach) = outcome {
            found.breach = Some(report(scenario, &run, &choices, &breach));
            break;
        }
    }
    found
}

/// Runs one sequence, given its choices, and answers its script, with the
/// breach if one was found.
pub fn replay(scenario: &Scenario, bounds: &Bounds, choices: &[usize]) -> Result<String, String> {
    let mut run = Run::new(scenario);
    for &c in choices {
        let actions = run.enabled(bounds);
        let action =
            actions.get(c).ok_or_else(|| format!("choice {c} of {} at step {}", actions.len(), run.step))?;
        if let Err(breach) = run.apply(action, c > 0) {
            return Err(report(scenario, &run, choices, &breach));
        }
    }
    let outcome = run.settle().and_then(|()| check::promises(&run));
    match outcome {
        Ok(()) => Ok(run.script.join("\n")),
        Err(breach) => Err(report(scenario, &run, choices, &breach)),
    }
}

fn report(scenario: &Scenario, run: &Run<'_>, choices: &[usize], breach: &str) -> String {
    let list: Vec<String> = choices.iter().map(usize::to_string).collect();
    format!(
        "scenario {}: {breach}\nreplay: RELAY_EXPLORE_REPLAY={}:{}\n{}\nrouters with calls in flight: {:?}",
        scenario.name,
        scenario.name,
        list.join(","),
        run.script.join("\n"),
        net::census(&run.net)
    )
}
