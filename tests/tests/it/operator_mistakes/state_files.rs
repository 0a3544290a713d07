//! Mistakes made on one machine state file: two processes on it, an older copy of it restored
//! under a `vesta gen` or a REST server, and the epoch changed under it.

use super::*;

// ---- 1. Two processes on one machine state file ----

/// Two `vesta gen --config v.toml -n 300000` started together on one state file: the second
/// waits for the first's lock and continues after it, so all 600,000 IDs are distinct.
#[test]
fn two_gen_runs_on_one_state_file_take_turns() {
    let root = tempfile::tempdir().unwrap();
    for family in [MAX_PEAK, MIN_GRANULARITY, LEAF] {
        let seat = Seat::new(root.path(), family.name, family.name);
        let conf = config(
            &root.path().join(format!("{}.toml", family.name)),
            family,
            "",
            7,
            &root.path().join(format!("{}.state", family.name)),
        );
        // `vesta gen ... > a.txt & vesta gen ... > b.txt; wait`
        let runs: Vec<(PathBuf, std::process::Child)> = ["a", "b"]
            .iter()
            .map(|run| {
                let out = root.path().join(format!("{}-{run}.txt", family.name));
                let child = seat
                    .cmd(["gen", "--config", path_str(&conf), "-n", "300000"])
                    .stdout(std::fs::File::create(&out).unwrap())
                    .spawn()
                    .unwrap();
                (out, child)
            })
            .collect();
        let mut ledger = Ledger::new();
        for (out, mut child) in runs {
            assert!(child.wait().unwrap().success());
            let text = std::fs::read_to_string(&out).unwrap();
            let ids = text.lines().map(|l| l.parse().unwrap());
            ledger.add(out.display().to_string(), ids);
        }
        assert_eq!(ledger.assert_none_twice(family.name), 600_000);
    }
}

/// Two `vesta serve rest` (and two `serve tcp`) with one config on two ports: the second is
/// refused at start in one line naming the state file and the first one's PID; a second config
/// with its own state file but the same machine ID is refused by the host's hold of the ID. The
/// first serves on, and once it has stopped the second starts and issues after it.
#[test]
fn a_second_server_on_one_state_file_is_refused_naming_the_file_and_its_holder() {
    let root = tempfile::tempdir().unwrap();
    for (kind, family) in [("rest", MAX_PEAK), ("tcp", MIN_GRANULARITY), ("rest", LEAF)] {
        let name = format!("{kind}-{}", family.name);
        let seat = Seat::new(root.path(), &name, &name);
        let state = root.path().join(format!("{name}.state"));
        let conf = config(
            &root.path().join(format!("{name}.toml")),
            family,
            "",
            930,
            &state,
        );
        let serve = |conf: &Path| seat.serve(kind, &["--config", path_str(conf)], &[]);
        let first = serve(&conf);
        // The file's lock names its holder as it wrote it (`pid N on host H since ...`), the
        // kernel's hold of the machine ID from the socket's peer (`pid N (uid U: COMMAND)`).
        let held_by = format!("is held by pid {}", first.child.id());
        let second = ["serve", kind, "--listen", "127.0.0.1:0", "--config"];
        seat.fails(
            &[&second[..], &[path_str(&conf)]].concat(),
            &[
                &format!("the state file {} is held by", state.display()),
                &held_by,
                "two on one file issue the same IDs",
            ],
        );
        let other_state = root.path().join(format!("{name}-other.state"));
        let other = config(
            &root.path().join(format!("{name}-other.toml")),
            family,
            "",
            930,
            &other_state,
        );
        seat.fails(
            &[&second[..], &[path_str(&other)]].concat(),
            &["machine 930 of ", " on this host ", &held_by],
        );
        let mut ledger = Ledger::new();
        ledger.add("the first server", server_ids(kind, &first, 5000));
        first.stop_cleanly();
        let next = serve(&conf);
        ledger.add("the second server", server_ids(kind, &next, 5000));
        next.stop_cleanly();
        ledger.assert_none_twice(&name);
    }
}

// ---- 2. An older copy of the state file ----

/// `vesta gen` on a state file restored from a backup — one taken after a clean stop, one
/// taken while a run issued (that run then SIGKILLed) — and on a copy taken to another host:
/// the old mark is never trusted backwards, so no run reissues what a later run issued.
#[test]
fn gen_on_a_restored_state_file_never_reissues() {
    let root = tempfile::tempdir().unwrap();
    for family in [MAX_PEAK, MIN_GRANULARITY] {
        let here = Seat::new(root.path(), family.name, family.name);
        let state = root.path().join(format!("{}.state", family.name));
        let conf = config(
            &root.path().join(format!("{}.toml", family.name)),
            family,
            "",
            8,
            &state,
        );
        let run = |seat: &Seat, conf: &Path, n: &str| {
            seat.run_gen(&["--config", path_str(conf), "-n", n])
        };
        let mut ledger = Ledger::new();
        ledger.add("run 1", run(&here, &conf, "20000"));
        let clean_backup = std::fs::read(&state).unwrap();
        ledger.add("run 2", run(&here, &conf, "200000"));
        std::fs::write(&state, &clean_backup).unwrap();
        ledger.add("run 3, on the clean backup", run(&here, &conf, "200000"));

        // A run SIGKILLed after 600,000 IDs; its state file copied while it issued.
        let mut child = spawn_gen(&here, &["--config", path_str(&conf), "-n", "3000000"]);
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let mut read = |n: usize| -> Vec<u64> {
            (0..n)
                .map(|_| lines.next().unwrap().unwrap().parse().unwrap())
                .collect()
        };
        let mut killed = read(100_000);
        let running_backup = std::fs::read(&state).unwrap();
        killed.extend(read(500_000));
        child.kill().unwrap();
        child.wait().unwrap();
        ledger.add("run 4, SIGKILLed", killed);
        std::fs::write(&state, &clean_backup).unwrap();
        ledger.add(
            "run 5, on the clean backup again",
            run(&here, &conf, "200000"),
        );
        std::fs::write(&state, &running_backup).unwrap();
        ledger.add("run 6, on the running backup", run(&here, &conf, "200000"));

        // The file copied to another host, then run here once more before the copy starts.
        let there = Seat::new(root.path(), &format!("{}-b", family.name), family.name);
        let copy = root.path().join(format!("{}-copy.state", family.name));
        std::fs::copy(&state, &copy).unwrap();
        let copy_conf = config(
            &root.path().join(format!("{}-copy.toml", family.name)),
            family,
            "",
            8,
            &copy,
        );
        ledger.add("run 7", run(&here, &conf, "200000"));
        ledger.add(
            "run 8, on the copy on another host",
            run(&there, &copy_conf, "200000"),
        );
        ledger.assert_none_twice(family.name);
    }
}

/// How a server is stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stop {
    Kill,
    Term,
}

fn stop(server: ServerChild, how: Stop) {
    match how {
        Stop::Term => {
            server.stop_cleanly();
        }
        Stop::Kill => {
            let mut server = server;
            server.child.kill().unwrap();
            server.child.wait().unwrap();
        }
    }
}

/// A REST server restarted on a restored copy of its state file: after SIGKILL on the copy
/// taken while it issued, after SIGTERM on the copy of an earlier clean stop. IDs from
/// `/genids` before and after: none twice.
#[test]
fn a_rest_server_restarted_on_a_restored_state_file_never_reissues() {
    let root = tempfile::tempdir().unwrap();
    for family in [MAX_PEAK, MIN_GRANULARITY] {
        for how in [Stop::Kill, Stop::Term] {
            let name = format!("{}-{how:?}", family.name);
            let seat = Seat::new(root.path(), &name, &name);
            let state = root.path().join(format!("{name}.state"));
            let conf = config(
                &root.path().join(format!("{name}.toml")),
                family,
                "",
                931,
                &state,
            );
            let serve = || seat.serve("rest", &["--config", path_str(&conf)], &[]);
            let mut ledger = Ledger::new();
            let first = serve();
            ledger.add("incarnation 1", genids(&first, 1000));
            first.stop_cleanly();
            let clean_backup = std::fs::read(&state).unwrap();

            let second = serve();
            let mut running_backup = Vec::new();
            for batch in 0..10 {
                ledger.add(
                    format!("incarnation 2, batch {batch}"),
                    genids(&second, 10_000),
                );
                if batch == 3 {
                    running_backup = std::fs::read(&state).unwrap();
                }
            }
            stop(second, how);
            let backup = match how {
                Stop::Kill => running_backup,
                Stop::Term => clean_backup,
            };
            std::fs::write(&state, backup).unwrap();
            let restarted = serve();
            for batch in 0..10 {
                ledger.add(
                    format!("incarnation 3 (restored), batch {batch}"),
                    genids(&restarted, 10_000),
                );
            }
            stop(restarted, how);
            assert_eq!(ledger.assert_none_twice(&name), 201_000);
        }
    }
}

// ---- 3. The epoch changed under one state file ----

/// The needles of the refusal of machine `machine`'s mark in `state`, counted from Vesta's
/// epoch, by an issuer counting from the `Z` one (or the other way round).
fn epoch_refusal(machine: u64, state: &Path) -> [String; 5] {
    [
        format!(
            "machine {machine}'s mark in the state file {}",
            state.display()
        ),
        VESTA_EPOCH.to_owned(),
        Z_EPOCH.to_owned(),
        "IDs of the two can be equal".to_owned(),
        format!("vesta machine retire --state-file {}", state.display()),
    ]
}

fn needles(n: &[String]) -> Vec<&str> {
    n.iter().map(String::as_str).collect()
}

/// `--epoch` passed once, or `epoch` written `...T00:00:00Z` for Vesta's `+08:00`, under the
/// state file of `vesta gen` and of `vesta serve rest`: refused in one line naming both epochs
/// and `vesta machine retire --state-file`; once retired (and this host's hold of the machine,
/// which remembers the epoch too), the new epoch starts (and the old one is then refused).
#[test]
fn an_epoch_changed_under_one_state_file_is_refused_until_retired() {
    let root = tempfile::tempdir().unwrap();
    for family in [MAX_PEAK, MIN_GRANULARITY] {
        let seat = Seat::new(root.path(), family.name, family.name);
        let state = root.path().join(format!("{}.state", family.name));
        let file = |name: &str| root.path().join(format!("{}-{name}.toml", family.name));
        let conf = config(&file("vesta"), family, "", 9, &state);
        let z_conf = config(
            &file("z"),
            family,
            "epoch = \"2015-01-01T00:00:00Z\"\n",
            9,
            &state,
        );
        let refusal = epoch_refusal(9, &state);
        seat.run_gen(&["--config", path_str(&conf), "-n", "10"]);
        seat.fails(
            &[
                "gen",
                "--config",
                path_str(&conf),
                "--epoch",
                "2015-01-01T00:00:00Z",
            ],
            &needles(&refusal),
        );
        seat.fails(&["gen", "--config", path_str(&z_conf)], &needles(&refusal));

        // A REST server's state file: the same refusal at start.
        let rest_state = root.path().join(format!("{}-rest.state", family.name));
        let rest = config(&file("rest"), family, "", 932, &rest_state);
        let rest_z = config(
            &file("rest-z"),
            family,
            "epoch = \"2015-01-01T00:00:00Z\"\n",
            932,
            &rest_state,
        );
        // It issues: a server that issued nothing leaves no mark (its file says so), and a
        // start in another epoch after it is rightly not refused.
        let first = seat.serve("rest", &["--config", path_str(&rest)], &[]);
        assert_eq!(genids(&first, 10).len(), 10);
        first.stop_cleanly();
        seat.fails(
            &[
                "serve",
                "rest",
                "--listen",
                "127.0.0.1:0",
                "--config",
                path_str(&rest_z),
            ],
            &needles(&epoch_refusal(932, &rest_state)),
        );

        // Retired: the new epoch starts, and the old one is now the other one.
        let said = seat.succeeds(&["machine", "retire", "--state-file", path_str(&state)]);
        assert!(
            said.starts_with(&format!("retired the state file {}", state.display())),
            "{said}"
        );
        // This host's hold of machine 9 still remembers the old epoch: refused in one line
        // naming the hold and its own retire command, then retired as well.
        let line = seat.fails(
            &["gen", "--config", path_str(&z_conf)],
            &[
                "machine 9's mark in this host's hold record ",
                VESTA_EPOCH,
                Z_EPOCH,
                "IDs of the two can be equal",
                "vesta machine retire --host-hold ",
            ],
        );
        let hold = line
            .rsplit("vesta machine retire --host-hold ")
            .next()
            .unwrap()
            .trim();
        assert!(Path::new(hold).starts_with(&seat.hold_dir), "{line}");
        let said = seat.succeeds(&["machine", "retire", "--host-hold", hold]);
        assert!(said.starts_with("retired the host hold"), "{said}");
        assert_eq!(
            seat.run_gen(&["--config", path_str(&z_conf), "-n", "10"])
                .len(),
            10
        );
        seat.fails(&["gen", "--config", path_str(&conf)], &needles(&refusal));
    }

    // `vesta gen` on its own state file (no config): `--epoch` once is refused too.
    let seat = Seat::new(root.path(), "own", "own");
    for family in [MIN_GRANULARITY, LEAF] {
        seat.run_gen(&[&family.flags[..], &["-n", "10"]].concat());
        let line = seat.fails(
            &[
                &["gen"],
                &family.flags[..],
                &["--epoch", "2020-01-01T00:00:00Z"],
            ]
            .concat(),
            &[
                "machine 0's mark in the state file ",
                "2020-01-01T00:00:00.000Z (1577836800000 ms)",
                &format!(
                    "vesta machine retire --state-file {}",
                    seat.state_home.join("vesta").display()
                ),
            ],
        );
        assert!(line.contains("IDs of the two can be equal"), "{line}");
    }
}
