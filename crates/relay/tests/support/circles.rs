//! Which shipped Rust files of one crate import each other in a loop.
//!
//! An arrow runs from a file to the file that defines a name it takes
//! through a `crate::`, `super::` or `self::` path (in a `use` or inline),
//! following re-exports (`pub use`) to the definition, as a reader would.
//! Re-exports themselves are not arrows: a module that hands its
//! children's names on does not depend on them for its own code. Test
//! modules (`#[cfg(test)] mod ...` and their files) are not read.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// One file of a crate, as far as the search reads it.
struct Module {
    /// The file, relative to the crate's `src/`.
    file: String,
    /// Its module path (`store::outbox` for `store/outbox/mod.rs`).
    path: Vec<String>,
    /// Its shipped code: comments and test modules left out.
    code: String,
    /// The names it defines at its top level.
    defines: BTreeSet<String>,
}

/// Every `.rs` file under `src`, relative, tests left out.
fn rust_files(src: &Path, under: &str, out: &mut Vec<String>) {
    let Ok(entries) = std::fs::read_dir(src.join(under)) else { return };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let rel = if under.is_empty() { name.clone() } else { format!("{under}/{name}") };
        if entry.path().is_dir() {
            rust_files(src, &rel, out);
        } else if name.ends_with(".rs") && name != "tests.rs" && !name.ends_with("_tests.rs") {
            out.push(rel);
        }
    }
}

/// The module path of the file at `rel`.
fn module_path(rel: &str) -> Vec<String> {
    let stem = rel.trim_end_matches(".rs");
    let mut parts: Vec<String> = stem.split('/').map(str::to_owned).collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib" | "main")) {
        parts.pop();
    }
    parts
}

/// `text` without comment lines and from its first test module on.
fn shipped(text: &str) -> String {
    let mut out = String::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        let t = line.trim_start();
        if t == "#[cfg(test)]" && lines.peek().is_some_and(|n| n.trim_start().starts_with("mod ")) {
            break;
        }
        if !t.starts_with("//") {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// The names `code` defines at its top level (unindented items).
fn definitions(code: &str) -> BTreeSet<String> {
    const KINDS: [&str; 9] =
        ["fn", "struct", "enum", "trait", "const", "static", "type", "mod", "macro_rules!"];
    let mut names = BTreeSet::new();
    for line in code.lines().filter(|l| !l.starts_with(' ') && !l.starts_with('}')) {
        let words: Vec<&str> = line
            .split(|c: char| c.is_whitespace() || c == '(' || c == '<' || c == ':' || c == '{' || c == ';')
            .filter(|w| !w.is_empty())
            .collect();
        for (i, w) in words.iter().enumerate() {
            if KINDS.contains(w) {
                if let Some(name) = words.get(i + 1) {
                    names.insert((*name).to_owned());
                }
                break;
            }
        }
    }
    names
}

/// The paths `code` names from `start` on, a `use` tree expanded:
/// `a::{b, c::d}` is `a::b` and `a::c::d`; `self` in a group is the group's own path.
fn paths_from(code: &str, start: usize) -> Vec<Vec<String>> {
    let bytes = code.as_bytes();
    let mut i = start;
    let mut prefix: Vec<String> = Vec::new();
    loop {
        let from = i;
        while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
            i += 1;
        }
        if i > from {
            prefix.push(code[from..i].to_owned());
        }
        if code[i..].starts_with("::") {
            i += 2;
            if bytes.get(i) == Some(&b'{') {
                return group(code, i + 1).into_iter().map(|tail| join(&prefix, tail)).collect();
            }
            if bytes.get(i) == Some(&b'*') {
                return vec![prefix];
            }
            continue;
        }
        return vec![prefix];
    }
}

/// `prefix` followed by `tail`, where a tail of `self` is the prefix itself.
fn join(prefix: &[String], tail: Vec<String>) -> Vec<String> {
    let mut path = prefix.to_vec();
    path.extend(tail.into_iter().filter(|s| s != "self"));
    path
}

/// The paths of the `use` group opening at `start` (just past its `{`).
fn group(code: &str, start: usize) -> Vec<Vec<String>> {
    let bytes = code.as_bytes();
    let (mut depth, mut i, mut item) = (0, start, start);
    let mut out = Vec::new();
    while i < bytes.len() {
        match bytes[i] {
            b'{' => depth += 1,
            b'}' if depth == 0 => break,
            b'}' => depth -= 1,
            b',' if depth == 0 => {
                out.extend(item_paths(code, item, i));
                item = i + 1;
            }
            _ => {}
        }
        i += 1;
    }
    out.extend(item_paths(code, item, i));
    out
}

/// The paths of one item of a group, `code[from..to]`.
fn item_paths(code: &str, from: usize, to: usize) -> Vec<Vec<String>> {
    let text = &code[from..to];
    let skip = text.len() - text.trim_start().len();
    if text.trim().is_empty() || text.trim() == "*" {
        return Vec::new();
    }
    paths_from(code, from + skip)
}

/// Every path a module's code takes a name by, absolute in its crate, with
/// whether it is a re-export (`pub use`).
fn references(m: &Module) -> Vec<(Vec<String>, bool)> {
    let mut out = Vec::new();
    for (at, _) in m
        .code
        .match_indices("crate::")
        .chain(m.code.match_indices("super::"))
        .chain(m.code.match_indices("self::"))
    {
        let before = m.code[..at].chars().next_back();
        if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':') {
            continue;
        }
        let line_start = m.code[..at].rfind('\n').map_or(0, |n| n + 1);
        let reexport = m.code[line_start..at].trim_start().starts_with("pub");
        for path in paths_from(&m.code, at) {
            if let Some(abs) = absolute(&m.path, path) {
                out.push((abs, reexport));
            }
        }
    }
    out.extend(child_uses(m));
    out
}

/// The paths of `use child::...` lines (a path relative to the module,
/// naming one of its children), absolute, with whether each is `pub`.
fn child_uses(m: &Module) -> Vec<(Vec<String>, bool)> {
    let mut out = Vec::new();
    let mut at = 0;
    for line in m.code.split_inclusive('\n') {
        let t = line.trim_start();
        let reexport = t.starts_with("pub");
        let body =
            t.trim_start_matches("pub(crate) ").trim_start_matches("pub(super) ").trim_start_matches("pub ");
        if let Some(rest) = body.strip_prefix("use ") {
            let first: String = rest.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
            if !first.is_empty()
                && !["crate", "super", "self", "std", "core", "alloc"].contains(&first.as_str())
            {
                let start = at + (line.len() - rest.len());
                for path in paths_from(&m.code, start) {
                    let mut abs = m.path.clone();
                    abs.extend(path);
                    out.push((abs, reexport));
                }
            }
        }
        at += line.len();
    }
    out
}

/// `code` without its `use` statements and `mod` declarations.
fn without_imports(code: &str) -> String {
    let mut out = String::new();
    let mut in_use = false;
    for line in code.lines() {
        let t = line.trim_start();
        let body =
            t.trim_start_matches("pub(crate) ").trim_start_matches("pub(super) ").trim_start_matches("pub ");
        if body.starts_with("use ") || body.starts_with("mod ") {
            in_use = true;
        }
        if !in_use {
            out.push_str(line);
            out.push('\n');
        }
        if in_use && t.ends_with(';') {
            in_use = false;
        }
    }
    out
}

/// Whether `name` is used in `m`'s code outside its imports.
fn used_outside_imports(m: &Module, name: &str) -> bool {
    without_imports(&m.code).lines().any(|l| {
        l.match_indices(name).any(|(i, _)| {
            let before = l[..i].chars().next_back();
            let after = l[i + name.len()..].chars().next();
            let word = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_');
            !word(before) && !word(after)
        })
    })
}

/// `path` (starting `crate`, `super` or `self`) as a path from the crate
/// root, seen from the module at `here`.
fn absolute(here: &[String], path: Vec<String>) -> Option<Vec<String>> {
    let mut segs = path.into_iter();
    let mut base: Vec<String> = match segs.next()?.as_str() {
        "crate" => Vec::new(),
        "self" => here.to_vec(),
        "super" => here[..here.len().checked_sub(1)?].to_vec(),
        _ => return None,
    };
    let mut rest: Vec<String> = segs.collect();
    while rest.first().map(String::as_str) == Some("super") {
        base.pop();
        rest.remove(0);
    }
    base.extend(rest);
    Some(base)
}

/// The crate's files by module path.
fn modules(src: &Path) -> BTreeMap<Vec<String>, Module> {
    let mut files = Vec::new();
    rust_files(src, "", &mut files);
    files
        .into_iter()
        .filter(|f| f != "main.rs" || !src.join("lib.rs").exists())
        .map(|file| {
            let text = std::fs::read_to_string(src.join(&file)).unwrap_or_default();
            let code = shipped(&text);
            let m = Module { path: module_path(&file), defines: definitions(&code), code, file };
            (m.path.clone(), m)
        })
        .collect()
}

/// The file that defines the item at `path`, through re-exports
/// (`depth` bounds how many it follows).
fn defining<'a>(mods: &'a BTreeMap<Vec<String>, Module>, path: &[String], depth: u32) -> Option<&'a Module> {
    let split = (0..=path.len()).rev().find(|&i| mods.contains_key(&path[..i]))?;
    let module = &mods[&path[..split]];
    let Some(name) = path.get(split) else { return Some(module) };
    if module.defines.contains(name) {
        return Some(module);
    }
    if depth == 0 {
        return None;
    }
    // Not defined here: where its re-export leads, or (another crate's
    // name, brought in by an alias) nowhere in this crate.
    let reexported = references(module).into_iter().filter(|(_, re)| *re).map(|(p, _)| p);
    let found = reexported.filter(|p| p.last() == Some(name)).find_map(|p| defining(mods, &p, depth - 1));
    found
}

/// The crate's arrows: file -> file it takes names from, with the names.
pub fn arrows(src: &Path) -> BTreeMap<(String, String), BTreeSet<String>> {
    let mods = modules(src);
    let mut arrows: BTreeMap<(String, String), BTreeSet<String>> = BTreeMap::new();
    for m in mods.values() {
        for (path, reexport) in references(m) {
            if reexport && !path.last().is_some_and(|name| used_outside_imports(m, name)) {
                continue;
            }
            if let Some(to) = defining(&mods, &path, 4) {
                // A submodule is part of the module that declares it: its
                // use of that module's items is no arrow.
                if to.file != m.file && !m.path.starts_with(&to.path) {
                    let name = path.last().cloned().unwrap_or_default();
                    arrows.entry((m.file.clone(), to.file.clone())).or_default().insert(name);
                }
            }
        }
    }
    arrows
}

/// The circles among `arrows`: each a set of files that reach each other.
pub fn circles(arrows: &BTreeMap<(String, String), BTreeSet<String>>) -> Vec<BTreeSet<String>> {
    let mut next: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (from, to) in arrows.keys() {
        next.entry(from).or_default().push(to);
    }
    let reach = |start: &str| {
        let mut seen = BTreeSet::new();
        let mut stack = vec![start];
        while let Some(f) = stack.pop() {
            for &t in next.get(f).into_iter().flatten() {
                if seen.insert(t) {
                    stack.push(t);
                }
            }
        }
        seen
    };
    let reached: BTreeMap<&str, BTreeSet<&str>> = next.keys().map(|&f| (f, reach(f))).collect();
    let mut out: Vec<BTreeSet<String>> = Vec::new();
    for (&f, r) in &reached {
        if !r.contains(f) {
            continue;
        }
        let circle: BTreeSet<String> = r
            .iter()
            .filter(|&&t| reached.get(t).is_some_and(|rt| rt.contains(f)))
            .map(|t| (*t).to_owned())
            .collect();
        if !out.contains(&circle) {
            out.push(circle);
        }
    }
    out
}
