//! A state file is held by the file, not the path: a second process reaching it through a
//! symlink, `..`, a hard link or a bind mount, or running on a copy of it taken while the
//! first runs, is refused — each on another host (another hold directory), so only the state
//! file's own lock can stop it. And the files vesta keeps (hold records, `.lock` files),
//! deleted while a server runs, let no second process issue its IDs; and a hold directory is
//! one host however `VESTA_HOLD_DIR` names it.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use vesta_tests::bin::{ServerChild, fails_in_one_line, vesta_command};
use vesta_tests::operator::{Ledger, Seat, genids};

use super::{MIN_GRANULARITY, ONE_FILE, ONE_HOLDER, config, held_by, path_str, serve_args};

/// Deletes every file directly in `dir`; returns how many.
pub(super) fn delete_files_in(dir: &Path) -> usize {
    let mut deleted = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_file() {
            std::fs::remove_file(&path).unwrap();
            deleted += 1;
        }
    }
    deleted
}

/// The state file's `written_ms` line.
fn written(state: &Path) -> String {
    std::fs::read_to_string(state)
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with("written_ms"))
        .unwrap_or_default()
        .to_owned()
}

/// Waits (at most 10 s) until the state file has been rewritten since it said `before`.
fn rewritten_since(state: &Path, before: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while written(state) == before {
        assert!(
            Instant::now() < deadline,
            "{} not rewritten",
            state.display()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn assert_symlink_to(link: &Path, target: &Path) {
    let meta = std::fs::symlink_metadata(link).unwrap();
    assert!(
        meta.file_type().is_symlink(),
        "{} is no symlink",
        link.display()
    );
    assert_eq!(std::fs::read_link(link).unwrap(), target);
}

/// `DIR` bind-mounted on `at` for as long as this lives (root only).
struct BindMount(std::path::PathBuf);

impl BindMount {
    fn new(dir: &Path, at: &Path) -> Option<BindMount> {
        std::fs::create_dir_all(at).unwrap();
        let ok = Command::new("mount")
            .args(["--bind", path_str(dir), path_str(at)])
            .output()
            .is_ok_and(|o| o.status.success());
        ok.then(|| BindMount(at.to_owned()))
    }
}

impl Drop for BindMount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

/// A REST server on `link.state`, a symlink to `state/m.state`: a second server on another
/// host (its own hold directory) with the same machine ID is refused on the real path, on
/// another symlink, on `state/sub/../m.state`, on a hard link made while it runs, on a copy
/// made while it runs, and on a bind mount of `state/` (as root, where `mount --bind` works);
/// the first server's rewrites keep `link.state` a symlink, and it serves on throughout.
#[test]
fn a_state_file_in_use_is_refused_through_any_other_path() {
    let tmp = tempfile::tempdir().unwrap();
    // The paths as the refusals name them: no symlink on the way to the temporary directory.
    let root = std::fs::canonicalize(tmp.path()).unwrap();
    let here = Seat::new(&root, "here", "u");
    let there = Seat::new(&root, "there", "u");
    let dir = root.join("state");
    std::fs::create_dir_all(dir.join("sub")).unwrap();
    let real = dir.join("m.state");
    let link = root.join("link.state");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let file = |name: &str| root.join(name);
    let first = config(&file("first.toml"), MIN_GRANULARITY, 955, Some(&link));
    let server = here.serve("rest", &["--config", path_str(&first)], &[]);
    let mut ledger = Ledger::new();
    ledger.add("before", genids(&server, 1000));
    let before = written(&real);
    rewritten_since(&real, &before);
    assert_symlink_to(&link, &real);

    let held = held_by(&server);
    let second = |name: &str, state: &Path, needles: &[&str]| -> String {
        let conf = config(&file(name), MIN_GRANULARITY, 955, Some(state));
        let line = there.fails(&serve_args("rest", &["--config", path_str(&conf)]), needles);
        assert!(line.contains(ONE_FILE), "{line}");
        line
    };
    let through = |p: &Path| {
        format!(
            "the state file {} (that is {})",
            p.display(),
            real.display()
        )
    };
    second(
        "real.toml",
        &real,
        &[&format!("the state file {} is held", real.display()), &held],
    );
    let link2 = file("link2.state");
    std::os::unix::fs::symlink(&real, &link2).unwrap();
    second("link2.toml", &link2, &[&through(&link2), &held]);
    let dotted = dir.join("sub/../m.state");
    second("dotted.toml", &dotted, &[&through(&dotted), &held]);

    // A hard link: refused for its two names; should the server's rewrite (every second)
    // have replaced the file meanwhile, the link is a copy of it and refused as that.
    let hard = dir.join("hard.state");
    std::fs::hard_link(&real, &hard).unwrap();
    let conf = config(&file("hard.toml"), MIN_GRANULARITY, 955, Some(&hard));
    let line = there.fails(
        &serve_args("rest", &["--config", path_str(&conf)]),
        &[&format!("state file {}", hard.display())],
    );
    assert!(
        line.contains("2 names (a hard link)")
            || (line.contains("(or a copy of it: its file_id") && line.contains(&held)),
        "{line}"
    );
    std::fs::remove_file(&hard).unwrap();

    let copy = file("copy.state");
    std::fs::copy(&real, &copy).unwrap();
    let copied = format!(
        "the state file {} (or a copy of it: its file_id",
        copy.display()
    );
    second("copy.toml", &copy, &[&copied, &held]);

    let am_root = rustix::process::geteuid().is_root();
    match am_root
        .then(|| BindMount::new(&dir, &file("bound")))
        .flatten()
    {
        Some(mount) => {
            let bound = mount.0.join("m.state");
            let named = format!("the state file {} is held", bound.display());
            second("bound.toml", &bound, &[&named, &held]);
        }
        None => println!("no bind mount here (root: {am_root}): that case is not tried"),
    }

    ledger.add("after", genids(&server, 1000));
    server.stop_cleanly();
    assert_symlink_to(&link, &real);
    let record = std::fs::read_to_string(&link).unwrap();
    assert!(
        record.contains("clean = true"),
        "the stop went through the link: {record}"
    );
    ledger.assert_none_twice("one server");
}

/// A state file with two names from the start (a hard link) is refused at once, by `vesta gen`
/// and by a server alike: either name would be a second way in.
#[test]
fn a_state_file_with_two_names_is_refused() {
    let root = tempfile::tempdir().unwrap();
    let seat = Seat::new(root.path(), "h", "u");
    let a = root.path().join("a.state");
    let b = root.path().join("b.state");
    seat.run_gen(&["--type", "min-granularity", "--state-file", path_str(&a)]);
    std::fs::hard_link(&a, &b).unwrap();
    for state in [&a, &b] {
        let named = format!("state file {}", state.display());
        seat.fails(
            &[
                "gen",
                "--type",
                "min-granularity",
                "--state-file",
                path_str(state),
            ],
            &[&named, "2 names (a hard link)"],
        );
        let conf = config(
            &root.path().join("c.toml"),
            MIN_GRANULARITY,
            958,
            Some(state),
        );
        seat.fails(
            &serve_args("rest", &["--config", path_str(&conf)]),
            &[&named, "2 names (a hard link)"],
        );
    }
}

/// A server with a state file; while it runs, every file of the hold directory (its host
/// record) and its state file's `.lock` are deleted. A second server on the same host with a
/// state file of its own is still refused (the kernel holds the machine ID, not a file), and so
/// is one on the first one's state file; once the first has stopped, the second issues after
/// it. Vesta min-granularity and Leaf; every ID distinct.
#[test]
fn deleting_the_files_vesta_keeps_lets_no_second_server_in() {
    let root = tempfile::tempdir().unwrap();
    for (name, id) in [("min-granularity", MIN_GRANULARITY), ("leaf", super::LEAF)] {
        let seat = Seat::new(root.path(), name, name);
        let file = |f: &str| root.path().join(format!("{name}-{f}"));
        let (state_a, state_b) = (file("a.state"), file("b.state"));
        let a = config(&file("a.toml"), id, 953, Some(&state_a));
        let b = config(&file("b.toml"), id, 953, Some(&state_b));
        let mut ledger = Ledger::new();
        let server = seat.serve("rest", &["--config", path_str(&a)], &[]);
        ledger.add("first", genids(&server, 10_000));

        assert!(delete_files_in(&seat.hold_dir) > 0, "a record to delete");
        let lock = state_a.with_file_name(format!("{name}-a.state.lock"));
        std::fs::remove_file(&lock).unwrap();
        let held = held_by(&server);
        seat.fails(
            &serve_args("rest", &["--config", path_str(&b)]),
            &["machine 953 of ", &held, ONE_HOLDER],
        );
        seat.fails(
            &serve_args("rest", &["--config", path_str(&a)]),
            &[
                &format!("the state file {}", state_a.display()),
                &held,
                ONE_FILE,
            ],
        );
        ledger.add("first, after", genids(&server, 10_000));
        server.stop_cleanly();

        let server = seat.serve("rest", &["--config", path_str(&b)], &[]);
        ledger.add("second", genids(&server, 10_000));
        server.stop_cleanly();
        assert_eq!(ledger.assert_none_twice(name), 30_000);
    }
}

/// One hold directory named two ways — `VESTA_HOLD_DIR=X`, `X/`, a symlink to `X` — is one
/// host: a second Leaf server on machine 959 (no state file) is refused whichever way it names
/// the directory. (Found writing these tests: the kernel's names were keyed by the variable's
/// spelling, and two servers with `X` and `X/` issued 5,904 of 20,000 IDs twice.)
#[test]
fn a_hold_directory_named_two_ways_is_one_host() {
    let root = tempfile::tempdir().unwrap();
    let hold = root.path().join("holds");
    let link = root.path().join("link");
    std::fs::create_dir(&hold).unwrap();
    std::os::unix::fs::symlink(&hold, &link).unwrap();
    let leaf = ["--layout", "leaf", "--machine", "959"];
    let first = path_str(&hold).to_owned();
    let server = ServerChild::start("rest", &leaf, &[("VESTA_HOLD_DIR", &first)]);
    for other in [
        format!("{first}/"),
        path_str(&link).to_owned(),
        format!("{first}/../holds"),
    ] {
        let mut second = vesta_command();
        second
            .env("VESTA_HOLD_DIR", &other)
            .args(serve_args("tcp", &leaf));
        fails_in_one_line(
            &mut second,
            &[
                &super::machine_held(959, "leaf"),
                &held_by(&server),
                ONE_HOLDER,
            ],
        );
    }
    server.stop_cleanly();
}
