//! The guides' code blocks run as written: every TOML block of docs/migrate.md loads as an
//! issuer's config and its layout builds, every shell block of it runs (with the `vesta` built
//! for the tests on `PATH`) and says what the text around it claims; the TOML blocks of the
//! other guides load as a server's config file (key names and kinds; values that depend on the
//! host, such as an ordinal's host name, are checked where they are documented).

use std::process::Command;

use vesta_embed::IssuerConfig;
use vesta_tests::bin::{state_home, vesta};
use vesta_tests::docs::snippets;

/// Runs a shell block in bash with `vesta` on `PATH`; returns its stdout.
fn run_sh(body: &str, line: usize) -> String {
    let dir = vesta().parent().unwrap();
    let path = format!(
        "{}:{}",
        dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = Command::new("bash")
        .args(["-euo", "pipefail", "-c", body])
        .env("PATH", path)
        .env("XDG_STATE_HOME", state_home())
        .env("RUST_LOG", "error")
        .output()
        .expect("running bash");
    assert!(
        out.status.success(),
        "docs/migrate.md line {line}: {body}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn migrate_md_runs_as_written() {
    let tomls = snippets("docs/migrate.md", "toml");
    assert!(tomls.len() >= 4, "{} TOML blocks", tomls.len());
    for (line, body) in &tomls {
        let config = IssuerConfig::from_toml_str(body)
            .unwrap_or_else(|e| panic!("docs/migrate.md line {line}: {e}\n{body}"));
        config
            .layout()
            .unwrap_or_else(|e| panic!("docs/migrate.md line {line}: {e}"));
    }
    let shells = snippets("docs/migrate.md", "sh");
    assert_eq!(shells.len(), 2, "the shell blocks this test knows");
    let mut said = Vec::new();
    for (line, body) in &shells {
        said.push(run_sh(body, *line));
    }
    // Which Sonyflake: the v1 ID reads as 2037 in v2 and as 2026 in v1.
    assert!(said[0].contains("timestamp  2037-"), "{}", said[0]);
    assert!(said[0].contains("timestamp  2026-11-26"), "{}", said[0]);
    // Checking a switch: the highest ID explains to its row's time and worker, making it back
    // from those gives the same ID, and new IDs are larger.
    let out = &said[1];
    assert!(out.contains("timestamp  2020-07-08T12:00:00.000Z"), "{out}");
    assert!(out.contains("workerId   331"), "{out}");
    let numbers: Vec<u64> = out.lines().filter_map(|l| l.parse().ok()).collect();
    assert_eq!(numbers.len(), 4, "make's ID and gen's three: {out}");
    assert_eq!(numbers[0], 1_280_834_012_576_002_048);
    assert!(numbers[1..].iter().all(|id| *id > numbers[0]), "{out}");
}

/// The other guides' TOML blocks are config files a server loads: every key is known and of the
/// right kind (for the REST server, or the TCP server where the block is about it).
#[test]
fn the_guides_toml_blocks_are_server_configs() {
    let dir = tempfile::tempdir().unwrap();
    for guide in [
        "docs/machine-ids.md",
        "docs/console.md",
        "docs/segment.md",
        "docs/seq.md",
        "docs/seq-cluster.md",
        "docs/zookeeper.md",
    ] {
        for (line, body) in snippets(guide, "toml") {
            let file = dir.path().join("snippet.toml");
            std::fs::write(&file, &body).unwrap();
            let rest = vesta_rest::RestConfig::from_toml_file_unchecked(&file);
            let tcp = vesta_server::TcpConfig::from_toml_file_unchecked(&file);
            assert!(
                rest.is_ok() || tcp.is_ok(),
                "{guide} line {line}: {}\n{body}",
                rest.err().map(|e| e.to_string()).unwrap_or_default()
            );
        }
    }
}
