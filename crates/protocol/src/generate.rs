//! What the operations table writes into the repository's other languages
//! (feature `generate`): `clients/typescript/protocol.json`, the npm
//! package's `operations.js`, and the TypeScript methods of the operations
//! without a body in two `.d.ts` files. The command
//! `scripts/generate` (this crate's `generate` example) writes them;
//! `--check` and the protocol test say whether they are current.

use crate::operations::{to_json, Param, Place};
use crate::routes::SourceOp;

/// The command that writes the files, as the files name it.
pub const COMMAND: &str = "scripts/generate";

/// The first line of a block of a `.d.ts` file that the table writes.
pub const WRITTEN_FROM: &str = "// Written from the protocol's table by `scripts/generate`: do not edit.\n";
/// The last line of such a block.
pub const WRITTEN_END: &str = "// End of what the protocol's table writes.\n";

/// One file the table writes, with its whole new text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Written {
    /// Its path from the repository's root.
    pub path: &'static str,
    /// Its text as the table writes it.
    pub text: String,
}

/// Every file the table writes, given `read`, which answers a file's
/// current text by its path from the repository's root (a `.d.ts` file
/// keeps what lies outside its written block). An error names a file
/// without its block.
pub fn files(read: impl Fn(&str) -> Result<String, String>) -> Result<Vec<Written>, String> {
    let interface = |name: &str, doc: &str, source: bool| {
        format!("/** {doc} */\nexport interface {name} {{\n{}}}\n", typescript_methods(source))
    };
    let rpc_doc = "`RelayRpc`'s methods for the operations without a body.";
    let package_doc = "`RelaySource`'s methods for the operations without a body.";
    let blocks = [
        ("clients/typescript/durable-relay.d.ts", interface("RelayRpcOperations", rpc_doc, true)),
        ("packages/durable-relay/src/index.d.ts", interface("RelaySourceOperations", package_doc, false)),
    ];
    let mut out = vec![
        Written {
            path: "clients/typescript/protocol.json",
            text: serde_json::to_string_pretty(&to_json()).map_err(|e| e.to_string())? + "\n",
        },
        Written { path: "packages/durable-relay/src/operations.js", text: operations_module()? },
    ];
    for (path, block) in blocks {
        out.push(Written { path, text: with_block(path, &read(path)?, &block)? });
    }
    Ok(out)
}

/// `text` with its written block made `block`.
fn with_block(path: &str, text: &str, block: &str) -> Result<String, String> {
    let start = text.find(WRITTEN_FROM).ok_or_else(|| format!("{path}: no block written from the table"))?;
    let end =
        text[start..].find(WRITTEN_END).ok_or_else(|| format!("{path}: the written block has no end"))?;
    Ok(format!("{}{WRITTEN_FROM}{block}{}", &text[..start], &text[start + end..]))
}

/// One TypeScript method per source operation with an RPC method and no
/// body (those with a body are written out beside the block): its doc, its
/// path's parameters as arguments (after `source: string` when `source`),
/// its query as an object (optional unless a parameter is required), and
/// the type it resolves to.
fn typescript_methods(source: bool) -> String {
    let mut out = String::new();
    for (op, params) in SourceOp::parameters() {
        let Some(rpc) = op.rpc.filter(|_| op.request.is_none()) else { continue };
        let mut args: Vec<String> = source.then(|| "source: string".to_owned()).into_iter().collect();
        args.extend(
            params.iter().filter(|p| p.place == Place::Path).map(|p| format!("{}: {}", p.name, p.ts)),
        );
        let query: Vec<&Param> = params.iter().filter(|p| p.place == Place::Query).collect();
        if !query.is_empty() {
            let optional = |p: &Param| if p.required { "" } else { "?" };
            let fields: Vec<String> =
                query.iter().map(|p| format!("{}{}: {}", p.name, optional(p), p.ts)).collect();
            let name = if query.iter().any(|p| p.max.is_some()) { "page" } else { "query" };
            let given = if query.iter().any(|p| p.required) { "" } else { "?" };
            args.push(format!("{name}{given}: {{ {} }}", fields.join("; ")));
        }
        let bounds: Vec<String> =
            query.iter().filter_map(|p| p.max.map(|max| format!("`{}` 1..={max}", p.name))).collect();
        let doc = match bounds.is_empty() {
            true => rpc.doc.to_owned(),
            false => format!("{} ({})", rpc.doc.trim_end_matches('.'), bounds.join(", ")) + ".",
        };
        out += &format!("  /** {doc} */\n  {}({}): Promise<{}>;\n", rpc.method, args.join(", "), rpc.returns);
    }
    out
}

/// The table's operations with an RPC method, and the variables that cover
/// each scope, as a JavaScript module: what the npm package's RelaySource
/// and the reference Worker's RelayRpc build their methods from.
fn operations_module() -> Result<String, String> {
    let table = to_json();
    let source = table["source"].as_array().ok_or("the table has no source operations")?;
    let ops: Vec<serde_json::Value> = source
        .iter()
        .filter(|op| !op["rpc"].is_null())
        .map(|op| {
            let pick = ["name", "method", "path", "scope", "request", "rpc"];
            serde_json::Value::Object(pick.iter().map(|k| (k.to_string(), op[*k].clone())).collect())
        })
        .collect();
    let pretty = |v: &serde_json::Value| serde_json::to_string_pretty(v).map_err(|e| e.to_string());
    Ok(format!(
        "// The relay's operations that RelaySource and RelayRpc offer as methods, and\n\
         // the variables whose tokens cover each scope, written from the protocol's\n\
         // table (crates/protocol/src/operations) by `{COMMAND}`. Do not edit.\n\n\
         export const OPERATIONS = {};\n\nexport const SCOPES = {};\n",
        pretty(&serde_json::Value::Array(ops))?,
        pretty(&table["scopes"])?,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_block_is_replaced_and_what_surrounds_it_kept() {
        let text = format!("before\n{WRITTEN_FROM}old\n{WRITTEN_END}after\n");
        let now = with_block("x.d.ts", &text, "new\n").unwrap();
        assert_eq!(now, format!("before\n{WRITTEN_FROM}new\n{WRITTEN_END}after\n"));
        assert!(with_block("x.d.ts", "no block", "new\n").unwrap_err().contains("x.d.ts"));
        assert!(with_block("x.d.ts", WRITTEN_FROM, "new\n").unwrap_err().contains("no end"));
    }

    #[test]
    fn a_required_query_parameter_is_written_non_optional() {
        let methods = typescript_methods(false);
        assert!(methods.contains("queuedRows(page: { target: string; after?: number"), "{methods}");
    }
}
