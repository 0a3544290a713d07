//! Per-key sequences against real databases — an SQLite file, a PostgreSQL server and a
//! MariaDB server, each started by the test — with real `vesta seq` processes, every number
//! they print checked (not sampled):
//!
//! - per key strictly increasing across clean restarts and a SIGKILL (which may land during a
//!   raise), for numeric edge keys (0, a section's last key, `u64::MAX`) and a non-ASCII
//!   string key;
//! - two processes on one table at once (an operator's mistake): the second refused at start
//!   in one line naming the first, which goes on;
//! - the database stopped mid-run: the process stops with a one-line error within the store
//!   timeout, and after a restart the numbers go on above everything printed;
//! - `vesta serve rest --seq-db`: `/seq/{key}` across a SIGKILL and a restart of the server;
//!   `vesta serve tcp --seq-db` asked by `vesta seq --server`, the same way;
//! - six concurrent TCP clients through a SIGKILL of the server, every answer through the
//!   history checker (`vesta_tests::history`): no number twice, real-time order per key.

use std::fs;
use std::path::Path;
use std::process::{Child, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use vesta_tests::bin::{ServerChild, http, vesta_cmd, vesta_ok};

/// A config with a small step, so a run makes many raises, and a short store timeout.
fn config(dir: &Path) -> String {
    let path = dir.join("seq.toml");
    fs::write(&path, "[seq]\nstep = 1000\nstore_timeout_ms = 1000\n").unwrap();
    path.to_str().unwrap().to_owned()
}

/// `vesta seq next KEY -n N` on the table to completion: its numbers.
fn next(url: &str, cfg: &str, key: &str, n: u64) -> Vec<u64> {
    next_from(key, n, &["--db", url, "--config", cfg])
}

/// `vesta seq next KEY -n N WHERE...` (`--db`, `--server`) to completion: its numbers.
fn next_from(key: &str, n: u64, from: &[&str]) -> Vec<u64> {
    let n = n.to_string();
    let mut args = vec!["seq", "next", key, "-n", &n];
    args.extend_from_slice(from);
    numbers(vesta_ok(&args).as_bytes())
}

/// A long `vesta seq next` printing to `out`.
fn spawn_next(url: &str, cfg: &str, key: &str, out: &Path) -> Child {
    vesta_cmd([
        "seq",
        "next",
        key,
        "-n",
        "1000000000",
        "--db",
        url,
        "--config",
        cfg,
    ])
    .stdin(Stdio::null())
    .stdout(fs::File::create(out).unwrap())
    .stderr(Stdio::piped())
    .spawn()
    .expect("spawning vesta seq next")
}

/// The complete lines of an output (a SIGKILL may cut the last one).
fn numbers(text: &[u8]) -> Vec<u64> {
    let complete = match text.iter().rposition(|&b| b == b'\n') {
        Some(i) => &text[..=i],
        None => &[][..],
    };
    std::str::from_utf8(complete)
        .unwrap()
        .lines()
        .map(|l| l.parse().unwrap_or_else(|_| panic!("not a number: {l:?}")))
        .collect()
}

/// Waits until `path` holds at least `bytes` (at most 30 s).
fn wait_output(path: &Path, bytes: u64) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while fs::metadata(path).map_or(0, |m| m.len()) < bytes {
        assert!(Instant::now() < deadline, "no output from vesta seq next");
        thread::sleep(Duration::from_millis(10));
    }
}

/// Every run's numbers for one key, in order: each must be above all before it.
fn assert_increasing(key: &str, runs: &[&[u64]]) {
    let mut last: Option<u64> = None;
    for (i, run) in runs.iter().enumerate() {
        for &n in *run {
            if let Some(l) = last {
                assert!(
                    n > l,
                    "key {key}, run {i}: {n} after {l}: not strictly increasing"
                );
            }
            last = Some(n);
        }
    }
}

/// Restarts and a SIGKILL: every key's numbers increase across every process.
fn restarts_and_a_kill_never_go_back(url: &str) {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path());
    for key in ["0", "99999", "18446744073709551615", "会话:Zürich"] {
        let first = next(url, &cfg, key, 3000);
        let second = next(url, &cfg, key, 10);
        let out = dir.path().join("killed");
        let mut killed = spawn_next(url, &cfg, key, &out);
        wait_output(&out, 200_000);
        killed.kill().unwrap();
        killed.wait().unwrap();
        let third = numbers(&fs::read(&out).unwrap());
        assert!(
            third.len() > 10_000,
            "{} numbers before the kill",
            third.len()
        );
        let fourth = next(url, &cfg, key, 10);
        assert_increasing(key, &[&first, &second, &third, &fourth]);
    }
}

/// Waits for `child` to exit (at most 30 s); its status and its stderr.
fn finish(child: &mut Child) -> (bool, String) {
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < deadline, "vesta seq next did not stop");
        thread::sleep(Duration::from_millis(20));
    };
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    (status.success(), err)
}

/// Two processes on one table (an operator's mistake): the second is refused at start in one
/// line naming the first (one owner per table: `vesta seq next` holds the table's lease for its
/// run), prints no number, and the first goes on.
fn two_processes_are_never_followed(url: &str) {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path());
    let out_a = dir.path().join("a");
    let mut a = spawn_next(url, &cfg, "7", &out_a);
    wait_output(&out_a, 100_000);
    let started = Instant::now();
    let said = vesta_tests::bin::fails_in_one_line(
        &mut vesta_cmd([
            "seq", "next", "7", "-n", "5000", "--db", url, "--config", &cfg,
        ]),
        &["is served by vesta-seq ", "one owner per table", "--server"],
    );
    eprintln!("{said}");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    let before = fs::metadata(&out_a).unwrap().len();
    wait_output(&out_a, before + 10_000);
    a.kill().unwrap();
    a.wait().unwrap();
    assert_increasing("7 (a)", &[&numbers(&fs::read(&out_a).unwrap())]);
}

/// The database stopped mid-run: a bounded one-line failure; the numbers go on after it.
fn outage(url: &str, stop: &mut dyn FnMut(), restart: &mut dyn FnMut()) {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path());
    let before = next(url, &cfg, "42", 100);
    let out = dir.path().join("during");
    let mut running = spawn_next(url, &cfg, "42", &out);
    wait_output(&out, 50_000);
    stop();
    let stopped = Instant::now();
    let (ok, err) = finish(&mut running);
    // One raise waits at most store_timeout_ms (1 s); the margin tells "never" from "late".
    assert!(
        stopped.elapsed() < Duration::from_secs(15),
        "{:?}",
        stopped.elapsed()
    );
    assert!(!ok);
    assert!(
        err.contains("key 42: its section could not be raised") && err.lines().count() == 1,
        "{err}"
    );
    let during = numbers(&fs::read(&out).unwrap());
    restart();
    let after = next(url, &cfg, "42", 100);
    assert_increasing("42", &[&before, &during, &after]);
}

/// `vesta serve rest --seq-db URL` on machine `machine`: `/seq/{key}` over HTTP, every answer
/// checked; a SIGKILL and a restart (the start guard waits out the killed server's unit): the
/// keys go on above; `/seq/{key}/current` reads without moving; `/metrics` counts.
fn served_over_rest(url: &str, machine: &str) {
    let start = || ServerChild::start("rest", &["--machine", machine, "--seq-db", url], &[]);
    let next = |server: &ServerChild, path: &str| -> u64 {
        let (status, body) = http(&server.addr, "GET", path);
        assert_eq!(status, 200, "{path}: {body}");
        body.parse()
            .unwrap_or_else(|_| panic!("{path}: not a number: {body}"))
    };
    let server = start();
    let mut seen: Vec<u64> = Vec::new();
    let mut chat: Vec<u64> = Vec::new();
    for _ in 0..200 {
        seen.push(next(&server, "/seq/42"));
        chat.push(next(&server, "/seq/chat%3A7?count=3"));
    }
    assert_eq!(next(&server, "/seq/42/current"), *seen.last().unwrap());
    let (_, metrics) = http(&server.addr, "GET", "/metrics");
    assert!(
        metrics.contains("vesta_seq_numbers_issued_total 800"),
        "{metrics}"
    );
    assert!(metrics.contains("vesta_seq_raises_total"), "{metrics}");
    let (_, health) = http(&server.addr, "GET", "/healthz");
    let health: serde_json::Value = serde_json::from_str(&health).unwrap();
    assert_eq!(health["status"], "ok", "{health}");
    assert!(health["seq"]["sections"].as_u64().unwrap() >= 2, "{health}");
    assert_eq!(health["seq"]["fenced"], 0, "{health}");
    drop(server); // SIGKILL
    let server = start();
    for _ in 0..20 {
        seen.push(next(&server, "/seq/42"));
        chat.push(next(&server, "/seq/chat%3A7?count=3"));
    }
    assert_increasing("42 over REST", &[&seen]);
    assert_increasing("chat:7 over REST (last of each batch)", &[&chat]);
    assert!(
        chat.windows(2).all(|w| w[1] >= w[0] + 3),
        "batches of 3 overlap"
    );
    let (status, body) = http(&server.addr, "GET", "/seq/%FF");
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("invalid parameter key"), "{body}");
    server.stop_cleanly();
}

/// `vesta serve tcp --seq-db URL` asked by `vesta seq next|show --server`: 25,000 numbers of a
/// key (three calls above the step), its current number, then the server SIGKILLed and
/// restarted: the key goes on above. Flags that cannot go together are refused in one line.
fn served_over_tcp(url: &str, machine: &str) {
    let start = || ServerChild::start("tcp", &["--machine", machine, "--seq-db", url], &[]);
    let ask = |server: &ServerChild, key: &str, n: u64| -> Vec<u64> {
        next_from(key, n, &["--server", &server.addr])
    };
    let server = start();
    let mut seen = ask(&server, "order:\u{4e2d}", 25_000);
    assert_eq!(seen.len(), 25_000);
    let shown = vesta_ok(&["seq", "show", "order:\u{4e2d}", "--server", &server.addr]);
    assert_eq!(shown.trim(), seen.last().unwrap().to_string());
    let numeric = ask(&server, "18446744073709551615", 3);
    drop(server); // SIGKILL
    let server = start();
    seen.extend(ask(&server, "order:\u{4e2d}", 10));
    assert_increasing("order:中 over TCP", &[&seen]);
    let after = ask(&server, "18446744073709551615", 1);
    assert_increasing("u64::MAX over TCP", &[&numeric, &after]);
    vesta_tests::bin::vesta_fails(
        &["seq", "next", "7", "--server", &server.addr, "--db", url],
        &["--server", "--db"],
    );
    vesta_tests::bin::vesta_fails(&["seq", "show", "7", "--tls-ca", "ca.pem"], &["--server"]);
    vesta_tests::bin::vesta_fails(
        &["seq", "next", "a\u{7}b", "--server", &server.addr],
        &["invalid key", "control character"],
    );
    server.stop_cleanly();
}

/// Concurrent callers through a SIGKILL of the server: 6 tasks of the TCP client over 4 keys
/// (batches of 1-5) against `vesta serve tcp`, the server killed while they call, restarted,
/// and called again; the history checker runs over every answer: no number twice per key, and
/// a call that began after another ended answered above it.
fn concurrent_callers_through_a_kill(url: &str, machine: &str) {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use vesta_tests::history::{self, History};

    const KEYS: [&str; 4] = [
        "0",
        "99999",
        "chat:\u{4e2d}\u{6587}",
        "18446744073709551615",
    ];
    let start = || ServerChild::start("tcp", &["--machine", machine, "--seq-db", url], &[]);
    let history = Arc::new(History::default());
    let answered = Arc::new(AtomicU64::new(0));
    // Waits until `n` calls in all were answered (each task counts as it goes).
    let wait_answered = |n: u64| {
        let deadline = Instant::now() + Duration::from_secs(60);
        while answered.load(Ordering::Relaxed) < n {
            assert!(
                Instant::now() < deadline,
                "{n} calls not answered within 60 s"
            );
            thread::sleep(Duration::from_millis(20));
        }
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    // Callers on `addr` until `stop` or their first failure; each records what it was answered.
    let callers = |addr: &str, stop: Arc<AtomicBool>| {
        (0..6u64)
            .map(|task| {
                let (addr, history, stop) = (addr.to_owned(), history.clone(), stop.clone());
                let answered = answered.clone();
                runtime.spawn(async move {
                    let mut config = vesta_server::ClientConfig::new([addr]);
                    config.retry_budget = Duration::from_millis(300);
                    let client = vesta_server::Client::connect(config).await.unwrap();
                    let mut mine = Vec::new();
                    let mut i = task;
                    while !stop.load(Ordering::Relaxed) {
                        let key = KEYS[(i % 4) as usize];
                        let n = 1 + (i * 7 + task) % 5;
                        let start = Instant::now();
                        let Ok(ranges) = client.seq_next_n(key, n).await else {
                            break; // the server is gone: this answer never came
                        };
                        answered.fetch_add(1, Ordering::Relaxed);
                        mine.extend(history::calls(key, ranges, start, Instant::now()));
                        i += 1;
                    }
                    history.extend(mine);
                })
            })
            .collect::<Vec<_>>()
    };
    let server = start();
    let stop = Arc::new(AtomicBool::new(false));
    let tasks = callers(&server.addr, stop.clone());
    // Kill it while they call, once they have made a thousand calls.
    wait_answered(1000);
    drop(server); // SIGKILL, calls in flight
    for t in tasks {
        runtime.block_on(t).unwrap();
    }
    let before = history.len();
    assert!(before > 0, "no call was answered before the kill");
    let server = start();
    let stop = Arc::new(AtomicBool::new(false));
    let tasks = callers(&server.addr, stop.clone());
    wait_answered(answered.load(Ordering::Relaxed) + 1000);
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        runtime.block_on(t).unwrap();
    }
    assert!(
        history.len() > before,
        "no call was answered after the restart"
    );
    let summary = history.check().unwrap_or_else(|v| panic!("{v}"));
    assert_eq!(summary.keys, 4, "{summary:?}");
    server.stop_cleanly();
}

mod sqlite {
    fn url(dir: &std::path::Path) -> String {
        format!("sqlite://{}/seq.db", dir.display())
    }

    #[test]
    fn restarts_and_a_kill_never_go_back() {
        let dir = tempfile::tempdir().unwrap();
        super::restarts_and_a_kill_never_go_back(&url(dir.path()));
    }

    #[test]
    fn two_processes_are_never_followed() {
        let dir = tempfile::tempdir().unwrap();
        super::two_processes_are_never_followed(&url(dir.path()));
    }

    #[test]
    fn served_over_rest() {
        let dir = tempfile::tempdir().unwrap();
        super::served_over_rest(&url(dir.path()), "1001");
    }

    #[test]
    fn served_over_tcp() {
        let dir = tempfile::tempdir().unwrap();
        super::served_over_tcp(&url(dir.path()), "1007");
    }

    #[test]
    fn concurrent_callers_through_a_kill() {
        let dir = tempfile::tempdir().unwrap();
        super::concurrent_callers_through_a_kill(&url(dir.path()), "1008");
    }
}

mod postgres {
    use vesta_tests::db::Postgres;

    #[test]
    fn restarts_and_a_kill_never_go_back() {
        let pg = Postgres::start();
        super::restarts_and_a_kill_never_go_back(&pg.create_database("restarts"));
    }

    #[test]
    fn two_processes_are_never_followed() {
        let pg = Postgres::start();
        super::two_processes_are_never_followed(&pg.create_database("two"));
    }

    #[test]
    fn served_over_rest() {
        let pg = Postgres::start();
        super::served_over_rest(&pg.create_database("rest"), "1002");
    }

    #[test]
    fn concurrent_callers_through_a_kill() {
        let pg = Postgres::start();
        super::concurrent_callers_through_a_kill(&pg.create_database("history"), "1009");
    }

    #[test]
    fn an_outage_fails_within_the_bound_and_numbers_go_on() {
        let pg = std::cell::RefCell::new(Postgres::start());
        let url = pg.borrow().create_database("outage");
        super::outage(&url, &mut || pg.borrow_mut().stop(), &mut || {
            pg.borrow_mut().restart()
        });
    }
}

mod mariadb {
    use vesta_tests::db::MariaDb;

    #[test]
    fn restarts_and_a_kill_never_go_back() {
        let db = MariaDb::start();
        super::restarts_and_a_kill_never_go_back(&db.create_database("restarts"));
    }

    #[test]
    fn two_processes_are_never_followed() {
        let db = MariaDb::start();
        super::two_processes_are_never_followed(&db.create_database("two"));
    }

    #[test]
    fn an_outage_fails_within_the_bound_and_numbers_go_on() {
        let db = std::cell::RefCell::new(MariaDb::start());
        let url = db.borrow().create_database("outage");
        super::outage(&url, &mut || db.borrow_mut().stop(), &mut || {
            db.borrow_mut().restart()
        });
    }
}
