//! The scenarios on an SQLite file, and what only a file has (its copy as a backup, its lock).

use super::*;
use vesta_tests::leaf::SqliteLock;

fn url(dir: &Path) -> String {
    format!("sqlite://{}", dir.join("segments.db").display())
}

#[test]
fn processes_and_leaf_never_duplicate() {
    let dir = tempfile::tempdir().unwrap();
    super::processes_and_leaf_never_duplicate(&url(dir.path()));
}

#[test]
fn outage_drains_buffers_fails_fast_and_recovers() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("segments.db");
    let lock = std::cell::RefCell::new(None);
    super::outage(
        &url(dir.path()),
        &mut || *lock.borrow_mut() = Some(SqliteLock::take(&path)),
        &mut || {
            if let Some(l) = lock.borrow_mut().take() {
                l.release();
            }
        },
    );
}

#[test]
fn shutdown_gives_the_tail_back() {
    let dir = tempfile::tempdir().unwrap();
    super::give_back(&url(dir.path()));
}

#[test]
fn bad_input_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let url = url(dir.path());
    // An existing file without the table (init is what creates the file).
    fs::write(dir.path().join("segments.db"), b"").unwrap();
    let missing = format!("sqlite://{}", dir.path().join("nope.db").display());
    super::bad_input(&url, &[(&missing, "nope.db does not exist")]);
    assert!(!dir.path().join("nope.db").exists(), "no file created");
}

#[test]
fn a_restored_backup_is_refused_until_raised() {
    let dir = tempfile::tempdir().unwrap();
    let (db, copy) = (dir.path().join("segments.db"), dir.path().join("backup.db"));
    super::restore_guard(
        &url(dir.path()),
        &mut || {
            fs::copy(&db, &copy).unwrap();
        },
        &mut || {
            fs::copy(&copy, &db).unwrap();
        },
    );
}

#[test]
fn the_default_database_is_a_file_in_the_working_directory() {
    let dir = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        let out = vesta_cmd(args)
            .current_dir(dir.path())
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        (
            out.status.success(),
            String::from_utf8(out.stdout).unwrap(),
            err,
        )
    };
    let (ok, _, err) = run(&["segment", "get", "t"]);
    assert!(
        !ok && err.contains("vesta-segments.db does not exist"),
        "{err}"
    );
    assert!(
        !dir.path().join("vesta-segments.db").exists(),
        "get created nothing"
    );
    assert!(run(&["segment", "init"]).0);
    assert!(dir.path().join("vesta-segments.db").exists());
    assert!(run(&["segment", "create", "t", "--step", "3", "--start", "42"]).0);
    let (ok, out, err) = run(&["segment", "get", "t", "-n", "4"]);
    assert!(ok, "{err}");
    assert_eq!(out, "42\n43\n44\n45\n");
}
