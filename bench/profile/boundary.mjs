// Counts every call across the JS/wasm boundary of the Worker's wasm
// instance, for the benchmark's profile (bench/profile.mjs) only.
//
// Imported before the Worker's own module, it replaces
// `WebAssembly.Instance` with one that wraps every imported function (a
// call from wasm into JS: the runtime's APIs and wasm-bindgen's glue) and
// every exported function (a call from JS into wasm) in a counter. The
// counts live in `globalThis.__relayBoundary`, which the benchmark build's
// `GET /v1/bench/work` reads. The wrappers cost time of their own, so the
// profile's CPU figures come from a run without them.

const counts = { imports: 0, exports: 0, by_name: {} };
globalThis.__relayBoundary = counts;

const Instance = WebAssembly.Instance;

/** `fns` with every function wrapped to count into `counts[field]`. */
function counted(fns, field) {
  const out = {};
  for (const [name, f] of Object.entries(fns)) {
    out[name] =
      typeof f === "function"
        ? function (...args) {
            counts[field] += 1;
            counts.by_name[name] = (counts.by_name[name] ?? 0) + 1;
            return f.apply(this, args);
          }
        : f;
  }
  return out;
}

WebAssembly.Instance = function CountedInstance(module, imports = {}) {
  const wrapped = {};
  for (const [space, fns] of Object.entries(imports)) wrapped[space] = counted(fns, "imports");
  const instance = new Instance(module, wrapped);
  return { exports: counted(instance.exports, "exports") };
};
