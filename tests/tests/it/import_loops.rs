//! A crate's modules depend one way: a lower module (the errors, the budget, a connection's
//! activity) never imports a higher one (the router, the server), so each can be read, changed
//! and tested knowing only what is below it. This reads the sources of the crates in [`CRATES`]
//! and fails naming each loop among their top-level modules (`src/x.rs` or `src/x/`), found
//! from every `crate::x` path in their code (comments left out, tests included: a test module
//! that imports upward ties its file to what is above it too).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The crates held to it.
const CRATES: [&str; 2] = ["vesta-service", "vesta-rest"];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_owned()
}

/// Every `.rs` file under `dir`.
fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// `text` without its comments (`//` to the end of the line, `/* ... */`), string literals
/// kept: a comment may name a module above to explain, and that is no import.
fn code(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix("//") {
            rest = after.find('\n').map_or("", |i| &after[i..]);
        } else if let Some(after) = rest.strip_prefix("/*") {
            rest = after.find("*/").map_or("", |i| &after[i + 2..]);
        } else if let Some(after) = rest.strip_prefix('"') {
            // Skip the literal whole, so that a `//` inside it is not taken for a comment.
            let mut end = after.len();
            let mut escaped = false;
            for (i, c) in after.char_indices() {
                match c {
                    '\\' if !escaped => escaped = true,
                    '"' if !escaped => {
                        end = i + 1;
                        break;
                    }
                    _ => escaped = false,
                }
            }
            out.push('"');
            out.push_str(&after[..end]);
            rest = &after[end..];
        } else {
            let c = rest.chars().next().unwrap();
            out.push(c);
            rest = &rest[c.len_utf8()..];
        }
    }
    out
}

fn ident_start(text: &str) -> &str {
    let end = text
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(text.len());
    &text[..end]
}

/// The top-level modules a file's code names by `crate::x` or `crate::{x, y::z, ...}`.
fn named_modules(code: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for (i, _) in code.match_indices("crate::") {
        let before = code[..i].chars().next_back();
        if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$') {
            continue; // `$crate::` in a macro, or a longer word
        }
        let after = &code[i + "crate::".len()..];
        if let Some(group) = after.strip_prefix('{') {
            // The names at the group's top depth, each first of its path.
            let mut depth = 0;
            let mut expect_name = true;
            for (j, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => expect_name = true,
                    c if expect_name && depth == 0 && !c.is_whitespace() => {
                        expect_name = false;
                        let name = ident_start(&group[j..]);
                        if !name.is_empty() {
                            names.insert(name.to_owned());
                        }
                    }
                    _ => {}
                }
            }
        } else {
            let name = ident_start(after);
            if !name.is_empty() {
                names.insert(name.to_owned());
            }
        }
    }
    names
}

/// The top-level modules of a crate and, for each, the others its files name.
fn module_graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut modules = BTreeSet::new();
    for entry in std::fs::read_dir(src).unwrap() {
        let path = entry.unwrap().path();
        let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
        if path.is_dir() || (path.extension().is_some_and(|e| e == "rs") && stem != "lib") {
            modules.insert(stem);
        }
    }
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut files = Vec::new();
    sources(src, &mut files);
    for file in files {
        let rel = file.strip_prefix(src).unwrap();
        let top = rel
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_string_lossy();
        let top = top.strip_suffix(".rs").unwrap_or(&top).to_owned();
        if !modules.contains(&top) {
            continue; // lib.rs: the root declares and re-exports every module
        }
        let text = std::fs::read_to_string(&file).unwrap();
        let edges = graph.entry(top.clone()).or_default();
        for name in named_modules(&code(&text)) {
            if name != top && modules.contains(&name) {
                edges.insert(name);
            }
        }
    }
    graph
}

/// Each loop of `graph`, as the modules it passes through from its least one back to it (each
/// loop once, whatever module it is entered from).
fn loops(graph: &BTreeMap<String, BTreeSet<String>>) -> BTreeSet<Vec<String>> {
    fn walk(
        graph: &BTreeMap<String, BTreeSet<String>>,
        start: &str,
        path: &mut Vec<String>,
        found: &mut BTreeSet<Vec<String>>,
    ) {
        let here = path.last().unwrap().clone();
        for next in graph.get(&here).into_iter().flatten() {
            if next == start {
                let mut cycle = path.clone();
                cycle.push(start.to_owned());
                found.insert(cycle);
            } else if next.as_str() > start && !path.contains(next) {
                path.push(next.clone());
                walk(graph, start, path, found);
                path.pop();
            }
        }
    }
    let mut found = BTreeSet::new();
    for start in graph.keys() {
        walk(graph, start, &mut vec![start.clone()], &mut found);
    }
    found
}

#[test]
fn the_finder_reads_paths_groups_and_skips_comments() {
    let text = "use crate::a::X;\nuse crate::{b, c::{D, E}, d::F};\n// crate::e is named here\n\
                /* crate::f */ let s = \"// not a comment\"; crate::g::h();\n$crate::i::j!();";
    let names: Vec<String> = named_modules(&code(text)).into_iter().collect();
    assert_eq!(names, ["a", "b", "c", "d", "g"]);
    let graph: BTreeMap<String, BTreeSet<String>> = [
        ("a", &["b"][..]),
        ("b", &["c", "a"][..]),
        ("c", &["a"][..]),
        ("d", &["a"][..]),
    ]
    .into_iter()
    .map(|(m, to)| (m.to_owned(), to.iter().map(|s| (*s).to_owned()).collect()))
    .collect();
    let found: Vec<String> = loops(&graph).iter().map(|l| l.join(" -> ")).collect();
    assert_eq!(found, ["a -> b -> a", "a -> b -> c -> a"]);
}

#[test]
fn no_module_imports_one_that_imports_it_back() {
    let root = root();
    let mut report = Vec::new();
    for krate in CRATES {
        let graph = module_graph(&root.join(krate).join("src"));
        assert!(
            graph.len() >= 8 && graph.values().any(|to| !to.is_empty()),
            "{krate}'s modules and their imports: {graph:?}"
        );
        for cycle in loops(&graph) {
            report.push(format!("{krate}: {}", cycle.join(" -> ")));
        }
    }
    assert!(
        report.is_empty(),
        "modules that import each other in a loop (move what the lower one needs below both):\n{}",
        report.join("\n")
    );
}
