//! The fuzz targets' properties on stable, in the test command: every file of `fuzz/seeds/<target>/`
//! and (when present) `fuzz/artifacts/<target>/` goes through the same function the libFuzzer
//! target runs (`fuzz/src/lib.rs`, the `vesta-fuzz` library), so a finding, once fixed and kept as a seed,
//! stays fixed in CI — and a finding still in `fuzz/artifacts/` fails the suite until it is.

use vesta_fuzz as checks;

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn inputs(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
}

#[test]
fn every_seed_and_artifact_keeps_the_targets_properties() {
    let mut failures = Vec::new();
    let mut seen = 0;
    for (name, check) in checks::TARGETS {
        let seeds = inputs(&repo().join("fuzz/seeds").join(name));
        assert!(
            !seeds.is_empty(),
            "fuzz/seeds/{name} holds the target's seeds"
        );
        let artifacts = inputs(&repo().join("fuzz/artifacts").join(name));
        for file in seeds.iter().chain(&artifacts) {
            let data = std::fs::read(file).expect("a readable input");
            seen += 1;
            if let Err(panic) = catch_unwind(AssertUnwindSafe(|| check(&data))) {
                let why = panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                failures.push(format!("{}: {why}", file.display()));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {seen} inputs break a fuzz property:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn every_target_has_a_check_and_a_binary() {
    for (name, _) in checks::TARGETS {
        let target = repo().join("fuzz/fuzz_targets").join(format!("{name}.rs"));
        let text = std::fs::read_to_string(&target).expect("the target's source");
        assert!(
            text.contains(&format!("vesta_fuzz::{name}(")),
            "{}",
            target.display()
        );
    }
}
