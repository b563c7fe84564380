// The TypeScript embedding: a source object that writes its own orders
// table and enqueues a row for the customer in one transaction, and a
// target object whose handler keeps points in its own table, applied once
// per row, in order.

import { DurableObject } from "cloudflare:workers";
import { RelayError, RelaySource, RelayTarget, type Row } from "../../../packages/durable-relay/src/index.js";

// readme: source
interface Env {
  ORDERS: DurableObjectNamespace<Orders>;
  CUSTOMERS: DurableObjectNamespace<Customers>;
}

interface Order {
  id: string;
  customer: string;
  amount: number;
  fail_after_enqueue?: boolean;
}

export class Orders extends DurableObject<Env> {
  relay = new RelaySource(this.ctx, this.env, { targets: "CUSTOMERS" });

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    ctx.storage.sql.exec("CREATE TABLE IF NOT EXISTS orders (id TEXT PRIMARY KEY, customer TEXT, amount INTEGER, seq INTEGER)");
  }

  async order(o: Order, idempotencyKey?: string) {
    const row: Row = { target: o.customer, puts: [[`order:${o.id}`, { amount: o.amount }]] };
    return this.relay.enqueue([row], {
      idempotencyKey,
      writes: (done) => {
        this.ctx.storage.sql.exec("INSERT INTO orders VALUES (?, ?, ?, ?)", o.id, o.customer, o.amount, done.seqs[0]);
        if (o.fail_after_enqueue) throw new Error("the order failed after its row was enqueued");
      },
    });
  }

  /** The same order inside the object's own transaction: the row commits or rolls back with it. */
  orderSync(o: Order, idempotencyKey?: string) {
    const row: Row = { target: o.customer, puts: [[`order:${o.id}`, { amount: o.amount }]] };
    return this.ctx.storage.transactionSync(() => {
      const done = this.relay.enqueueSync([row], { idempotencyKey });
      if (!done.duplicate) {
        this.ctx.storage.sql.exec("INSERT INTO orders VALUES (?, ?, ?, ?)", o.id, o.customer, o.amount, done.seqs[0]);
      }
      if (o.fail_after_enqueue) throw new Error("the order failed after its row was enqueued");
      return done;
    });
  }

  /**
   * Either order, with a refusal answered as data: a `RelayError` is a class in this object only
   * (RPC hands the caller an `Error` keeping `name`, `code`, `status` and the message, but no
   * instance of the class), so the object itself tells refusals from failures.
   */
  async place(o: Order, idempotencyKey?: string, sync = false) {
    try {
      return { enqueued: await (sync ? this.orderSync(o, idempotencyKey) : this.order(o, idempotencyKey)) };
    } catch (e) {
      if (e instanceof RelayError) return { refused: { code: e.code, message: e.message }, status: e.status };
      throw e; // not the relay's refusal: the order itself failed
    }
  }

  orders() {
    return this.ctx.storage.sql.exec("SELECT id, customer, amount, seq FROM orders ORDER BY id").toArray();
  }

  async fetch(request: Request) {
    return this.relay.fetch(request);
  }

  async alarm(alarmInfo?: { retryCount: number }) {
    await this.relay.alarm(alarmInfo);
  }
}
// readme: end

// readme: target
export class Customers extends DurableObject<Env> {
  relay = new RelayTarget(this.ctx, {
    // Each put of each row new to this customer, once, inside the apply's transaction.
    onPut: (_key, value) => {
      const { amount } = value as { amount: number };
      // A negative amount is refused: the batch rolls back and the source retries it.
      if (amount < 0) throw new Error(`refused amount ${amount}`);
      this.ctx.storage.sql.exec("UPDATE points SET points = points + ? WHERE id = 1", amount);
    },
  });

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    ctx.storage.sql.exec("CREATE TABLE IF NOT EXISTS points (id INTEGER PRIMARY KEY, points INTEGER)");
    ctx.storage.sql.exec("INSERT OR IGNORE INTO points VALUES (1, 0)");
  }

  points() {
    return this.ctx.storage.sql.exec("SELECT points FROM points WHERE id = 1").one().points;
  }

  async fetch(request: Request) {
    // A customer named slow-<ms> answers the relay that late, to show the
    // source keeps serving while its alarm waits.
    const slow = /^slow-(\d+)$/.exec(this.ctx.id.name ?? "");
    if (slow) await new Promise((resolve) => setTimeout(resolve, Number(slow[1])));
    return this.relay.fetch(request);
  }
}
// readme: end

const json = (value: unknown, status = 200) =>
  new Response(JSON.stringify(value), { status, headers: { "content-type": "application/json" } });

/** The relay's own protocol under `/orders/{shard}/relay/...` and `/customers/{name}/relay/...`. */
function relayRequest(request: Request, rest: string[]) {
  const url = new URL(request.url);
  return new Request(`https://relay/${rest.join("/")}${url.search}`, request);
}

export default {
  async fetch(request: Request, env: Env): Promise<Response> {
    const parts = new URL(request.url).pathname.split("/").filter(Boolean);
    const [kind, name, sub, ...rest] = parts;
    if (kind === "health") return json({ ok: true });
    if (kind === "orders" && name) {
      const shard = env.ORDERS.getByName(name);
      if (sub === "relay") return shard.fetch(relayRequest(request, rest));
      if (request.method === "POST") {
        const key = request.headers.get("idempotency-key") ?? undefined;
        const sync = new URL(request.url).searchParams.has("sync");
        try {
          const placed = await shard.place(await request.json(), key, sync);
          return placed.refused ? json({ error: placed.refused }, placed.status) : json(placed.enqueued);
        } catch (e) {
          return json({ error: { code: "internal", message: (e as Error).message } }, 500);
        }
      }
      return json(await shard.orders());
    }
    if (kind === "customers" && name) {
      const customer = env.CUSTOMERS.getByName(name);
      if (sub === "relay") return customer.fetch(relayRequest(request, rest));
      return json({ points: await customer.points() });
    }
    return json({ error: { code: "no_route", message: "no such route" } }, 404);
  },
};
