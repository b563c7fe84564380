// Both directions over the one wire protocol: a TypeScript source (the npm
// package) delivering to the reference Worker's Rust target, and the Rust
// source delivering to a TypeScript target. Each object's own protocol is
// reached through its binding.

import { DurableObject } from "cloudflare:workers";
import { RelaySource, RelayTarget, type Row } from "../../../../packages/durable-relay/src/index.js";

interface Env {
  TS_SOURCES: DurableObjectNamespace<TsSource>;
  TS_TARGETS: DurableObjectNamespace<TsTarget>;
  RUST_SOURCES: DurableObjectNamespace;
  RUST_TARGETS: DurableObjectNamespace;
}

export class TsSource extends DurableObject<Env> {
  relay = new RelaySource(this.ctx, this.env, { targets: "RUST_TARGETS" });

  async enqueue(body: { rows: Row[]; idempotency_key?: string }) {
    return this.relay.enqueue(body.rows, { idempotencyKey: body.idempotency_key });
  }

  /** The package's operator methods, by name. */
  async operate(op: string, target: string, seq: number) {
    switch (op) {
      case "parkedTargets":
        return this.relay.parkedTargets();
      case "parkedRows":
        return this.relay.parkedRows(target, { after: 0, limit: 10 });
      case "redrive":
        return this.relay.redrive(target);
      case "discard":
        return this.relay.discard(target);
      case "deliveredThrough":
        return this.relay.deliveredThrough(seq);
      case "relayWatermark":
        return this.relay.relayWatermark();
      default:
        return this.relay.status();
    }
  }

  async fetch(request: Request) {
    return this.relay.fetch(request);
  }

  async alarm() {
    await this.relay.alarm();
  }
}

export class TsTarget extends DurableObject<Env> {
  relay = new RelayTarget(this.ctx);

  async fetch(request: Request) {
    return this.relay.fetch(request);
  }
}

export default {
  async fetch(request: Request, env: Env): Promise<Response> {
    const url = new URL(request.url);
    const [kind, name, ...rest] = url.pathname.split("/").filter(Boolean);
    if (kind === "health") return new Response("ok");
    const inner = new Request(`https://relay/${rest.join("/")}${url.search}`, request);
    if (kind === "ts-source" && rest[0] === "operate") {
      const target = url.searchParams.get("target") ?? "";
      const seq = Number(url.searchParams.get("seq") ?? 0);
      try {
        return Response.json(await env.TS_SOURCES.getByName(name).operate(rest[1], target, seq));
      } catch (e) {
        const err = e as { code?: string; status?: number; message: string };
        return Response.json({ error: { code: err.code, message: err.message } }, { status: err.status ?? 500 });
      }
    }
    if (kind === "ts-source" && request.method === "POST") {
      try {
        return Response.json(await env.TS_SOURCES.getByName(name).enqueue(await request.json()));
      } catch (e) {
        const err = e as { code?: string; status?: number; message: string };
        return Response.json({ error: { code: err.code, message: err.message } }, { status: err.status ?? 500 });
      }
    }
    const namespace = { "ts-source": env.TS_SOURCES, "ts-target": env.TS_TARGETS, "rust-source": env.RUST_SOURCES, "rust-target": env.RUST_TARGETS }[kind];
    if (!namespace || !name) return new Response("no route", { status: 404 });
    return namespace.getByName(name).fetch(inner);
  },
};
