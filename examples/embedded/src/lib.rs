//! A Worker of its own that embeds durable-relay, as a workers-rs author
//! would: its own `#[event(fetch)]`, its own Durable Object classes, its own
//! tables, and the library doing the relaying.
//!
//! - `Orders` (a source): placing an order writes the `orders` table and
//!   enqueues one row for the customer in **one** transaction; its
//!   `alarm()` delivers. Any other request is the relay's own source
//!   protocol (status, parked targets, redrive), served by the library.
//! - `Customer` (a target): counts each order it receives into its own
//!   `loyalty_log` table, inside the relay's atomic apply.
//! - `Notes` and `Inbox` (the README's quick start): a note posted to
//!   `Notes` writes its `sent` table and enqueues one row for the inbox
//!   named, in one transaction; `Inbox` keeps the rows' keys.
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
//! | `POST /notes/{to}` | the body is a note's text: `Notes` sends it to the inbox `to` |
//! | `GET /notes/relay/{path..}` | the `Notes` object's relay protocol (`status`, `parked`, ...) |
//! | `GET /inboxes/{to}` | the inbox's keys (`note`, the last note it received) |
//! | `GET /inboxes/{to}/relay/{path..}` | the inbox's protocol (`status`, `watermarks`) |
//! | `POST /forward/{source}` | `{"rows":[..]}`: enqueue at the reference relay's source |
//! | `GET /forward/{source}/status` | that source's status |

#![allow(
    missing_docs,
    reason = "#[durable_object] generates public wasm-bindgen methods that cannot carry docs"
)]

// Everything the objects below name, in one import; the rest is what only
// this example's routing and forwarding use.
use durable_relay::core::decode_enqueue;
use durable_relay::durable::source::traceparent;
use durable_relay::prelude::*;
use durable_relay::{RelayClient, StubCall};

/// Shard of `Orders` objects, by name.
const ORDERS: &str = "ORDERS";
/// The quick start's `Notes` objects (it uses one: `NOTES_OBJECT`).
const NOTES: &str = "NOTES";
/// The one `Notes` object, by name: the source name of every note.
const NOTES_OBJECT: &str = "notes";
/// The quick start's `Inbox` objects, by name.
const INBOXES: &str = "INBOXES";
/// `Holds` objects, by name: a source that shares its alarm with the relay.
const HOLDS: &str = "HOLDS";
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

/// This Worker's own HTTP shape: each path goes to the object it names.
async fn route(req: &mut Request, env: &Env) -> Result<Response, RelayError> {
    let path = req.path();
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    match (req.method(), segments.as_slice()) {
        (Method::Get, ["health"]) => Ok(json(&serde_json::json!({"ok": true}))?),
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
        (Method::Post, ["notes", to]) => {
            forward(req, env, NOTES, NOTES_OBJECT, &format!("/notes/{to}")).await
        }
        (_, ["notes", "relay", rest @ ..]) => {
            forward(req, env, NOTES, NOTES_OBJECT, &format!("/{}", rest.join("/"))).await
        }
        (Method::Post, ["holds", name]) => forward(req, env, HOLDS, name, "/hold").await,
        (Method::Get, ["inboxes", to]) => forward(req, env, INBOXES, to, "/keys").await,
        (_, ["inboxes", to, "relay", rest @ ..]) => {
            forward(req, env, INBOXES, to, &format!("/{}", rest.join("/"))).await
        }
        (Method::Post, ["forward", source]) => {
            // The caller's trace context, if any, travels on with the rows.
            let trace = traceparent(req)?;
            let body = decode_enqueue(&read_body(req).await?)?;
            let source = RelayClient::from_env(env, RELAY_SOURCE)?.source(source)?;
            let done = match &trace {
                Some(t) => source.enqueue_traced(t, None, &body.rows).await?,
                None => source.enqueue(&body.rows).await?,
            };
            Ok(json(&done)?)
        }
        (Method::Get, ["forward", source, "status"]) => {
            let status = RelayClient::from_env(env, RELAY_SOURCE)?.source(source)?.status().await?;
            Ok(json(&status)?)
        }
        _ => Err(RelayError::new(404, ErrorCode::NoRoute, format!("no route for {path}"))),
    }
}

/// Sends the request on to the object `name` in `binding`, at `path`.
async fn forward(
    req: &mut Request,
    env: &Env,
    binding: &str,
    name: &str,
    path: &str,
) -> Result<Response, RelayError> {
    let query = req.url()?.query().map(|q| format!("?{q}")).unwrap_or_default();
    let method = req.method();
    let body = if method == Method::Post { Some(read_body(req).await?) } else { None };
    let call = StubCall::new(method, format!("{path}{query}")).body(body);
    Ok(call.send_to(&env.durable_object(binding)?, name).await?)
}

// ---- the source -------------------------------------------------------------

/// The orders table, beside the relay's outbox.
// readme: source
/// `Customer` objects, by the binding name wrangler.toml gives them.
const CUSTOMERS: &str = "CUSTOMERS";

const ORDERS_TABLE: Migrations =
    &[&["CREATE TABLE IF NOT EXISTS orders (id TEXT PRIMARY KEY, customer TEXT NOT NULL, \
     amount INTEGER NOT NULL, seq INTEGER NOT NULL)"]];

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
    relay: RelaySource,
}

impl DurableObject for Orders {
    fn new(state: State, env: Env) -> Self {
        Orders { relay: RelaySource::new(state, env).targets(CUSTOMERS).tables("orders", ORDERS_TABLE) }
    }

    async fn fetch(&self, mut req: Request) -> worker::Result<Response> {
        match (req.method(), req.path().as_str()) {
            (Method::Post, "/orders") => respond(self.place(&mut req).await),
            (Method::Get, "/orders") => respond(self.orders()),
            _ => self.relay.fetch(req).await,
        }
    }

    async fn alarm(&self) -> worker::Result<Response> {
        self.relay.alarm().await
    }
}

impl Orders {
    /// Writes the order and enqueues its row in one transaction; the order
    /// id is the idempotency key, so a retried request writes nothing twice.
    async fn place(&self, req: &mut Request) -> Result<Response, RelayError> {
        let order: Order = parse_json(&read_body(req).await?)?;
        let row = row(&format!("customer-{}", order.customer))?
            .put(format!("order:{}", order.id), serde_json::json!({"amount": order.amount}));
        let (_, done) = self
            .relay
            .enqueue_with(&[row], Enqueue::key(&order.id), |sql, done| {
                let seq = done.seqs.first().copied().unwrap_or(0);
                let values = vec![order.id.as_str().into(), order.customer.as_str().into()];
                sql.run(
                    "INSERT INTO orders (id, customer, amount, seq) VALUES (?, ?, ?, ?)",
                    [values, vec![int(order.amount.into()), int(seq)]].concat(),
                )?;
                if order.fail_after_enqueue {
                    // Your own failure: it rolls back the order and the row.
                    return Err(WriteError::new("the order was refused after its row was enqueued"));
                }
                Ok(())
            })
            .await?;
        Ok(json(&done)?)
    }

    /// The shard's orders, in outbox order: your own rows, read as your
    /// own type (its fields named as the query's columns).
    fn orders(&self) -> Result<Response, RelayError> {
        let sql = self.relay.sql()?;
        let rows: Vec<OrderRow> =
            sql.rows_as("SELECT id, customer, amount, seq FROM orders ORDER BY seq", vec![])?;
        Ok(json(&rows)?)
    }
}
// readme: end

// ---- a source that shares the object's alarm ---------------------------------

/// How long a hold lasts, ms.
const HOLD_MS: u64 = 60_000;

/// The holds' own table, beside the relay's outbox.
const HOLDS_TABLE: Migrations = &[&["CREATE TABLE IF NOT EXISTS holds (until_ms INTEGER NOT NULL)"]];

// readme: shared alarm
/// Holds stock for a while and releases it on the object's one alarm, which
/// it shares with the relay: its own time goes through the relay.
#[durable_object]
pub struct Holds {
    relay: RelaySource,
}

impl DurableObject for Holds {
    fn new(state: State, env: Env) -> Self {
        Holds { relay: RelaySource::new(state, env).targets(CUSTOMERS).tables("holds", HOLDS_TABLE) }
    }

    async fn fetch(&self, _req: Request) -> worker::Result<Response> {
        respond(self.hold().await)
    }

    async fn alarm(&self) -> worker::Result<Response> {
        // The relay delivers what is due, then says whether your own time has come.
        if self.relay.alarm_summary().await?.host_alarm {
            respond(self.release().await)?;
        }
        Response::ok("")
    }
}

impl Holds {
    /// A hold until `HOLD_MS` from now.
    async fn hold(&self) -> Result<Response, RelayError> {
        let until = now_ms() + HOLD_MS;
        self.relay.sql()?.run("INSERT INTO holds (until_ms) VALUES (?)", vec![int(until)])?;
        self.arm().await?;
        Ok(json(&until)?)
    }

    /// Releases the holds whose time has come.
    async fn release(&self) -> Result<Response, RelayError> {
        self.relay.sql()?.run("DELETE FROM holds WHERE until_ms <= ?", vec![int(now_ms())])?;
        self.arm().await?;
        Ok(json(&"released")?)
    }

    /// Your own alarm, through the relay (never the storage's own): the earliest hold.
    async fn arm(&self) -> Result<(), RelayError> {
        let first = self.relay.sql()?.first("SELECT MIN(until_ms) FROM holds", vec![])?;
        match first.map(|r| r.opt_u64(0)).transpose()?.flatten() {
            Some(at) => self.relay.set_alarm(at).await,
            None => self.relay.delete_alarm(),
        }
    }
}
// readme: end

// ---- the target -------------------------------------------------------------

// readme: target
/// The customer's own tables, beside the relay's inbox: version 1 the log of
/// orders counted, version 2 (added later, run once on objects that had
/// version 1) the running total the hook keeps.
const LOYALTY_TABLE: Migrations = &[
    &["CREATE TABLE IF NOT EXISTS loyalty_log (source TEXT NOT NULL, seq INTEGER NOT NULL, \
     order_id TEXT NOT NULL, amount INTEGER NOT NULL)"],
    &[
        "CREATE TABLE loyalty_points (points INTEGER NOT NULL)",
        "INSERT INTO loyalty_points (points) SELECT coalesce(sum(amount), 0) FROM loyalty_log",
    ],
];

/// Counts every order that arrives into the customer's loyalty tables,
/// inside the relay's apply transaction: both commit or neither does, and a
/// redelivered batch never reaches it. `source` is the sending object's
/// name and id (the log keeps both, as [`Sender::key`] spells them: two
/// classes may each have an object of one name); `rows` are the rows new to
/// this object, in sequence order. A row can only put or delete keys: a counter, like the
/// points total, is the hook's to keep.
struct Loyalty;

impl OnApply for Loyalty {
    fn on_apply(&self, sql: &DoSql, source: &Sender, rows: &[ApplyRow]) -> Result<(), HookError> {
        #[derive(Deserialize)]
        struct Amount {
            amount: u64,
        }
        for row in rows {
            for (order, Amount { amount }) in row.puts_under("order:")? {
                let values = vec![source.key().into(), int(row.seq), order.into(), int(amount)];
                sql.run(
                    "INSERT INTO loyalty_log (source, seq, order_id, amount) VALUES (?, ?, ?, ?)",
                    values,
                )?;
                sql.run("UPDATE loyalty_points SET points = points + ?", vec![int(amount)])?;
            }
        }
        Ok(())
    }
}

/// A customer: the relay's inbox and its own loyalty table.
#[durable_object]
pub struct Customer {
    inbox: RelayTarget<Loyalty>,
}

impl DurableObject for Customer {
    fn new(state: State, _env: Env) -> Self {
        Customer { inbox: RelayTarget::new(&state).on_apply(Loyalty).tables("loyalty", LOYALTY_TABLE) }
    }

    async fn fetch(&self, req: Request) -> worker::Result<Response> {
        if req.method() == Method::Get && req.path() == "/loyalty" {
            return respond(self.loyalty());
        }
        self.inbox.fetch(req).await
    }
}
// readme: end

impl Customer {
    /// The points earned (the hook's running total), and every order counted,
    /// in the order counted.
    fn loyalty(&self) -> Result<Response, RelayError> {
        #[derive(Serialize, Deserialize)]
        struct Counted {
            source: String,
            seq: u64,
            order_id: String,
            amount: u64,
        }
        #[derive(Deserialize)]
        struct Points {
            points: u64,
        }
        let sql = self.inbox.sql()?;
        let log: Vec<Counted> =
            sql.rows_as("SELECT source, seq, order_id, amount FROM loyalty_log ORDER BY rowid", vec![])?;
        let totals: Vec<Points> = sql.rows_as("SELECT points FROM loyalty_points", vec![])?;
        let points = totals.first().map_or(0, |t| t.points);
        Ok(json(&serde_json::json!({"points": points, "orders": log}))?)
    }
}

// ---- the quick start: its own module, as the README shows it ------------

pub mod notes;
