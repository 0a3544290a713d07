//! Segment mode against real databases — an SQLite file, a PostgreSQL server and a MariaDB
//! server, each started by the test — with real `vesta` processes and a raw Leaf-style
//! allocator on the same tag:
//!
//! - two `vesta segment get` processes (one adaptive, one fixed step), a third one killed with
//!   SIGKILL mid-run, and Leaf's own fetch code interleaved: 0 duplicates in over 10M
//!   numbers, each process's numbers increasing;
//! - the database stopped mid-run: numbers keep coming from the buffers, calls fail cleanly
//!   and fast once they are drained, and issuing resumes by itself after a restart;
//! - clean shutdown gives the unused tail back, and leaves `max_id` alone when another
//!   allocator moved it;
//! - bad input (unknown tag, tag too long, bad count or step, missing table, wrong or
//!   unreachable database): one-line error, nothing written;
//! - the restore guard: `leaf_alloc` restored from a real backup (a copy of the SQLite file,
//!   `pg_dump`, `mariadb-dump`) is refused by a process with a state file, naming the floor,
//!   until `vesta segment raise` moves the tag past it; no number is issued twice.

use std::fs;
use std::ops::Range;
use std::path::Path;
use std::process::{Child, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use vesta_segment::{GiveBackOutcome, Health, SegmentError, SegmentSection, Store, TagState};
use vesta_tests::bin::{vesta_cmd, vesta_fails, vesta_ok};
use vesta_tests::leaf::LeafAllocator;

/// Numbers each of the two long-running processes prints.
const PER_PROCESS: u64 = 5_000_000;

fn spawn_get(url: &str, tag: &str, count: u64, config: &Path, out: &Path) -> Child {
    let mut cmd = vesta_cmd(["segment", "get", tag, "--db", url, "-n", &count.to_string()]);
    cmd.arg("--config").arg(config);
    cmd.stdin(Stdio::null())
        .stdout(fs::File::create(out).expect("output file"))
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawning vesta segment get")
}

/// The complete lines of a process's output (a SIGKILL may cut the last one), checked to be
/// strictly increasing, as runs of consecutive numbers (one per segment, so the overlap checks
/// below are cheap even unoptimised).
fn read_runs(path: &Path) -> Vec<Range<u64>> {
    let text = fs::read(path).expect("reading output");
    let complete = match text.iter().rposition(|&b| b == b'\n') {
        Some(i) => &text[..=i],
        None => &[][..],
    };
    let mut runs: Vec<Range<u64>> = Vec::new();
    let mut n: u64 = 0;
    for &b in complete {
        if b != b'\n' {
            assert!(
                b.is_ascii_digit(),
                "not a number line in {}",
                path.display()
            );
            n = n * 10 + u64::from(b - b'0');
            continue;
        }
        match runs.last_mut() {
            Some(run) if run.end == n => run.end = n + 1,
            Some(run) if run.end > n => {
                panic!(
                    "{}: {n} after {}: not increasing",
                    path.display(),
                    run.end - 1
                )
            }
            _ => runs.push(n..n + 1),
        }
        n = 0;
    }
    runs
}

/// No number in two processes' runs or in a Leaf segment: sorted by start, every range must
/// end before the next begins.
fn assert_disjoint(mut ranges: Vec<(Range<u64>, &str)>) {
    ranges.sort_by_key(|(r, _)| r.start);
    for w in ranges.windows(2) {
        assert!(
            w[0].0.end <= w[1].0.start,
            "{:?} ({}) and {:?} ({}) overlap: numbers issued twice",
            w[0].0,
            w[0].1,
            w[1].0,
            w[1].1
        );
    }
}

/// Scenario 1: two processes, a killed one and Leaf's code on one tag: no number twice.
fn processes_and_leaf_never_duplicate(url: &str) {
    vesta_ok(&["segment", "init", "--db", url]);
    vesta_ok(&["segment", "create", "t", "--step", "50000", "--db", url]);
    let dir = tempfile::tempdir().unwrap();
    // Generous waits: under four-way contention (SQLite's busy handler is not fair) a fetch
    // can take a while, and this test is about uniqueness, not latency.
    let adaptive_conf = dir.path().join("adaptive.toml");
    fs::write(&adaptive_conf, "[segment]\nwait_ms = 30000\n").unwrap();
    let fixed = dir.path().join("fixed.toml");
    fs::write(
        &fixed,
        "[segment]\nwait_ms = 30000\nadaptive_step = false\n",
    )
    .unwrap();
    let started = Instant::now();

    // Leaf's own fetch loop, interleaved with the processes until they finish.
    let stop = Arc::new(AtomicBool::new(false));
    let leaf = {
        let (url, stop) = (url.to_owned(), Arc::clone(&stop));
        thread::spawn(move || {
            let mut leaf = LeafAllocator::connect(&url);
            let mut ranges = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                ranges.push(leaf.fetch("t"));
                thread::sleep(Duration::from_millis(20));
            }
            ranges
        })
    };
    let out = |name: &str| dir.path().join(name);
    let mut adaptive = spawn_get(url, "t", PER_PROCESS, &adaptive_conf, &out("a"));
    let mut fixed_step = spawn_get(url, "t", PER_PROCESS, &fixed, &out("b"));
    let mut killed = spawn_get(url, "t", u64::MAX, &fixed, &out("c"));
    // SIGKILL the third process once it has printed a good share.
    let deadline = Instant::now() + Duration::from_secs(30);
    while fs::metadata(out("c")).map_or(0, |m| m.len()) < 2_000_000 && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(10));
    }
    killed.kill().unwrap();
    killed.wait().unwrap();
    for (name, child) in [("adaptive", &mut adaptive), ("fixed", &mut fixed_step)] {
        let status = child.wait().unwrap();
        let mut err = String::new();
        std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
        assert!(status.success(), "{name} process failed: {err}");
    }
    stop.store(true, Ordering::Relaxed);
    let leaf_ranges: Vec<Range<i64>> = leaf.join().unwrap();
    let run = started.elapsed();

    let mut all: Vec<(Range<u64>, &str)> = Vec::new();
    let mut printed = 0;
    for name in ["a", "b", "c"] {
        let runs = read_runs(&out(name));
        let count: u64 = runs.iter().map(|r| r.end - r.start).sum();
        if name != "c" {
            assert_eq!(count, PER_PROCESS, "{name} printed all");
        }
        printed += count;
        all.extend(runs.into_iter().map(|r| (r, name)));
    }
    assert!(printed >= 10_000_000, "only {printed} numbers");
    assert!(
        leaf_ranges.len() >= 2,
        "Leaf's loop fetched {leaf_ranges:?}"
    );
    let leaf_ranges: Vec<Range<u64>> = leaf_ranges
        .into_iter()
        .map(|r| r.start as u64..r.end as u64)
        .collect();
    all.extend(leaf_ranges.iter().map(|r| (r.clone(), "Leaf")));
    assert_disjoint(all);
    let leaf_numbers: u64 = leaf_ranges.iter().map(|r| r.end - r.start).sum();
    eprintln!(
        "{url}: {printed} numbers from 3 processes + {} Leaf segments ({leaf_numbers} numbers), \
         0 duplicates, in {run:?}",
        leaf_ranges.len()
    );
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// Scenario 2: the database goes away mid-run and comes back.
fn outage(url: &str, stop: &mut dyn FnMut(), restart: &mut dyn FnMut()) {
    vesta_ok(&["segment", "init", "--db", url]);
    vesta_ok(&["segment", "create", "t", "--step", "1000", "--db", url]);
    let section = SegmentSection {
        db: Some(url.to_owned()),
        adaptive_step: false,
        fetch_timeout_ms: 500,
        wait_ms: 1_000,
        ..SegmentSection::default()
    };
    let rt = runtime();
    let store = rt.block_on(Store::open(&section)).unwrap();
    let mut issued = Vec::new();
    for _ in 0..500 {
        issued.push(rt.block_on(store.next("t")).unwrap());
    }
    let wait_next = |store: &Store| {
        let deadline = Instant::now() + Duration::from_secs(10);
        while store.status().tags[0].next.is_none() {
            assert!(
                Instant::now() < deadline,
                "no prefetch: {:?}",
                store.status()
            );
            thread::sleep(Duration::from_millis(10));
        }
    };
    wait_next(&store);

    stop();
    // Everything buffered still comes out, in order; then a clean, bounded error.
    let drained_at = loop {
        let started = Instant::now();
        match rt.block_on(store.next("t")) {
            Ok(n) => issued.push(n),
            Err(e) => {
                assert!(
                    matches!(
                        e,
                        SegmentError::Unavailable { .. } | SegmentError::Timeout { .. }
                    ),
                    "unexpected error: {e}"
                );
                assert!(e.to_string().contains("\"t\""), "{e}");
                // Bounded by segment.wait_ms (1 s); the margin tells "never" from "late".
                assert!(
                    started.elapsed() < Duration::from_millis(1_000) + Duration::from_secs(5),
                    "waited {:?}",
                    started.elapsed()
                );
                break issued.len();
            }
        }
        assert!(issued.len() <= 2_000, "more numbers than were buffered");
    };
    assert_eq!(drained_at, 2_000, "both segments (1..2001) were issued");
    assert_eq!(issued, (1..=2_000).collect::<Vec<u64>>());
    // Once a fetch has failed, calls fail fast (no wait) and health says so.
    let deadline = Instant::now() + Duration::from_secs(10);
    while store.status().tags[0].state != TagState::Down {
        assert!(Instant::now() < deadline, "{:?}", store.status());
        thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(store.status().health, Health::Degraded);
    let started = Instant::now();
    let err = rt.block_on(store.next("t")).unwrap_err();
    assert!(matches!(err, SegmentError::Unavailable { .. }), "{err}");
    // Fast: it does not wait segment.wait_ms (1 s) for a fetch it knows has failed.
    assert!(
        started.elapsed() < Duration::from_millis(1_000),
        "waited {:?} although the store is known down",
        started.elapsed()
    );
    let err = rt.block_on(store.next_n("t", 10)).unwrap_err();
    assert!(matches!(err, SegmentError::Unavailable { .. }), "{err}");
    // A new process cannot start without the database: a one-line error naming it.
    let dir = tempfile::tempdir().unwrap();
    let quick = dir.path().join("quick.toml");
    fs::write(&quick, "[segment]\nfetch_timeout_ms = 500\n").unwrap();
    let quick = quick.to_str().unwrap();
    vesta_fails(
        &["segment", "get", "t", "--db", url, "--config", quick],
        &[url],
    );

    restart();
    let deadline = Instant::now() + Duration::from_secs(30);
    let resumed = loop {
        match rt.block_on(store.next("t")) {
            Ok(n) => break n,
            Err(e) => {
                assert!(Instant::now() < deadline, "did not recover: {e}");
                thread::sleep(Duration::from_millis(50));
            }
        }
    };
    assert!(resumed > 2_000, "no number twice after recovery: {resumed}");
    assert_eq!(store.status().health, Health::Ok);
    let more = rt.block_on(store.next_n("t", 3_000)).unwrap();
    assert!(more[0].start > resumed);
    rt.block_on(store.shutdown());
}

/// Scenario 3: clean shutdown gives the tail back, unless another allocator moved `max_id`.
fn give_back(url: &str) {
    vesta_ok(&["segment", "init", "--db", url]);
    vesta_ok(&["segment", "create", "t", "--step", "100", "--db", url]);
    let get = |n: &str| -> Vec<u64> {
        vesta_ok(&["segment", "get", "t", "-n", n, "--db", url])
            .lines()
            .map(|l| l.parse().unwrap())
            .collect()
    };
    assert_eq!(get("5"), vec![1, 2, 3, 4, 5]);
    assert_eq!(get("5"), vec![6, 7, 8, 9, 10], "the tail came back: no gap");
    let mut leaf = LeafAllocator::connect(url);
    assert_eq!(leaf.max_id("t"), 11);

    let rt = runtime();
    let section = SegmentSection {
        db: Some(url.to_owned()),
        ..SegmentSection::default()
    };
    let store = rt.block_on(Store::open(&section)).unwrap();
    assert_eq!(rt.block_on(store.next("t")).unwrap(), 11);
    assert_eq!(leaf.fetch("t"), 111..211, "Leaf takes the next segment");
    let gave = rt.block_on(store.shutdown());
    assert_eq!(gave[0].outcome, GiveBackOutcome::Moved);
    assert_eq!(leaf.max_id("t"), 211, "max_id left alone");
    assert_eq!(get("1"), vec![211]);
}

/// Scenario 5: `leaf_alloc` goes back to a backup taken before numbers were issued; the
/// restore guard refuses it (and writes nothing) until `raise` moves the tag past its floor.
fn restore_guard(url: &str, backup: &mut dyn FnMut(), restore: &mut dyn FnMut()) {
    vesta_ok(&["segment", "init", "--db", url]);
    vesta_ok(&["segment", "create", "t", "--step", "100", "--db", url]);
    backup();
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("guard.toml");
    fs::write(
        &conf,
        format!(
            "[segment]\nstate_file = \"{}\"\n",
            dir.path().join("segments.state").display()
        ),
    )
    .unwrap();
    let conf = conf.to_str().unwrap();
    let get = |n: &str| -> Vec<u64> {
        vesta_ok(&[
            "segment", "get", "t", "-n", n, "--db", url, "--config", conf,
        ])
        .lines()
        .map(|l| l.parse().unwrap())
        .collect()
    };
    let first = get("250");
    assert_eq!(first, (1..=250).collect::<Vec<u64>>());
    // A fresh connection each time: the restore replaces the table (or the file) underneath.
    let max_id = || LeafAllocator::connect(url).max_id("t");
    assert_eq!(max_id(), 251, "the tail came back");

    restore();
    assert_eq!(
        max_id(),
        1,
        "the backup is from before any number was issued"
    );
    vesta_fails(
        &["segment", "get", "t", "--db", url, "--config", conf],
        &[
            "leaf_alloc went back",
            "starts at 1, below 251",
            &format!("vesta segment raise t --to N --db {url} (N >= 251)"),
        ],
    );
    assert_eq!(max_id(), 1, "the refused fetch was rolled back");

    assert_eq!(
        vesta_ok(&["segment", "raise", "t", "--to", "251", "--db", url]),
        "t: max_id 1 -> 251\n"
    );
    assert_eq!(
        vesta_ok(&["segment", "raise", "t", "--to", "100", "--db", url]),
        "t: max_id 251 is already at or above 100: left alone\n",
        "raise never lowers"
    );
    let after = get("3");
    assert_eq!(
        after,
        vec![251, 252, 253],
        "issuing resumes past every number issued"
    );
    assert!(first.iter().all(|n| !after.contains(n)));
    assert_eq!(
        vesta_ok(&["segment", "raise", "--all", "--by", "1000", "--db", url]),
        "t: max_id 254 -> 1254\n"
    );
    assert_eq!(
        vesta_ok(&["segment", "raise", "t", "--by", "1", "--json", "--db", url]),
        "{\"tag\":\"t\",\"from\":1254,\"to\":1255}\n"
    );
    for (args, needles) in [
        (vec!["nope", "--to", "5"], vec!["unknown tag \"nope\""]),
        (
            vec!["t", "--by", "0"],
            vec!["by 0 is out of range for tag \"t\": allowed 1..=9223372036854775807"],
        ),
        (vec!["t", "--to", "-1"], vec!["to -1 is out of range"]),
        (
            vec!["t", "--by", "9223372036854775807"],
            vec!["(max_id is 1255): allowed 1..=9223372036854774552"],
        ),
        (vec!["t"], vec!["--to"]),
        (vec!["t", "--all", "--to", "5"], vec!["--all"]),
        (vec!["t", "--to", "5", "--by", "5"], vec!["--by"]),
    ] {
        let mut full = vec!["segment", "raise"];
        full.extend(args);
        full.extend(["--db", url]);
        vesta_fails(&full, &needles);
    }
    assert_eq!(max_id(), 1255, "failed raises wrote nothing");
}

/// Scenario 4: bad input is a one-line error and writes nothing.
fn bad_input(url: &str, wrong_urls: &[(&str, &str)]) {
    // No table: every command but init says so; nothing is created.
    for args in [
        vec!["segment", "get", "t"],
        vec!["segment", "ls"],
        vec!["segment", "create", "t", "--step", "5"],
    ] {
        let mut args = args;
        args.extend(["--db", url]);
        vesta_fails(
            &args,
            &[
                "table leaf_alloc does not exist",
                &format!("(to create it: vesta segment init --db {url})"),
            ],
        );
    }
    vesta_fails(&["segment", "ls", "--db", url], &["does not exist"]);

    vesta_ok(&["segment", "init", "--db", url]);
    vesta_ok(&["segment", "create", "t", "--step", "10", "--db", url]);
    vesta_ok(&["segment", "get", "t", "-n", "3", "--db", url]);
    let before = vesta_ok(&["segment", "ls", "--json", "--db", url]);
    let long = "x".repeat(129);
    for (args, needles) in [
        (vec!["get", "nope"], vec!["unknown tag \"nope\""]),
        (vec!["get", &long], vec!["129 characters is too long"]),
        (vec!["get", "a/b"], vec!["invalid tag \"a/b\""]),
        (vec!["get", "t", "-n", "0"], vec!["count 0 is out of range"]),
        (vec!["get", "t", "-n", "-1"], vec!["--count"]),
        (vec!["get", "t", "-n", "many"], vec!["--count"]),
        (
            vec!["create", "t", "--step", "5"],
            vec!["tag \"t\" already exists"],
        ),
        (
            vec!["create", "u", "--step", "0"],
            vec!["step 0 is out of range for tag \"u\""],
        ),
        (
            vec!["create", "u", "--step", "-4"],
            vec!["step -4 is out of range"],
        ),
        (
            vec!["create", "u", "--step", "2147483648"],
            vec!["step 2147483648"],
        ),
        (
            vec!["create", "u", "--step", "5", "--start", "-1"],
            vec!["start -1"],
        ),
        (vec!["create", &long, "--step", "5"], vec!["too long"]),
    ] {
        let mut full = vec!["segment"];
        full.extend(args);
        full.extend(["--db", url]);
        vesta_fails(&full, &needles);
    }
    assert_eq!(
        vesta_ok(&["segment", "ls", "--json", "--db", url]),
        before,
        "nothing written"
    );
    for (wrong, needle) in wrong_urls {
        let line = vesta_fails(&["segment", "ls", "--db", wrong], &[needle]);
        assert!(!line.contains("secret"), "password shown: {line}");
    }
    vesta_fails(
        &["segment", "ls", "--db", "postgres://u:secret@127.0.0.1/x"],
        &[
            "--db: invalid database URL postgres://u:***@127.0.0.1/x",
            "port is missing",
        ],
    );
    vesta_fails(
        &["segment", "ls", "--db", "redis://h:1/0"],
        &["unsupported scheme"],
    );
}

mod sqlite {
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
}

mod postgres {
    use vesta_tests::db::Postgres;

    /// A server's stop with its database behind a partition (blackhole: nothing answers, no
    /// connection is refused): the give-back and the pool's close are bounded, so the stop
    /// ends (a close that waited for a stuck connection hung forever), leaving gaps.
    #[test]
    fn a_stop_behind_a_partition_is_bounded() {
        use super::*;
        use vesta_tests::proxy::Proxy;
        let pg = Postgres::start();
        let url = pg.create_database("partition");
        vesta_ok(&["segment", "init", "--db", &url]);
        vesta_ok(&["segment", "create", "t", "--step", "100", "--db", &url]);
        let proxy = Proxy::start(([127, 0, 0, 1], pg.port()).into());
        let section = SegmentSection {
            db: Some(format!(
                "postgres://vesta@127.0.0.1:{}/partition",
                proxy.port()
            )),
            fetch_timeout_ms: 500,
            prefetch_percent: 0,
            ..SegmentSection::default()
        };
        let rt = runtime();
        let store = rt.block_on(Store::open(&section)).unwrap();
        assert_eq!(rt.block_on(store.next("t")).unwrap(), 1);
        proxy.blackhole();
        let started = Instant::now();
        let gave = rt.block_on(store.shutdown());
        // Fetches under way: one fetch_timeout_ms; the give-backs: another; the close: a third.
        assert!(
            started.elapsed() < Duration::from_millis(3 * 500) + Duration::from_secs(5),
            "the stop took {:?}",
            started.elapsed()
        );
        assert!(
            matches!(gave[0].outcome, GiveBackOutcome::Failed { .. }),
            "{gave:?}"
        );
        proxy.heal();
        let leaf = vesta_tests::leaf::LeafAllocator::connect(&url);
        assert!(
            leaf.max_id("t") > 1,
            "not given back: a gap, never a repeat"
        );
    }

    #[test]
    fn processes_and_leaf_never_duplicate() {
        let pg = Postgres::start();
        super::processes_and_leaf_never_duplicate(&pg.create_database("dups"));
    }

    #[test]
    fn outage_drains_buffers_fails_fast_and_recovers() {
        let pg = std::cell::RefCell::new(Postgres::start());
        let url = pg.borrow().create_database("outage");
        super::outage(&url, &mut || pg.borrow_mut().stop(), &mut || {
            pg.borrow_mut().restart()
        });
    }

    #[test]
    fn shutdown_gives_the_tail_back() {
        let pg = Postgres::start();
        super::give_back(&pg.create_database("giveback"));
    }

    #[test]
    fn a_restored_backup_is_refused_until_raised() {
        let pg = Postgres::start();
        let url = pg.create_database("restore");
        let backup = std::cell::RefCell::new(None);
        super::restore_guard(
            &url,
            &mut || *backup.borrow_mut() = Some(pg.backup_table("restore", "leaf_alloc")),
            &mut || pg.restore("restore", backup.borrow().as_ref().unwrap()),
        );
    }

    #[test]
    fn bad_input_writes_nothing() {
        let pg = Postgres::start();
        let url = pg.create_database("bad");
        let port = pg.port();
        let no_db = format!("postgres://vesta@127.0.0.1:{port}/nosuchdb");
        let closed = "postgres://vesta:secret@127.0.0.1:1/x".to_owned();
        super::bad_input(
            &url,
            &[
                (&no_db, "database \"nosuchdb\" does not exist"),
                (&closed, "postgres://vesta:***@127.0.0.1:1/x: connecting"),
            ],
        );
        // Nothing created by the failed commands above but the table and one tag.
        let tags = pg.psql("bad", "SELECT biz_tag FROM leaf_alloc");
        assert_eq!(tags.trim(), "t");
    }
}

mod mariadb {
    use vesta_tests::db::MariaDb;

    #[test]
    fn processes_and_leaf_never_duplicate() {
        let db = MariaDb::start();
        super::processes_and_leaf_never_duplicate(&db.create_database("dups"));
    }

    #[test]
    fn outage_drains_buffers_fails_fast_and_recovers() {
        let db = std::cell::RefCell::new(MariaDb::start());
        let url = db.borrow().create_database("outage");
        super::outage(&url, &mut || db.borrow_mut().stop(), &mut || {
            db.borrow_mut().restart()
        });
    }

    #[test]
    fn shutdown_gives_the_tail_back() {
        let db = MariaDb::start();
        super::give_back(&db.create_database("giveback"));
    }

    #[test]
    fn a_restored_backup_is_refused_until_raised() {
        let db = MariaDb::start();
        let url = db.create_database("restore");
        let backup = std::cell::RefCell::new(None);
        super::restore_guard(
            &url,
            &mut || *backup.borrow_mut() = Some(db.backup_table("restore", "leaf_alloc")),
            &mut || db.restore("restore", backup.borrow().as_ref().unwrap()),
        );
    }

    #[test]
    fn bad_input_writes_nothing() {
        let db = MariaDb::start();
        let url = db.create_database("bad");
        let port = db.port();
        let no_db = format!("mysql://root@127.0.0.1:{port}/nosuchdb");
        let closed = "mysql://root:secret@127.0.0.1:1/x".to_owned();
        super::bad_input(
            &url,
            &[
                (&no_db, "Unknown database 'nosuchdb'"),
                (&closed, "mysql://root:***@127.0.0.1:1/x: connecting"),
            ],
        );
        assert_eq!(db.sql("SELECT biz_tag FROM bad.leaf_alloc").trim(), "t");
    }
}
