// The soak's baseline: the least a JavaScript source/target pair can do to
// deliver a row through a Durable Object outbox, so the relay's memory can
// be read beside what any Worker under the same load holds. Per row the
// source inserts it into its SQLite, calls the target, and deletes it; the
// target writes the value and logs (source, seq) so the driver can check
// that every row arrived once.
//
//   POST /enqueue/{source}  {rows: [{target, key, value}]}  -> {seqs}
//   GET  /stats/{target}    -> {distinct, duplicates}
//   GET  /v1/health         -> ok (the harness's readiness probe)

import { DurableObject } from "cloudflare:workers";

/** The source: an outbox of one table, emptied row by row as it delivers. */
export class PairSource extends DurableObject {
  constructor(ctx, env) {
    super(ctx, env);
    this.sql = ctx.storage.sql;
    this.sql.exec("CREATE TABLE IF NOT EXISTS outbox (seq INTEGER PRIMARY KEY AUTOINCREMENT, target TEXT, key TEXT, value TEXT)");
  }

  async fetch(request) {
    const source = new URL(request.url).searchParams.get("source");
    const { rows } = await request.json();
    const seqs = [];
    for (const row of rows) {
      const value = JSON.stringify(row.value);
      const seq = this.sql.exec("INSERT INTO outbox (target, key, value) VALUES (?, ?, ?) RETURNING seq", row.target, row.key, value).one().seq;
      const stub = this.env.PAIR_TARGET.get(this.env.PAIR_TARGET.idFromName(row.target));
      const reply = await stub.fetch("http://target/apply", {
        method: "POST",
        body: JSON.stringify({ source, seq, key: row.key, value }),
      });
      if (!reply.ok) return new Response(`target ${row.target}: ${reply.status}`, { status: 502 });
      this.sql.exec("DELETE FROM outbox WHERE seq = ?", seq);
      seqs.push(seq);
    }
    return Response.json({ seqs });
  }
}

/** The target: the value, and an arrival count per (source, seq). */
export class PairTarget extends DurableObject {
  constructor(ctx, env) {
    super(ctx, env);
    this.sql = ctx.storage.sql;
    this.sql.exec("CREATE TABLE IF NOT EXISTS kv (key TEXT PRIMARY KEY, value TEXT)");
    this.sql.exec("CREATE TABLE IF NOT EXISTS arrivals (source TEXT, seq INTEGER, n INTEGER, PRIMARY KEY (source, seq))");
  }

  async fetch(request) {
    if (request.method === "GET") {
      const r = this.sql.exec("SELECT COUNT(*) AS distinct_rows, COALESCE(SUM(n - 1), 0) AS duplicates FROM arrivals").one();
      return Response.json({ distinct: r.distinct_rows, duplicates: r.duplicates });
    }
    const { source, seq, key, value } = await request.json();
    this.sql.exec("INSERT INTO kv (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value", key, value);
    this.sql.exec("INSERT INTO arrivals (source, seq, n) VALUES (?, ?, 1) ON CONFLICT (source, seq) DO UPDATE SET n = n + 1", source, seq);
    return new Response("ok");
  }
}

export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    const [, route, name] = url.pathname.split("/");
    if (url.pathname === "/v1/health") return new Response("ok");
    if (route === "enqueue" && request.method === "POST" && name) {
      const stub = env.PAIR_SOURCE.get(env.PAIR_SOURCE.idFromName(name));
      return stub.fetch(`http://source/enqueue?source=${encodeURIComponent(name)}`, { method: "POST", body: await request.text() });
    }
    if (route === "stats" && request.method === "GET" && name) {
      return env.PAIR_TARGET.get(env.PAIR_TARGET.idFromName(name)).fetch("http://target/stats");
    }
    return new Response("no such route", { status: 404 });
  },
};
