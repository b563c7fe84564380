// The book's "your own crate from scratch", followed verbatim in a fresh
// directory: its Cargo.toml and wrangler.toml blocks, and a src/lib.rs that
// is the README's Rust quick start followed by the chapter's front door.
// Built with worker-build as the chapter says (offline, with the tools
// scripts/bootstrap installed), then run in workerd until a note arrives.
// A block the chapter changes is the block this test builds: no copy of it
// lives here.

import { test, after } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { homedir, tmpdir } from "node:os";
import { join } from "node:path";
import { ROOT, startWrangler, until } from "./harness.mjs";

const dir = mkdtempSync(join(tmpdir(), "relay-scratch-"));
let app;
after(async () => {
  await app?.stop();
  rmSync(dir, { recursive: true, force: true });
});

/** The chapter's dependency line, which the test points at this checkout. */
const DEPENDENCY = 'durable-relay = { path = "../durable-relay/crates/relay" }';

/** The fenced blocks of `markdown` with info string `fence`, in order. */
function blocks(markdown, fence) {
  return [...markdown.matchAll(new RegExp("```" + fence + "\\n([\\s\\S]*?)```", "g"))].map((m) => m[1]);
}

/** The one block of `list` whose text satisfies `pred`, or a failure naming `what`. */
function only(list, pred, what) {
  const found = list.filter(pred);
  assert.equal(found.length, 1, `the chapter should hold exactly one ${what} block`);
  return found[0];
}

test("a crate built from the chapter alone compiles and relays a note in workerd", { timeout: 900_000 }, async () => {
  const chapter = readFileSync(join(ROOT, "docs", "embedding-rust.md"), "utf8");
  const scratch = chapter.split("\n## Your own crate from scratch\n")[1];
  assert.ok(scratch, "docs/embedding-rust.md has a section 'Your own crate from scratch'");
  const section = scratch.split("\n## ")[0];
  const toml = blocks(section, "toml");
  const manifest = only(toml, (b) => b.startsWith("[package]"), "Cargo.toml");
  const wrangler = only(toml, (b) => b.startsWith("name ="), "wrangler.toml");
  const front = only(blocks(section, "rust"), (b) => b.includes("#[event(fetch)]"), "front door");
  const readme = readFileSync(join(ROOT, "README.md"), "utf8");
  const quick = only(blocks(readme, "rust"), (b) => b.startsWith("use durable_relay::prelude::*;"), "README quick start");

  assert.ok(manifest.includes(DEPENDENCY), `the manifest names the library as ${DEPENDENCY}`);
  writeFileSync(join(dir, "Cargo.toml"), manifest.replace(DEPENDENCY, `durable-relay = { path = ${JSON.stringify(join(ROOT, "crates", "relay"))} }`));
  writeFileSync(join(dir, "wrangler.toml"), wrangler);
  mkdirSync(join(dir, "src"));
  writeFileSync(join(dir, "src", "lib.rs"), `${quick}\n${front}`);
  // The versions this suite tested: offline, cargo resolves only what it has.
  copyFileSync(join(ROOT, "Cargo.lock"), join(dir, "Cargo.lock"));

  // The tools scripts/bootstrap installed (cargo's bin holds worker-build
  // and wasm-bindgen), as scripts/build-worker hands them to worker-build;
  // wrangler dev inherits them when it runs the chapter's build command.
  const cargoBin = join(homedir(), ".cargo", "bin");
  Object.assign(process.env, {
    PATH: `${join(ROOT, "node_modules", ".bin")}:${cargoBin}:${process.env.PATH}`,
    WASM_BINDGEN_BIN: join(cargoBin, "wasm-bindgen"),
    ESBUILD_BIN: join(ROOT, "node_modules", "esbuild", "bin", "esbuild"),
    CARGO_NET_OFFLINE: "true",
    // Its own directory under the workspace's target: later runs reuse the build.
    CARGO_TARGET_DIR: join(ROOT, "target", "scratch"),
  });
  const started = Date.now();
  try {
    execFileSync("worker-build", ["--release"], { cwd: dir, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
  } catch (e) {
    const errors = (String(e.stderr).match(/^error(\[E\d+\])?:/gm) ?? []).length;
    assert.fail(`the chapter's crate did not build (${errors} compile errors):\n${e.stderr}`);
  }
  console.log(`the chapter's crate built in ${((Date.now() - started) / 1000).toFixed(1)} s`);

  app = await startWrangler({ configs: [join(dir, "wrangler.toml")], persistDir: join(dir, "state"), ready: "/status", cwd: dir });
  const sent = await app.api("POST", "/notes/ada", "hello", { raw: true });
  assert.equal(sent.status, 200, sent.text);
  assert.deepEqual(sent.body.seqs, [1]);
  const keys = async () => (await app.api("GET", "/inboxes/ada/keys")).body?.keys;
  await until(async () => (await keys())?.length === 1, "the note to reach the inbox");
  assert.deepEqual(await keys(), [{ key: "note", value: "hello" }]);
  const status = (await app.api("GET", "/status")).body;
  assert.equal(status.delivered_rows, 1, "the source counts the note delivered");
});
