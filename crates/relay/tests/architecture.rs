//! The book against the code: every name that ARCHITECTURE.md, the READMEs
//! and the chapters of docs/ put in backticks and that reads as code (a
//! file or folder, a `Type`, a `Type::member`, a `module::item`) must exist
//! in the sources, so a rename or a move that the pages miss fails here
//! rather than misleading the next reader. And the house's shape: no
//! shipped file over its bound, and no two files of a crate that import
//! each other in a loop.

use std::collections::BTreeSet;
use std::path::PathBuf;

/// The pages this test holds against the code besides the chapters of
/// docs/ (the changelog is history: it names what was).
const MAPS: [&str; 3] = ["ARCHITECTURE.md", "README.md", "packages/durable-relay/README.md"];

/// Every page: [`MAPS`] and each chapter of docs/.
fn pages() -> Vec<String> {
    let mut pages: Vec<String> = MAPS.iter().map(|m| m.to_string()).collect();
    let docs = std::fs::read_dir(root().join("docs")).expect("docs/");
    let mut chapters: Vec<String> = docs
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with(".md"))
        .map(|n| format!("docs/{n}"))
        .collect();
    chapters.sort();
    pages.extend(chapters);
    pages
}

/// Backticked words of the maps that read as code but are not the
/// project's own names: the platform's, the language's, other crates'.
const FOREIGN: [&str; 27] = [
    "Agent",
    "Context",
    "DurableObject::new",
    "Env",
    "Method",
    "None",
    "Response",
    "State",
    "Infinity",
    "Map",
    "Set",
    "worker::signal::is_near_cpu_limit",
    "node_modules/",
    "NaN",
    "build/screenshots/",
    "serde_json::Value",
    "serde_json::json",
    "clippy::unwrap_used",
    "RelayRpc.enqueue",
    "Value",
    "LifecycleCapability",
    "WorkerEntrypoint",
    "DurableObject",
    "SqlStorage",
    "ObjectNamespace",
    "Date",
    "Request",
];

/// Files that a build or a benchmark run writes, which the pages name but
/// a clean checkout does not hold.
const OUTPUTS: [&str; 2] = ["build/prod/entry.mjs", "results.json"];

#[path = "support/circles.rs"]
mod circles;
#[path = "support/files.rs"]
mod files;
use files::{files_under, root};

/// Every source file of the project (Rust, JavaScript, TypeScript types,
/// scripts), outside dependencies and build output, relative to the root.
fn sources() -> Vec<String> {
    let skip = |name: &str| {
        ["node_modules", ".git", ".wrangler", "build", "dist", "tmp", ".e2e"].contains(&name)
            || name.starts_with("target")
    };
    let relative =
        |p: PathBuf| p.strip_prefix(root()).expect("under the root").to_string_lossy().replace('\\', "/");
    files_under(&root(), &skip).into_iter().map(relative).collect()
}

/// The backticked spans of `text`, outside fenced code blocks.
fn spans(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut in_code = false;
    for line in text.lines() {
        if line.starts_with("```") {
            in_code = !in_code;
            continue;
        }
        if !in_code {
            out.extend(line.split('`').skip(1).step_by(2).map(str::to_owned));
        }
    }
    out
}

/// Whether `word` reads as a path in the repository.
fn is_path(word: &str) -> bool {
    let file =
        [".rs", ".mjs", ".js", ".ts", ".json", ".toml", ".md", ".sql"].iter().any(|e| word.ends_with(e));
    let folder = word.ends_with('/') && word.len() > 1 && !word.contains(' ');
    (file || folder) && !word.contains(' ') && !word.starts_with('/') && !word.contains('{')
}

/// Whether `word` reads as a Rust name of ours: `Type`, `Type::member`,
/// `module::item` (at least one `::`, or a capitalised identifier).
fn is_name(word: &str) -> bool {
    let idents = word.split("::").collect::<Vec<_>>();
    let all_idents =
        idents.iter().all(|s| !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'));
    let capitalised = word.chars().next().is_some_and(|c| c.is_ascii_uppercase())
        && word.chars().any(|c| c.is_ascii_lowercase());
    all_idents && (idents.len() > 1 || capitalised)
}

/// Whether `path` names a file or a folder of `files` (as a whole path or
/// as the tail of one).
fn path_exists(path: &str, files: &[String]) -> bool {
    let path = path.trim_end_matches('/');
    files.iter().any(|f| {
        f == path
            || f.ends_with(&format!("/{path}"))
            || f.starts_with(&format!("{path}/"))
            || f.contains(&format!("/{path}/"))
    })
}

/// Whether the sources define `ident` (a type, trait, function, constant,
/// module, macro, enum variant, name given to JavaScript, JavaScript
/// class or method, or TypeScript interface of that name).
fn defined(ident: &str, texts: &str) -> bool {
    let forms = [
        format!("struct {ident}"),
        format!("enum {ident}"),
        format!("trait {ident}"),
        format!("type {ident}"),
        format!("fn {ident}"),
        format!("const {ident}"),
        format!("static {ident}"),
        format!("mod {ident}"),
        format!("class {ident}"),
        format!("interface {ident}"),
        format!("macro_rules! {ident}"),
        format!("js_name = {ident}"),
        format!("  {ident}("),
        format!("  async {ident}("),
        format!("    {ident} {{"),
        format!("    {ident},"),
    ];
    forms.iter().any(|form| {
        texts.match_indices(form.as_str()).any(|(at, _)| {
            let next = texts[at + form.len()..].chars().next().unwrap_or(' ');
            form.ends_with('(') || !(next.is_ascii_alphanumeric() || next == '_')
        })
    })
}

/// Whether a `module::item` or `Type::member` name resolves: its last part
/// is defined, and each part before it is a module (a file or folder of
/// that name), a crate's short name, or a defined type.
fn name_exists(word: &str, files: &[String], texts: &str) -> bool {
    let parts: Vec<&str> = word.split("::").collect();
    let (last, before) = parts.split_last().expect("a name has a part");
    let module = |m: &str| {
        ["core", "crate", "durable_relay", "durable_relay_sql", "durable_relay_protocol"].contains(&m)
            || files.iter().any(|f| f.ends_with(&format!("/{m}.rs")) || f.contains(&format!("/{m}/")))
    };
    defined(last, texts) && before.iter().all(|p| module(p) || defined(p, texts))
}

#[test]
fn every_code_name_in_the_book_exists_in_the_code() {
    let files = sources();
    let code: Vec<&String> = files
        .iter()
        .filter(|f| [".rs", ".mjs", ".js", ".ts"].iter().any(|e| f.ends_with(e)))
        .filter(|f| !f.ends_with(".d.ts") || f.starts_with("packages/") || f.starts_with("clients/"))
        .collect();
    let texts: String = code
        .iter()
        .map(|f| std::fs::read_to_string(root().join(f)).unwrap_or_default())
        .collect::<Vec<_>>()
        .join("\n");
    let mut checked = 0u32;
    let mut missing = BTreeSet::new();
    for map in pages() {
        let map = map.as_str();
        let text = std::fs::read_to_string(root().join(map)).expect("the page");
        for word in spans(&text) {
            let word = word.trim_end_matches("()").trim_end_matches('!');
            if FOREIGN.contains(&word) || OUTPUTS.contains(&word) {
                continue;
            }
            let found = if is_path(word) {
                path_exists(word, &files)
            } else if is_name(word) {
                name_exists(word, &files, &texts)
            } else {
                continue;
            };
            checked += 1;
            if !found {
                missing.insert(format!("{map}: `{word}`"));
            }
        }
    }
    eprintln!("{checked} names of code checked on {} pages", pages().len());
    assert!(checked > 100, "the pages name at least a hundred pieces of code; {checked} were read");
    assert!(missing.is_empty(), "names in the maps that the code no longer has:\n{}", {
        let list: Vec<String> = missing.into_iter().collect();
        list.join("\n")
    });
}

#[test]
fn a_renamed_item_is_caught() {
    let files =
        vec!["crates/sql/src/store/outbox/mod.rs".to_owned(), "crates/core/src/schedule.rs".to_owned()];
    let texts =
        "pub struct Outbox;\nimpl Outbox {\n    pub fn enqueue_plain() {}\n}\npub fn next_alarm_at() {}";
    assert!(name_exists("Outbox::enqueue_plain", &files, texts));
    assert!(!name_exists("Outbox::enqueue_fenced", &files, texts), "a method that is gone");
    assert!(name_exists("schedule::next_alarm_at", &files, texts));
    assert!(!name_exists("scheduler::next_alarm_at", &files, texts), "a module that is gone");
    assert!(path_exists("store/outbox/", &files) && path_exists("outbox/mod.rs", &files));
    assert!(!path_exists("store/inbox.rs", &files), "a file that is gone");
    assert!(!defined("Outbo", texts), "a prefix of a name is not the name");
}

/// Longest a source file may be, lines: past it a file holds more than one
/// concept and a newcomer cannot read it at once. Tests are exempt (a
/// suite of scenarios reads well long); functions have their own bound,
/// `too-many-lines-threshold` in clippy.toml.
const SOURCE_FILE_LINES_MAX: usize = 500;

/// Whether `path` is shipped source (not a test, a bench or a build).
fn is_shipped_source(path: &str) -> bool {
    let rust = path.ends_with(".rs")
        && (path.starts_with("src/") || (path.starts_with("crates/") && path.contains("/src/")))
        && !path.ends_with("/tests.rs")
        && !path.ends_with("_tests.rs");
    let script = path.starts_with("packages/durable-relay/src/") && path.ends_with(".js");
    rust || script
}

#[test]
fn no_shipped_source_file_is_longer_than_the_bound() {
    let long: Vec<String> = sources()
        .into_iter()
        .filter(|f| is_shipped_source(f))
        .filter_map(|f| {
            let lines = std::fs::read_to_string(root().join(&f)).unwrap_or_default().lines().count();
            (lines > SOURCE_FILE_LINES_MAX).then(|| format!("{f}: {lines} lines"))
        })
        .collect();
    assert!(
        long.is_empty(),
        "over {SOURCE_FILE_LINES_MAX} lines; split along the concepts they hold:\n{}",
        long.join("\n")
    );
}

#[test]
fn tests_and_builds_are_not_held_to_the_source_bound() {
    assert!(is_shipped_source("crates/sql/src/source.rs"));
    assert!(is_shipped_source("src/routes.rs"));
    assert!(is_shipped_source("packages/durable-relay/src/index.js"));
    assert!(!is_shipped_source("crates/core/src/fire_tests.rs"));
    assert!(!is_shipped_source("crates/sql/src/source/tests.rs"));
    assert!(!is_shipped_source("crates/sql/tests/scenarios.rs"));
    assert!(!is_shipped_source("bench/soak/soak.mjs"));
}

/// Each crate's source folder: within one, no file may import a file that
/// imports it back (between crates, Cargo already refuses a loop).
const CRATE_SOURCES: [&str; 6] =
    ["crates/core/src", "crates/protocol/src", "crates/sql/src", "crates/relay/src", "crates/js/src", "src"];

/// The circles of the crate at `src`, each with the arrows that tie it.
fn circles_of(src: &std::path::Path) -> Vec<String> {
    let arrows = circles::arrows(src);
    circles::circles(&arrows)
        .into_iter()
        .map(|circle| {
            let ties: Vec<String> = arrows
                .iter()
                .filter(|((from, to), _)| circle.contains(from) && circle.contains(to))
                .map(|((from, to), names)| format!("  {from} -> {to}: {names:?}"))
                .collect();
            format!("{circle:?}\n{}", ties.join("\n"))
        })
        .collect()
}

#[test]
fn no_file_imports_a_file_that_imports_it_back() {
    let mut found = Vec::new();
    for krate in CRATE_SOURCES {
        let src = root().join(krate);
        assert!(src.is_dir(), "{krate}");
        found.extend(circles_of(&src).into_iter().map(|c| format!("{krate}: {c}")));
    }
    assert!(
        found.is_empty(),
        "files that import each other in a loop; move what ties them where one of them no longer needs the other:\n{}",
        found.join("\n")
    );
}

/// A crate written to a scratch folder: `files` as (path under src, text).
fn scratch_crate(name: &str, files: &[(&str, &str)]) -> PathBuf {
    let src = std::env::temp_dir().join(format!("relay-circles-{name}-{}", std::process::id())).join("src");
    for (path, text) in files {
        let file = src.join(path);
        std::fs::create_dir_all(file.parent().expect("a folder")).expect("scratch folder");
        std::fs::write(file, text).expect("scratch file");
    }
    src
}

#[test]
fn a_circle_is_caught_through_a_re_export_and_a_submodule_using_its_parent_is_none() {
    let two = scratch_crate(
        "two",
        &[
            ("lib.rs", "mod a;\nmod b;\n"),
            ("a.rs", "use crate::b::B;\npub struct A;\n"),
            ("b.rs", "pub struct B;\nfn f(_: crate::a::A) {}\n"),
        ],
    );
    assert_eq!(circles_of(&two).len(), 1, "a.rs and b.rs take each other's names");

    let re_exported = scratch_crate(
        "reexported",
        &[
            ("lib.rs", "mod c;\nmod m;\npub use m::M;\n"),
            ("m.rs", "use crate::c::C;\npub struct M;\n"),
            ("c.rs", "use crate::M;\npub struct C;\n"),
        ],
    );
    let found = circles_of(&re_exported);
    assert_eq!(found.len(), 1, "c.rs takes M through lib.rs's re-export: {found:?}");
    assert!(found[0].contains("c.rs -> m.rs"), "{found:?}");

    let nested = scratch_crate(
        "nested",
        &[
            ("lib.rs", "mod p;\n"),
            ("p.rs", "mod q;\npub use q::Q;\npub struct P;\nfn f(_: Q) {}\n"),
            ("p/q.rs", "use super::P;\npub struct Q;\n#[cfg(test)]\nmod tests {\n    use crate::p::P;\n}\n"),
        ],
    );
    assert_eq!(circles_of(&nested), Vec::<String>::new(), "q.rs is part of p.rs, which declares it");
}
