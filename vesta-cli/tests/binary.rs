//! The `vesta` binary as cargo builds it for the tests: it starts and says which version it is.
//! (Having an integration test also makes `cargo test --workspace` build `target/debug/vesta`
//! with the workspace's features, which scripts/test hands to the real-process tests in
//! `tests/` through `VESTA_BIN`, so that they need no second build of their own.)

use std::process::Command;

#[test]
fn the_binary_says_its_version() {
    let out = Command::new(env!("CARGO_BIN_EXE_vesta"))
        .arg("--version")
        .output()
        .expect("running vesta");
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.starts_with(&format!("vesta {}", env!("CARGO_PKG_VERSION"))),
        "{text}"
    );
}
