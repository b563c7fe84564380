//! The plain enqueue and partition fencing, on the outbox over SQLite with
//! every statement recorded: an unrouted enqueue at a source that never
//! stored a partition map reads no partition record (the state row it reads
//! anyway says so), and one at an object that stored a map is still fenced,
//! whichever outbox instance on the same storage stored it and whenever
//! the object was reopened.

use std::cell::RefCell;
use std::rc::Rc;

use durable_relay_sql::core::{part_of, EnqueueRefusal, EnqueueRow, Layout, Name, PartitionMap};
use durable_relay_sql::sim::SqliteSql;
use durable_relay_sql::store::outbox::{Entry, Seat};
use durable_relay_sql::store::Rows;
use durable_relay_sql::{EnqueueFailure, Enqueued, Outbox, OutboxSettings, Sql, SqlValue, StoreError};
use serde_json::json;

/// When the tests run, ms since the epoch.
const NOW: u64 = 1_700_000_000_000;

/// Statements one unrouted single-row enqueue runs at a source that never
/// stored a map: one read (the state with its tail, whether a map was
/// stored, the newest slot, the target's records, the key's record) and
/// the insert.
const PLAIN_ENQUEUE_STATEMENTS: usize = 2;

/// One SQLite database, shared by every outbox opened on it, that records
/// the text of each statement run.
#[derive(Clone)]
struct Recording {
    inner: Rc<SqliteSql>,
    seen: Rc<RefCell<Vec<String>>>,
}

impl Recording {
    fn new() -> Recording {
        Recording { inner: Rc::new(SqliteSql::memory().unwrap()), seen: Rc::default() }
    }

    /// The statements run since the last call.
    fn take(&self) -> Vec<String> {
        std::mem::take(&mut self.seen.borrow_mut())
    }
}

impl Sql for Recording {
    fn exec(&self, query: &str, params: Vec<SqlValue>) -> Result<Rows, StoreError> {
        self.seen.borrow_mut().push(query.to_owned());
        self.inner.exec(query, params)
    }

    fn transaction<T>(&self, body: impl FnMut() -> Result<T, StoreError>) -> Result<T, StoreError> {
        self.inner.transaction(body)
    }
}

fn row(target: &str, n: u64) -> EnqueueRow {
    EnqueueRow::new(Name::new(target).unwrap(), vec![("n".to_owned(), json!(n))], vec![])
}

fn open(sql: &Recording) -> Outbox<Recording> {
    Outbox::open(sql.clone(), OutboxSettings::default()).unwrap()
}

/// An unrouted enqueue of one row at `name`, in a transaction of its own.
fn enqueue(outbox: &Outbox<Recording>, name: &Name, n: u64) -> Result<Enqueued, EnqueueFailure> {
    let seat = Seat { name, part: part_of(name) };
    let mut failure = None;
    let done = outbox.sql().transaction(|| {
        outbox.enqueue(Entry::Unrouted(seat), NOW + n, None, &[row("t", n)]).map_err(|e| {
            failure = Some(e);
            StoreError::Aborted("refused".into())
        })
    });
    done.map_err(|e| failure.take().unwrap_or(EnqueueFailure::Store(e)))
}

/// Prepares and activates a two-partition map at `name`, one that still
/// reaches the plain object (which may hold rows).
fn adopt(outbox: &Outbox<Recording>, name: &Name) {
    let map = PartitionMap { partitions: Layout::Count(2), epoch: 1, from: vec![Layout::Plain] };
    let seat = Seat { name, part: part_of(name) };
    outbox.prepare(seat, NOW, &map).unwrap();
    outbox.activate(NOW, &map).unwrap();
}

#[test]
fn a_plain_enqueue_at_a_source_never_partitioned_reads_no_partition_record() {
    let sql = Recording::new();
    let outbox = open(&sql);
    let name = Name::new("orders").unwrap();
    enqueue(&outbox, &name, 1).unwrap();
    sql.take();
    let done = enqueue(&outbox, &name, 2).unwrap();
    assert_eq!(done.seqs, vec![2]);
    let seen = sql.take();
    assert!(
        seen.iter().all(|s| !s.contains("relay_partition")),
        "a plain enqueue read the partition record: {seen:#?}"
    );
    assert_eq!(seen.len(), PLAIN_ENQUEUE_STATEMENTS, "{seen:#?}");
}

#[test]
fn a_partition_that_adopted_a_map_refuses_unrouted_enqueues_after_it_reopens() {
    let sql = Recording::new();
    let name = Name::new("orders:0").unwrap();
    adopt(&open(&sql), &name);
    let reopened = open(&sql);
    let refused = enqueue(&reopened, &name, 1);
    assert_eq!(
        refused,
        Err(EnqueueFailure::Refused(EnqueueRefusal::PartitionEnqueue { source: "orders:0".into() }))
    );
    assert_eq!(reopened.audit().unwrap(), Ok(()));
}

#[test]
fn a_map_stored_through_another_instance_fences_this_ones_next_plain_enqueue() {
    // Two instances over one storage (an evicted object's successor, or a
    // second handle): what one stores, the other's next enqueue sees.
    let sql = Recording::new();
    let name = Name::new("orders").unwrap();
    let (first, second) = (open(&sql), open(&sql));
    enqueue(&first, &name, 1).unwrap();
    adopt(&second, &name);
    let refused = enqueue(&first, &name, 2);
    assert_eq!(
        refused,
        Err(EnqueueFailure::Refused(EnqueueRefusal::PartitionedSource {
            source: "orders".into(),
            plain_at_ms: None
        }))
    );
    assert_eq!(first.audit().unwrap(), Ok(()));
}

/// A row to an endpoint the source does not know is refused at the object
/// itself, on the plain path and the routed one (a router that does not
/// know the endpoints leaves the check to each object), before anything is
/// read or written; once the endpoint is configured the same row is taken.
#[test]
fn an_object_refuses_rows_to_endpoints_it_does_not_know_on_every_path() {
    let sql = Recording::new();
    let outbox = open(&sql);
    let name = Name::new("orders:0").unwrap();
    let seat = Seat { name: &name, part: part_of(&name) };
    let rows = [row("t", 1), row("endpoint:hook", 2)];
    let unknown =
        EnqueueFailure::Refused(EnqueueRefusal::UnknownEndpoint { index: 1, target: "endpoint:hook".into() });
    sql.take();
    assert_eq!(outbox.enqueue(Entry::Unrouted(seat), NOW, None, &rows).unwrap_err(), unknown);
    let fence = durable_relay_sql::core::Fence { epoch: 1, map_id: 7, gate: false };
    assert_eq!(outbox.enqueue_fenced(seat, NOW, None, &rows, fence).unwrap_err(), unknown);
    assert_eq!(sql.take(), Vec::<String>::new(), "refused before any statement");
    outbox.set_endpoints(["hook".to_owned()].into(), Default::default());
    let done = outbox.enqueue(Entry::Unrouted(seat), NOW, None, &rows).unwrap();
    assert_eq!(done.seqs.len(), 2, "taken once the endpoint is configured");
    let routed = outbox.enqueue_fenced(seat, NOW, None, &rows, fence);
    assert!(
        !matches!(routed, Err(EnqueueFailure::Refused(EnqueueRefusal::UnknownEndpoint { .. }))),
        "{routed:?}"
    );
}
