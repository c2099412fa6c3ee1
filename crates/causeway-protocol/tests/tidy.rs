//! Tidy checks that run as ordinary tests: the architecture invariants that
//! a reviewer would otherwise have to remember.

use std::fs;
use std::path::{Path, PathBuf};

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The protocol core is sans-IO and deterministic: no clocks, threads,
/// sockets, files, random sources, or randomly seeded hash maps.
#[test]
fn protocol_core_does_no_io_and_reads_no_clock() {
    let forbidden = [
        "std::time",
        "SystemTime",
        "Instant::",
        "std::thread",
        "std::net",
        "std::fs",
        "tokio",
        "rand::",
        "thread_rng",
        "std::collections::HashMap",
        "std::collections::HashSet",
        "RandomState",
        "println!",
    ];
    let mut files = Vec::new();
    rust_files(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"), &mut files);
    assert!(files.len() > 5);
    let mut offences = Vec::new();
    for file in files {
        let text = fs::read_to_string(&file).unwrap();
        for (n, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap();
            for f in forbidden {
                if code.contains(f) {
                    offences.push(format!("{}:{}: {f}", file.display(), n + 1));
                }
            }
        }
    }
    assert!(offences.is_empty(), "the protocol core must stay sans-IO and deterministic:\n{}", offences.join("\n"));
}

/// docs/ARCHITECTURE.md is the map of the code: every crate is on it.
#[test]
fn architecture_doc_names_every_crate() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let doc = fs::read_to_string(root.join("docs/ARCHITECTURE.md")).expect("docs/ARCHITECTURE.md exists");
    for entry in fs::read_dir(root.join("crates")).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        assert!(doc.contains(&format!("crates/{name}")), "docs/ARCHITECTURE.md does not mention crates/{name}");
    }
}
