// A host that uses the object's one alarm for its own work beside the relay,
// in workerd (tests/e2e/shared_alarm.test.mjs). Shop holds stock for a
// while: each hold is a row of its own table, written with the relay's row
// to the desk in one transaction, and expires on the object's alarm, which
// Shop arms through the relay (`relay.setAlarm`) at its earliest open hold.
// Desk notes when each row arrives. `pushBack` is the misuse the relay must
// catch: the object's alarm set directly, an hour on.

import { DurableObject } from "cloudflare:workers";
import { RelaySource, RelayTarget } from "../../../../packages/durable-relay/src/index.js";

interface Env {
  SHOPS: DurableObjectNamespace<Shop>;
  DESKS: DurableObjectNamespace<Desk>;
}

/** The desk every hold is announced to. */
const DESK = "desk";

export class Shop extends DurableObject<Env> {
  relay: RelaySource;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    ctx.storage.sql.exec(
      "CREATE TABLE IF NOT EXISTS holds (id TEXT PRIMARY KEY, seq INTEGER, at_ms INTEGER, expires_ms INTEGER, expired_ms INTEGER)",
    );
    this.relay = new RelaySource(ctx, env, { targets: "DESKS" });
  }

  /** Holds `id` for `ttlMs`: the hold and its row commit together; the alarm covers its expiry. */
  async hold(id: string, ttlMs: number) {
    const at = Date.now();
    const done = await this.relay.enqueue([{ target: DESK, puts: [[`hold:${id}`, ttlMs]] }], {
      writes: (enqueued) => {
        this.ctx.storage.sql.exec("INSERT INTO holds VALUES (?, ?, ?, ?, NULL)", id, enqueued.seqs[0], at, at + ttlMs);
      },
    });
    await this.armExpiry();
    return { seq: done.seqs[0], at_ms: at };
  }

  // readme: shared alarm
  async alarm(alarmInfo?: AlarmInvocationInfo) {
    // The relay delivers what is due, then says whether your own time has come.
    const { hostAlarm } = await this.relay.alarm(alarmInfo);
    if (hostAlarm) {
      const now = Date.now();
      this.ctx.storage.sql.exec("UPDATE holds SET expired_ms = ? WHERE expired_ms IS NULL AND expires_ms <= ?", now, now);
      await this.armExpiry();
    }
  }

  /** Your own alarm, through the relay (never ctx.storage.setAlarm): the earliest open hold. */
  async armExpiry() {
    const next = this.ctx.storage.sql.exec("SELECT MIN(expires_ms) AS at FROM holds WHERE expired_ms IS NULL").one().at;
    if (next === null) await this.relay.deleteAlarm();
    else await this.relay.setAlarm(Number(next));
  }
  // readme: end

  /**
   * The misuse the issue found: a row enqueued, then the object's alarm set
   * directly an hour on, pushing the relay's back.
   */
  async pushBack(id: string) {
    const at = Date.now();
    const done = this.ctx.storage.transactionSync(() => this.relay.enqueueSync([{ target: DESK, puts: [[`late:${id}`, 1]] }]));
    await this.ctx.storage.setAlarm(at + 3_600_000);
    return { seq: done.seqs[0], at_ms: at };
  }

  holds() {
    return this.ctx.storage.sql.exec("SELECT id, seq, at_ms, expires_ms, expired_ms FROM holds ORDER BY seq").toArray();
  }

  async alarms() {
    return { host: await this.relay.getAlarm(), object: await this.ctx.storage.getAlarm() };
  }

  async fetch(request: Request) {
    return this.relay.fetch(request);
  }
}

export class Desk extends DurableObject<Env> {
  relay: RelayTarget;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    ctx.storage.sql.exec("CREATE TABLE IF NOT EXISTS arrivals (source TEXT, seq INTEGER, at_ms INTEGER)");
    this.relay = new RelayTarget(ctx, {
      onApply: (source, rows) => {
        for (const row of rows) ctx.storage.sql.exec("INSERT INTO arrivals VALUES (?, ?, ?)", source, row.seq, Date.now());
      },
    });
  }

  arrivals(source: string) {
    return this.ctx.storage.sql.exec("SELECT seq, at_ms FROM arrivals WHERE source = ? ORDER BY seq", source).toArray();
  }

  async fetch(request: Request) {
    return this.relay.fetch(request);
  }
}

export default {
  async fetch(request: Request, env: Env): Promise<Response> {
    const url = new URL(request.url);
    const [kind, name, op, ...rest] = url.pathname.split("/").filter(Boolean);
    if (kind === "health") return new Response("ok");
    if (kind === "shop" && name) {
      const shop = env.SHOPS.getByName(name);
      const q = url.searchParams;
      if (op === "hold") return Response.json(await shop.hold(q.get("id") ?? "", Number(q.get("ttl_ms"))));
      if (op === "push-back") return Response.json(await shop.pushBack(q.get("id") ?? ""));
      if (op === "holds") return Response.json(await shop.holds());
      if (op === "alarms") return Response.json(await shop.alarms());
      if (op === "relay") return shop.fetch(new Request(`https://relay/${rest.join("/")}${url.search}`, request));
    }
    if (kind === "desk" && name && op === "arrivals") {
      return Response.json(await env.DESKS.getByName(name).arrivals(url.searchParams.get("source") ?? ""));
    }
    return new Response("no route", { status: 404 });
  },
};
