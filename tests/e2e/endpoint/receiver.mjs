// A webhook receiver for the endpoint tests: a plain Node HTTP server that
// verifies every request's Standard Webhooks signature as a receiver's
// library would (HMAC-SHA256 over id.timestamp.body, five minutes either
// way), keeps each webhook-id's first body (what a receiver that
// deduplicates applies), and can be told how to answer the next requests:
// fail, stall, throttle with Retry-After, or drop the connection.

import { createServer } from "node:http";
import { createHmac, timingSafeEqual } from "node:crypto";

/** The tolerance every Standard Webhooks library uses, seconds. */
const TOLERANCE_S = 300;

/** Whether `signatures` (the header's space-separated list) holds a valid `v1` signature of the request. */
export function verify(secret, id, timestamp, body, signatures) {
  const key = Buffer.from(secret.replace(/^whsec_/, ""), "base64");
  const want = createHmac("sha256", key).update(`${id}.${timestamp}.${body}`).digest();
  return String(signatures ?? "")
    .split(" ")
    .some((s) => {
      const [version, b64] = s.split(",");
      const got = Buffer.from(b64 ?? "", "base64");
      return version === "v1" && got.length === want.length && timingSafeEqual(got, want);
    });
}

export class Receiver {
  constructor(secret) {
    this.secret = secret;
    /** Every request as it arrived: id, timestamp, body, whether its signature held, headers; when it began, was read (`at`) and ended. */
    this.requests = [];
    /** Each webhook-id's payload, first arrival only, in arrival order: what a deduplicating receiver applied. */
    this.applied = new Map();
    /** How to answer the next requests, one entry each (then `otherwise`). */
    this.script = [];
    /** How to answer once the script is used up. */
    this.otherwise = 200;
    /** Requests being answered now, and the most ever at once. */
    this.inFlight = 0;
    this.maxInFlight = 0;
  }

  static async start(secret) {
    const r = new Receiver(secret);
    r.server = createServer((req, res) => r.handle(req, res));
    await new Promise((ok) => r.server.listen(0, "127.0.0.1", ok));
    r.url = `http://127.0.0.1:${r.server.address().port}/hook`;
    return r;
  }

  async stop() {
    this.server.closeAllConnections();
    await new Promise((ok) => this.server.close(ok));
  }

  /** Answers the next requests as listed: a status, { status, headers, delay_ms }, "stall" (never answers) or "close" (drops the connection). */
  next(...answers) {
    this.script.push(...answers);
  }

  /** The payloads applied once each, in the order first received (a batch's rows in its order). */
  payloads() {
    return [...this.applied.values()].flatMap((body) => [JSON.parse(body)].flat());
  }

  async handle(req, res) {
    const started = Date.now();
    this.inFlight++;
    this.maxInFlight = Math.max(this.maxInFlight, this.inFlight);
    const chunks = [];
    for await (const c of req) chunks.push(c);
    const body = Buffer.concat(chunks).toString("utf8");
    const id = req.headers["webhook-id"];
    const timestamp = req.headers["webhook-timestamp"];
    const fresh = Math.abs(Date.now() / 1000 - Number(timestamp)) <= TOLERANCE_S;
    const valid = fresh && verify(this.secret, id, timestamp, body, req.headers["webhook-signature"]);
    const answer = this.script.shift() ?? this.otherwise;
    const request = { id, timestamp, body, valid, answer, headers: req.headers, started, at: Date.now(), ended: null };
    this.requests.push(request);
    const done = () => {
      this.inFlight--;
      request.ended = Date.now();
    };
    if (answer === "stall") {
      req.socket.on("close", done);
      return;
    }
    if (answer === "close") {
      done();
      req.socket.destroy();
      return;
    }
    const { status, headers = {}, delay_ms = 0 } = typeof answer === "number" ? { status: answer } : answer;
    if (delay_ms) await new Promise((ok) => setTimeout(ok, delay_ms));
    if (valid && status >= 200 && status < 300 && !this.applied.has(id)) this.applied.set(id, body);
    done();
    res.writeHead(valid ? status : 401, { "content-type": "text/plain", ...headers });
    res.end(valid ? "" : "bad signature");
  }
}
