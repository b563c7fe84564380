//! The documentation against the code, so it cannot drift:
//!
//! - the code blocks of the README, the book and the npm package's README
//!   are the examples' own code or the modules' doc tests (which
//!   `scripts/test` compiles and runs), verbatim; the package README names
//!   every method of its classes;
//! - the tables of limits, budget presets, error codes and the objects'
//!   protocol are written from the code (`RELAY_BLESS=1` rewrites them after
//!   a deliberate change);
//! - the configuration table names every variable and binding the code
//!   reads, and no other, and its defaults and ranges are the parser's;
//! - the changelog's newest release records this build's wire protocol and
//!   schema versions;
//! - the book's chapters chain in the order its index and the README list;
//! - every relative link in every Markdown file resolves, anchors included.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use durable_relay::core::ErrorCode;
use durable_relay::protocol::PROTOCOL_VERSION;
use durable_relay::testing::upgrade::Component;
use durable_relay::RelayConfig;

#[path = "support/files.rs"]
mod files;
use files::{files_under, root};

fn read(path: &str) -> String {
    std::fs::read_to_string(root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn bless() -> bool {
    std::env::var("RELAY_BLESS").is_ok_and(|v| v == "1")
}

// ---- snippets ---------------------------------------------------------------

/// The regions of `text` marked `// readme: <name>` ... `// readme: end`.
fn regions(text: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        let Some(name) = line.trim().strip_prefix("// readme: ") else { continue };
        assert_ne!(name, "end", "an end marker without a start");
        let mut block = String::new();
        for inner in lines.by_ref() {
            if inner.trim() == "// readme: end" {
                break;
            }
            block.push_str(inner);
            block.push('\n');
        }
        assert!(out.insert(name.to_owned(), block).is_none(), "region {name} marked twice");
    }
    out
}

/// Checks that `doc` holds `path`'s region `name` as a whole code block.
fn assert_snippet(doc: &str, path: &str, name: &str, fence: &str) {
    let marked = regions(&read(path));
    let block = marked.get(name).unwrap_or_else(|| panic!("{path} marks no region {name}"));
    // The block may open with lines of its own (an import) before a blank line.
    let text = read(doc);
    assert!(
        text.contains(&format!("```{fence}\n{block}```")) || text.contains(&format!("\n\n{block}```")),
        "{doc} lacks {path}'s {name} region ending a ```{fence} block, verbatim:\n{block}"
    );
}

/// The visible lines of the first code block of `path`'s module doc (a
/// doc test, which `cargo test` compiles and runs): `//! ` stripped, the
/// hidden `# ` lines dropped.
fn doc_example(path: &str) -> String {
    let mut out = String::new();
    let mut inside = false;
    for line in read(path).lines().map_while(|l| l.strip_prefix("//!")) {
        let line = line.strip_prefix(' ').unwrap_or(line);
        if line.starts_with("```") {
            if inside {
                return out;
            }
            inside = true;
        } else if inside && !(line.starts_with("# ") || line == "#") {
            out.push_str(line);
            out.push('\n');
        }
    }
    panic!("{path}: no code block in the module doc");
}

#[test]
fn the_rust_blocks_of_the_book_are_doc_tests() {
    assert_snippet(
        "docs/partitioned-sources.md",
        "crates/relay/examples/partitioned_client.rs",
        "partitioned",
        "rust",
    );
    for (doc, path) in [
        ("docs/calling-from-workers.md", "crates/relay/src/client.rs"),
        ("docs/development.md", "crates/sql/src/sim/mod.rs"),
        ("docs/embedding-rust.md", "crates/relay/src/prelude.rs"),
    ] {
        let code = doc_example(path);
        assert!(
            read(doc).contains(&format!("```rust\n{code}```")),
            "{doc} lacks {path}'s doc test, verbatim:\n{code}"
        );
    }
}

#[test]
fn the_embedding_snippets_are_the_examples_own_code() {
    assert_snippet("README.md", "examples/embedded/src/notes.rs", "quick start", "rust");
    assert_snippet("README.md", "tests/e2e/stranger/src/index.ts", "quick start", "ts");
    assert_snippet("docs/embedding-typescript.md", "tests/e2e/stranger/src/index.ts", "quick start", "ts");
    assert_snippet("README.md", "examples/producer/src/index.ts", "rpc", "ts");
    assert_snippet(
        "packages/durable-relay/README.md",
        "tests/e2e/stranger/src/index.ts",
        "quick start",
        "ts",
    );
    for name in ["rpc tour", "stub"] {
        assert_snippet("docs/calling-from-workers.md", "examples/producer/src/tour.ts", name, "ts");
    }
    assert_snippet(
        "docs/embedding-typescript.md",
        "tests/e2e/shared_alarm/src/index.ts",
        "shared alarm",
        "ts",
    );
    assert_snippet("docs/embedding-typescript.md", "tests/e2e/agents/src/index.ts", "agent", "ts");
    assert_snippet("docs/embedding-rust.md", "examples/embedded/src/lib.rs", "shared alarm", "rust");
    for name in ["source", "target"] {
        assert_snippet("docs/embedding-rust.md", "examples/embedded/src/lib.rs", name, "rust");
        assert_snippet("docs/embedding-typescript.md", "examples/typescript/src/index.ts", name, "ts");
    }
}

/// The ```rust blocks of `text`, each without its fences.
fn rust_blocks(text: &str) -> Vec<String> {
    text.split("```rust\n")
        .skip(1)
        .filter_map(|rest| rest.split_once("```").map(|(b, _)| b.to_owned()))
        .collect()
}

#[test]
fn every_rust_block_of_the_readme_and_the_book_is_compiled() {
    // What the build compiles: the examples' marked regions and the doc
    // tests above; the scratch chapter's front door is built by
    // tests/e2e/scratch.test.mjs.
    let mut compiled: Vec<String> = [
        "examples/embedded/src/lib.rs",
        "examples/embedded/src/notes.rs",
        "crates/relay/examples/partitioned_client.rs",
    ]
    .iter()
    .flat_map(|path| regions(&read(path)).into_values())
    .collect();
    for path in ["crates/relay/src/client.rs", "crates/sql/src/sim/mod.rs", "crates/relay/src/prelude.rs"] {
        compiled.push(doc_example(path));
    }
    let scratch = read("docs/embedding-rust.md");
    let scratch = scratch.split("\n## Your own crate from scratch\n").nth(1).expect("the scratch section");
    compiled.extend(rust_blocks(scratch.split("\n## ").next().unwrap_or_default()));
    let mut docs = files_under(&root().join("docs"), &|_| false);
    docs.retain(|p| p.extension().is_some_and(|e| e == "md"));
    docs.push(root().join("README.md"));
    assert!(docs.len() > 10, "the book's chapters: {docs:?}");
    for doc in docs {
        for block in rust_blocks(&std::fs::read_to_string(&doc).expect("a chapter")) {
            assert!(
                compiled.contains(&block),
                "{} shows a Rust block nothing compiles; make it an example's region or a doc test:\n{block}",
                doc.display()
            );
        }
    }
}

/// The tables a freshly opened `component` creates, by name.
fn tables_of(open: impl FnOnce(&durable_relay::sim::SqliteSql)) -> Vec<String> {
    use durable_relay::Sql;
    let sql = durable_relay::sim::SqliteSql::memory().expect("an in-memory database");
    open(&sql);
    let rows = sql
        .rows("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'", vec![])
        .expect("the schema's tables");
    rows.iter().map(|r| r.text(0).expect("a table name")).collect()
}

#[test]
fn the_development_chapter_names_every_table_and_every_test_file() {
    use durable_relay::{Inbox, Outbox, OutboxSettings};
    let chapter = read("docs/development.md");
    let storage = chapter.split("\nStorage: ").nth(1).expect("the layout's Storage paragraph");
    let storage = storage.split("\n\n").next().unwrap_or_default();
    let mut tables =
        tables_of(|sql| drop(Outbox::open(sql.clone(), OutboxSettings::default()).expect("an outbox")));
    tables.extend(tables_of(|sql| drop(Inbox::open(sql.clone()).expect("an inbox"))));
    assert!(tables.len() >= 8, "{tables:?}");
    let missing: Vec<String> = tables.into_iter().filter(|t| !storage.contains(&format!("`{t}"))).collect();
    assert!(missing.is_empty(), "docs/development.md's Storage paragraph lacks {missing:?}");
    let mut tests = files_under(&root().join("tests/e2e"), &|_| true);
    tests.retain(|p| p.to_string_lossy().ends_with(".test.mjs"));
    for package in packages() {
        let dir = package.join("tests");
        if dir.is_dir() {
            tests.extend(
                files_under(&dir, &|_| true).into_iter().filter(|p| p.extension().is_some_and(|e| e == "rs")),
            );
        }
    }
    assert!(tests.len() > 40, "{tests:?}");
    let unsaid: Vec<String> = tests
        .iter()
        .map(|t| t.file_name().expect("a file").to_string_lossy().into_owned())
        .filter(|name| !chapter.contains(&format!("`{name}`")) && !chapter.contains(&format!("/{name}`")))
        .collect();
    assert!(unsaid.is_empty(), "docs/development.md does not say what these check: {unsaid:?}");
}

#[test]
fn the_npm_packages_readme_names_every_method_of_its_classes() {
    let types = read("packages/durable-relay/src/index.d.ts");
    let readme = read("packages/durable-relay/README.md");
    let mut methods = 0;
    // RelaySource's methods written from the protocol's table are in the
    // interface it merges.
    for class in ["class RelaySource", "interface RelaySourceOperations", "class RelayTarget"] {
        let start = types.find(class).unwrap_or_else(|| panic!("index.d.ts: {class}"));
        let body = &types[start..start + types[start..].find("\n}").expect("the class's end")];
        for line in body.lines() {
            let Some(name) = line.strip_prefix("  ").and_then(|l| l.split_once('(')).map(|(n, _)| n) else {
                continue;
            };
            if name.chars().all(char::is_alphanumeric) && name != "constructor" {
                assert!(readme.contains(&format!("`{name}(")), "the package README lacks {name}");
                methods += 1;
            }
        }
    }
    assert!(methods >= 12, "found only {methods} methods");
}

// ---- generated tables -------------------------------------------------------

/// Checks (or, blessing, rewrites) the region of `doc` between
/// `<!-- generated: name -->` and `<!-- end: name -->`.
fn generated(doc: &str, name: &str, body: &str) {
    let text = read(doc);
    let start =
        format!("<!-- generated: {name} (crates/relay/tests/docs.rs; RELAY_BLESS=1 rewrites it) -->\n");
    let end = format!("<!-- end: {name} -->");
    let from = text.find(&start).unwrap_or_else(|| panic!("{doc} lacks the marker {start}")) + start.len();
    let to = from + text[from..].find(&end).unwrap_or_else(|| panic!("{doc} lacks {end}"));
    if bless() {
        let now = format!("{}{body}{}", &text[..from], &text[to..]);
        std::fs::write(root().join(doc), now).unwrap();
        return;
    }
    assert!(text[from..to] == *body, "{doc}: the {name} table is stale (RELAY_BLESS=1 rewrites it)");
}

/// Text for a table cell: rustdoc's intra-doc link brackets dropped, pipes escaped.
fn cell(text: &str) -> String {
    text.replace("[`", "`").replace("`]", "`").replace('|', "\\|")
}

#[test]
fn the_error_code_table_is_written_from_the_code() {
    let mut body = String::from("| code | meaning |\n| --- | --- |\n");
    for code in ErrorCode::ALL {
        let doc = code.doc().expect("a known code has its documentation");
        body.push_str(&format!("| `{}` | {} |\n", code.as_str(), cell(doc)));
    }
    generated("docs/http-api.md", "error codes", &body);
}

#[test]
fn the_budget_presets_table_is_written_from_the_code() {
    use durable_relay::core::RelayBudget;
    let mut body = String::from(
        "| preset | targets per fire | fires per alarm | calls per target per fire | base rows per fire \
         | rows per target call | subrequest cap per alarm | work per alarm |\n| --- | --- | --- | --- | --- | --- | --- | --- |\n",
    );
    for (name, b) in [
        ("RelayBudget::FREE", RelayBudget::FREE),
        ("RelayBudget::PAID", RelayBudget::PAID),
        ("RelayBudget::default()", RelayBudget::default()),
    ] {
        let cells =
            [b.targets_per_fire, b.fires_per_alarm, b.calls_per_target, b.rows_per_fire, b.batch_rows]
                .map(|v| thousands(u64::from(v)))
                .join(" | ");
        body.push_str(&format!(
            "| `{name}` | {cells} | {} | {} |\n",
            thousands(u64::from(b.subrequests_per_alarm)),
            thousands(u64::from(b.work_per_alarm))
        ));
    }
    generated("docs/limits.md", "budgets", &body);
}

#[test]
fn the_object_protocol_table_is_written_from_the_protocol() {
    use durable_relay::protocol::{Reach, SOURCE_OPERATIONS, TARGET_OPERATIONS};
    let mut body = String::from("| object | operation | method and path | who may call it | RPC method |\n| --- | --- | --- | --- | --- |\n");
    for (object, table) in [("source", SOURCE_OPERATIONS), ("target", TARGET_OPERATIONS)] {
        for op in table {
            let reach = match op.reach {
                Reach::Public => "public",
                Reach::Router => "a partitioned source's router",
                Reach::Source => "a source's alarm",
            };
            let rpc = op.rpc.map_or("—".to_owned(), |r| format!("`{}`", r.method));
            body.push_str(&format!(
                "| {object} | `{}` | `{} {}` | {reach} | {rpc} |\n",
                op.name, op.method, op.path
            ));
        }
    }
    generated("docs/calling-from-workers.md", "object protocol", &body);
}

/// An integer constant as the source defines it.
struct Constant {
    name: String,
    expr: String,
    doc: String,
    place: &'static str,
}

/// The source files whose integer constants are limits: every file under
/// `crates/*/src`, except the test plumbing (`testing/`), the simulator
/// (`sim/`) and the benchmark builds (`bench/`), which ship no limit.
fn limit_files() -> Vec<(PathBuf, &'static str)> {
    let plumbing = |name: &str| ["testing", "sim", "bench"].contains(&name);
    let mut out = Vec::new();
    for package in packages() {
        let place = if package == root() {
            "reference Worker"
        } else if package.ends_with("crates/core") {
            "engine"
        } else if package.ends_with("crates/js") {
            continue;
        } else {
            "library"
        };
        let files = files_under(&package.join("src"), &plumbing);
        out.extend(
            files.into_iter().filter(|p| p.extension().is_some_and(|e| e == "rs")).map(|p| (p, place)),
        );
    }
    // The limits module first, then the rest in path order.
    out.sort_by_key(|(path, _)| (!path.ends_with("core/src/limits.rs"), path.clone()));
    out
}

/// Every top-level `pub const NAME: <integer> = EXPR;` of `text`, with the
/// first sentence of its doc comment.
fn constants(text: &str, place: &'static str) -> Vec<Constant> {
    let mut out = Vec::new();
    let mut doc: Vec<&str> = Vec::new();
    for line in text.lines() {
        if let Some(d) = line.strip_prefix("///") {
            doc.push(d.trim());
            continue;
        }
        let Some(rest) = line.strip_prefix("pub const ") else {
            if !line.starts_with("#[") {
                doc.clear();
            }
            continue;
        };
        let (name, rest) = rest.split_once(": ").expect("a typed constant");
        let (ty, expr) = rest.split_once(" = ").expect("a constant's value");
        // A version number is not a limit.
        if ["u8", "u16", "u32", "u64", "usize"].contains(&ty) && !name.ends_with("_VERSION") {
            let expr = expr.strip_suffix(';').expect("a one-line constant").to_owned();
            let joined = doc.join(" ");
            let first = joined.split_inclusive(". ").next().unwrap_or("").trim_end().to_owned();
            out.push(Constant { name: name.to_owned(), expr, doc: first, place });
        }
        doc.clear();
    }
    out
}

/// Evaluates a constant expression of integers, `_` separators, other
/// constants, parentheses, `+ - * <<` (the forms the limits use).
fn eval(expr: &str, known: &BTreeMap<String, u64>) -> u64 {
    let tokens: Vec<String> = {
        let mut t = Vec::new();
        let mut chars = expr.chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                ' ' => {}
                '<' => {
                    assert_eq!(chars.next(), Some('<'), "{expr}");
                    t.push("<<".to_owned());
                }
                '(' | ')' | '+' | '-' | '*' => t.push(c.to_string()),
                _ => {
                    let mut word = c.to_string();
                    while chars.peek().is_some_and(|n| n.is_alphanumeric() || *n == '_' || *n == ':') {
                        word.push(chars.next().unwrap());
                    }
                    t.push(word);
                }
            }
        }
        t
    };
    let mut pos = 0;
    let value = shift(&tokens, &mut pos, known);
    assert_eq!(pos, tokens.len(), "cannot evaluate {expr}");
    value
}

fn shift(t: &[String], pos: &mut usize, known: &BTreeMap<String, u64>) -> u64 {
    let mut v = sum(t, pos, known);
    while t.get(*pos).is_some_and(|s| s == "<<") {
        *pos += 1;
        v <<= sum(t, pos, known);
    }
    v
}

fn sum(t: &[String], pos: &mut usize, known: &BTreeMap<String, u64>) -> u64 {
    let mut v = product(t, pos, known);
    while let Some(op) = t.get(*pos).filter(|s| *s == "+" || *s == "-").cloned() {
        *pos += 1;
        let r = product(t, pos, known);
        v = if op == "+" { v + r } else { v - r };
    }
    v
}

fn product(t: &[String], pos: &mut usize, known: &BTreeMap<String, u64>) -> u64 {
    let mut v = atom(t, pos, known);
    while t.get(*pos).is_some_and(|s| s == "*") {
        *pos += 1;
        v *= atom(t, pos, known);
    }
    v
}

fn atom(t: &[String], pos: &mut usize, known: &BTreeMap<String, u64>) -> u64 {
    let token = t[*pos].clone();
    *pos += 1;
    if token == "(" {
        let v = shift(t, pos, known);
        assert_eq!(t[*pos], ")");
        *pos += 1;
        return v;
    }
    if let Ok(n) = token.replace('_', "").parse::<u64>() {
        return n;
    }
    let name = token.rsplit("::").next().unwrap();
    *known.get(name).unwrap_or_else(|| panic!("unknown constant {token}"))
}

/// `1234567` as `1,234,567`.
fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A value as a reader wants it: with its unit when the name gives one.
fn shown(name: &str, v: u64) -> String {
    let n = thousands(v);
    if v > u64::from(u32::MAX) && (v + 1).is_power_of_two() {
        return format!("2^{} - 1 ({n})", (v + 1).trailing_zeros());
    }
    if name.ends_with("_MS") && v >= 1_000 {
        let unit =
            [(86_400_000 * 2, 86_400_000, "days"), (3_600_000, 3_600_000, "h"), (60_000, 60_000, "min")]
                .into_iter()
                .find(|(at_least, per, _)| v >= *at_least && v.is_multiple_of(*per));
        return match unit {
            Some((_, per, u)) => format!("{n} ({} {u})", v / per),
            None if v.is_multiple_of(1_000) => format!("{n} ({} s)", v / 1_000),
            None => n,
        };
    }
    if name.ends_with("_BYTES") && v >= 1024 && v.is_power_of_two() {
        let (per, u) = [(1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")]
            .into_iter()
            .find(|(per, _)| v >= *per)
            .unwrap();
        return format!("{n} ({} {u})", v / per);
    }
    n
}

#[test]
fn the_limits_table_is_written_from_the_code() {
    let mut all = Vec::new();
    for (path, place) in limit_files() {
        all.extend(constants(&std::fs::read_to_string(&path).unwrap(), place));
    }
    let mut known = BTreeMap::new();
    // Constants may name constants of other files: evaluate until all are known.
    while known.len() < all.len() {
        let before = known.len();
        for c in &all {
            let ready = c
                .expr
                .split(|ch: char| !(ch.is_alphanumeric() || ch == '_' || ch == ':'))
                .filter(|w| w.starts_with(|ch: char| ch.is_ascii_uppercase()))
                .all(|w| known.contains_key(w.rsplit("::").next().unwrap()));
            if ready && !known.contains_key(&c.name) {
                known.insert(c.name.clone(), eval(&c.expr, &known));
            }
        }
        assert!(known.len() > before, "constants that name unknown constants");
    }
    assert!(all.len() >= 80, "found only {} limits: is the parser still reading them?", all.len());
    assert_eq!(known["SEQ_MAX"], durable_relay::core::SEQ_MAX, "the evaluator agrees with the compiler");
    assert_eq!(known["MAX_ROW_BYTES"], u64::from(durable_relay::core::MAX_ROW_BYTES));
    let mut body = String::from("| constant | value | where | what it bounds |\n| --- | --- | --- | --- |\n");
    for c in &all {
        assert!(!c.doc.is_empty(), "{} has no doc comment", c.name);
        let value = shown(&c.name, known[&c.name]);
        body.push_str(&format!("| `{}` | {value} | {} | {} |\n", c.name, c.place, cell(&c.doc)));
    }
    generated("docs/limits.md", "limits", &body);
}

// ---- configuration ----------------------------------------------------------

/// The rows of the configuration table: every `RELAY_*` name in the first
/// cell, with the row's default and meaning cells.
fn config_rows() -> Vec<(Vec<String>, String, String)> {
    let text = read("docs/configuration.md");
    let mut out = Vec::new();
    for line in text.lines().filter(|l| l.starts_with("| ") && l.contains("`RELAY_")) {
        let cells: Vec<&str> = line.trim_matches('|').split(" | ").map(str::trim).collect();
        assert_eq!(cells.len(), 3, "a configuration row has three cells: {line}");
        let names = cells[0]
            .split('`')
            .filter(|w| w.starts_with("RELAY_") && !w.contains(' '))
            .map(str::to_owned)
            .collect();
        out.push((names, cells[1].to_owned(), cells[2].to_owned()));
    }
    out
}

/// Every Rust package's directory: the root (the reference Worker) and each
/// of `crates/`.
fn packages() -> Vec<PathBuf> {
    let mut out = vec![root()];
    let crates = std::fs::read_dir(root().join("crates")).expect("crates/");
    out.extend(
        crates.map(|entry| entry.expect("an entry").path()).filter(|p| p.join("Cargo.toml").is_file()),
    );
    out.sort();
    out
}

/// Every `"RELAY_..."` string the shipped code reads.
fn names_in_code() -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let dirs = ["crates/relay/src", "src", "crates/js/src", "packages/durable-relay/src"];
    for path in dirs.iter().flat_map(|d| files_under(&root().join(d), &|_| false)) {
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        for piece in text.split('"').skip(1).step_by(2) {
            let is_name = piece.len() > 6 && piece.chars().all(|c| c.is_ascii_uppercase() || c == '_');
            if piece.starts_with("RELAY_") && is_name {
                out.insert(piece.to_owned());
            }
        }
    }
    out
}

#[test]
fn the_configuration_table_names_every_variable_the_code_reads_and_no_other() {
    let documented: BTreeSet<String> = config_rows().into_iter().flat_map(|(n, _, _)| n).collect();
    let read_by_code = names_in_code();
    assert!(read_by_code.contains("RELAY_PLAN") && read_by_code.len() > 20, "{read_by_code:?}");
    let missing: Vec<_> = read_by_code.difference(&documented).collect();
    let stale: Vec<_> = documented.difference(&read_by_code).collect();
    assert!(missing.is_empty(), "docs/configuration.md lacks {missing:?}");
    assert!(stale.is_empty(), "docs/configuration.md names what no code reads: {stale:?}");
}

fn config(vars: &[(&str, String)]) -> Result<RelayConfig, durable_relay::config::ConfigError> {
    RelayConfig::from_vars(|name| vars.iter().find(|(n, _)| *n == name).map(|(_, v)| v.clone()))
}

fn number(text: &str) -> Option<u64> {
    text.replace(',', "").parse().ok()
}

#[test]
fn the_configuration_tables_defaults_and_ranges_are_the_parsers() {
    let unset = config(&[]).unwrap();
    let mut checked = 0;
    for (names, default, meaning) in config_rows() {
        let [name] = names.as_slice() else { continue };
        // Only what the relay's configuration reads (others are the Worker's).
        let Err(refused) = config(&[(name, "not a value".into())]) else { continue };
        assert_eq!(refused.var, name.as_str(), "{name}: a bad value is refused naming it");
        let default = default.trim_matches('`');
        if let Some(v) = number(default).map(|v| v.to_string()).or(Some(default.to_owned())) {
            if let Ok(set) = config(&[(name, v.clone())]) {
                assert_eq!(set, unset, "{name}: the documented default {v} is not the default");
                checked += 1;
            }
        }
        let Some(range) = meaning.rsplit_once('(').and_then(|(_, r)| r.split_once(')')).map(|(r, _)| r)
        else {
            continue;
        };
        let Some((lo, hi)) = range.split_once("..=").and_then(|(l, h)| Some((number(l)?, number(h)?))) else {
            continue;
        };
        for (v, ok) in [(lo, true), (hi, true), (hi + 1, false)]
            .into_iter()
            .chain(lo.checked_sub(1).map(|below| (below, false)))
        {
            let got = config(&[(name, v.to_string())]);
            assert_eq!(got.is_ok(), ok, "{name} = {v}: documented range {range}, got {got:?}");
            if let Err(e) = got {
                assert_eq!(e.var, name.as_str());
            }
        }
        checked += 1;
    }
    assert!(checked >= 12, "checked only {checked} defaults and ranges");
}

// ---- changelog --------------------------------------------------------------

#[test]
fn the_changelog_records_this_builds_protocol_and_schema_versions() {
    let text = read("CHANGELOG.md");
    let newest = text.split("\n## ").nth(1).expect("a release section");
    let wanted = [
        format!("| wire protocol | {PROTOCOL_VERSION} |"),
        format!("| source schema (`{}`) | {} |", Component::Source.schema_name(), Component::Source.newest()),
        format!("| target schema (`{}`) | {} |", Component::Target.schema_name(), Component::Target.newest()),
        format!(
            "| source schema a build must know to run on this release's (`{}`) | {} |",
            Component::Source.schema_name(),
            Component::Source.required()
        ),
        format!(
            "| target schema a build must know to run on this release's (`{}`) | {} |",
            Component::Target.schema_name(),
            Component::Target.required()
        ),
    ];
    for row in wanted {
        assert!(newest.contains(&row), "the newest CHANGELOG section lacks the row {row}");
    }
}

// ---- the book ---------------------------------------------------------------

/// The chapters in the order docs/README.md lists them.
fn chapters() -> Vec<String> {
    read("docs/README.md")
        .lines()
        .filter(|l| l.split_once(". [").is_some_and(|(n, _)| n.parse::<u32>().is_ok()))
        .filter_map(|l| l.split_once("](").and_then(|(_, r)| r.split_once(')')).map(|(f, _)| f.to_owned()))
        .collect()
}

#[test]
fn the_book_reads_in_order_and_the_readme_lists_it_the_same_way() {
    let order = chapters();
    assert!(order.len() >= 12, "docs/README.md lists {order:?}");
    let on_disk: BTreeSet<String> = std::fs::read_dir(root().join("docs"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".md") && n != "README.md")
        .collect();
    assert_eq!(order.iter().cloned().collect::<BTreeSet<_>>(), on_disk, "every chapter listed once");
    for pair in order.windows(2) {
        let text = read(&format!("docs/{}", pair[0]));
        let next = text.lines().rfind(|l| l.starts_with("Next: ")).unwrap_or_default();
        assert!(
            next.ends_with(&format!("]({}).", pair[1])),
            "docs/{} should end with Next: {}",
            pair[0],
            pair[1]
        );
    }
    let readme = read("README.md");
    let section = readme.split("\n## Documentation").nth(1).expect("the README's Documentation section");
    let toc: Vec<String> = section
        .lines()
        .filter(|l| l.split_once(". [").is_some_and(|(n, _)| n.parse::<u32>().is_ok()))
        .filter_map(|l| {
            l.split_once("](docs/").and_then(|(_, r)| r.split_once(')')).map(|(f, _)| f.to_owned())
        })
        .collect();
    assert_eq!(toc, order, "the README's table of contents is the book's");
}

// ---- links ------------------------------------------------------------------

/// Every Markdown file of the repository, outside build output and
/// dependencies.
fn markdown_files() -> Vec<PathBuf> {
    let skip = |name: &str| {
        ["node_modules", ".git", ".wrangler", "build", "dist", "tmp"].contains(&name)
            || name.starts_with("target")
    };
    files_under(&root(), &skip).into_iter().filter(|p| p.extension().is_some_and(|e| e == "md")).collect()
}

/// GitHub's anchor for a heading: lower case, spaces to `-`, punctuation
/// other than `-` and `_` dropped.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The anchors of a Markdown file's headings (outside code blocks).
fn anchors(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut seen: BTreeMap<String, u32> = BTreeMap::new();
    let mut in_code = false;
    for line in text.lines() {
        if line.starts_with("```") {
            in_code = !in_code;
        }
        if in_code || !line.starts_with('#') {
            continue;
        }
        let base = slug(line.trim_start_matches('#'));
        let n = seen.entry(base.clone()).or_insert(0);
        out.insert(if *n == 0 { base.clone() } else { format!("{base}-{n}") });
        *n += 1;
    }
    out
}

/// The targets of a text's inline links and images, outside code.
fn links(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut in_code = false;
    for line in text.lines() {
        if line.starts_with("```") {
            in_code = !in_code;
        }
        if in_code {
            continue;
        }
        // Inline code spans hold no links.
        let prose: String = line.split('`').step_by(2).collect::<Vec<_>>().join(" ");
        let mut rest = prose.as_str();
        while let Some(i) = rest.find("](") {
            let after = &rest[i + 2..];
            let Some(end) = after.find(')') else { break };
            out.push(after[..end].to_owned());
            rest = &after[end..];
        }
    }
    out
}

#[test]
fn every_relative_link_in_the_docs_resolves() {
    let files = markdown_files();
    assert!(files.len() >= 15, "found only {} Markdown files", files.len());
    let mut broken = Vec::new();
    let mut checked = 0;
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        for link in links(&text) {
            if link.contains("://") || link.starts_with("mailto:") {
                continue;
            }
            let (path, anchor) = link.split_once('#').unwrap_or((&link, ""));
            let target = if path.is_empty() { file.clone() } else { file.parent().unwrap().join(path) };
            checked += 1;
            if !target.exists() {
                broken.push(format!("{}: {link} (no such file)", file.display()));
                continue;
            }
            let is_md = target.extension().is_some_and(|e| e == "md");
            if !anchor.is_empty()
                && is_md
                && !anchors(&std::fs::read_to_string(&target).unwrap()).contains(anchor)
            {
                broken.push(format!("{}: {link} (no such heading)", file.display()));
            }
        }
    }
    assert!(checked >= 50, "checked only {checked} links");
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}
