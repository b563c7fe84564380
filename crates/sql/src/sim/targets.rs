//! The simulated side of a target call: [`SimTargets`] is the [`Targets`]
//! the real driver calls during a simulated fire. Each call goes to the
//! target's real [`Inbox`](crate::Inbox) (the shipped apply SQL) with the
//! test apply log as its hook, through the target's faults (refuse, refuse
//! for good, apply and lose the reply). Before a call, at seeded points, it
//! injects what would interleave with the fire in workerd while it awaits
//! its targets: another writer's enqueue, a second fire of the same source,
//! another writer's checkpoint. After a call it yields a seeded number of
//! times, so concurrent calls complete in a seeded order.

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};

use super::world::{PlatformFault, Release, SimSource, TargetFault, World, BEFORE_IDS_REFUSAL};
use crate::core::{ApplyReply, ApplyRow, CallOutcome, Effects, Failure, Name, RelayHook, ScanState, Sender};
use crate::driver::{self, AlarmOptions, Targets};
use crate::store::inbox::ApplyFailure;
use crate::store::Sql;

/// The targets of one source's fire (or alarm).
pub(crate) struct SimTargets {
    pub(crate) world: Rc<World>,
    pub(crate) source: Name,
    pub(crate) src: Rc<SimSource>,
    pub(crate) options: AlarmOptions,
    /// Calls made, as (target, rows in the batch), in call order.
    pub(crate) log: RefCell<Vec<(Name, usize)>>,
    /// Whether this serves an overlapping fire (which may not overlap again).
    pub(crate) nested: bool,
}

/// Yields to the executor `n` times.
struct Yield(u32);

impl Future for Yield {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0 == 0 {
            return Poll::Ready(());
        }
        self.0 -= 1;
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

impl Targets for SimTargets {
    async fn apply(&self, target: &Name, body: String) -> CallOutcome {
        self.interleave().await;
        let rows = crate::core::decode_request(&body).map_or(0, |r| r.rows.len());
        self.log.borrow_mut().push((target.clone(), rows));
        self.world.total_calls.set(self.world.total_calls.get() + 1);
        let outcome = call(&self.world, target, &as_sent(&self.world, &body));
        let turns = self.world.rng.borrow_mut().below(3) as u32;
        Yield(turns).await;
        outcome
    }
}

impl SimTargets {
    /// Injects the source's armed mid-fire faults.
    async fn interleave(&self) {
        let (appends, conflict) = {
            let mut m = self.src.mid_fire.borrow_mut();
            (std::mem::take(&mut m.appends), std::mem::take(&mut m.conflict))
        };
        for rows in appends {
            let now = self.world.now();
            let relay = &self.src.relay;
            // A concurrent writer may be refused like any other: ignore it.
            if let Ok(done) = relay.enqueue(now, None, &rows).await {
                self.world.record_enqueued(&self.source, &rows, &done.seqs);
            }
        }
        if conflict {
            other_writer_checkpoint(&self.src, self.world.now());
        }
        let overlap =
            !self.nested && self.src.mid_fire.borrow().overlap && self.world.rng.borrow_mut().chance(50);
        if overlap {
            self.src.mid_fire.borrow_mut().overlap = false;
            let nested = SimTargets {
                world: self.world.clone(),
                source: self.source.clone(),
                src: self.src.clone(),
                options: self.options,
                log: RefCell::default(),
                nested: true,
            };
            let calls = self.options.budget.calls_per_fire();
            let now = || self.world.now();
            let relay = &self.src.relay;
            let (options, object, id) = (&self.options, relay.name(), relay.id());
            let mut cpu = driver::Cpu::new(&options.budget, &driver::no_signal);
            let fire =
                driver::fire(relay.outbox(), object, id, options, calls, &nested, &now, None, &mut cpu);
            let fire: Pin<Box<dyn Future<Output = _> + '_>> = Box::pin(fire);
            // The overlapping fire's own outcome does not matter: the audit
            // after the outer fire checks what both did.
            let _ = fire.await;
        }
    }
}

/// Another writer's checkpoint: the same cycle under a new generation, so
/// the fire in flight loses its guard.
fn other_writer_checkpoint(src: &SimSource, now_ms: u64) {
    let relay = &src.relay;
    let sql = relay.sql();
    let Ok(state) = relay.outbox().state() else { return };
    let mut scan = state.rs.as_deref().and_then(|t| ScanState::decode(t).ok()).unwrap_or_else(|| {
        // A cycle begun as the relay begins one: its clock is the time.
        let mut scan = ScanState::new_cycle(state.os, None);
        scan.clock_ms = now_ms;
        scan
    });
    scan.generation += 1;
    let _ = sql.run("UPDATE relay_state SET rs = ? WHERE id = 1", vec![scan.encode().into()]);
}

/// The user's hook (if any) and the apply log, in one hook.
struct Hooks<'a> {
    user: Option<&'a dyn RelayHook>,
    log: &'a dyn RelayHook,
}

impl RelayHook for Hooks<'_> {
    fn extra_effects(&self, sender: &Sender, rows: &[ApplyRow]) -> Result<Effects, String> {
        let extra = match self.user {
            Some(h) => h.extra_effects(sender, rows)?,
            None => Effects::default(),
        };
        self.log.extra_effects(sender, rows)?;
        Ok(extra)
    }
}

/// A batch as the release its source runs sends it, when it sends it:
/// without the id from a source of the release before ids.
pub(crate) fn as_sent(world: &World, body: &str) -> String {
    let Ok(request) = crate::core::decode_request(body) else { return body.to_owned() };
    let older = world.source_releases.borrow().get(&request.source) == Some(&Release::BeforeIds);
    match request.source_id {
        Some(id) if older => crate::core::without_source_id(body, &id),
        _ => body.to_owned(),
    }
}

/// One call to `target`, synchronously, through its faults.
pub(crate) fn call(world: &World, target: &Name, body: &str) -> CallOutcome {
    world.ensure_target(target);
    world.check_not_early(body);
    let mut targets = world.targets.borrow_mut();
    let Some(t) = targets.get_mut(target) else {
        return CallOutcome::Failed(Failure::Transient("no such target".into()));
    };
    t.calls += 1;
    if t.release == Release::BeforeIds && body.contains(r#""source_id":"#) {
        return CallOutcome::Failed(Failure::Permanent(BEFORE_IDS_REFUSAL.into()));
    }
    match t.fault {
        TargetFault::Healthy => {}
        TargetFault::Reject => return CallOutcome::Failed(Failure::Transient("injected rejection".into())),
        TargetFault::RejectPermanently => {
            return CallOutcome::Failed(Failure::Permanent("injected permanent rejection".into()))
        }
    }
    let platform = t.platform.pop_front();
    let failed = |f: PlatformFault| {
        let thrown = crate::core::ThrownBy { message: f.message(), ..Default::default() };
        CallOutcome::Failed(crate::core::classify_thrown(thrown))
    };
    if let Some(f) = platform.filter(|f| !f.applies()) {
        return failed(f);
    }
    let log = t.tables.log_hook();
    let hooks = Hooks { user: t.hook.as_deref(), log: &log };
    let reply: Result<ApplyReply, ApplyFailure> = t.inbox.apply_body(body, &hooks);
    let outcome = match reply {
        Ok(r) => CallOutcome::Applied { watermark: r.watermark, applied: r.applied },
        Err(ApplyFailure::Rejected(e)) => CallOutcome::Failed(Failure::Permanent(e.to_string())),
        Err(ApplyFailure::Hook(e)) => CallOutcome::Failed(Failure::Transient(format!("hook refused: {e}"))),
        Err(ApplyFailure::Unavailable(e)) => CallOutcome::Failed(Failure::Transient(e)),
    };
    if let Some(f) = platform {
        return failed(f);
    }
    let outcome = match outcome {
        CallOutcome::Applied { applied, .. } if target.endpoint().is_some() => endpoint_reply(body, applied),
        other => other,
    };
    if t.lose_replies > 0 && matches!(outcome, CallOutcome::Applied { .. }) {
        t.lose_replies -= 1;
        return CallOutcome::Failed(Failure::Transient("injected lost reply".into()));
    }
    outcome
}

/// What the relay hears from an endpoint that took the call: it was sent
/// exactly one row (an endpoint gets one per call), and its 2xx says that
/// row is taken and nothing of what the receiver holds beyond it, unlike a
/// Durable Object target's watermark. A call of more rows is a relay bug:
/// it is refused, so the rows park and the check fails.
fn endpoint_reply(body: &str, applied: u32) -> CallOutcome {
    let seqs: Vec<u64> = serde_json::from_str::<serde_json::Value>(body)
        .ok()
        .and_then(|b| b.get("rows").and_then(|r| r.as_array().cloned()))
        .unwrap_or_default()
        .iter()
        .filter_map(|r| r.get("seq").and_then(serde_json::Value::as_u64))
        .collect();
    match seqs.as_slice() {
        [seq] => CallOutcome::Applied { watermark: *seq, applied },
        _ => {
            CallOutcome::Failed(Failure::Permanent(format!("an endpoint was sent rows {seqs:?} in one call")))
        }
    }
}
