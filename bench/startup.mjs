// Startup: how long V8 takes to compile and instantiate the production
// Worker's wasm (build/prod/index_bg.wasm), each time in a fresh Node
// process (Node 22 carries the V8 family workerd runs; workerd itself
// freezes the clocks a Worker can read, so it cannot time this from
// inside). Imports are stubs, which is all instantiation needs: the
// module's start-up runs no relay code.
//
//   node bench/startup.mjs [FILE.wasm] [--runs N]   prints JSON

import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

/** Fresh processes timed. */
export const STARTUP_RUNS = 11;

/** Times one compile and instantiate of `file` in this process. */
function timeOnce(file) {
  const bytes = readFileSync(file);
  const t0 = process.hrtime.bigint();
  const module = new WebAssembly.Module(bytes);
  const t1 = process.hrtime.bigint();
  const imports = {};
  for (const imp of WebAssembly.Module.imports(module)) {
    const space = (imports[imp.module] ??= {});
    if (imp.kind === "function") space[imp.name] = () => undefined;
    else if (imp.kind === "memory") space[imp.name] = new WebAssembly.Memory({ initial: 17 });
    else if (imp.kind === "table") space[imp.name] = new WebAssembly.Table({ initial: 128, element: "anyfunc" });
    else if (imp.kind === "global") space[imp.name] = new WebAssembly.Global({ value: "i32", mutable: false }, 0);
    else if (imp.kind === "tag") space[imp.name] = WebAssembly.JSTag;
  }
  const t2 = process.hrtime.bigint();
  new WebAssembly.Instance(module, imports);
  const t3 = process.hrtime.bigint();
  return { compile_ms: Number(t1 - t0) / 1e6, instantiate_ms: Number(t3 - t2) / 1e6 };
}

/** Median, min and max of `xs`. */
function spread(xs) {
  const s = [...xs].sort((a, b) => a - b);
  const r = (x) => Math.round(x * 100) / 100;
  return { median: r(s[Math.floor(s.length / 2)]), min: r(s[0]), max: r(s[s.length - 1]) };
}

/** `runs` fresh processes timing `file`; the spread of each figure, and the file's size. */
export function measureStartup(file, runs = STARTUP_RUNS) {
  const self = fileURLToPath(import.meta.url);
  const times = [];
  for (let i = 0; i < runs; i++) {
    times.push(JSON.parse(execFileSync(process.execPath, [self, "--once", file], { encoding: "utf8" })));
  }
  return {
    file,
    runs,
    wasm_bytes: readFileSync(file).length,
    compile_ms: spread(times.map((t) => t.compile_ms)),
    instantiate_ms: spread(times.map((t) => t.instantiate_ms)),
    total_ms: spread(times.map((t) => t.compile_ms + t.instantiate_ms)),
  };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const args = process.argv.slice(2);
  if (args[0] === "--once") {
    console.log(JSON.stringify(timeOnce(args[1])));
  } else {
    const root = join(fileURLToPath(import.meta.url), "..", "..");
    const file = args.find((a) => a.endsWith(".wasm")) ?? join(root, "build", "prod", "index_bg.wasm");
    const at = args.indexOf("--runs");
    console.log(JSON.stringify(measureStartup(file, at >= 0 ? Number(args[at + 1]) : STARTUP_RUNS), null, 2));
  }
}
