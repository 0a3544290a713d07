//! `vesta gen` run in parallel on its default state, as `xargs -P4` runs it, by one user and by
//! two, and run twice in a row within one second.

use super::*;

// ---- 4. `vesta gen` in parallel on its default ----

/// IDs per run of the parallel `vesta gen` tests (see the first of them for why so few).
const GEN_RUN: &str = "50000";

/// `RUNS` runs of `vesta gen ARGS`, `PARALLEL` at a time, exactly as `seq RUNS | xargs
/// -PPARALLEL` runs them, on one host (`hold_dir`); run `i` as user `i % users` (state
/// directories `users_dir/user-N`). Returns each run's IDs.
fn xargs_gen(
    out_dir: &Path,
    hold_dir: &Path,
    users_dir: &Path,
    users: usize,
    (runs, parallel): (usize, usize),
    args: &[&str],
) -> Vec<Vec<u64>> {
    std::fs::create_dir_all(out_dir).unwrap();
    let script = r#"run=$1; shift
XDG_STATE_HOME="$USERS_DIR/user-$((run % USERS))" exec "$VESTA" gen "$@" > "$OUT/run-$run.txt""#;
    let mut xargs = Command::new("xargs")
        .args([
            "-P",
            &parallel.to_string(),
            "-I{}",
            "sh",
            "-c",
            script,
            "sh",
            "{}",
        ])
        .args(args)
        .env("RUST_LOG", "error")
        .env("VESTA", vesta())
        .env("VESTA_HOLD_DIR", hold_dir)
        .env("USERS_DIR", users_dir)
        .env("USERS", users.to_string())
        .env("OUT", out_dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("xargs (findutils)");
    let list: String = (0..runs).map(|i| format!("{i}\n")).collect();
    xargs
        .stdin
        .take()
        .unwrap()
        .write_all(list.as_bytes())
        .unwrap();
    let done = xargs.wait_with_output().unwrap();
    assert!(
        done.status.success(),
        "a run failed: {}",
        String::from_utf8_lossy(&done.stderr)
    );
    (0..runs)
        .map(|i| {
            std::fs::read_to_string(out_dir.join(format!("run-{i}.txt")))
                .unwrap()
                .lines()
                .map(|l| l.parse().unwrap())
                .collect()
        })
        .collect()
}

/// `seq 8 | xargs -P4 vesta gen -n 50000` on `vesta gen`'s default (static machine 0, no
/// config; its own state file): the runs take turns on the host's hold of machine 0, and none
/// of the 400,000 IDs is handed out twice; in every layout family.
///
/// A run waits at most `HOLD_WAIT` (10 s) for its turn, and polling for a lock is not a queue:
/// an unlucky run can wait for all seven others (and the first run on the host waits out up
/// to two units of unknown past). Each run is kept short (`GEN_RUN` IDs; 200,000 took 0.08 s
/// in a debug build continuing a clean stop, and a loaded machine made four parallel runs of
/// them miss the wait) so that seven fit in the wait many times over: that is what the test
/// may assume, not an idle machine.
#[test]
fn gen_in_parallel_on_its_default_never_collides() {
    let root = tempfile::tempdir().unwrap();
    for family in [MAX_PEAK, MIN_GRANULARITY, LEAF] {
        let base = root.path().join(family.name);
        let hold = base.join("host");
        std::fs::create_dir_all(&hold).unwrap();
        // The default layout takes no flag at all, as the README's first command.
        let flags: &[&str] = if family.name == "max-peak" {
            &[]
        } else {
            &family.flags
        };
        let runs = xargs_gen(
            &base.join("out"),
            &hold,
            &base,
            1,
            (8, 4),
            &[flags, &["-n", GEN_RUN]].concat(),
        );
        let mut ledger = Ledger::new();
        for (i, ids) in runs.into_iter().enumerate() {
            assert_eq!(ids.len().to_string(), GEN_RUN);
            ledger.add(format!("run {i}"), ids);
        }
        ledger.assert_none_twice(family.name);
    }
}

/// Two users (two `XDG_STATE_HOME`s, so two state files of machine 0) running `vesta gen` in
/// parallel on one host: the host's hold of machine 0 serializes them, and a run that finds
/// the other user's stop on the hold (not its own) waits out what that run may have issued.
#[test]
fn two_users_running_gen_in_parallel_never_collide() {
    let root = tempfile::tempdir().unwrap();
    // The host's hold is under test, not the layout: millisecond layouts, whose switch between
    // users waits milliseconds (max-peak's waits a second or two).
    for (family, runs) in [(MIN_GRANULARITY, 8), (LEAF, 8)] {
        let base = root.path().join(family.name);
        let hold = base.join("host");
        std::fs::create_dir_all(&hold).unwrap();
        let all = xargs_gen(
            &base.join("out"),
            &hold,
            &base,
            2,
            (runs, 4),
            &[&family.flags[..], &["-n", GEN_RUN]].concat(),
        );
        let mut ledger = Ledger::new();
        for (i, ids) in all.into_iter().enumerate() {
            ledger.add(format!("run {i} (user {})", i % 2), ids);
        }
        assert_eq!(
            ledger.assert_none_twice(family.name),
            runs * GEN_RUN.parse::<usize>().unwrap(),
            "{}",
            family.name
        );
        for user in 0..2 {
            let own = base.join(format!("user-{user}/vesta"));
            let files = std::fs::read_dir(&own)
                .unwrap()
                .filter(|e| {
                    let name = e.as_ref().unwrap().file_name();
                    name.to_string_lossy().ends_with(".state")
                })
                .count();
            assert_eq!(files, 1, "{}: each user's own state file", own.display());
        }
    }
}

/// `vesta gen -n 1` twice in a row in max-peak (seconds): the second continues at once. The
/// first run, on a fresh host and user, has no clean stop to continue, so it waits for the
/// clock to pass `now + tolerance` (one second) and issues at the very start of a second, seq
/// 0. The second finds the first's clean stop vouched for by the host's hold and continues
/// right after it: the same second, seq + 1. Had it waited, its ID could not be in that second
/// (a wait ends a whole second later), so this proves there was no wait without timing it.
/// Should the machine stall the second run for most of a second, it lands in the next second
/// (still without waiting, as its log shows): the pair is then tried again on a fresh host.
#[test]
fn gen_n1_twice_in_a_row_continues_in_the_same_second() {
    let root = tempfile::tempdir().unwrap();
    let envs = [("RUST_LOG", GUARD_LOG)];
    for attempt in 0..3 {
        let name = format!("attempt-{attempt}");
        let seat = Seat::new(root.path(), &name, &name);
        let run = || {
            let out = seat.cmd(["gen", "-n", "1"]).envs(envs).output().unwrap();
            assert!(out.status.success());
            let ids = ids_of(&out);
            assert_eq!(ids.len(), 1);
            (
                IdFields::decode(ids[0]),
                String::from_utf8_lossy(&out.stderr).into_owned(),
            )
        };
        let (first, log) = run();
        assert!(log.contains(GUARD_WAITS), "a first run waits: {log}");
        let (second, log) = run();
        assert!(!log.contains(GUARD_WAITS), "the second waited: {log}");
        assert!((second.time, second.seq) > (first.time, first.seq));
        if second.time == first.time {
            assert_eq!(second.seq, first.seq + 1, "{first:?} then {second:?}");
            return;
        }
    }
    panic!("three pairs of runs each took most of a second");
}
