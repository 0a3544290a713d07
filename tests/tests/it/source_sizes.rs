//! Small modules with one job: no Rust source file of the repository is over 650 lines, but
//! generated code (`vesta-grpc/src/gen/`, written by protoc and tonic). A file that grows past
//! it is split into a folder of modules, each with its own `//!` saying why it is apart.

use std::path::{Path, PathBuf};

/// The most lines a hand-written source file may have.
const MAX_LINES: usize = 650;

/// Generated code, relative to the repository root.
const GENERATED: [&str; 1] = ["vesta-grpc/src/gen"];

/// Folders that hold no source of the repository: build output, installed packages.
const NOT_SOURCE: [&str; 4] = ["target", "node_modules", ".venv", "__pycache__"];

#[test]
fn no_source_file_is_over_650_lines() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let files = rust_files(root);
    assert!(files.len() > 300, "read {} files", files.len());
    let mut over: Vec<(usize, String)> = files
        .iter()
        .filter(|f| !GENERATED.iter().any(|g| f.starts_with(root.join(g))))
        .filter_map(|f| {
            let lines = std::fs::read_to_string(f).unwrap().lines().count();
            (lines > MAX_LINES)
                .then(|| (lines, f.strip_prefix(root).unwrap().display().to_string()))
        })
        .collect();
    over.sort_unstable_by(|a, b| b.cmp(a));
    assert!(
        over.is_empty(),
        "source files over {MAX_LINES} lines (split each into modules with one job):\n{}",
        over.iter()
            .map(|(n, f)| format!("{n:>6} {f}"))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// Every `.rs` file under `root`, but in hidden folders (`.git`; `.ci` is read) and
/// [`NOT_SOURCE`] ones.
fn rust_files(root: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut todo = vec![root.to_owned()];
    while let Some(dir) = todo.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy();
            if path.is_dir() {
                let hidden = name.starts_with('.') && name != ".ci";
                if !hidden && !NOT_SOURCE.contains(&name.as_ref()) {
                    todo.push(path);
                }
            } else if name.ends_with(".rs") {
                found.push(path);
            }
        }
    }
    found
}
