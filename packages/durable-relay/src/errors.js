// The one error class the package throws and rejects with, so a caller
// tells the relay's refusals from its own failures by `instanceof`.

/**
 * A refusal of the caller's input (or a failure of the relay): `code` and
 * `status` are the HTTP API's, the message leads with the code. Every
 * error the package throws or rejects with is one, so `instanceof
 * RelayError` catches them; `name` is "RelayError" too.
 */
export class RelayError extends Error {
  /**
   * @param {string} code the stable error code
   * @param {string} message what was wrong
   * @param {number} [status] the HTTP status the same refusal has (400)
   * @param {number} [retryAfterS] seconds to wait before a retry (with `outbox_full`)
   */
  constructor(code, message, status = 400, retryAfterS = undefined) {
    super(`${code}: ${message}`);
    this.name = "RelayError";
    this.code = code;
    this.status = status;
    if (retryAfterS !== undefined) this.retryAfterS = retryAfterS;
  }
}

/** A refusal of the caller's input (400). */
export function relayError(code, message) {
  return new RelayError(code, message);
}
