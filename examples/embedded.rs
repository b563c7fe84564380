//! Embedding durable-relay in your own Durable Objects (workers-rs).
//!
//! `Orders` is a source: placing an order writes the `orders` table and
//! appends an outbox row in one transaction, so both commit or neither does;
//! its `alarm()` runs the relay. `Customer` is a target: it applies batches
//! with a hook that updates its own `loyalty` table inside the same atomic
//! apply. Copy these into your Worker crate and bind them in wrangler.toml
//! (`new_sqlite_classes = ["Orders", "Customer"]`, binding `CUSTOMERS` for
//! `Customer`). This file is compiled by `cargo clippy --all-targets`; it runs
//! only in workerd.

use std::time::Duration;

use durable_relay::core::{ApplyRow, Effects, EnqueueRow, Name, RelayBudget, RelayHook};
use durable_relay::worker::outbox::{EnqueueFailure, OutboxSettings};
use durable_relay::worker::relay::DEFAULT_CALL_TIMEOUT_MS;
use durable_relay::worker::storage::{int, StoreError};
use durable_relay::worker::{run_alarm, Db, DoTargets, Inbox, Outbox};
use worker::{durable_object, wasm_bindgen, DurableObject, Env, Request, Response, Result, State};

fn now_ms() -> u64 {
    worker::Date::now().as_millis()
}

fn err(e: impl std::fmt::Display) -> worker::Error {
    worker::Error::RustError(e.to_string())
}

#[derive(serde::Deserialize)]
struct Order {
    id: String,
    customer: String,
    amount: u32,
}

/// A source: its own table plus the relay's outbox, in one SQLite database.
#[durable_object]
pub struct Orders {
    state: State,
    env: Env,
    db: Db,
    outbox: Outbox,
}

impl DurableObject for Orders {
    fn new(state: State, env: Env) -> Self {
        let (state, db) = Db::from_state(state);
        db.run(
            "CREATE TABLE IF NOT EXISTS orders (id TEXT PRIMARY KEY, customer TEXT, amount INTEGER)",
            vec![],
        )
        .expect("create orders");
        let outbox = Outbox::open(db.clone(), OutboxSettings::default()).expect("open the outbox");
        Orders { state, env, db, outbox }
    }

    async fn fetch(&self, mut req: Request) -> Result<Response> {
        let order: Order = req.json().await?;
        let customer = Name::new(format!("customer-{}", order.customer)).map_err(err)?;
        let row = EnqueueRow::new(customer, vec![("last_order".into(), serde_json::json!(order.id))], vec![]);
        // The business write and the outbox row commit together; the order id is
        // the idempotency key, so a retried request enqueues nothing twice.
        let seqs = self
            .db
            .transaction(|| {
                self.db.run(
                    "INSERT INTO orders (id, customer, amount) VALUES (?, ?, ?)",
                    vec![
                        order.id.as_str().into(),
                        order.customer.as_str().into(),
                        int(u64::from(order.amount)),
                    ],
                )?;
                match self.outbox.enqueue(now_ms(), Some(&order.id), std::slice::from_ref(&row)) {
                    Ok(done) => Ok(done.seqs),
                    Err(EnqueueFailure::Store(e)) => Err(e),
                    Err(EnqueueFailure::Refused(e)) => Err(StoreError::Sql(e.to_string())),
                }
            })
            .map_err(err)?;
        // Arm the relay (in the same synchronous turn: no await came between).
        self.state.storage().set_alarm(Duration::from_millis(0)).await?;
        Response::from_json(&serde_json::json!({ "seqs": seqs }))
    }

    async fn alarm(&self) -> Result<Response> {
        let source = Name::new(self.state.id().name().unwrap_or_default()).map_err(err)?;
        let namespace = self.env.durable_object("CUSTOMERS")?;
        let targets = DoTargets { namespace, timeout_ms: DEFAULT_CALL_TIMEOUT_MS };
        let summary = run_alarm(&self.outbox, &source, RelayBudget::FREE, 6, &targets, now_ms)
            .await
            .map_err(|e| err(format!("{e:?}")))?;
        if let Some(delay_ms) = summary.next_in_ms {
            self.state.storage().set_alarm(Duration::from_millis(delay_ms)).await?;
        }
        Response::ok("relayed")
    }
}

/// Adds loyalty points for every new row, inside the apply transaction.
struct Loyalty {
    db: Db,
}

impl RelayHook for Loyalty {
    fn extra_effects(&self, _source: &Name, rows: &[ApplyRow]) -> std::result::Result<Effects, String> {
        self.db
            .run("UPDATE loyalty SET points = points + ?", vec![int(rows.len() as u64)])
            .map_err(|e| e.to_string())?;
        Ok(Effects::default())
    }
}

/// A target: applies relay batches and keeps its own loyalty count.
#[durable_object]
pub struct Customer {
    db: Db,
    inbox: Inbox,
}

impl DurableObject for Customer {
    fn new(state: State, _env: Env) -> Self {
        let (_, db) = Db::from_state(state);
        db.run("CREATE TABLE IF NOT EXISTS loyalty (points INTEGER NOT NULL)", vec![])
            .expect("create loyalty");
        db.run("INSERT INTO loyalty SELECT 0 WHERE NOT EXISTS (SELECT 1 FROM loyalty)", vec![])
            .expect("seed loyalty");
        let inbox = Inbox::open(db.clone()).expect("open the inbox");
        Customer { db, inbox }
    }

    async fn fetch(&self, mut req: Request) -> Result<Response> {
        match req.path().as_str() {
            "/apply" => self.inbox.handle_apply(&mut req, &Loyalty { db: self.db.clone() }).await,
            _ => Response::error("not found", 404),
        }
    }
}

fn main() {
    // Nothing to run natively: the classes above are for workerd.
}
