//! Writes the files the protocol's table writes (see
//! `durable_relay_protocol::generate`), from the repository's root:
//! `scripts/generate` runs it. With `--check` it writes nothing and fails,
//! naming each file that is not current.

use std::path::PathBuf;
use std::process::ExitCode;

use durable_relay_protocol::generate::{files, COMMAND};

fn main() -> ExitCode {
    let check = std::env::args().skip(1).any(|a| a == "--check");
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let read = |path: &str| std::fs::read_to_string(root.join(path)).map_err(|e| format!("{path}: {e}"));
    let written = match files(read) {
        Ok(written) => written,
        Err(e) => {
            eprintln!("{COMMAND}: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut stale = 0;
    for file in written {
        let current = read(file.path).ok();
        if current.as_deref() == Some(file.text.as_str()) {
            continue;
        }
        stale += 1;
        if check {
            eprintln!("{}: not current; {COMMAND} writes it", file.path);
        } else if let Err(e) = std::fs::write(root.join(file.path), &file.text) {
            eprintln!("{}: {e}", file.path);
            return ExitCode::FAILURE;
        } else {
            println!("wrote {}", file.path);
        }
    }
    if check && stale > 0 {
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}
