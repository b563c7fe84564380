// The request path of a call of one of the relay's operations, built from
// the operation's entry in the protocol's table (protocol.json): what
// RelayRpc sends to a source object, so that a method is the table's and
// not a copy of it.

/**
 * The path a call of `op` (an entry of protocol.json's `source`) asks for,
 * from its arguments: one argument per `{param}` of
 * the path, in order, then an object of the query's parameters, each sent
 * when given. What the arguments mean is the object's to check: it answers
 * a bad one with the code the HTTP API gives it. A path argument that is
 * missing or empty as text (`""`, `[]`) is sent as an escaped NUL, which no parameter accepts, so that
 * it is refused with its parameter's code instead of dropping out of the
 * path and naming another operation (`/parked//` would read as `/parked`).
 */
export function pathOf(op, args) {
  const [template, query] = op.path.split("?");
  let i = 0;
  const segment = (value) => {
    const text = value === undefined || value === null ? "" : String(value);
    return text === "" ? "%00" : encodeURIComponent(text);
  };
  const path = template.replace(/\{\w+\}/g, () => segment(args[i++]));
  const given = args[i] ?? {};
  const pairs = (query ? query.split("&") : [])
    .filter((name) => given[name] !== undefined)
    .map((name) => `${name}=${encodeURIComponent(String(given[name]))}`);
  return pairs.length === 0 ? path : `${path}?${pairs.join("&")}`;
}
