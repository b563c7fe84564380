// A call of one of the relay's operations as a request and its reply: the
// path, built from the operation's entry in the protocol's table
// (operations.js), and the reply read back or thrown as an error. What the
// package's RelaySource serves itself and the reference Worker's RelayRpc
// sends to a source object, so that a method is the table's and not a copy
// of it.

/**
 * The path a call of `op` (an entry of `OPERATIONS`) asks for,
 * from its arguments: one argument per `{param}` of
 * the path, in order, then an object of the query's parameters, each sent
 * when given. What the arguments mean is the object's to check: it answers
 * a bad one with the code the HTTP API gives it. A path argument that is
 * missing or empty as text (`""`, `[]`) is sent as an escaped NUL, which no parameter accepts, so that
 * it is refused with its parameter's code instead of dropping out of the
 * path and naming another operation (`/parked//` would read as `/parked`).
 * A lone surrogate, which has no UTF-8 and would make encodeURIComponent
 * throw, is sent as U+FFFD, which no parameter accepts either.
 */
export function pathOf(op, args) {
  const [template, query] = op.path.split("?");
  let i = 0;
  const segment = (value) => {
    const text = value === undefined || value === null ? "" : String(value);
    return text === "" ? "%00" : encode(text);
  };
  const path = template.replace(/\{\w+\}/g, () => segment(args[i++]));
  const given = args[i] ?? {};
  const pairs = (query ? query.split("&") : [])
    .filter((name) => given[name] !== undefined)
    .map((name) => `${name}=${encode(String(given[name]))}`);
  return pairs.length === 0 ? path : `${path}?${pairs.join("&")}`;
}

/** `text` escaped for a URL, its lone surrogates as U+FFFD. */
function encode(text) {
  return encodeURIComponent(text.toWellFormed());
}

/**
 * The JSON of a reply to a call, or its refusal thrown: `refusal(code,
 * message, status, retryAfterS, committed)` builds the error, with the HTTP
 * API's code and status, the reply's retry delay and, at a partitioned
 * source, the positions that committed.
 */
export async function replyOf(res, refusal) {
  const text = await res.text();
  let parsed;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw refusal("internal", text, res.status);
  }
  if (res.ok) return parsed;
  const retry = res.headers.get("retry-after");
  const error = parsed?.error ?? { code: "internal", message: text };
  throw refusal(error.code, error.message, res.status, retry === null ? undefined : Number(retry), error.committed);
}
