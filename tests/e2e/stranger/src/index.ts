// A stranger's Worker: the smallest TypeScript use of the installed
// package, a source and a target class, as the README shows them.

import { DurableObject } from "cloudflare:workers";
import { RelaySource, RelayTarget } from "durable-relay";

interface Env {
  NOTES: DurableObjectNamespace<Notes>;
  INBOXES: DurableObjectNamespace<Inbox>;
}

export class Notes extends DurableObject<Env> {
  relay = new RelaySource(this.ctx, this.env, { targets: "INBOXES" });

  async add(to: string, text: string) {
    return this.relay.enqueue([{ target: to, puts: [["note", text]] }], {
      writes: () => {
        this.ctx.storage.sql.exec("CREATE TABLE IF NOT EXISTS sent (text TEXT)");
        this.ctx.storage.sql.exec("INSERT INTO sent VALUES (?)", text);
      },
    });
  }

  async alarm() {
    await this.relay.alarm();
  }
}

export class Inbox extends DurableObject<Env> {
  relay = new RelayTarget(this.ctx);

  async fetch(request: Request) {
    return this.relay.fetch(request);
  }
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
