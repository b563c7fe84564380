//! A Worker of its own that embeds durable-relay, as a workers-rs author
//! would: its own `#[event(fetch)]`, its own Durable Object classes, its own
//! tables, and the library doing the relaying.
//!
//! - `Orders` (a source): placing an order writes the `orders` table and
//!   enqueues one row for the customer in **one** transaction
//!   ([`Relay::enqueue_with`]); its `alarm()` is [`Relay::alarm`]. Any other
//!   request is the relay's own source protocol (status, parked targets,
//!   redrive), served by the library.
//! - `Customer` (a target): applies the relay's batches with a hook that
//!   updates its own `loyalty` table inside the same atomic apply.
//! - `/forward/{source}` enqueues at the reference relay (another Worker,
//!   bound by `script_name`) through the library's Rust client.
//!
//! Routes (no authentication: it is an example to run locally):
//!
//! | route | what |
//! | --- | --- |
//! | `GET /health` | `{"ok":true}` |
//! | `POST /orders/{shard}` | `{"id","customer","amount","fail_after_enqueue"?}`: place an order |
//! | `GET /orders/{shard}` | the shard's orders |
//! | `GET /orders/{shard}/relay/{path..}` | the shard's relay protocol (`status`, `parked`, ...) |
//! | `GET /customers/{id}` | the customer's loyalty points and the orders counted, in order |
//! | `GET /customers/{id}/relay/{path..}` | the customer's inbox protocol (`keys`, `watermarks`) |
//! | `POST /forward/{source}` | `{"rows":[..]}`: enqueue at the reference relay's source |
//! | `GET /forward/{source}/status` | that source's status |

use std::cell::OnceCell;

use durable_relay::core::{ApplyRow, Effects, EnqueueRow, Name, RelayHook, DEFAULT_CALL_TIMEOUT_MS};
use durable_relay::durable::{now_ms, DoRelay, DoSql, DoTargets};
use durable_relay::http::{json, read_body, respond, HttpError};
use durable_relay::store::{int, Sql};
use durable_relay::{Inbox, NoObserver, RelayClient, RelayConfig};
use serde::{Deserialize, Serialize};
use worker::{
    durable_object, event, wasm_bindgen, Context, DurableObject, Env, Method, Request, RequestInit, Response,
    State,
};

/// Shard of `Orders` objects, by name.
const ORDERS: &str = "ORDERS";
/// `Customer` objects, by name.
const CUSTOMERS: &str = "CUSTOMERS";
/// The reference relay's source class, in another Worker.
const RELAY_SOURCE: &str = "RELAY_SOURCE";

#[event(start)]
fn start() {
    console_error_panic_hook::set_once();
}

#[event(fetch)]
async fn fetch(mut req: Request, env: Env, _ctx: Context) -> worker::Result<Response> {
    respond(route(&mut req, &env).await)
}

async fn route(req: &mut Request, env: &Env) -> Result<Response, HttpError> {
    let path = req.path();
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    let internal = |e: worker::Error| HttpError::internal(e.to_string());
    match (req.method(), segments.as_slice()) {
        (Method::Get, ["health"]) => json(&serde_json::json!({"ok": true})).map_err(internal),
        (_, ["orders", shard]) => forward(req, env, ORDERS, &format!("orders-{shard}"), "/orders").await,
        (_, ["orders", shard, "relay", rest @ ..]) => {
            forward(req, env, ORDERS, &format!("orders-{shard}"), &format!("/{}", rest.join("/"))).await
        }
        (Method::Get, ["customers", id]) => {
            forward(req, env, CUSTOMERS, &format!("customer-{id}"), "/loyalty").await
        }
        (_, ["customers", id, "relay", rest @ ..]) => {
            forward(req, env, CUSTOMERS, &format!("customer-{id}"), &format!("/{}", rest.join("/"))).await
        }
        (Method::Post, ["forward", source]) => {
            // The caller's trace context, if any, travels on with the rows.
            let trace = durable_relay::durable::source::traceparent(req)?;
            let body = durable_relay::core::decode_enqueue(&read_body(req).await?)?;
            let client = RelayClient::from_env(env, RELAY_SOURCE).map_err(client_error)?;
            let source = client.source(source).map_err(client_error)?;
            let done = match &trace {
                Some(t) => source.enqueue_traced(t, None, &body.rows).await,
                None => source.enqueue(&body.rows).await,
            }
            .map_err(client_error)?;
            json(&done).map_err(internal)
        }
        (Method::Get, ["forward", source, "status"]) => {
            let client = RelayClient::from_env(env, RELAY_SOURCE).map_err(client_error)?;
            let status = client.source(source).map_err(client_error)?.status().await.map_err(client_error)?;
            json(&status).map_err(internal)
        }
        _ => Err(HttpError::new(404, "no_route", format!("no route for {path}"))),
    }
}

/// A client error, answered with the relay's own status and code.
fn client_error(e: durable_relay::RelayError) -> HttpError {
    HttpError::new(e.status, e.code.as_static_str().unwrap_or("internal"), e.message)
}

/// Sends the request on to the object `name` in `binding`, at `path`.
async fn forward(
    req: &mut Request,
    env: &Env,
    binding: &str,
    name: &str,
    path: &str,
) -> Result<Response, HttpError> {
    let internal = |e: worker::Error| HttpError::internal(e.to_string());
    let namespace = env.durable_object(binding).map_err(internal)?;
    let stub = namespace.id_from_name(name).map_err(internal)?.get_stub().map_err(internal)?;
    let query = req.url().map_err(internal)?.query().map(|q| format!("?{q}")).unwrap_or_default();
    let mut init = RequestInit::new();
    let method = req.method();
    if method == Method::Post {
        init.with_body(Some(read_body(req).await?.into()));
    }
    init.with_method(method);
    let inner = Request::new_with_init(&format!("https://example{path}{query}"), &init).map_err(internal)?;
    stub.fetch_with_request(inner).await.map_err(internal)
}

// ---- the source -------------------------------------------------------------

/// An order as placed.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Order {
    id: String,
    customer: String,
    amount: u32,
    /// Test switch: fail after the enqueue, inside the same transaction.
    #[serde(default)]
    fail_after_enqueue: bool,
}

/// One stored order.
#[derive(Serialize, Deserialize)]
struct OrderRow {
    id: String,
    customer: String,
    amount: u64,
    /// The outbox sequence its row was given.
    seq: u64,
}

/// A shard of orders: its own table, and the relay's outbox beside it.
#[durable_object]
pub struct Orders {
    state: State,
    env: Env,
    relay: OnceCell<DoRelay>,
}

impl DurableObject for Orders {
    fn new(state: State, env: Env) -> Self {
        Orders { state, env, relay: OnceCell::new() }
    }

    async fn fetch(&self, mut req: Request) -> worker::Result<Response> {
        respond(self.route(&mut req).await)
    }

    async fn alarm(&self) -> worker::Result<Response> {
        let relay = self.relay().map_err(|e| worker::Error::RustError(e.message))?;
        let namespace = self.env.durable_object(CUSTOMERS)?;
        let targets = DoTargets { namespace, timeout_ms: DEFAULT_CALL_TIMEOUT_MS };
        match relay.alarm(&targets, &now_ms, &NoObserver).await {
            Ok(summary) => {
                worker::console_log!("{}", serde_json::json!({"event": "orders_alarm", "alarm": summary}));
                Response::ok("relayed")
            }
            // The relay armed a back-off before failing; throwing lets the
            // platform retry sooner.
            Err(f) => Err(worker::Error::RustError(f.error.to_string())),
        }
    }
}

impl Orders {
    /// The relay, opened on first use together with the orders table.
    fn relay(&self) -> Result<&DoRelay, HttpError> {
        if let Some(r) = self.relay.get() {
            return Ok(r);
        }
        // The library's defaults (the Free preset), or the same variables the
        // reference Worker reads, if this Worker sets any.
        let config = RelayConfig::from_vars(|k| self.env.var(k).ok().map(|v| v.to_string()))
            .map_err(|e| HttpError::new(500, "bad_configuration", e.to_string()))?;
        let relay = DoRelay::for_object(&self.state, config.source())?;
        relay.sql().run(
            "CREATE TABLE IF NOT EXISTS orders (id TEXT PRIMARY KEY, customer TEXT NOT NULL, \
             amount INTEGER NOT NULL, seq INTEGER NOT NULL)",
            vec![],
        )?;
        Ok(self.relay.get_or_init(|| relay))
    }

    async fn route(&self, req: &mut Request) -> Result<Response, HttpError> {
        let relay = self.relay()?;
        let internal = |e: worker::Error| HttpError::internal(e.to_string());
        match (req.method(), req.path().as_str()) {
            (Method::Post, "/orders") => {
                let order: Order = durable_relay::http::parse_json(&read_body(req).await?)?;
                json(&self.place(relay, &order).await?).map_err(internal)
            }
            (Method::Get, "/orders") => {
                let rows: Vec<OrderRow> = relay
                    .sql()
                    .rows_as("SELECT id, customer, amount, seq FROM orders ORDER BY seq", vec![])?;
                json(&rows).map_err(internal)
            }
            // Everything else is the relay's source protocol.
            _ => durable_relay::durable::source::handle(relay, req).await,
        }
    }

    /// Writes the order and enqueues its row in one transaction; the order
    /// id is the idempotency key, so a retried request enqueues nothing twice.
    async fn place(&self, relay: &DoRelay, order: &Order) -> Result<durable_relay::Enqueued, HttpError> {
        let customer = Name::new(format!("customer-{}", order.customer))
            .map_err(|e| HttpError::bad_request("invalid_target", e.to_string()))?;
        let value = serde_json::json!({"amount": order.amount});
        let row = EnqueueRow::new(customer, vec![(format!("order:{}", order.id), value)], vec![]);
        let sql = relay.sql();
        let (_, done) = relay
            .enqueue_with(now_ms(), Some(&order.id), &[row], |enqueued| {
                if enqueued.duplicate {
                    return Ok(());
                }
                let seq = enqueued.seqs.first().copied().unwrap_or(0);
                sql.run(
                    "INSERT INTO orders (id, customer, amount, seq) VALUES (?, ?, ?, ?)",
                    vec![
                        order.id.as_str().into(),
                        order.customer.as_str().into(),
                        int(order.amount.into()),
                        int(seq),
                    ],
                )
                .map_err(|e| e.to_string())?;
                if order.fail_after_enqueue {
                    return Err("the order was refused after its row was enqueued".to_owned());
                }
                Ok(())
            })
            .await?;
        Ok(done)
    }
}

// ---- the target -------------------------------------------------------------

/// Counts every order that arrives into the customer's own loyalty table,
/// inside the relay's apply transaction: both commit or neither does, and
/// the watermark makes a redelivered batch skip it.
struct Loyalty {
    sql: DoSql,
}

impl RelayHook for Loyalty {
    fn extra_effects(&self, source: &Name, rows: &[ApplyRow]) -> Result<Effects, String> {
        for row in rows {
            for (key, value) in &row.effects.puts {
                let Some(order) = key.strip_prefix("order:") else { continue };
                let amount = serde_json::from_str::<serde_json::Value>(value.as_str())
                    .ok()
                    .and_then(|v| v.get("amount").and_then(serde_json::Value::as_u64))
                    .ok_or_else(|| format!("order {order} has no amount"))?;
                self.sql
                    .run(
                        "INSERT INTO loyalty_log (source, seq, order_id, amount) VALUES (?, ?, ?, ?)",
                        vec![source.as_str().into(), int(row.seq), order.into(), int(amount)],
                    )
                    .map_err(|e| e.to_string())?;
            }
        }
        Ok(Effects::default())
    }
}

/// A customer: the relay's inbox and its own loyalty tables.
#[durable_object]
pub struct Customer {
    sql: DoSql,
    inbox: OnceCell<Inbox<DoSql>>,
}

impl DurableObject for Customer {
    fn new(state: State, _env: Env) -> Self {
        Customer { sql: DoSql::new(&state), inbox: OnceCell::new() }
    }

    async fn fetch(&self, mut req: Request) -> worker::Result<Response> {
        respond(self.route(&mut req).await)
    }
}

impl Customer {
    fn inbox(&self) -> Result<&Inbox<DoSql>, HttpError> {
        if let Some(i) = self.inbox.get() {
            return Ok(i);
        }
        let inbox = Inbox::open(self.sql.clone())?;
        self.sql.run(
            "CREATE TABLE IF NOT EXISTS loyalty_log (source TEXT NOT NULL, seq INTEGER NOT NULL, \
             order_id TEXT NOT NULL, amount INTEGER NOT NULL)",
            vec![],
        )?;
        Ok(self.inbox.get_or_init(|| inbox))
    }

    async fn route(&self, req: &mut Request) -> Result<Response, HttpError> {
        let inbox = self.inbox()?;
        if req.method() == Method::Get && req.path() == "/loyalty" {
            #[derive(Serialize, Deserialize)]
            struct Counted {
                source: String,
                seq: u64,
                order_id: String,
                amount: u64,
            }
            let log: Vec<Counted> = self
                .sql
                .rows_as("SELECT source, seq, order_id, amount FROM loyalty_log ORDER BY rowid", vec![])?;
            let points: u64 = log.iter().map(|c| c.amount).sum();
            return json(&serde_json::json!({"points": points, "orders": log}))
                .map_err(|e| HttpError::internal(e.to_string()));
        }
        // Everything else is the relay's target protocol (apply, keys, ...).
        durable_relay::durable::target::handle(inbox, req, &Loyalty { sql: self.sql.clone() }).await
    }
}
