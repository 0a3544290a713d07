//! ARCHITECTURE.md is a map, and a map that drifts misleads: this fails when it names a path in
//! backticks that does not exist, when it leaves out a folder of a crate's `src/`, or when it
//! grows past 25 KiB (a map, not a second copy of the docs).
//!
//! A path in backticks is resolved, in order, against the folders named before it in the same
//! item (a bullet, or a paragraph) and the folders of the files named there, the crate last
//! named in the item's words (`vesta-embed` in "vesta-embed `src/clock.rs`") or else the one
//! whose `###` heading it is under, and the repository root; it must exist in one of them (a
//! folder when it ends in `/`; a `*` in its last part must match something). Only the map's own
//! text decides, never a search of the tree, so a new file elsewhere cannot make it pass or
//! fail.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The most the map may weigh.
const LIMIT_BYTES: usize = 25 * 1024;

/// File endings that make a backticked word a path even without a `/`.
const FILE_ENDINGS: [&str; 13] = [
    "rs", "md", "toml", "proto", "py", "yaml", "yml", "sh", "json", "js", "ts", "lock", "txt",
];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_owned()
}

#[test]
fn the_map_names_only_paths_that_exist_and_every_src_folder() {
    let root = root();
    let text = std::fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap();
    assert!(
        text.len() <= LIMIT_BYTES,
        "ARCHITECTURE.md is {} bytes, over {LIMIT_BYTES}: a map names folders and the few files \
         that matter, and links docs/ for the rest",
        text.len()
    );
    let checked = check(&root, &text);
    assert!(
        checked.named.len() > 100,
        "{} paths named",
        checked.named.len()
    );
    let mut problems = checked.missing;
    for folder in src_folders(&root) {
        let named = if folder.ends_with("src") {
            checked.named.iter().any(|p| p.starts_with(&folder))
        } else {
            checked.named.contains(&folder)
        };
        if !named {
            problems.push(format!(
                "{} is not named (every folder of a crate's src/ is)",
                folder.strip_prefix(&root).unwrap().display()
            ));
        }
    }
    assert!(
        problems.is_empty(),
        "ARCHITECTURE.md has drifted:\n{}",
        problems.join("\n")
    );
}

/// What the map names: every path resolved, and the ones that were not.
struct Checked {
    named: BTreeSet<PathBuf>,
    missing: Vec<String>,
}

/// Resolves every backticked path of `map` against the tree at `root`.
fn check(root: &Path, map: &str) -> Checked {
    let mut checked = Checked {
        named: BTreeSet::new(),
        missing: Vec::new(),
    };
    for item in items(root, map) {
        // Folders named so far in this item, the latest first.
        let mut near: Vec<PathBuf> = Vec::new();
        let mut krate = item.krate.clone();
        for (i, piece) in item.text.split('`').enumerate() {
            if i % 2 == 0 {
                // Words: the last crate they name is where the next paths are.
                if let Some(named) = piece
                    .split(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
                    .rfind(|w| w.starts_with("vesta-") && root.join(w).join("Cargo.toml").is_file())
                {
                    krate = Some(root.join(named));
                }
                continue;
            }
            let token = piece;
            if !is_path(token) {
                continue;
            }
            let mut bases = near.clone();
            bases.extend(krate.iter().cloned());
            bases.push(root.to_owned());
            match bases.iter().find_map(|b| resolve(b, token)) {
                Some(found) => {
                    let folder = if found.is_dir() {
                        found.clone()
                    } else {
                        found.parent().unwrap().to_owned()
                    };
                    near.retain(|f| f != &folder);
                    near.insert(0, folder);
                    checked.named.insert(found);
                }
                None => checked.missing.push(format!(
                    "line {}: `{token}` does not exist (under {}; a bare name is looked for in \
                     the folders named before it in the same item)",
                    item.line,
                    krate
                        .as_deref()
                        .map_or("the repository root".into(), |k| format!(
                            "{} or the root",
                            k.strip_prefix(root).unwrap().display()
                        )),
                )),
            }
        }
    }
    checked
}

/// `token` under `base`, if it is there (a folder when it ends in `/`); a `*` in its last part
/// matches any run of characters (the folder is returned).
fn resolve(base: &Path, token: &str) -> Option<PathBuf> {
    let want_folder = token.ends_with('/');
    let path = base.join(token.trim_end_matches('/'));
    let name = path.file_name()?.to_string_lossy().into_owned();
    if name.contains('*') {
        let parent = path.parent()?;
        let matched = std::fs::read_dir(parent).ok()?.any(|e| {
            let entry = e.unwrap().file_name().to_string_lossy().into_owned();
            glob(&name, &entry)
        });
        return matched.then(|| parent.to_owned());
    }
    let exists = if want_folder {
        path.is_dir()
    } else {
        path.exists()
    };
    exists.then_some(path)
}

/// `pattern` (with `*`s) matches all of `text`.
fn glob(pattern: &str, text: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == text,
        Some((head, tail)) => {
            text.starts_with(head) && (head.len()..=text.len()).any(|at| glob(tail, &text[at..]))
        }
    }
}

/// A backticked word is a path when it has a `/` or a file's ending, and nothing a path in
/// this repository never has (spaces, `::`, a scheme, braces; a leading `/` is a URL's path).
fn is_path(token: &str) -> bool {
    let odd = |c: char| c.is_whitespace() || "{}<>()[]=?&|,:;'\"$@#!+".contains(c);
    if token.is_empty() || token.starts_with('/') || token.starts_with('-') || token.contains(odd) {
        return false;
    }
    token.contains('/')
        || token
            .rsplit_once('.')
            .is_some_and(|(stem, end)| !stem.is_empty() && FILE_ENDINGS.contains(&end))
}

/// One item of the map: a bullet (with its continuation lines) or a paragraph, with the crate
/// whose `###` heading it is under (`None`: the repository).
struct Item {
    line: usize,
    krate: Option<PathBuf>,
    text: String,
}

fn items(root: &Path, map: &str) -> Vec<Item> {
    let mut items: Vec<Item> = Vec::new();
    let mut krate = None;
    let mut fenced = false;
    let mut open = false;
    for (i, line) in map.lines().enumerate() {
        if line.starts_with("```") {
            fenced = !fenced;
            open = false;
            continue;
        }
        if fenced {
            continue;
        }
        if let Some(heading) = line.strip_prefix('#') {
            let heading = heading.trim_start_matches('#').trim();
            let word = heading
                .split(|c: char| c.is_whitespace() || c == ':')
                .next()
                .unwrap_or("");
            let dir = root.join(word);
            krate =
                (line.starts_with("### ") && !word.is_empty() && dir.join("Cargo.toml").is_file())
                    .then_some(dir);
            open = false;
            continue;
        }
        if line.trim().is_empty() {
            open = false;
            continue;
        }
        if open && !line.starts_with("- ") {
            let last = items.last_mut().unwrap();
            last.text.push(' ');
            last.text.push_str(line.trim());
        } else {
            items.push(Item {
                line: i + 1,
                krate: krate.clone(),
                text: line.to_owned(),
            });
            open = true;
        }
    }
    items
}

/// Every folder under a crate's `src/` (the crates: the workspace's folders with a
/// `Cargo.toml` and a `src/`), `src/` itself included.
fn src_folders(root: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(root).unwrap() {
        let krate = entry.unwrap().path();
        let src = krate.join("src");
        if !krate.join("Cargo.toml").is_file() || !src.is_dir() {
            continue;
        }
        let mut todo = vec![src];
        while let Some(dir) = todo.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    todo.push(path);
                }
            }
            found.push(dir);
        }
    }
    assert!(found.len() > 40, "src folders: {found:?}");
    found.sort();
    found
}

/// The checker itself: a bare name resolves through a folder named before it, not from
/// another item; a missing file, a file where a folder is named and a glob matching nothing
/// are caught; words that are not paths are left alone.
#[test]
fn the_checker_resolves_by_the_items_own_folders() {
    let root = root();
    let map = "\
### vesta-core: the ID contract

- `src/layout/`: `mod.rs`, `presets.rs`; `src/clock.rs`, `epoch.rs`, `src/*.rs`.
- `presets.rs` alone, `src/nothing_here.rs`, `src/lib.rs/`, `src/*.nothing`.
- Not paths: `vesta_core::Layout`, `GET /healthz`, `/seq/{key}`, `--seq-db`, `seq.step`.

## Elsewhere

`vesta-core/src/generator/`, `mod.rs` and `docs/seq.md`; `layout/` is not at the root;
vesta-seq `src/owner/` and `mode.rs`, then `src/clock.rs` is vesta-seq's (it has none).
";
    let checked = check(&root, map);
    let core = root.join("vesta-core");
    for named in [
        "src/layout",
        "src/layout/mod.rs",
        "src/layout/presets.rs",
        "src/clock.rs",
        "src/epoch.rs",
        "src",
        "src/generator",
        "src/generator/mod.rs",
    ] {
        assert!(
            checked.named.contains(&core.join(named)),
            "{named}: {:?}",
            checked.named
        );
    }
    assert!(
        checked
            .named
            .contains(&root.join("vesta-seq/src/owner/mode.rs"))
    );
    let missing: Vec<&str> = checked
        .missing
        .iter()
        .map(|m| m.split('`').nth(1).unwrap())
        .collect();
    assert_eq!(
        missing,
        [
            "presets.rs",
            "src/nothing_here.rs",
            "src/lib.rs/",
            "src/*.nothing",
            "layout/",
            "src/clock.rs"
        ]
    );
    assert!(
        checked.missing[0].starts_with("line 4: "),
        "{:?}",
        checked.missing
    );
}
