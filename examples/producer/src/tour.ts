// The calls a producer Worker can make on the relay, as "Calling the relay
// from other Workers" in the docs shows them: the marked regions are that
// page's code blocks, type-checked here with tsc --strict.

// readme: rpc tour
import type { RelayError, RelayRpc, Row } from "../../../clients/typescript/durable-relay";
interface Env { RELAY: Service<RelayRpc> }

export async function tour(env: Env, rows: Row[]) {
  const done = await env.RELAY.enqueue("orders", [{ target: "customer-1", puts: [["balance", 10]] }],
                                       { idempotencyKey: "order-17" }); // { seqs, last_seq, duplicate, queued_rows, ... }
  try {
    await env.RELAY.enqueue("orders", rows);
  } catch (e) {
    const err = e as RelayError;              // err.code: "outbox_full", err.status: 429, err.retryAfterS: 5
  }
  await env.RELAY.status("orders");                   // SourceStatus
  await env.RELAY.deliveredThrough("orders", done.seqs[0]); // boolean
  await env.RELAY.relayWatermark("orders");           // ms
  await env.RELAY.parkedTargets("orders");            // { targets: TargetReport[], next }
  await env.RELAY.parkedRows("orders", "customer-9", { after: 0, limit: 100 });
  await env.RELAY.redrive("orders", "customer-9");    // { rows, was_parked }
  await env.RELAY.discard("orders", "customer-9");
}
// readme: end

// readme: stub
export async function viaStub(env: { RELAY_SOURCE: DurableObjectNamespace }) {
  const res = await env.RELAY_SOURCE.getByName("orders").fetch("https://relay/enqueue", {
    method: "POST",
    body: JSON.stringify({ rows: [{ target: "customer-1", puts: [["balance", 10]] }] }),
  });
  return res.json(); // 200 {"seqs":[4],"last_seq":4,"duplicate":false,...}, or 4xx {"error":{"code","message"}}
}
// readme: end
