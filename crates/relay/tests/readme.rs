//! The README's embedding snippets are the examples' own code (Rust and
//! TypeScript), so they compile (`scripts/test` builds and type-checks both)
//! and cannot drift: every region an example marks `// readme: <name>` ...
//! `// readme: end` must appear in README.md verbatim, ending a code block.

use std::path::Path;

fn read(path: &str) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    std::fs::read_to_string(root.join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The marked regions of `text`, by name.
fn regions(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
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
        out.push((name.to_owned(), block));
    }
    out
}

#[test]
fn the_readmes_embedding_snippets_are_the_examples_verbatim() {
    let readme = read("README.md");
    for (path, fence) in
        [("examples/embedded/src/lib.rs", "rust"), ("examples/typescript/src/index.ts", "ts")]
    {
        let example = read(path);
        // The Rust quick start is marked ahead of the README text that will
        // show it; it is not checked against README.md yet.
        let marked: Vec<_> =
            regions(&example).into_iter().filter(|(name, _)| name != "quick start").collect();
        assert_eq!(
            marked.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>(),
            vec!["source", "target"],
            "{path} marks its two snippets"
        );
        for (name, block) in marked {
            assert!(
                readme.contains(&format!("```{fence}\n{block}```"))
                    || readme.contains(&format!("\n\n{block}```")),
                "README.md lacks {path}'s {name} snippet, verbatim:\n{block}"
            );
        }
    }
}
