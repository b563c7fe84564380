//! The explorer's network: the shipped router runs over a [`Partitions`]
//! sink whose every call becomes a message that waits until the explorer
//! delivers it. Delivering one runs the call on the real object (a
//! [`Relay`](crate::Relay) on the shipped SQL) in one transaction, as a
//! Durable Object runs a request, and hands the reply to its router. A
//! router that crashed leaves its messages behind: each may still arrive
//! (a call already sent) or be lost.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};

use crate::core::{EnqueueRefusal, EnqueueRow, Fence, KeyVerdict, Name, Part, PartitionMap, Ticket};
use crate::partition::{self, Partitions, RouteFailure, RoutedEnqueue};
use crate::sim::world::World;
use crate::store::outbox::{EnqueueFailure, Enqueued, RoutedKey, Sealed};

/// Which attempt a message belongs to.
pub(crate) type RouterId = u32;

/// One call of a router, as the object receives it.
#[derive(Clone, Debug)]
pub(crate) enum Op {
    /// A routed enqueue (keyed: the key, its digest and ticket).
    Enqueue { key: Option<(String, String, Ticket)>, rows: Vec<EnqueueRow>, fence: Fence },
    /// An unrouted enqueue at a plain source.
    Plain { key: Option<String>, rows: Vec<EnqueueRow> },
    /// A key's attempt at its home.
    RecordKey { key: String, digest: String, reach: Vec<Part> },
    /// A retry's seal.
    Seal { key: String, digest: String, ticket: Ticket },
    /// The plain object's own record of a key.
    ProbePlain { key: String, digest: String, fence: Fence },
    /// The first phase of adoption.
    Prepare(PartitionMap),
    /// The second phase.
    Activate(PartitionMap),
}

impl Op {
    /// A short name for scripts.
    fn verb(&self) -> &'static str {
        match self {
            Op::Enqueue { fence, .. } if fence.gate => "gated-enqueue",
            Op::Enqueue { .. } => "enqueue",
            Op::Plain { .. } => "plain-enqueue",
            Op::RecordKey { .. } => "record-key",
            Op::Seal { .. } => "seal",
            Op::ProbePlain { .. } => "probe-plain",
            Op::Prepare(_) => "prepare",
            Op::Activate(_) => "activate",
        }
    }
}

/// What an object answered.
#[derive(Clone, Debug)]
pub(crate) enum Reply {
    Enqueued(Option<Enqueued>),
    Key(KeyVerdict),
    Sealed(Sealed),
    Prepared(Vec<Part>),
    Activated,
}

/// A call in flight.
pub(crate) struct Message {
    pub(crate) id: u64,
    pub(crate) router: RouterId,
    pub(crate) to: Name,
    pub(crate) op: Op,
    slot: Rc<RefCell<Option<Result<Reply, EnqueueRefusal>>>>,
}

impl Message {
    /// How a script names it: `seal@lx:3`.
    pub(crate) fn label(&self) -> String {
        format!("{}@{}", self.op.verb(), self.to)
    }
}

/// The messages in flight, oldest first.
#[derive(Default)]
pub(crate) struct Network {
    pending: RefCell<Vec<Message>>,
    next_id: Cell<u64>,
}

impl Network {
    fn send(&self, router: RouterId, to: Name, op: Op) -> ReplyFuture {
        let slot = Rc::new(RefCell::new(None));
        let id = self.next_id.get();
        self.next_id.set(id + 1);
        self.pending.borrow_mut().push(Message { id, router, to, op, slot: slot.clone() });
        ReplyFuture { slot }
    }

    /// The ids of `router`'s messages in flight, oldest first.
    pub(crate) fn of(&self, router: RouterId) -> Vec<u64> {
        self.pending.borrow().iter().filter(|m| m.router == router).map(|m| m.id).collect()
    }

    /// Takes message `id` out of the network.
    pub(crate) fn take(&self, id: u64) -> Option<Message> {
        let mut pending = self.pending.borrow_mut();
        let at = pending.iter().position(|m| m.id == id)?;
        Some(pending.remove(at))
    }

    /// A message's label, by id.
    pub(crate) fn label(&self, id: u64) -> String {
        self.pending.borrow().iter().find(|m| m.id == id).map_or_else(|| format!("#{id}"), Message::label)
    }
}

/// Resolves when the explorer delivered the message and put its reply.
struct ReplyFuture {
    slot: Rc<RefCell<Option<Result<Reply, EnqueueRefusal>>>>,
}

impl Future for ReplyFuture {
    type Output = Result<Reply, EnqueueRefusal>;

    fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Self::Output> {
        match self.slot.borrow_mut().take() {
            Some(reply) => Poll::Ready(reply),
            None => Poll::Pending,
        }
    }
}

/// Runs message `m` on its object, now, and puts the reply where its
/// router (if it still runs) will read it.
#[allow(clippy::panic, reason = "the simulator's in-memory store does not fail; a failure is a bug")]
pub(crate) fn deliver(world: &World, m: Message) {
    let src = world.source(&m.to);
    let relay = &src.relay;
    let now = world.now();
    let refusal = |f: EnqueueFailure| match f {
        EnqueueFailure::Refused(r) => r,
        EnqueueFailure::Store(e) => panic!("at {}: {e}", m.to),
        EnqueueFailure::Aborted(never) => match never {},
    };
    #[allow(clippy::expect_used, reason = "an in-memory store")]
    let os_before = relay.outbox().state().expect("an in-memory store").os;
    let reply = match &m.op {
        Op::Enqueue { key, rows, fence } => {
            let key = key.as_ref().map(|(key, digest, ticket)| RoutedKey { key, digest, ticket: *ticket });
            let done = futures::executor::block_on(relay.enqueue_routed(now, key, rows, *fence));
            done.map(|d| {
                if let Some(d) = &d {
                    world.record_new(&m.to, rows, &d.seqs, os_before);
                }
                Reply::Enqueued(d)
            })
        }
        Op::Plain { key, rows } => {
            let done = futures::executor::block_on(relay.enqueue(now, key.as_deref(), rows));
            done.map(|d| {
                world.record_new(&m.to, rows, &d.seqs, os_before);
                Reply::Enqueued(Some(d))
            })
        }
        Op::RecordKey { key, digest, reach } => relay.record_key(now, key, digest, reach).map(Reply::Key),
        Op::Seal { key, digest, ticket } => relay.seal(now, key, digest, *ticket).map(Reply::Sealed),
        Op::ProbePlain { key, digest, fence } => {
            relay.probe_plain(now, key, digest, *fence).map(Reply::Enqueued)
        }
        Op::Prepare(map) => relay.prepare(now, map).map(Reply::Prepared),
        Op::Activate(map) => relay.activate(now, map).map(|()| Reply::Activated),
    };
    *m.slot.borrow_mut() = Some(reply.map_err(refusal));
}

/// A router's sink: every call a message on the network.
pub(crate) struct NetSink {
    pub(crate) net: Rc<Network>,
    pub(crate) router: RouterId,
    pub(crate) logical: Name,
}

/// A reply of the wrong kind: the network's bug.
fn mismatch(reply: &Reply) -> EnqueueRefusal {
    EnqueueRefusal::PartitionEnqueue { source: format!("a reply of the wrong kind: {reply:?}") }
}

impl NetSink {
    async fn call(&self, part: Part, op: Op) -> Result<Reply, EnqueueRefusal> {
        self.net.send(self.router, part.object(&self.logical), op).await
    }

    /// An unrouted enqueue at the plain object.
    pub(crate) async fn plain(
        &self,
        key: Option<String>,
        rows: Vec<EnqueueRow>,
    ) -> Result<Enqueued, EnqueueRefusal> {
        match self.call(Part::Plain, Op::Plain { key, rows }).await? {
            Reply::Enqueued(Some(done)) => Ok(done),
            other => Err(mismatch(&other)),
        }
    }
}

impl Partitions for NetSink {
    type Error = EnqueueRefusal;

    async fn enqueue(
        &self,
        part: Part,
        key: Option<RoutedKey<'_>>,
        rows: &[EnqueueRow],
        fence: Fence,
    ) -> Result<Option<Enqueued>, EnqueueRefusal> {
        let key = key.map(|k| (k.key.to_owned(), k.digest.to_owned(), k.ticket));
        match self.call(part, Op::Enqueue { key, rows: rows.to_vec(), fence }).await? {
            Reply::Enqueued(done) => Ok(done),
            other => Err(mismatch(&other)),
        }
    }

    async fn record_key(
        &self,
        home: u32,
        key: &str,
        digest: &str,
        reach: &[Part],
    ) -> Result<KeyVerdict, EnqueueRefusal> {
        let op = Op::RecordKey { key: key.to_owned(), digest: digest.to_owned(), reach: reach.to_vec() };
        match self.call(Part::Index(home), op).await? {
            Reply::Key(v) => Ok(v),
            other => Err(mismatch(&other)),
        }
    }

    async fn seal(
        &self,
        part: Part,
        key: &str,
        digest: &str,
        ticket: Ticket,
    ) -> Result<Sealed, EnqueueRefusal> {
        let op = Op::Seal { key: key.to_owned(), digest: digest.to_owned(), ticket };
        match self.call(part, op).await? {
            Reply::Sealed(s) => Ok(s),
            other => Err(mismatch(&other)),
        }
    }

    async fn probe_plain(
        &self,
        key: &str,
        digest: &str,
        fence: Fence,
    ) -> Result<Option<Enqueued>, EnqueueRefusal> {
        let op = Op::ProbePlain { key: key.to_owned(), digest: digest.to_owned(), fence };
        match self.call(Part::Plain, op).await? {
            Reply::Enqueued(done) => Ok(done),
            other => Err(mismatch(&other)),
        }
    }

    async fn prepare(&self, part: Part, map: &PartitionMap) -> Result<Vec<Part>, EnqueueRefusal> {
        match self.call(part, Op::Prepare(map.clone())).await? {
            Reply::Prepared(known) => Ok(known),
            other => Err(mismatch(&other)),
        }
    }

    async fn activate(&self, part: Part, map: &PartitionMap) -> Result<(), EnqueueRefusal> {
        match self.call(part, Op::Activate(map.clone())).await? {
            Reply::Activated => Ok(()),
            other => Err(mismatch(&other)),
        }
    }

    fn refused(&self, refusal: EnqueueRefusal) -> EnqueueRefusal {
        refusal
    }

    fn unadopted(&self, error: &EnqueueRefusal) -> bool {
        matches!(error, EnqueueRefusal::EpochNotAdopted { .. })
    }

    fn moved_on_direct(&self, part: Part) -> EnqueueRefusal {
        EnqueueRefusal::PartitionEnqueue { source: format!("{part} answered a direct enqueue with moved") }
    }
}

/// What one attempt of a request ended with.
pub(crate) type Outcome = Result<RoutedEnqueue, RouteFailure<EnqueueRefusal>>;

/// A running attempt.
pub(crate) type Router = Pin<Box<dyn Future<Output = Outcome>>>;

/// Starts an attempt of `key`/`rows` by `map` (`None`: an unrouted enqueue
/// at a plain source) as router `id`.
pub(crate) fn start(
    net: &Rc<Network>,
    id: RouterId,
    logical: &Name,
    map: Option<PartitionMap>,
    key: Option<String>,
    rows: Vec<EnqueueRow>,
    now_ms: u64,
) -> Router {
    let sink = NetSink { net: net.clone(), router: id, logical: logical.clone() };
    Box::pin(async move {
        match map {
            Some(map) => partition::enqueue(&map, &sink, key.as_deref(), &rows, now_ms).await,
            None => sink
                .plain(key, rows)
                .await
                .map(routed)
                .map_err(|error| RouteFailure { error, committed: vec![] }),
        }
    })
}

/// A plain enqueue's reply, as a routed one.
fn routed(done: Enqueued) -> RoutedEnqueue {
    let positions =
        done.seqs.iter().map(|&seq| partition::Position { partition: Part::Plain, seq }).collect();
    RoutedEnqueue {
        seqs: done.seqs,
        positions,
        duplicate: done.duplicate,
        queued_rows: done.queued_rows,
        parked_rows: done.parked_rows,
        at_ms: done.at_ms,
        due_ms: done.due_ms,
    }
}

/// Polls `router` once, with a waker that does nothing (the explorer polls
/// again after every delivery).
pub(crate) fn poll(router: &mut Router) -> Option<Outcome> {
    let waker = futures::task::noop_waker();
    let mut cx = Context::from_waker(&waker);
    match router.as_mut().poll(&mut cx) {
        Poll::Ready(outcome) => Some(outcome),
        Poll::Pending => None,
    }
}

/// Messages by router, for a script's listing.
pub(crate) fn census(net: &Network) -> BTreeMap<RouterId, usize> {
    let mut out = BTreeMap::new();
    for m in net.pending.borrow().iter() {
        *out.entry(m.router).or_insert(0) += 1;
    }
    out
}
