//! The delivery explorer's wire: each target call a delivery makes waits
//! here as a [`Call`] until the explorer chooses what happens to it (it
//! arrives and is answered, its reply is lost, it times out and may arrive
//! later), and the delivery awaiting it wakes when its outcome is put.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

use crate::core::{CallOutcome, Name};
use crate::driver::Targets;
use crate::sim::targets::as_sent;
use crate::sim::world::World;

/// A target call waiting for the explorer.
pub(crate) struct Call {
    /// Its number, in the order calls were made.
    pub(crate) id: u64,
    /// The delivery that made it; `None` once that delivery died or gave up
    /// on it (a late call, which may still arrive).
    pub(crate) delivery: Option<u32>,
    /// The target it is addressed to.
    pub(crate) target: Name,
    /// The batch it carries.
    pub(crate) body: String,
    /// Where its outcome goes.
    pub(crate) slot: Rc<Slot>,
}

/// Where a call's outcome is put, and who to wake then.
#[derive(Default)]
pub(crate) struct Slot {
    /// The outcome, once put; taken by the delivery.
    pub(crate) outcome: RefCell<Option<CallOutcome>>,
    /// The delivery waiting for it.
    pub(crate) waker: RefCell<Option<Waker>>,
}

impl Slot {
    /// Puts the outcome and wakes the delivery that waits for it.
    pub(crate) fn put(&self, outcome: CallOutcome) {
        *self.outcome.borrow_mut() = Some(outcome);
        if let Some(w) = self.waker.borrow_mut().take() {
            w.wake();
        }
    }
}

/// The calls in flight, oldest first.
#[derive(Default)]
pub(crate) struct Wire {
    /// Every call not yet arrived or given up for lost.
    pub(crate) calls: RefCell<Vec<Call>>,
    /// The next call's number.
    pub(crate) next: Cell<u64>,
    /// The first call made to a target while a live delivery of the same
    /// source still waited on another call to it: a breach of one request
    /// in flight per source and target (what an endpoint is promised).
    pub(crate) overlap: RefCell<Option<String>>,
}

impl Wire {
    /// Calls a live delivery waits for, oldest first.
    pub(crate) fn live(&self) -> Vec<u64> {
        self.calls.borrow().iter().filter(|c| c.delivery.is_some()).map(|c| c.id).collect()
    }

    /// Late calls: still in flight, no delivery waiting for them.
    pub(crate) fn late(&self) -> Vec<u64> {
        self.calls.borrow().iter().filter(|c| c.delivery.is_none()).map(|c| c.id).collect()
    }

    /// Puts `call` on the wire, noting the first call made to a target
    /// while a live delivery still waits on another to it.
    fn post(&self, call: Call) {
        let mut calls = self.calls.borrow_mut();
        let open = calls.iter().find(|c| c.target == call.target && c.delivery.is_some());
        let first = self.overlap.borrow().is_none();
        if let Some(open) = open.filter(|_| first) {
            let text = format!(
                "call {} to {} was made while call {} (delivery {:?}) still waited for its answer",
                call.id, call.target, open.id, open.delivery
            );
            *self.overlap.borrow_mut() = Some(text);
        }
        calls.push(call);
    }

    /// Takes call `id` off the wire.
    pub(crate) fn take(&self, id: u64) -> Option<Call> {
        let mut calls = self.calls.borrow_mut();
        let at = calls.iter().position(|c| c.id == id)?;
        Some(calls.remove(at))
    }
}

/// The [`Targets`] of one delivery: each call waits on the wire.
pub(crate) struct WireTargets {
    /// Where its calls wait.
    pub(crate) wire: Rc<Wire>,
    /// The delivery's number.
    pub(crate) delivery: u32,
    /// The world, whose releases say what a batch looks like as sent.
    pub(crate) world: Rc<World>,
}

impl Targets for WireTargets {
    async fn apply(&self, target: &Name, body: String) -> CallOutcome {
        let body = as_sent(&self.world, &body);
        let slot = Rc::new(Slot::default());
        let id = self.wire.next.get();
        self.wire.next.set(id + 1);
        let call =
            Call { id, delivery: Some(self.delivery), target: target.clone(), body, slot: slot.clone() };
        self.wire.post(call);
        Answer(slot).await
    }
}

/// Resolves when the explorer puts the call's outcome.
struct Answer(Rc<Slot>);

impl Future for Answer {
    type Output = CallOutcome;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<CallOutcome> {
        match self.0.outcome.borrow_mut().take() {
            Some(outcome) => Poll::Ready(outcome),
            None => {
                *self.0.waker.borrow_mut() = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }
}
