//! A server restarted cleanly against one that crashed, two users with two epochs on one
//! machine ID, and a static machine ID moved to another host and back.

use super::*;

// ---- 5. A clean restart against a crash ----

/// The first ID a REST server hands out, as fields.
fn genid(server: &ServerChild) -> (u64, IdFields) {
    let (status, body) = http(&server.addr, "GET", "/genid");
    assert_eq!(status, 200, "{body}");
    let id = body.trim().parse().unwrap();
    (id, IdFields::decode(id))
}

/// Sleeps until the wall clock is in the first fifth of a second (arranging a test, never
/// asserting on the clock).
fn early_in_a_second() {
    let ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .subsec_millis();
    if ms > 200 {
        std::thread::sleep(Duration::from_millis(u64::from(1000 - ms)));
    }
}

/// `vesta serve rest` with a state file: after SIGTERM a restart continues at once (no start
/// guard in its log; in max-peak the first ID is the last one's seq + 1 in the same second);
/// after SIGKILL a restart waits (the start guard logs its wait, and its first ID is at least
/// the rollback tolerance and a unit after the last one: two seconds in max-peak, six ms in
/// min-granularity). Every ID distinct.
#[test]
fn a_clean_restart_continues_and_a_crash_restart_waits() {
    let root = tempfile::tempdir().unwrap();
    let envs = [("RUST_LOG", GUARD_LOG)];
    for (family, after_crash) in [(MAX_PEAK, 2), (MIN_GRANULARITY, 6)] {
        let seat = Seat::new(root.path(), family.name, family.name);
        let conf = config(
            &root.path().join(format!("{}.toml", family.name)),
            family,
            "",
            933,
            &root.path().join(format!("{}.state", family.name)),
        );
        let serve = || seat.serve("rest", &["--config", path_str(&conf)], &envs);
        let mut ledger = Ledger::new();
        let mut server = serve();
        assert!(
            server
                .before_startup
                .iter()
                .any(|l| l.contains(GUARD_WAITS)),
            "a first start waits: {:?}",
            server.before_startup
        );
        ledger.add("the first start", genids(&server, 5000));
        let mut same_unit = false;
        for restart in 0..5 {
            if family.name == "max-peak" {
                early_in_a_second();
            }
            let (id, last) = genid(&server);
            ledger.add(format!("before clean restart {restart}"), [id]);
            server.stop_cleanly();
            server = serve();
            assert!(
                !server
                    .before_startup
                    .iter()
                    .any(|l| l.contains(GUARD_WAITS)),
                "a clean restart waited: {:?}",
                server.before_startup
            );
            let (id, next) = genid(&server);
            ledger.add(format!("after clean restart {restart}"), [id]);
            if next.time == last.time {
                assert_eq!(next.seq, last.seq + 1, "{last:?} then {next:?}");
                same_unit = true;
                break;
            }
        }
        if family.name == "max-peak" {
            assert!(same_unit, "five clean restarts each took most of a second");
        }
        ledger.add("before the crash", genids(&server, 5000));
        let (id, last) = genid(&server);
        ledger.add("the last before the crash", [id]);
        server.child.kill().unwrap();
        server.child.wait().unwrap();
        let server = serve();
        assert!(
            server
                .before_startup
                .iter()
                .any(|l| l.contains(GUARD_WAITS)),
            "a restart after a crash did not wait: {:?}",
            server.before_startup
        );
        let (id, next) = genid(&server);
        assert!(
            next.time >= last.time + after_crash,
            "{}: {last:?} then {next:?}",
            family.name
        );
        ledger.add("after the crash", [id]);
        ledger.add("after the crash, more", genids(&server, 5000));
        server.stop_cleanly();
        ledger.assert_none_twice(family.name);
    }
}

// ---- Found while writing these tests (duplicates, fixed) ----

/// Two users on one host, each with `vesta gen`'s own state file of machine 0, one passing
/// `--epoch` once (three seconds after Vesta's here; `Z` for `+08:00` is eight hours, which
/// collides the same way eight hours apart): the second user's state file is new, so only the
/// host's hold, which records what its last holder counted in, can refuse the other epoch.
/// The second user's runs are refused naming the hold, and issue no ID twice.
#[test]
fn two_users_with_two_epochs_on_one_machine_id_never_collide() {
    let root = tempfile::tempdir().unwrap();
    let a = Seat::new(root.path(), "host", "a");
    let b = a.other_user(root.path(), "b");
    let mut ledger = Ledger::new();
    ledger.add("user a", a.run_gen(&["-n", "1000000"]));
    for _ in 0..2 {
        let out = b
            .cmd(["gen", "--epoch", "1420041603000", "-n", "1000000"])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "user b issued under another epoch");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains("1420041603000"), "{err}");
        assert!(err.contains("this host's hold"), "{err}");
        assert!(err.contains("vesta machine retire --host-hold"), "{err}");
    }
    // The same epoch as user a's runs (its own new state file, waiting out now + tolerance).
    ledger.add("user b, a's epoch", b.run_gen(&["-n", "1000000"]));
    ledger.assert_none_twice("two epochs on one host");
}

/// A static machine ID moved to another host with a copy of its state file, then back: the
/// first host stopped cleanly before the copy ran, and its next start continues that clean
/// stop because its own host's hold vouches for it, though the other host issued with the ID
/// since. The continuation stays within the stopped unit and then waits beyond now +
/// tolerance, past everything the other host issued.
#[test]
fn a_static_id_moved_to_another_host_and_back_never_collides() {
    let root = tempfile::tempdir().unwrap();
    let a = Seat::new(root.path(), "a", "ops");
    let b = Seat::new(root.path(), "b", "ops");
    let (state_a, state_b) = (root.path().join("a.state"), root.path().join("b.state"));
    let conf_a = config(&root.path().join("a.toml"), MAX_PEAK, "", 9, &state_a);
    let conf_b = config(&root.path().join("b.toml"), MAX_PEAK, "", 9, &state_b);
    let mut ledger = Ledger::new();
    ledger.add(
        "host a",
        a.run_gen(&["--config", path_str(&conf_a), "-n", "1000"]),
    );
    std::fs::copy(&state_a, &state_b).unwrap();
    ledger.add(
        "host b, on the copy",
        b.run_gen(&["--config", path_str(&conf_b), "-n", "300000"]),
    );
    ledger.add(
        "host a again",
        a.run_gen(&["--config", path_str(&conf_a), "-n", "300000"]),
    );
    ledger.assert_none_twice("moved and back");
}
