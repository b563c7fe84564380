// The callbacks a caller hands the relay (`writes`, `onApply`, `onPut`,
// `onDelete`): they must be functions, and synchronous, since they run
// inside the relay's synchronous transaction; a target's three hooks are
// composed here into the one handler the engine calls per apply.

import { relayError } from "./errors.js";

/** `value` if it is a callback (or absent); refused otherwise. */
export function handler(value, what) {
  if (value !== undefined && typeof value !== "function") throw relayError("invalid_request", `${what} must be a function`);
  return value;
}

/**
 * `callback` as the engine runs it, inside a synchronous transaction: a
 * result that is a promise (any thenable) is refused by a throw, which
 * rolls the transaction back with whatever the callback wrote before its
 * first `await`. Its rejection is handled here, so it is never reported as
 * unhandled; `refused(error, args)` hears of each refusal.
 */
export function synchronous(callback, what, refused) {
  if (callback === undefined) return undefined;
  return (...args) => {
    const result = callback(...args);
    if (typeof result?.then !== "function") return;
    Promise.resolve(result).catch(() => {});
    const error = relayError(
      "async_callback",
      `${what} returned a promise; it runs inside the relay's synchronous transaction, so it must be synchronous ` +
        "(what an async function writes after its first await would land outside the transaction)",
    );
    refused(error, args);
    throw error;
  };
}

/** `callback`, with what it throws told to `threw` before it is thrown on. */
export function keeping(callback, threw) {
  if (callback === undefined) return undefined;
  return (...args) => {
    try {
      return callback(...args);
    } catch (e) {
      threw(e);
      throw e;
    }
  };
}

/**
 * Logs a target's callback that returned a promise, at the target where the
 * mistake is: the source only sees its apply fail (`hook_refused`, with
 * this message) and retries it until it parks the target.
 */
function logRefusal(callback, source, seqs, error) {
  console.error(JSON.stringify({ event: "relay_async_callback", callback, source, seqs, message: error.message }));
}

/**
 * The one handler the engine calls per apply, from the three a target may
 * be given: `onApply` with the batch, then `onPut` and `onDelete` with each
 * key of each row, in the order the target applies them (a row's puts,
 * then its deletes). Each is refused as `async_callback` if it answers a
 * promise, and the refusal is logged naming it.
 */
export function applying(onApply, onPut, onDelete) {
  const batch = synchronous(onApply, "onApply", (e, [source, rows]) =>
    logRefusal("onApply", source, Array.isArray(rows) ? rows.map((row) => row.seq) : [], e),
  );
  const put = synchronous(onPut, "onPut", (e, [, , from]) => logRefusal("onPut", from.source, [from.seq], e));
  const del = synchronous(onDelete, "onDelete", (e, [, from]) => logRefusal("onDelete", from.source, [from.seq], e));
  if (put === undefined && del === undefined) return batch;
  return (source, rows, sourceId) => {
    batch?.(source, rows, sourceId);
    for (const row of rows) {
      const from = { source, sourceId, seq: row.seq };
      for (const [key, value] of row.effects.puts) put?.(key, value, from);
      for (const key of row.effects.deletes) del?.(key, from);
    }
  };
}
