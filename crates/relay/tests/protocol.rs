//! The protocol table (`durable_relay::protocol`) against everything that
//! spells an operation: the routes' parser and builder, the Rust client,
//! the RPC entrypoint, the TypeScript types, the route table of docs/http-api.md and
//! `clients/typescript/protocol.json` (written from the table by
//! `scripts/generate`, which `RELAY_BLESS=1` also runs).

use std::collections::BTreeSet;

use durable_relay::core::ErrorCode;
use durable_relay::protocol::{
    Operation, Reach, REFERENCE_WORKER_ONLY, SOURCE_OPERATIONS, TARGET_OPERATIONS,
};
use durable_relay::routes::{SourceOp, TargetOp};
use durable_relay_protocol::generate;

fn repo_file(path: &str) -> String {
    let full = format!("{}/../../{path}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&full).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// One operation of every kind, from the declaration itself.
fn source_samples() -> Vec<SourceOp> {
    SourceOp::examples(7)
}

fn target_samples() -> Vec<TargetOp> {
    TargetOp::examples(7)
}

/// Whether `path` (built, with values) fits `template` (`{x}` a segment,
/// `?a&b` the query's parameters in order, any of them left out).
fn fits(template: &str, path: &str) -> bool {
    let (t_path, t_query) = template.split_once('?').unwrap_or((template, ""));
    let (p_path, p_query) = path.split_once('?').unwrap_or((path, ""));
    let t: Vec<&str> = t_path.split('/').collect();
    let p: Vec<&str> = p_path.split('/').collect();
    let segments_fit = t.len() == p.len()
        && t.iter().zip(&p).all(|(t, p)| (t.starts_with('{') && t.ends_with('}') && !p.is_empty()) || t == p);
    let t_keys: Vec<&str> = t_query.split('&').filter(|s| !s.is_empty()).collect();
    let p_keys: Vec<&str> =
        p_query.split('&').filter(|s| !s.is_empty()).map(|kv| kv.split('=').next().unwrap()).collect();
    // The query's parameters in the template's order, an optional one left out when not given.
    let mut rest = t_keys.iter();
    segments_fit && p_keys.iter().all(|k| rest.any(|t| t == k))
}

#[test]
fn every_operation_has_one_entry_and_builds_the_path_its_template_names() {
    let mut seen = BTreeSet::new();
    for op in source_samples() {
        let entry = op.operation();
        assert!(fits(entry.path, &op.path()), "{op:?}: {} does not fit {}", op.path(), entry.path);
        assert_eq!(op.method(), entry.method);
        assert!(seen.insert(entry.name), "{op:?} shares the entry {}", entry.name);
    }
    assert_eq!(seen.len(), SOURCE_OPERATIONS.len(), "a source entry no operation uses");
    let mut seen = BTreeSet::new();
    for op in target_samples() {
        let entry = op.operation();
        assert!(fits(entry.path, &op.path()), "{op:?}: {} does not fit {}", op.path(), entry.path);
        assert!(seen.insert(entry.name), "{op:?} shares the entry {}", entry.name);
    }
    assert_eq!(seen.len(), TARGET_OPERATIONS.len(), "a target entry no operation uses");
}

#[test]
fn every_error_code_belongs_to_an_operation_or_to_the_reference_worker() {
    let listed: Vec<ErrorCode> = SOURCE_OPERATIONS
        .iter()
        .chain(TARGET_OPERATIONS)
        .flat_map(Operation::all_codes)
        .chain(REFERENCE_WORKER_ONLY.iter().cloned())
        .collect();
    for code in ErrorCode::ALL {
        assert!(listed.contains(code), "{code} is answered by no operation in the protocol table");
    }
}

/// The body of `async {method}(` in entry.mjs, up to the next method.
fn rpc_body<'a>(entry: &'a str, method: &str) -> Option<&'a str> {
    let start = entry.find(&format!("  async {method}("))?;
    let rest = &entry[start..];
    let end = rest[1..].find("\n  async ").map_or(rest.len(), |e| e + 1);
    Some(&rest[..end])
}

fn rpc_operations() -> Vec<&'static Operation> {
    SOURCE_OPERATIONS.iter().filter(|o| o.rpc.is_some()).collect()
}

/// The RPC entrypoint builds a method for every operation without a body
/// from its entry in protocol.json (its path's `{param}`s as arguments, its
/// query as an options object), and writes out only those that take a
/// body (enqueue: rows and options), which the table cannot spell.
#[test]
fn the_rpc_entrypoint_builds_its_methods_from_the_table_and_writes_out_only_those_with_a_body() {
    let entry = repo_file("src/entry.mjs");
    assert!(entry.contains("from \"./operations.js\";"), "entry.mjs reads the table");
    let build = repo_file("scripts/build-worker");
    assert!(build.contains("packages/durable-relay/src/operations.js"), "the build puts the table beside it");
    for op in SOURCE_OPERATIONS {
        assert_eq!(
            op.rpc.is_some(),
            op.reach == Reach::Public,
            "{}: public operations, and only they, have RPC",
            op.name
        );
    }
    for op in rpc_operations() {
        let rpc = op.rpc.unwrap();
        let written = rpc_body(&entry, rpc.method);
        match op.request {
            Some(_) => {
                let body = written.unwrap_or_else(|| panic!("entry.mjs has no RelayRpc.{}", rpc.method));
                let lookup = format!("rpcOperations.get(\"{}\"), \"{}\"", rpc.method, op.path);
                assert!(body.contains(&lookup), "RelayRpc.{} calls its table entry's path", rpc.method);
            }
            None => assert!(written.is_none(), "RelayRpc.{} is written out: the table builds it", rpc.method),
        }
        // pathOf's grammar: literal and `{param}` segments, then `?a&b`.
        let (path, query) = op.path.split_once('?').unwrap_or((op.path, ""));
        assert!(path.starts_with('/') && !path.contains('&'), "{}: {}", op.name, op.path);
        assert!(query.split('&').all(|q| q.chars().all(|c| c.is_ascii_lowercase() || c == '_')));
    }
}

#[test]
fn the_typescript_methods_of_operations_without_a_body_are_written_from_the_table() {
    for op in rpc_operations() {
        let rpc = op.rpc.unwrap();
        if rpc.unwraps.is_none() {
            assert_eq!(
                rpc.returns, op.reply,
                "{}: a method that unwraps nothing resolves to the reply",
                op.name
            );
        }
        assert!(!rpc.doc.is_empty() && rpc.doc.ends_with('.'), "{}: a sentence of doc", op.name);
    }
    let rpc = repo_file("clients/typescript/durable-relay.d.ts");
    assert!(rpc.contains("export interface RelayRpcMethods extends RelayRpcOperations {"));
    let package = repo_file("packages/durable-relay/src/index.d.ts");
    assert!(package.contains("export interface RelaySource extends RelaySourceOperations {}"));
}

#[test]
fn the_rust_client_has_a_method_for_every_public_source_operation() {
    let client = repo_file("crates/relay/src/client.rs");
    for op in rpc_operations().into_iter().filter(|o| o.name != "parked_rows") {
        assert!(
            client.contains(&format!("pub async fn {}(", op.name)),
            "SourceClient::{} is missing",
            op.name
        );
    }
    assert!(client.contains("SourceOp::ParkedRows"), "parked rows through SourceClient::call");
}

/// The front door's spelling of an operation, as the route table of docs/http-api.md writes it.
fn front_route(kind: &str, op: &Operation) -> String {
    let (path, query) = op.path.split_once('?').unwrap_or((op.path, ""));
    let query = if query.is_empty() {
        String::new()
    } else {
        format!("?{}", query.split('&').map(|k| format!("{k}=")).collect::<Vec<_>>().join("&"))
    };
    format!("`{} /v1/{kind}{path}{query}`", op.method)
}

#[test]
fn the_readme_route_table_lists_every_public_operation_and_no_private_one() {
    let readme = repo_file("docs/http-api.md");
    for (kind, table) in [("sources/{source}", SOURCE_OPERATIONS), ("targets/{target}", TARGET_OPERATIONS)] {
        for op in table {
            let route = front_route(kind, op);
            let listed = readme.contains(&format!("| {route} |"));
            assert_eq!(listed, op.reach == Reach::Public, "docs/http-api.md route table and {route}");
        }
    }
}

/// What `scripts/generate` writes is current: protocol.json, the npm
/// package's operations.js and the TypeScript methods of the operations
/// without a body (`RELAY_BLESS=1` writes them too).
#[test]
fn the_files_the_table_writes_are_current() {
    let root = format!("{}/../..", env!("CARGO_MANIFEST_DIR"));
    let read =
        |path: &str| std::fs::read_to_string(format!("{root}/{path}")).map_err(|e| format!("{path}: {e}"));
    let written = generate::files(read).unwrap();
    assert_eq!(written.len(), 4, "protocol.json, operations.js and two .d.ts files");
    for file in written {
        if std::env::var("RELAY_BLESS").is_ok_and(|v| v == "1") {
            std::fs::write(format!("{root}/{}", file.path), &file.text).unwrap();
        }
        let recorded = read(file.path).unwrap_or_default();
        assert!(recorded == file.text, "{} is stale: scripts/generate writes it", file.path);
    }
}

#[test]
fn the_npm_package_offers_every_rpc_method_under_the_same_name() {
    let class = |path: &str| {
        let text = repo_file(path);
        let start = text.find("class RelaySource").unwrap_or_else(|| panic!("{path}: class RelaySource"));
        text[start..start + text[start..].find("\n}").expect("the class's end")].to_owned()
    };
    let (types, code) =
        (class("packages/durable-relay/src/index.d.ts"), class("packages/durable-relay/src/index.js"));
    assert!(repo_file("packages/durable-relay/src/index.js").contains("from \"./operations.js\";"));
    let operations = repo_file("packages/durable-relay/src/index.d.ts");
    for op in rpc_operations() {
        let method = op.rpc.unwrap().method;
        // Typed in the class, or in the interface the table writes.
        let typed = if op.request.is_some() { &types } else { &operations };
        assert!(typed.contains(&format!("\n  {method}(")), "index.d.ts: RelaySource.{method} is missing");
        // Built from the table, unless the table cannot spell its arguments.
        let written = code.contains(&format!("\n  {method}("));
        assert_eq!(written, op.request.is_some(), "index.js: RelaySource.{method} written out");
    }
}
