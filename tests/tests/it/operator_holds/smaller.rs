//! The smaller items: a config's machine ID contradicted by `--machine-db`, a hold
//! directory that does not exist yet, `vesta gen` with no usable state directory, and the
//! UidGenerator migration (docs/migrate.md) without a retire.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};

use vesta_tests::bin::{fails_in_one_line, vesta_command};
use vesta_tests::operator::{Ledger, Seat, ids_of};

use super::{config, path_str, serve_args};

/// `[machine] id = 388` in the config and `--machine-db` on the command line: `vesta gen` and
/// `vesta serve rest` are refused in one line naming both (and `--machine 388`), and nothing
/// is leased (no database file appears).
#[test]
fn a_config_machine_id_and_a_machine_db_flag_are_refused_naming_both() {
    let root = tempfile::tempdir().unwrap();
    let seat = Seat::new(root.path(), "h", "u");
    let conf = config(&root.path().join("v.toml"), "", 388, None);
    let db = root.path().join("m.db");
    let url = format!("sqlite://{}", db.display());
    let needles = ["[machine] id = 388", "--machine-db", "--machine 388"];
    seat.fails(
        &["gen", "--config", path_str(&conf), "--machine-db", &url],
        &needles,
    );
    seat.fails(
        &serve_args("rest", &["--config", path_str(&conf), "--machine-db", &url]),
        &needles,
    );
    assert!(!db.exists(), "nothing leased from {url}");
}

/// `VESTA_HOLD_DIR` naming a directory that does not exist: it is made (mode 1777, as the
/// host's), and the run holds and records its machine ID there.
#[test]
fn a_missing_hold_dir_is_made() {
    let root = tempfile::tempdir().unwrap();
    let hold = root.path().join("not/there/yet");
    let mut cmd = vesta_command();
    cmd.env("VESTA_HOLD_DIR", &hold)
        .env("XDG_STATE_HOME", root.path().join("state"))
        .args(["gen", "--type", "min-granularity", "-n", "3"])
        .stdin(Stdio::null());
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(ids_of(&out).len(), 3);
    let mode = std::fs::metadata(&hold).unwrap().permissions().mode();
    assert_eq!(mode & 0o7777, 0o1777, "{:o}", mode);
    assert!(hold.join("vesta-rs.node0-9.m0.hold").is_file());
}

/// Environment variables to set (`Some`) or remove (`None`).
type Env<'a> = Vec<(&'a str, Option<&'a Path>)>;

/// `vesta gen` on the host `hold`, its state directory's variables set by `env` (`None`:
/// removed), with `args`.
fn gen_with(hold: &Path, env: &[(&str, Option<&Path>)], args: &[&str]) -> Command {
    let mut c = vesta_command();
    c.env("VESTA_HOLD_DIR", hold).stdin(Stdio::null());
    for (name, value) in env {
        match value {
            Some(v) => c.env(name, v),
            None => c.env_remove(name),
        };
    }
    c.arg("gen").args(args);
    c
}

/// `vesta gen` with no usable state directory — neither `XDG_STATE_HOME` nor `HOME` set,
/// `HOME` a file (no directory can be made in it, root or not), `XDG_STATE_HOME` a file — runs
/// without a state file, saying so in one line that names `--state-file`; `--state-file FILE`
/// keeps one there, silently. The runs (Vesta's default max-peak once, min-granularity
/// otherwise) share the host's hold of machine 0, and none of their IDs is handed out twice.
#[test]
fn gen_without_a_usable_state_directory_runs_and_says_so() {
    let root = tempfile::tempdir().unwrap();
    let hold = root.path().join("host");
    let a_file = root.path().join("a-file");
    std::fs::write(&a_file, "").unwrap();
    let min = ["--type", "min-granularity", "-n", "20000"];
    let no_state: [(&str, Env, &[&str]); 4] = [
        (
            "no variable",
            vec![("HOME", None), ("XDG_STATE_HOME", None)],
            &["-n", "10"],
        ),
        (
            "no variable",
            vec![("HOME", None), ("XDG_STATE_HOME", None)],
            &min,
        ),
        (
            "HOME a file",
            vec![("HOME", Some(&a_file)), ("XDG_STATE_HOME", None)],
            &min,
        ),
        (
            "XDG_STATE_HOME a file",
            vec![("XDG_STATE_HOME", Some(&a_file))],
            &min,
        ),
    ];
    let mut ledger = Ledger::new();
    for (what, env, args) in no_state {
        let out = gen_with(&hold, &env, args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{what}: {err}");
        assert_eq!(err.lines().count(), 1, "{what}: {err}");
        for needle in [
            "vesta gen: ",
            "going on without a state file",
            "machine 0 is still held on this host",
            "--state-file FILE",
        ] {
            assert!(err.contains(needle), "{what}: {err} lacks {needle:?}");
        }
        ledger.add(what, ids_of(&out));
    }
    let own = root.path().join("own.state");
    for run in 0..2 {
        let env = [("HOME", Some(a_file.as_path())), ("XDG_STATE_HOME", None)];
        let args = [&min[..], &["--state-file", path_str(&own)]].concat();
        let out = gen_with(&hold, &env, &args).output().unwrap();
        assert!(out.status.success());
        assert!(
            out.stderr.is_empty(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        ledger.add(format!("--state-file, run {run}"), ids_of(&out));
    }
    assert!(
        std::fs::read_to_string(&own)
            .unwrap()
            .contains("clean = true")
    );
    assert_eq!(
        ledger.assert_none_twice("without a state directory"),
        100_010
    );
}

/// docs/migrate.md's UidGenerator flow: `vesta gen --layout uid-generator` on its preset
/// epoch fails in one line ("the time field is full"); the same with a new epoch then issues
/// at once, with no `vesta machine retire` in between (the failed run left nothing to retire),
/// and again after it.
#[test]
fn the_uid_generator_migration_needs_no_retire() {
    let root = tempfile::tempdir().unwrap();
    let seat = Seat::new(root.path(), "h", "u");
    let uid = ["gen", "--layout", "uid-generator", "-n", "1"];
    fails_in_one_line(&mut seat.cmd(uid), &["the time field is full"]);
    let new_epoch = [
        "--layout",
        "uid-generator",
        "--epoch",
        "2026-01-01T00:00:00Z",
    ];
    let mut ledger = Ledger::new();
    for run in 0..2 {
        let ids = seat.run_gen(&[&new_epoch[..], &["-n", "100"]].concat());
        assert_eq!(ids.len(), 100);
        ledger.add(format!("run {run}"), ids);
    }
    ledger.assert_none_twice("uid-generator, new epoch");
    let retired = std::fs::read_dir(seat.state_home.join("vesta"))
        .unwrap()
        .filter(|e| {
            let name = e.as_ref().unwrap().file_name();
            name.to_string_lossy().contains(".retired-")
        })
        .count();
    assert_eq!(retired, 0, "nothing was retired");
}
