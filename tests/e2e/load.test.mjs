// A load test in workerd: concurrent enqueuers, a failing target that is
// parked and redriven mid-run, a target that stays parked, and a final
// audit: every accepted row applied exactly once, in order, or sitting in
// the parked list, in order.

import { test } from "node:test";
import assert from "node:assert/strict";
import { Relay, put, sleep } from "./harness.mjs";

test("load: concurrent enqueuers with a target parked and redriven mid-run; every row applied once or parked, in order", async () => {
  const relay = await Relay.start({ vars: { RELAY_PARK_AFTER_FAILED_CYCLES: "2" } });
  const src = "load";
  const targets = ["l-a", "l-b", "l-c", "l-d", "l-e", "l-flaky", "l-dead"];
  const sent = new Map(targets.map((t) => [t, []]));
  try {
    await relay.api("POST", "/v1/targets/l-flaky/faults", { reject: true });
    await relay.api("POST", "/v1/targets/l-dead/faults", { reject: true, permanent: true });
    let redriven = false;
    let stop = false;
    const operator = (async () => {
      while (!stop) {
        const ps = (await relay.api("GET", `/v1/sources/${src}/parked`)).body.targets;
        if (!redriven && ps.some((t) => t.target === "l-flaky" && t.parked)) {
          await relay.api("POST", "/v1/targets/l-flaky/faults", { reject: false });
          const r = await relay.api("POST", `/v1/sources/${src}/parked/l-flaky/redrive`);
          console.log(`redrove l-flaky mid-run: ${r.body.rows} rows`);
          redriven = true;
        }
        await sleep(100);
      }
    })();
    const writer = async (w) => {
      for (let r = 0; r < 25; r++) {
        const rows = targets.map((t) => put(t, `w${w}`, { w, r }));
        const { seqs } = await relay.enqueue(src, rows);
        seqs.forEach((seq, i) => sent.get(targets[i]).push(seq));
        if (r % 5 === 4) await sleep(50);
      }
    };
    const started = Date.now();
    await Promise.all([0, 1, 2, 3].map(writer));
    while (!redriven) {
      assert.ok(Date.now() - started < 60_000, "l-flaky was never parked");
      await sleep(100);
    }
    const s = await relay.drained(src, 90_000);
    stop = true;
    await operator;
    const accepted = [...sent.values()].reduce((n, l) => n + l.length, 0);
    let applied = 0;
    for (const t of targets) {
      const expected = sent.get(t).sort((a, b) => a - b);
      const log = await relay.log(t, src);
      if (t === "l-dead") {
        assert.deepEqual(log, [], "a parked target applied nothing");
        const rows = (await relay.api("GET", `/v1/sources/${src}/parked/l-dead?limit=500`)).body.rows;
        assert.deepEqual(rows.map((r) => r.seq), expected, "l-dead's rows sit parked, in order");
      } else {
        assert.deepEqual(log, expected, `${t}: exactly once, in order`);
        applied += log.length;
      }
    }
    const parkedRows = sent.get("l-dead").length;
    console.log(
      `load audit: accepted ${accepted}, applied once in order ${applied}, parked in order ${parkedRows}, ` +
        `duplicates 0, lost ${accepted - applied - parkedRows}; alarms ${s.alarms}, subrequests ${s.subrequests}, ` +
        `rows written per delivered row ${s.sql_rows_written_per_delivered_row.toFixed(2)}`,
    );
    assert.equal(applied + parkedRows, accepted);
    assert.equal(s.parked_rows, parkedRows);
    assert.equal(s.delivered_rows, applied);
    assert.deepEqual(await relay.audit(), [], "the relay's own audit");
  } finally {
    await relay.stop();
  }
});
