//! One owner per table (issue 47, item 1), with real `vesta` processes on a real SQLite file
//! and a real PostgreSQL (one per module), every answer through the history checker
//! (`vesta_tests::history`: no number twice per key, a call that began after another ended
//! answered above it). The operator's mistakes of the first table, each refused in one
//! line naming the holder, while the holder goes on:
//!
//! - a second standalone server on the table (REST beside REST, TCP beside TCP), while a
//!   client calls the first (three calls a key over 600 keys, and two busy keys);
//! - `vesta seq next|show --db` while a server serves the table, in a loop;
//! - two standalone servers started at once, 20 times: exactly one serves (on two hosts, so
//!   the table's lease decides, not the host's kernel);
//! - a standalone server started 0-50 ms after a cluster member on a fresh table, 20 times:
//!   exactly one serves (the table's recorded mode decides);
//! - a member of another coordination (the database vs etcd): refused naming both;
//! - a REST member joining TCP members (a client of one could not be sent to the other):
//!   refused at its join.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use vesta_tests::bin::{ServerChild, fails_in_one_line, vesta_cmd, vesta_command, vesta_ok};
use vesta_tests::db::Postgres;
use vesta_tests::etcd::Etcd;
use vesta_tests::seq_ops::Calls;

/// A `[seq]` config on `db` with a short lease (`extra`: more lines), written in `dir`.
fn config(dir: &Path, name: &str, db: &str, extra: &str) -> String {
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(
        &path,
        format!(
            "[seq]\ndb = \"{db}\"\nstep = 1000\nstore_timeout_ms = 1000\ncluster_ttl_ms = 1500\n\
             {extra}"
        ),
    )
    .unwrap();
    path.to_str().unwrap().to_owned()
}

/// `vesta serve KIND` on `cfg` as `machine`, on the host `host` (its hold directory).
fn serve(kind: &str, cfg: &str, machine: &str, host: &Path) -> ServerChild {
    ServerChild::start(
        kind,
        &[
            "--type",
            "min-granularity",
            "--machine",
            machine,
            "--config",
            cfg,
        ],
        &[("VESTA_HOLD_DIR", host.to_str().unwrap())],
    )
}

/// The command line of a server that must be refused.
fn serve_cmd(kind: &str, cfg: &str, machine: &str, host: &Path) -> std::process::Command {
    let mut c = vesta_command();
    c.env("VESTA_HOLD_DIR", host).args([
        "serve",
        kind,
        "--listen",
        "127.0.0.1:0",
        "--type",
        "min-granularity",
        "--machine",
        machine,
        "--config",
        cfg,
    ]);
    c
}

/// A second standalone server, `vesta seq next|show --db` beside a running one: each refused
/// in one line naming it, while a client's calls on it go on; once it stops, `vesta seq next`
/// takes the table at once and goes on above.
fn a_second_owner_is_refused(db: &str, dir: &Path) {
    let calls = Calls::default();
    let host = tempfile::tempdir().unwrap();
    for (i, kind) in ["rest", "tcp"].into_iter().enumerate() {
        let cfg = config(dir, kind, db, "");
        let a = serve(kind, &cfg, &format!("{}", 960 + 2 * i), host.path());
        let call = |key: &str| match kind {
            "rest" => calls.rest(&a.addr, key).map(|_| ()),
            _ => calls
                .tcp(&[&a.addr], key, 1, Duration::from_secs(2))
                .map(|_| ()),
        };
        // Three calls a key over 600 keys (REST), two busy keys (TCP), between the mistakes.
        let keys: Vec<String> = match kind {
            "rest" => (0..600).map(|k| (k * 7919).to_string()).collect(),
            _ => vec!["busy:1".into(), "busy:2".into()],
        };
        let rounds = if kind == "rest" { 3 } else { 300 };
        for round in 0..rounds {
            for k in &keys {
                call(k).unwrap_or_else(|r| panic!("{kind} {k}: {r:?}"));
            }
            if round == 0 {
                // Another server on the table, on another host: refused, naming the holder.
                let said = fails_in_one_line(
                    &mut serve_cmd(kind, &cfg, &format!("{}", 961 + 2 * i), host.path()),
                    &["one owner per table", &a.addr, "vesta seq mode --db"],
                );
                eprintln!("{said}");
            }
            if round < 3 {
                // A `vesta seq` run straight from the table: refused, naming the server.
                let verb = ["next", "show", "next"][round];
                let said = fails_in_one_line(
                    &mut vesta_cmd(["seq", verb, &keys[0], "--config", &cfg]),
                    &["is served by server", &a.addr, "--server"],
                );
                eprintln!("{said}");
            }
        }
        a.stop_cleanly();
        // Nothing serves it: a run takes the table at once, above every number answered.
        let began = Instant::now();
        let out = vesta_ok(&["seq", "next", &keys[0], "-n", "3", "--config", &cfg]);
        let printed: Vec<u64> = out.lines().map(|l| l.parse().unwrap()).collect();
        calls.printed(&keys[0], &printed, began);
        assert!(
            began.elapsed() < Duration::from_secs(5),
            "{:?}",
            began.elapsed()
        );
    }
    let summary = calls.check();
    eprintln!("a second owner refused: {summary:?}");
    assert!(summary.calls >= 1800 + 600, "{summary:?}");
}

/// Spawns `vesta serve` (for a race: stderr read by [`outcome`]).
fn spawn(mut cmd: std::process::Command) -> Child {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn vesta serve")
}

/// Whether a raced server serves (its startup line) or was refused (its one line).
fn outcome(child: &mut Child) -> Result<(), String> {
    let stderr = child.stderr.take().unwrap();
    let mut last = String::new();
    for line in BufReader::new(stderr).lines().map_while(Result::ok) {
        if line.contains(" listening on ") {
            return Ok(());
        }
        last = line;
    }
    let status = child.wait().unwrap();
    assert!(!status.success(), "exited 0 without serving");
    Err(last)
}

/// Two processes raced onto one fresh table, `offset` apart, 20 times: exactly one serves
/// each time, the other is refused in one line naming `refusal`.
fn exactly_one_of(
    name: &str,
    offsets: impl Fn(u32) -> Duration,
    pair: impl Fn(&Path, u32) -> (std::process::Command, std::process::Command),
    refusals: &[&str],
) {
    let mut wins = [0; 2];
    for trial in 0..20 {
        let dir = tempfile::tempdir().unwrap();
        let (first, second) = pair(dir.path(), trial);
        let mut a = spawn(first);
        std::thread::sleep(offsets(trial));
        let mut b = spawn(second);
        let (ra, rb) = std::thread::scope(|s| {
            let ta = s.spawn(|| outcome(&mut a));
            let tb = s.spawn(|| outcome(&mut b));
            (ta.join().unwrap(), tb.join().unwrap())
        });
        let refused = match (&ra, &rb) {
            (Ok(()), Err(line)) => {
                wins[0] += 1;
                line
            }
            (Err(line), Ok(())) => {
                wins[1] += 1;
                line
            }
            _ => panic!("{name}, trial {trial}: not exactly one serving: {ra:?} {rb:?}"),
        };
        assert!(
            refusals.iter().any(|r| refused.contains(r)),
            "{name}, trial {trial}: {refused}"
        );
        for c in [&mut a, &mut b] {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
    eprintln!("{name}: 20 trials, exactly one serving each time (first/second won {wins:?})");
}

#[test]
fn simultaneous_standalone_starts_leave_exactly_one_serving() {
    let hosts = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
    exactly_one_of(
        "two standalone servers 0 ms apart",
        |_| Duration::ZERO,
        |dir, _| {
            let db = format!("sqlite://{}/seq.db", dir.display());
            let cfg = config(dir, "s", &db, "");
            (
                serve_cmd("rest", &cfg, "964", hosts[0].path()),
                serve_cmd("rest", &cfg, "965", hosts[1].path()),
            )
        },
        &["one owner per table"],
    );
}

#[test]
fn a_standalone_server_just_after_a_member_leaves_exactly_one_serving() {
    let hosts = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
    exactly_one_of(
        "a member, then a standalone server 0-50 ms later",
        |trial| Duration::from_micros(u64::from(trial) * 2_500),
        |dir, _| {
            let db = format!("sqlite://{}/seq.db", dir.display());
            let member = config(dir, "m", &db, "cluster = true\n");
            let alone = config(dir, "s", &db, "");
            (
                serve_cmd("tcp", &member, "966", hosts[0].path()),
                serve_cmd("tcp", &alone, "967", hosts[1].path()),
            )
        },
        &["is served as", "one owner per table"],
    );
}

#[test]
fn a_member_serving_another_transport_is_refused_at_its_join() {
    let dir = tempfile::tempdir().unwrap();
    let host = tempfile::tempdir().unwrap();
    let db = format!("sqlite://{}/seq.db", dir.path().display());
    let cfg = config(dir.path(), "m", &db, "cluster = true\n");
    let a = serve("tcp", &cfg, "968", host.path());
    let said = fails_in_one_line(
        &mut serve_cmd("rest", &cfg, "969", host.path()),
        &[
            "this server serves REST and gRPC",
            "live member(s) 968 serve TCP",
            "every member of a cluster serves the same transport",
        ],
    );
    eprintln!("{said}");
    let calls = Calls::default();
    for k in 0..200 {
        calls
            .tcp(&[&a.addr], &k.to_string(), 1, Duration::from_secs(5))
            .unwrap();
    }
    assert_eq!(calls.check().calls, 200);
    a.stop_cleanly();
}

#[test]
fn on_sqlite_a_second_owner_is_refused_naming_the_holder() {
    let dir = tempfile::tempdir().unwrap();
    let db = format!("sqlite://{}/seq.db", dir.path().display());
    a_second_owner_is_refused(&db, dir.path());
}

/// PostgreSQL, one server for every case: a second owner, and members of two coordinations.
#[test]
fn on_postgres_a_second_owner_and_another_coordination_are_refused() {
    let pg = Postgres::start();
    let dir = tempfile::tempdir().unwrap();
    a_second_owner_is_refused(&pg.create_database("second"), dir.path());

    // A member coordinated in the database, then one coordinated in etcd on the same table.
    let db = pg.create_database("coordinations");
    let etcd = Etcd::start();
    let host = tempfile::tempdir().unwrap();
    let sql = config(dir.path(), "sql", &db, "cluster = true\n");
    let in_etcd = config(
        dir.path(),
        "etcd",
        &db,
        &format!(
            "cluster = true\ncoordination = \"etcd\"\n[etcd]\nendpoints = [\"{}\"]\n",
            etcd.url()
        ),
    );
    let a = serve("tcp", &sql, "970", host.path());
    let said = fails_in_one_line(
        &mut serve_cmd("tcp", &in_etcd, "971", host.path()),
        &[
            "is served as a cluster coordinated in the database (sql)",
            "this server as a cluster coordinated in etcd",
            "vesta seq mode --db",
        ],
    );
    eprintln!("{said}");
    let calls = Calls::default();
    for k in 0..100 {
        calls
            .tcp(&[&a.addr], &k.to_string(), 2, Duration::from_secs(5))
            .unwrap();
    }
    a.stop_cleanly();
    // Nothing serves it: the mode is changed on purpose, and the etcd member serves.
    let set = vesta_ok(&["seq", "mode", "--set", "cluster etcd", "--config", &in_etcd]);
    assert_eq!(set.trim(), "mode cluster sql -> cluster etcd");
    let b = serve("tcp", &in_etcd, "971", host.path());
    for k in 0..100 {
        calls
            .tcp(&[&b.addr], &k.to_string(), 2, Duration::from_secs(10))
            .unwrap();
    }
    let summary = calls.check();
    eprintln!("two coordinations: {summary:?}");
    b.stop_cleanly();
}
