// A stranger's Worker: the README's TypeScript quick start, as installed
// from the packed package (tests/e2e/stranger.test.mjs), plus a router.

// readme: quick start
import { DurableObject } from "cloudflare:workers";
import { RelaySource, RelayTarget } from "durable-relay";

export class Notes extends DurableObject {
  relay = new RelaySource(this.ctx, this.env, { targets: "INBOXES" });

  add(to: string, text: string) {
    return this.ctx.storage.transactionSync(() => {
      this.ctx.storage.sql.exec("CREATE TABLE IF NOT EXISTS sent (text TEXT)");
      this.ctx.storage.sql.exec("INSERT INTO sent VALUES (?)", text); // your write...
      return this.relay.enqueueSync([{ target: to, puts: [["note", text]] }]); // ...and the row, atomically
    });
  }

  async alarm(alarmInfo?: { retryCount: number }) {
    await this.relay.alarm(alarmInfo); // delivers, in order, within the budgets; a retry runs smaller
  }
}

export class Inbox extends DurableObject {
  relay = new RelayTarget(this.ctx); // applies each row once; keys readable at /keys

  fetch(request: Request) {
    return this.relay.fetch(request);
  }
}
// readme: end

interface Env {
  NOTES: DurableObjectNamespace<Notes>;
  INBOXES: DurableObjectNamespace<Inbox>;
}

export default {
  async fetch(request: Request, env: Env): Promise<Response> {
    const url = new URL(request.url);
    if (url.pathname === "/health") return new Response("ok");
    const to = url.searchParams.get("to") ?? "someone";
    if (request.method === "POST") {
      const done = await env.NOTES.getByName("notes").add(to, await request.text());
      return Response.json(done);
    }
    return env.INBOXES.getByName(to).fetch(new Request("https://relay/keys"));
  },
};
