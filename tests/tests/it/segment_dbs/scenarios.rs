//! The scenarios, each a function of the database's URL that its database's module runs: two
//! processes and Leaf's code on one tag, an outage, the give-back, the restore guard and bad
//! input.

use super::*;

/// Scenario 1: two processes, a killed one and Leaf's code on one tag: no number twice.
pub(super) fn processes_and_leaf_never_duplicate(url: &str) {
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

/// Scenario 2: the database goes away mid-run and comes back.
pub(super) fn outage(url: &str, stop: &mut dyn FnMut(), restart: &mut dyn FnMut()) {
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
pub(super) fn give_back(url: &str) {
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
pub(super) fn restore_guard(url: &str, backup: &mut dyn FnMut(), restore: &mut dyn FnMut()) {
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
pub(super) fn bad_input(url: &str, wrong_urls: &[(&str, &str)]) {
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
