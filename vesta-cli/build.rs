//! Records the git commit `vesta --version` shows, when the crate is built from a checkout of
//! vesta-rs. Never fails the build: without git, outside a checkout (crates.io, a tarball) or
//! inside some other repository, the commit is simply not recorded.

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=VESTA_GIT_COMMIT");
    // Git missing from PATH is the usual reason for no commit: look again when PATH changes.
    println!("cargo:rerun-if-env-changed=PATH");
    if let Some(commit) = commit() {
        println!("cargo:rustc-env=VESTA_GIT_COMMIT={commit}");
    }
}

/// The checkout's commit (12 hex digits), or `None`.
fn commit() -> Option<String> {
    if let Ok(given) = std::env::var("VESTA_GIT_COMMIT") {
        return Some(given).filter(|c| !c.is_empty());
    }
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR")?);
    let workspace = manifest.parent()?;
    // Only our own checkout: a packaged crate unpacked inside another repository must not
    // report that repository's commit.
    let top = git(workspace, &["rev-parse", "--show-toplevel"])?;
    if Path::new(&top).canonicalize().ok()? != workspace.canonicalize().ok()? {
        return None;
    }
    // Rebuild when HEAD moves: HEAD itself, the branch it points to, packed refs.
    let git_dir = PathBuf::from(git(workspace, &["rev-parse", "--absolute-git-dir"])?);
    println!("cargo:rerun-if-changed={}", git_dir.join("HEAD").display());
    if let Some(common) = git(workspace, &["rev-parse", "--git-common-dir"]) {
        let common = workspace.join(common);
        println!(
            "cargo:rerun-if-changed={}",
            common.join("packed-refs").display()
        );
        if let Some(branch) = git(workspace, &["symbolic-ref", "-q", "HEAD"]) {
            println!("cargo:rerun-if-changed={}", common.join(branch).display());
        }
    }
    let commit = git(workspace, &["rev-parse", "--short=12", "HEAD"])?;
    commit
        .chars()
        .all(|c| c.is_ascii_hexdigit())
        .then_some(commit)
}

/// `git ARGS` in `dir`: its trimmed stdout on success, else `None`.
fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8(out.stdout).ok()?.trim().to_owned();
    (!text.is_empty()).then_some(text)
}
