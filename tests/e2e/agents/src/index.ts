// The relay inside a Cloudflare Agents SDK Agent, in workerd
// (tests/e2e/agents.test.mjs). Shop is an Agent whose Lifecycle owns the
// object's alarm: it is a relay source through `agentRelay`, and schedules
// jobs of its own (`this.schedule`) with every order, each noting when it
// ran against when it was due. Desk notes when each row arrives, and
// refuses rows (its hook throws, so the source retries) until the time
// `refuseFor` set has passed.

import { DurableObject } from "cloudflare:workers";
import { Agent } from "agents";
import { RelayTarget } from "../../../../packages/durable-relay/src/index.js";
import { agentRelay } from "../../../../packages/durable-relay/src/agents.js";

interface Env {
  SHOPS: DurableObjectNamespace<TestShop>;
  DESKS: DurableObjectNamespace<Desk>;
}

// readme: agent
export class Shop extends Agent<Env> {
  // The Agent's Lifecycle keeps the relay's alarm and runs it: no alarm() override.
  relay = agentRelay(this, { targets: "DESKS" });

  onStart() {
    this.sql`CREATE TABLE IF NOT EXISTS ticks (id TEXT, due_ms INTEGER, ran_ms INTEGER)`;
  }

  /** Orders `id`: its row goes to the desk, and a job of the Agent's own is due `tickMs` later. */
  async order(id: string, tickMs: number) {
    const at = Date.now();
    const done = await this.relay.enqueue([{ target: "desk", puts: [[`order:${id}`, id]] }]);
    await this.schedule(new Date(at + tickMs), "tick", { id, due: at + tickMs });
    return { seq: done.seqs[0], at_ms: at };
  }

  /** The Agent's own job: notes when it was due and when it ran. */
  tick(payload: { id: string; due: number }) {
    this.sql`INSERT INTO ticks VALUES (${payload.id}, ${payload.due}, ${Date.now()})`;
  }
}
// readme: end

/** Shop, with the order made inside the object's own transaction, and what the test reads. */
export class TestShop extends Shop {
  /** `order`, with the row enqueued by `enqueueSync` inside `transactionSync`. */
  async orderSync(id: string, tickMs: number) {
    const at = Date.now();
    const done = this.ctx.storage.transactionSync(() =>
      this.relay.enqueueSync([{ target: "desk", puts: [[`order:${id}`, id]] }]),
    );
    await this.schedule(new Date(at + tickMs), "tick", { id, due: at + tickMs });
    return { seq: done.seqs[0], at_ms: at };
  }

  ticks() {
    return this.sql<{ id: string; due_ms: number; ran_ms: number }>`SELECT id, due_ms, ran_ms FROM ticks ORDER BY due_ms`;
  }

  status() {
    return this.relay.status();
  }
}

export class Desk extends DurableObject<Env> {
  relay: RelayTarget;
  /** Batches this desk refused since it started. */
  refused = 0;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    ctx.storage.sql.exec("CREATE TABLE IF NOT EXISTS arrivals (source TEXT, seq INTEGER, at_ms INTEGER)");
    ctx.storage.sql.exec("CREATE TABLE IF NOT EXISTS refusing (id INTEGER PRIMARY KEY, until_ms INTEGER)");
    this.relay = new RelayTarget(ctx, {
      onApply: (source, rows) => {
        const until = ctx.storage.sql.exec("SELECT until_ms FROM refusing").toArray()[0]?.until_ms ?? 0;
        if (Date.now() < Number(until)) {
          this.refused++;
          throw new Error("the desk is refusing rows for now");
        }
        for (const row of rows) ctx.storage.sql.exec("INSERT INTO arrivals VALUES (?, ?, ?)", source, row.seq, Date.now());
      },
    });
  }

  /** Refuses every row for the next `ms`. */
  refuseFor(ms: number) {
    this.ctx.storage.sql.exec("INSERT OR REPLACE INTO refusing VALUES (1, ?)", Date.now() + ms);
  }

  arrivals(source: string) {
    const rows = this.ctx.storage.sql.exec("SELECT seq, at_ms FROM arrivals WHERE source = ? ORDER BY rowid", source).toArray();
    return { rows, refused: this.refused };
  }

  async fetch(request: Request) {
    return this.relay.fetch(request);
  }
}

export default {
  async fetch(request: Request, env: Env): Promise<Response> {
    const url = new URL(request.url);
    const [kind, name, op] = url.pathname.split("/").filter(Boolean);
    const q = url.searchParams;
    if (kind === "health") return new Response("ok");
    if (kind === "shop" && name) {
      const shop = env.SHOPS.getByName(name);
      if (op === "order") return Response.json(await shop.order(q.get("id") ?? "", Number(q.get("tick_ms"))));
      if (op === "order-sync") return Response.json(await shop.orderSync(q.get("id") ?? "", Number(q.get("tick_ms"))));
      if (op === "ticks") return Response.json(await shop.ticks());
      if (op === "status") return Response.json(await shop.status());
    }
    if (kind === "desk" && name) {
      const desk = env.DESKS.getByName(name);
      if (op === "refuse") return Response.json(await desk.refuseFor(Number(q.get("ms"))));
      if (op === "arrivals") return Response.json(await desk.arrivals(q.get("source") ?? ""));
    }
    return new Response("no route", { status: 404 });
  },
};
