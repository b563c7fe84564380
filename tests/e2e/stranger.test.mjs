// The npm package installed as a stranger would: `npm pack`, the tarball
// installed into a fresh directory holding only a minimal TypeScript Worker
// (tests/e2e/stranger: one .ts file whose source and target classes are
// replaced by the README's quick start, beside the TypeScript chapter's
// wrangler.toml and tsconfig.json, all extracted from the docs),
// type-checked with tsc, bundled with wrangler deploy --dry-run, and run
// with wrangler dev until a row arrives.

import { test, after } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { cpSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ROOT, startWrangler, until } from "./harness.mjs";

const BIN = join(ROOT, "node_modules", ".bin");
const dir = mkdtempSync(join(tmpdir(), "relay-stranger-"));
let app;
after(async () => {
  await app?.stop();
  rmSync(dir, { recursive: true, force: true });
});

/** Runs `cmd` (npm from the machine, the rest from the repository's node_modules) in `cwd`. */
const run = (cmd, args, cwd = dir) =>
  execFileSync(cmd === "npm" ? "npm" : join(BIN, cmd), args, {
    cwd,
    encoding: "utf8",
    env: { ...process.env, PATH: `${BIN}:${process.env.PATH}` },
  });

/** `source` with its quick-start region replaced by the README's TypeScript quick start. */
function withReadmeQuickStart(source) {
  const readme = readFileSync(join(ROOT, "README.md"), "utf8");
  const block = [...readme.matchAll(/```ts\n([\s\S]*?)```/g)].map((m) => m[1]).find((b) => b.includes("new RelaySource("));
  assert.ok(block, "the README has a TypeScript quick start");
  const region = /(\/\/ readme: quick start\n)[\s\S]*?(\/\/ readme: end\n)/;
  assert.match(source, region, "the fixture marks its quick-start region");
  return source.replace(region, (_, open, close) => `${open}${block}${close}`);
}

/** The TypeScript chapter's block in `lang` that holds `needle`. */
function chapterBlock(lang, needle) {
  const chapter = readFileSync(join(ROOT, "docs", "embedding-typescript.md"), "utf8");
  const blocks = [...chapter.matchAll(new RegExp("```" + lang + "\\n([\\s\\S]*?)```", "g"))].map((m) => m[1]);
  const block = blocks.find((b) => b.includes(needle));
  assert.ok(block, `the TypeScript chapter has a ${lang} block with ${needle}`);
  return block;
}

test("the packed package installs, type-checks, bundles and relays in a stranger's Worker", async () => {
  const packed = run("npm", ["pack", "--pack-destination", dir, "--silent"], join(ROOT, "packages", "durable-relay")).trim();
  cpSync(join(ROOT, "tests", "e2e", "stranger"), dir, { recursive: true });
  // The quick start is the README's own block, extracted: what a newcomer
  // copies is what this builds, beside the fixture's router.
  writeFileSync(join(dir, "src", "index.ts"), withReadmeQuickStart(readFileSync(join(dir, "src", "index.ts"), "utf8")));
  writeFileSync(join(dir, "wrangler.toml"), chapterBlock("toml", 'new_sqlite_classes = ["Notes", "Inbox"]'));
  writeFileSync(join(dir, "tsconfig.json"), chapterBlock("json", '"compilerOptions"'));
  writeFileSync(join(dir, "package.json"), JSON.stringify({ name: "stranger", private: true, type: "module" }));
  run("npm", ["install", "--prefer-offline", "--no-audit", "--no-fund", join(dir, packed)]);
  assert.deepEqual(readdirSync(join(dir, "node_modules", "durable-relay", "dist")).sort(), [
    "relay.d.ts", "relay.js", "relay_bg.wasm", "snippets", "wire.d.ts",
  ]);

  // The chapter's dev dependencies, as the repository has them installed
  // (the registry may be out of reach here): the types by a link.
  mkdirSync(join(dir, "node_modules", "@cloudflare"), { recursive: true });
  symlinkSync(join(ROOT, "node_modules", "@cloudflare", "workers-types"), join(dir, "node_modules", "@cloudflare", "workers-types"));
  run("tsc", ["-p", join(dir, "tsconfig.json")]);

  const dry = run("wrangler", ["deploy", "--dry-run", "--outdir", join(dir, "out")]);
  const size = dry.match(/Total Upload: ([\d.]+ KiB) \/ gzip: ([\d.]+ KiB)/);
  assert.ok(size, dry);
  console.log(`stranger's upload: ${size[1]}, gzip ${size[2]}`);

  app = await startWrangler({ configs: [join(dir, "wrangler.toml")], persistDir: join(dir, "state"), ready: "/health" });
  const sent = await app.api("POST", "/?to=ada", "hello", { raw: true });
  assert.equal(sent.status, 200, sent.text);
  assert.deepEqual(sent.body.seqs, [1]);
  await until(async () => (await app.api("GET", "/?to=ada")).body?.keys?.length === 1, "the note to arrive");
  assert.deepEqual((await app.api("GET", "/?to=ada")).body.keys, [{ key: "note", value: "hello" }]);
  assert.deepEqual(app.panics(), []);
});
