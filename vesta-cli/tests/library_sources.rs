//! Libraries return remedies as data; only vesta-cli spells `vesta ...` command lines and their
//! flags (ARCHITECTURE.md's invariant). This reads every library crate's sources (`vesta-*/src`
//! but vesta-cli's) and fails listing each string literal that spells one: `vesta <command>`
//! for each command of the `vesta` binary and each of its long flags, as its own `--help` names
//! them (so a flag added later is covered too). Comments and doc comments may name commands
//! (they explain, and are not printed).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

/// What a library may not spell in a string, whatever the help says (the reader's test uses
/// these; the help must name each).
const SPELLED: [&str; 7] = [
    "vesta machine",
    "vesta segment",
    "vesta seq",
    "--host-hold",
    "--state-file",
    "--machine-db",
    "--console",
];

/// Words of the `vesta` help a library may spell.
const NOT_SPELLED: [&str; 3] = [
    // Every program's (clap's).
    "--help",
    "--version",
    // Also the name of the bit layout ("id.type applies to the vesta layout only").
    "vesta layout",
];

/// Crates whose sources are not read.
const NOT_READ: [&str; 1] = [
    // The one crate that spells commands.
    "vesta-cli",
];

/// `vesta <command>` for each command and every long flag of every command, as the `vesta`
/// binary's help lists them (but [`NOT_SPELLED`]).
fn cli_words() -> BTreeSet<String> {
    let mut words = BTreeSet::new();
    let mut todo: Vec<Vec<String>> = vec![vec![]];
    while let Some(path) = todo.pop() {
        let out = Command::new(env!("CARGO_BIN_EXE_vesta"))
            .args(&path)
            .arg("--help")
            .output()
            .unwrap();
        assert!(out.status.success(), "vesta {path:?} --help: {out:?}");
        let help = String::from_utf8(out.stdout).unwrap();
        let mut in_commands = false;
        for line in help.lines() {
            if line.ends_with(':') && !line.starts_with(' ') {
                in_commands = line == "Commands:";
                continue;
            }
            let trimmed = line.trim_start();
            if in_commands && line.starts_with("  ") && !line.starts_with("   ") {
                let command = trimmed.split_whitespace().next().unwrap().to_owned();
                if command != "help" {
                    if path.is_empty() {
                        words.insert(format!("vesta {command}"));
                    }
                    let mut sub = path.clone();
                    sub.push(command);
                    todo.push(sub);
                }
            }
            // `  -c, --connections <N>` or `      --seq-db <URL>`.
            let flag = trimmed
                .strip_prefix('-')
                .filter(|rest| rest.len() > 3 && rest.as_bytes()[1] == b',')
                .map_or(trimmed, |rest| rest[2..].trim_start());
            if let Some(name) = flag.strip_prefix("--") {
                let name: String = name
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
                    .collect();
                if !name.is_empty() && line.starts_with("  ") {
                    words.insert(format!("--{name}"));
                }
            }
        }
    }
    for spelled in SPELLED {
        assert!(
            words.contains(spelled),
            "the help names {spelled}: {words:?}"
        );
    }
    words.retain(|w| !NOT_SPELLED.contains(&w.as_str()));
    words
}

#[test]
fn no_library_spells_a_vesta_command() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut crates: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            name.starts_with("vesta-")
                && !NOT_READ.contains(&name.as_str())
                && p.join("src").is_dir()
        })
        .collect();
    crates.sort();
    assert!(crates.len() >= 9, "the library crates: {crates:?}");
    let spelled = cli_words();
    assert!(
        spelled.len() > 40 && spelled.contains("--seq-db") && spelled.contains("vesta serve"),
        "the help's words: {spelled:?}"
    );
    let mut offenders = Vec::new();
    let mut files = 0;
    for krate in &crates {
        for file in rust_files(&krate.join("src")) {
            files += 1;
            let text = std::fs::read_to_string(&file).unwrap();
            for (line, literal) in string_literals(&text) {
                if let Some(spelled) = spelled.iter().find(|s| spells(&literal, s)) {
                    let shown = file
                        .strip_prefix(&root)
                        .unwrap_or(&file)
                        .display()
                        .to_string();
                    offenders.push(format!("{shown}:{line}: {spelled:?} in {literal:?}"));
                }
            }
        }
    }
    assert!(files > 100, "read {files} files");
    assert!(
        offenders.is_empty(),
        "library crates spell `vesta` commands (return a vesta_core::Remedy instead; vesta-cli \
         renders it):\n{}",
        offenders.join("\n")
    );
}

/// True when `literal` has `word` not followed by more of a word (`vesta seq` but not
/// `vesta sequences`).
fn spells(literal: &str, word: &str) -> bool {
    literal.match_indices(word).any(|(at, _)| {
        literal[at + word.len()..]
            .chars()
            .next()
            .is_none_or(|c| !c.is_alphanumeric() && c != '_' && c != '-')
    })
}

/// Every `.rs` file under `dir`.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut todo = vec![dir.to_owned()];
    while let Some(dir) = todo.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                todo.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                found.push(path);
            }
        }
    }
    found
}

/// The string literals of Rust source `text` (plain, raw, byte), each with the line it starts
/// on, as the compiler reads them where it matters here: a `\` line continuation joins the
/// lines without the next one's indent. Comments and char literals are skipped.
fn string_literals(text: &str) -> Vec<(usize, String)> {
    let chars: Vec<char> = text.chars().collect();
    let (mut i, mut line) = (0, 1);
    let mut found = Vec::new();
    let at = |i: usize| chars.get(i).copied().unwrap_or('\0');
    while i < chars.len() {
        let c = chars[i];
        let prev_ident = i > 0 && (chars[i - 1].is_alphanumeric() || chars[i - 1] == '_');
        if c == '\n' {
            line += 1;
            i += 1;
        } else if c == '/' && at(i + 1) == '/' {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && at(i + 1) == '*' {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && at(i + 1) == '*' {
                    depth += 1;
                    i += 2;
                } else if chars[i] == '*' && at(i + 1) == '/' {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    line += usize::from(chars[i] == '\n');
                    i += 1;
                }
            }
        } else if c == '\'' {
            // A char literal ('x', '\n', '"'), or a lifetime.
            if at(i + 1) == '\\' {
                i += 2;
                while i < chars.len() && chars[i] != '\'' {
                    i += 1;
                }
                i += 1;
            } else if at(i + 2) == '\'' {
                i += 3;
            } else {
                i += 1;
            }
        } else if !prev_ident && (c == 'r' || (c == 'b' && at(i + 1) == 'r')) {
            // A raw string: r"...", r#"..."#, br"...". Else an identifier.
            let mut j = i + if c == 'b' { 2 } else { 1 };
            let mut hashes = 0;
            while at(j) == '#' {
                hashes += 1;
                j += 1;
            }
            if at(j) != '"' {
                i += 1;
                continue;
            }
            let start_line = line;
            let mut literal = String::new();
            j += 1;
            while j < chars.len() {
                if chars[j] == '"' && (0..hashes).all(|k| at(j + 1 + k) == '#') {
                    break;
                }
                line += usize::from(chars[j] == '\n');
                literal.push(chars[j]);
                j += 1;
            }
            found.push((start_line, literal));
            i = j + 1 + hashes;
        } else if c == '"' {
            let start_line = line;
            let mut literal = String::new();
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                if chars[i] == '\\' {
                    if at(i + 1) == '\n' {
                        // A continuation: the newline and the next line's indent are not part
                        // of the string.
                        i += 1;
                        while i < chars.len() && chars[i].is_whitespace() {
                            line += usize::from(chars[i] == '\n');
                            i += 1;
                        }
                        continue;
                    }
                    literal.push(chars[i]);
                    literal.push(at(i + 1));
                    i += 2;
                    continue;
                }
                line += usize::from(chars[i] == '\n');
                literal.push(chars[i]);
                i += 1;
            }
            found.push((start_line, literal));
            i += 1;
        } else {
            i += 1;
        }
    }
    found
}

/// The reader finds a command split over a continuation, in a raw string, after a `'"'`, and
/// none in comments or doc comments.
#[test]
fn the_reader_finds_literals_and_skips_comments() {
    let source = r####"
//! Run `vesta machine retire` to ...
/// "vesta segment init" in a doc comment.
fn f() -> String {
    /* "vesta seq ls" /* nested "--state-file" */ */
    let quote = '"'; let tab = '\t'; let lifetime: &'static str = "plain";
    let split = "retire it: vesta machine \
                 retire --host-hold x";
    let raw = r#"a "quoted" --machine-db here"#;
    let sequences = "vesta sequences are fine";
    format!("{quote}{tab}{lifetime}{split}{raw}{sequences}")
}
"####;
    let literals = string_literals(source);
    let texts: Vec<&str> = literals.iter().map(|(_, l)| l.as_str()).collect();
    assert_eq!(
        texts,
        [
            "plain",
            "retire it: vesta machine retire --host-hold x",
            "a \"quoted\" --machine-db here",
            "vesta sequences are fine",
            "{quote}{tab}{lifetime}{split}{raw}{sequences}",
        ]
    );
    assert_eq!(literals[1].0, 7, "the line a literal starts on");
    let flagged: Vec<&str> = texts
        .iter()
        .filter(|l| SPELLED.iter().any(|s| spells(l, s)))
        .copied()
        .collect();
    assert_eq!(
        flagged,
        [
            "retire it: vesta machine retire --host-hold x",
            "a \"quoted\" --machine-db here"
        ]
    );
}
