//! Every request and reply type the operations table names is a type of
//! the `wire` module: defined there, or the engine's and re-exported from
//! it. A caller that talks to the relay then finds every body in one
//! place, without the storage crate; an operation whose reply is left in
//! the store, or a body renamed on one side only, fails here.

use std::collections::BTreeSet;
use std::path::Path;

use durable_relay_protocol::{Operation, SOURCE_OPERATIONS, TARGET_OPERATIONS};

/// The text of every Rust file under `dir`, joined.
fn texts_under(dir: &Path) -> String {
    let mut out = String::new();
    let mut entries: Vec<_> =
        std::fs::read_dir(dir).expect("the folder").flatten().map(|e| e.path()).collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            out.push_str(&texts_under(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push_str(&std::fs::read_to_string(&path).expect("a source file"));
            out.push('\n');
        }
    }
    out
}

/// The `wire` module's sources.
fn wire_text() -> String {
    texts_under(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src/wire"))
}

/// Every request and reply type the two tables name.
fn named_types() -> BTreeSet<&'static str> {
    let table = SOURCE_OPERATIONS.iter().chain(TARGET_OPERATIONS);
    table.flat_map(|op: &Operation| op.request.into_iter().chain([op.reply])).collect()
}

/// The identifiers of `text`, in order.
fn words(text: &str) -> Vec<&str> {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).filter(|w| !w.is_empty()).collect()
}

/// Whether `text` defines `name` (a struct or an enum) or re-exports the
/// engine's type of that name.
fn offers(text: &str, name: &str) -> bool {
    let defined = words(text).windows(2).any(|w| matches!(w, ["struct" | "enum", n] if *n == name));
    let reexported = text.match_indices("pub use crate::core::").any(|(at, _)| {
        let statement = text[at..].split(';').next().unwrap_or_default();
        words(statement).contains(&name)
    });
    defined || reexported
}

#[test]
fn every_request_and_reply_the_table_names_is_a_wire_type() {
    let text = wire_text();
    let names = named_types();
    assert!(names.len() > 20, "the tables name their bodies; {} were read", names.len());
    let missing: Vec<&str> = names.iter().copied().filter(|n| !offers(&text, n)).collect();
    assert!(
        missing.is_empty(),
        "bodies the table names that `wire` neither defines nor re-exports: {missing:?}"
    );
}

#[test]
fn a_body_left_elsewhere_is_caught() {
    let text = "pub struct Enqueued {}\npub enum Mode {}\npub use crate::core::{ApplyReply, ApplyRequest};\nuse other::Sealed;";
    assert!(offers(text, "Enqueued") && offers(text, "Mode") && offers(text, "ApplyRequest"));
    assert!(!offers(text, "Sealed"), "imported, not offered");
    assert!(!offers(text, "Enqueue"), "a prefix of a name is not the name");
    assert!(!offers(text, "SourceStatus"), "a body defined nowhere here");
}
