// Checks what `npm pack` would publish for an npm package, from its
// `npm pack --dry-run --json` output: prints the file count and sizes, and
// fails unless the tarball holds every file the package.json's entry points
// name (`exports`, `types`, `main`) and, following their relative imports,
// every file those reach (the wasm, the wasm-bindgen glue and its snippets,
// the .d.ts files the types import).
//
//   node scripts/check-package.mjs PACKAGE_DIR PACK_JSON
import { existsSync, readFileSync } from "node:fs";
import { join, posix } from "node:path";

const [dir, packJson] = process.argv.slice(2);
if (!dir || !packJson) {
  console.error("usage: node scripts/check-package.mjs PACKAGE_DIR PACK_JSON");
  process.exit(2);
}
const manifest = JSON.parse(readFileSync(join(dir, "package.json"), "utf8"));
const [pack] = JSON.parse(readFileSync(packJson, "utf8"));
const packed = new Set(pack.files.map((f) => posix.normalize(f.path)));

const bytes = (n) => n.toLocaleString("en-US");
console.log(`${pack.filename}: ${pack.entryCount} files, ${bytes(pack.size)} bytes packed, ${bytes(pack.unpackedSize)} unpacked`);

// Every path string under `exports` (conditions nest), and the top-level fields.
const entries = [];
const walk = (v) => {
  if (typeof v === "string") entries.push(v);
  else if (v && typeof v === "object") Object.values(v).forEach(walk);
};
walk(manifest.exports);
for (const field of ["types", "typings", "main", "module"]) walk(manifest[field]);

// The relative specifiers a JavaScript or declaration file imports.
const IMPORT = /(?:\bfrom\s*|\bimport\s*\(?\s*)["'](\.{1,2}\/[^"']+)["']/g;
const specifiers = (text) => [...text.matchAll(IMPORT)].map((m) => m[1]);

// A declaration file's "./x.js" names "./x.d.ts"; anything else names itself.
const resolve = (from, spec) => {
  const path = posix.normalize(posix.join(posix.dirname(from), spec));
  if (from.endsWith(".d.ts") && path.endsWith(".js")) return path.replace(/\.js$/, ".d.ts");
  return path;
};

const needed = new Map(); // path -> who names it
const queue = entries.map((e) => [posix.normalize(e), "package.json"]);
while (queue.length) {
  const [path, by] = queue.shift();
  if (needed.has(path)) continue;
  needed.set(path, by);
  if (!/\.(m?js|d\.ts)$/.test(path) || !existsSync(join(dir, path))) continue;
  for (const spec of specifiers(readFileSync(join(dir, path), "utf8"))) queue.push([resolve(path, spec), path]);
}

for (const [path, by] of needed) console.log(`  ${packed.has(path) ? "packed " : "MISSING"} ${path} (named by ${by})`);
const problems = [...needed].filter(([path]) => !packed.has(path)).map(([path, by]) => `the tarball lacks ${path} (named by ${by})`);
// A stranger reads the README and the licence before installing.
for (const file of ["README.md", "LICENSE"]) if (!packed.has(file)) problems.push(`the tarball lacks ${file}`);
// The package is nothing without its wasm, its JavaScript and its types.
for (const kind of [".wasm", ".js", ".d.ts"]) {
  if (![...needed.keys()].some((p) => p.endsWith(kind))) problems.push(`no ${kind} file is reached from the entry points`);
}
if (problems.length) {
  console.error(`${manifest.name}: ${problems.join("; ")}`);
  process.exit(1);
}
