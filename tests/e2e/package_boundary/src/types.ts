// Type tests of the package's callbacks, checked by `tsc --strict` (npm run
// typecheck, and tests/e2e/package_boundary.test.mjs): each line below marked
// as an expected error must be refused, or tsc fails on the unused directive.
// Never bundled: the Worker's entry does not import it.

import { RelayError, RelaySource, RelayTarget, type Enqueued } from "../../../../packages/durable-relay/src/index.js";

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
