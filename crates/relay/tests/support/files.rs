//! The repository as the documentation tests read it: its root, and every
//! file under a directory.

use std::path::{Path, PathBuf};

/// The repository's root.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Every file under `dir`, in path order, not entering directories whose
/// name `skip` refuses.
pub fn files_under(dir: &Path, skip: &dyn Fn(&str) -> bool) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let path = entry.unwrap().path();
            if !path.is_dir() {
                out.push(path);
            } else if !skip(&path.file_name().unwrap().to_string_lossy()) {
                stack.push(path);
            }
        }
    }
    out.sort();
    out
}
