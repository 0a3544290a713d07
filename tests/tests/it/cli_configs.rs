//! What an operator hands the `vesta` command: every shipped config (`deploy/etc/vesta/*.toml`,
//! `conf/*.toml`) to the commands that only read the layout (`layout`, `explain`, `make`:
//! the sections they do not use left unread, an unknown key inside the ones they read still
//! refused); and an SQLite URL in a directory that does not exist, for the sequences, segment
//! mode and the SQL machine lease alike: refused in one line naming the directory.

use vesta_tests::bin::{vesta_fails, vesta_ok};

/// The repository's root.
fn repo() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_owned()
}

#[test]
fn layout_explain_and_make_read_every_shipped_config() {
    let mut configs = Vec::new();
    for dir in ["deploy/etc/vesta", "conf"] {
        for entry in std::fs::read_dir(repo().join(dir)).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "toml") {
                configs.push(path);
            }
        }
    }
    assert!(configs.len() >= 5, "{configs:?}");
    for config in &configs {
        let file = config.to_str().unwrap();
        let shown = vesta_ok(&["layout", "--config", file]);
        assert!(shown.contains("type 0 max-peak"), "{file}: {shown}");
        let json = vesta_ok(&["layout", "--json", "--config", file]);
        assert!(json.contains("\"name\": \"vesta\""), "{file}: {json}");
        let explained = vesta_ok(&["explain", "--config", file, "402919754366452736"]);
        assert!(
            explained.contains("timestamp  2026-11-21T19:37:43.000Z"),
            "{file}: {explained}"
        );
        let made = vesta_ok(&[
            "make",
            "--config",
            file,
            "--time",
            "1000",
            "--seq",
            "7",
            "--machine",
            "3",
        ]);
        assert_eq!(made.trim(), "1073741831171", "{file}");
    }
    // A server's config with a typo inside [id]: refused, naming the key and the file.
    let dir = tempfile::tempdir().unwrap();
    let typo = dir.path().join("rest.toml");
    std::fs::write(
        &typo,
        "[server]\nlisten = \"127.0.0.1:8080\"\n[id]\nlayuot = \"leaf\"\n",
    )
    .unwrap();
    for command in ["layout", "explain"] {
        let mut args = vec![command, "--config", typo.to_str().unwrap()];
        if command == "explain" {
            args.push("1");
        }
        vesta_fails(&args, &["unknown field `layuot`", "rest.toml"]);
    }
    // Its [id] section is read: the layout is the server's.
    std::fs::write(&typo, "[server]\nmake = false\n[id]\nlayout = \"leaf\"\n").unwrap();
    let shown = vesta_ok(&["layout", "--config", typo.to_str().unwrap()]);
    assert!(shown.contains("layout leaf"), "{shown}");
}

#[test]
fn an_sqlite_file_in_a_missing_directory_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("var/lib/vesta");
    let shown = missing.display().to_string();
    let url = |file: &str| format!("sqlite://{}/{file}", missing.display());
    let needles = [shown.as_str(), "does not exist"];
    // The sequences (a server's --seq-db opens the same way, at start).
    vesta_fails(&["seq", "next", "k", "--db", &url("seq.db")], &needles);
    // Segment mode.
    vesta_fails(&["segment", "init", "--db", &url("segments.db")], &needles);
    // The SQL machine lease.
    vesta_fails(
        &["gen", "-n", "1", "--machine-db", &url("lease.db")],
        &needles,
    );
    assert!(!missing.exists(), "nothing creates the directory");
}
