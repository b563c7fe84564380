// A producer Worker in TypeScript that calls the reference relay from
// another script, the three ways a Worker can:
//
// - /stub/...  through a Durable Object binding to the relay's RelaySource
//              class (script_name = "durable-relay"), speaking its fetch
//              protocol (plain JSON);
// - /rpc/...   through a service binding to the relay's RelayRpc
//              entrypoint: typed calls, typed errors;
// - /relay/... through a service binding to the relay's front door (its
//              HTTP API, with the bearer token);
// - /quick-start/{order}: the README's RPC example.
//
// Types come from clients/typescript/durable-relay.d.ts; `npm run typecheck`
// checks this file with tsc --strict.

import type { Enqueued, ErrorCode, RelayError, RelayRpc, Row } from "../../../clients/typescript/durable-relay";

interface Env {
  RELAY_SOURCE: DurableObjectNamespace;
  RELAY: Service<RelayRpc>;
  RELAY_HTTP: Fetcher;
}

const json = (body: unknown, status = 200): Response =>
  new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json" } });

/** Whether `e` is a relay refusal that crossed RPC (checked by its code, not by class). */
function isRelayError(e: unknown): e is RelayError {
  return e instanceof Error && typeof (e as { code?: unknown }).code === "string";
}

/** A relay refusal as this Worker answers it: the relay's own status and code. */
function refusal(e: unknown): Response {
  if (!isRelayError(e)) throw e;
  const code: ErrorCode = e.code;
  const committed = e.committed ?? null;
  return json({ error: { name: e.name, code, status: e.status, message: e.message, retryAfterS: e.retryAfterS ?? null, committed } }, e.status);
}

async function rpc(env: Env, parts: string[], request: Request): Promise<Response> {
  const [op, source, arg] = parts.map(decodeURIComponent);
  try {
    switch (`${request.method} ${op}`) {
      case "POST enqueue": {
        const body = (await request.json()) as { rows: Row[]; idempotencyKey?: string };
        // The caller's trace context travels on with the rows.
        const traceparent = request.headers.get("traceparent") ?? undefined;
        const done: Enqueued = await env.RELAY.enqueue(source, body.rows, { idempotencyKey: body.idempotencyKey, traceparent });
        return json(done);
      }
      case "GET status":
        return json(await env.RELAY.status(source));
      case "GET delivered":
        return json({ delivered: await env.RELAY.deliveredThrough(source, Number(arg)) });
      case "GET watermark":
        return json({ relay_watermark: await env.RELAY.relayWatermark(source) });
      case "GET parked":
        return json(arg === undefined ? await env.RELAY.parkedTargets(source) : await env.RELAY.parkedRows(source, arg));
      case "GET queued":
        return json(await env.RELAY.queuedRows(source, { target: arg }));
      case "POST redrive":
        return json(await env.RELAY.redrive(source, arg));
      case "POST discard":
        return json(await env.RELAY.discard(source, arg));
      default:
        return json({ error: { code: "no_route" } }, 404);
    }
  } catch (e) {
    return refusal(e);
  }
}

// Compile-time checks that the types bind (never called): each line below
// must fail to type-check, or tsc reports the unused directive.
async function typeChecks(env: Env): Promise<void> {
  // @ts-expect-error: a row needs a target
  await env.RELAY.enqueue("s", [{ puts: [["k", 1]] }]);
  // @ts-expect-error: the idempotency key is a string
  await env.RELAY.enqueue("s", [], { idempotencyKey: 5 });
  // @ts-expect-error: not one of the relay's codes
  const code: ErrorCode = "not_a_code";
  // @ts-expect-error: deliveredThrough answers a boolean
  const n: number = await env.RELAY.deliveredThrough("s", 1);
  void code;
  void n;
}
void typeChecks;

// readme: rpc
/** Enqueues an order's row for its customer, then asks whether it was applied yet. */
async function placeOrder(env: Env, order: string): Promise<boolean> {
  const row: Row = { target: "customer-1", puts: [["balance", 10]] };
  const done = await env.RELAY.enqueue("orders", [row], { idempotencyKey: order }); // { seqs, duplicate, ... }
  return env.RELAY.deliveredThrough("orders", done.seqs[0]); // true once the customer applied it
}
// readme: end

export default {
  async fetch(request: Request, env: Env): Promise<Response> {
    const url = new URL(request.url);
    const [kind, ...parts] = url.pathname.split("/").filter((p) => p !== "");
    switch (kind) {
      case "health":
        return json({ ok: true });
      case "stub": {
        // POST /stub/{source}/enqueue and the other source routes, as the object's protocol.
        const [source, ...rest] = parts;
        const stub = env.RELAY_SOURCE.getByName(source);
        const init: RequestInit = { method: request.method };
        if (request.method === "POST") init.body = await request.text();
        return stub.fetch(`https://relay/${rest.join("/")}${url.search}`, init);
      }
      case "rpc":
        return rpc(env, parts, request);
      case "quick-start":
        // POST /quick-start/{order}: the README's RPC example.
        return json({ applied: await placeOrder(env, parts[0] ?? "order-17") });
      case "relay":
        // The relay's HTTP API: /relay/v1/... with the caller's Authorization.
        return env.RELAY_HTTP.fetch(new Request(`https://relay/${parts.join("/")}${url.search}`, request));
      default:
        return json({ error: { code: "no_route" } }, 404);
    }
  },
} satisfies ExportedHandler<Env>;
