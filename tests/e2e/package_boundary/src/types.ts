// Type tests of the package's callbacks, checked by `tsc --strict` (npm run
// typecheck, and tests/e2e/package_boundary.test.mjs): each line below marked
// as an expected error must be refused, or tsc fails on the unused directive.
// Never bundled: the Worker's entry does not import it.

import { RelayError, RelaySource, RelayTarget, type Enqueued, type Row, type SourceStatus } from "../../../../packages/durable-relay/src/index.js";

export function callbacks(ctx: DurableObjectState, source: RelaySource) {
  // Synchronous callbacks are what the package runs.
  new RelayTarget(ctx, {
    onApply: (_source, rows) => {
      if (rows.length === 0) throw new Error("no rows");
    },
  });
  source.enqueue([], { writes: (done) => void done.seqs });
  source.enqueue([], {
    writes: () => {
      ctx.storage.sql.exec("SELECT 1");
    },
  });

  // onApply is told the source object's id beside its name: a string, or
  // null for a sender older than ids.
  new RelayTarget(ctx, {
    onApply: (source, _rows, sourceId) => {
      const key: string = sourceId === null ? source : `${source}/${sourceId}`;
      void key;
    },
  });
  // @ts-expect-error: sourceId may be null
  new RelayTarget(ctx, { onApply: (_source, _rows, sourceId) => void (sourceId satisfies string) });

  // An async function returns a promise: refused, inline or named.
  // @ts-expect-error: an async onApply
  new RelayTarget(ctx, { onApply: async () => {} });
  // @ts-expect-error: an async writes
  source.enqueue([], { writes: async () => {} });
  const later = (_done: Enqueued): Promise<void> => Promise.resolve();
  // @ts-expect-error: a function declared to return a promise
  source.enqueue([], { writes: later });
  // @ts-expect-error: a callback returning a value (what it returns is never read)
  source.enqueue([], { writes: () => ctx.storage.sql.exec("SELECT 1") });
}

export function caught(e: unknown): string | undefined {
  // A RelayError is a class: instanceof narrows to it, `code` is an ErrorCode.
  if (e instanceof RelayError) return e.code satisfies string;
  return undefined;
}

/** An Env with two Durable Object bindings and a variable. */
interface TypedEnv {
  CUSTOMERS: DurableObjectNamespace;
  ORDERS: DurableObjectNamespace;
  RELAY_PLAN: string;
}

export function bindings(ctx: DurableObjectState, env: TypedEnv, untyped: any, plain: unknown, empty: {}) {
  // `targets` names one of the Env's Durable Object bindings.
  new RelaySource(ctx, env, { targets: "CUSTOMERS" });
  // @ts-expect-error: a misspelt binding
  new RelaySource(ctx, env, { targets: "CUSTOMERZ" });
  // @ts-expect-error: a variable, not a Durable Object binding
  new RelaySource(ctx, env, { targets: "RELAY_PLAN" });
  // An untyped env takes any name (checked at run time).
  new RelaySource(ctx, untyped, { targets: "ANYTHING" });
  new RelaySource(ctx, plain, { targets: "ANYTHING" });
  new RelaySource(ctx, empty, { targets: "ANYTHING" });
}

export function camelCase(status: SourceStatus, done: Enqueued) {
  // What the package returns is camelCase; the caller's data keeps its keys.
  void (status.queuedRows satisfies number);
  void (status.config.settings.dedupHorizonMs satisfies number);
  void (status.lastAlarm?.rowsDelivered satisfies number | undefined);
  void (status.parkedTargets["any_target"] satisfies number | undefined);
  void (done.lastSeq satisfies number | undefined);
  // @ts-expect-error: no snake_case field in a reply
  void status.queued_rows;
  // @ts-expect-error: no snake_case field in a reply
  void done.last_seq;
  const row: Row = { target: "t", puts: [["a_key", { snake_case: 1 }]], delayMs: 5 };
  // @ts-expect-error: a row takes delayMs, not delay_ms
  const wire: Row = { target: "t", delay_ms: 5 };
  return [row, wire];
}
