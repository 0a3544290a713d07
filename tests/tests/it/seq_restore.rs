//! A restored table never hands out a number twice (issue 47, item 2), with real `vesta`
//! processes on a real SQLite file and a real PostgreSQL (one per module): an older copy of
//! `vesta_seq` put back — while the server is stopped (the SQLite file copied back; `pg_dump`
//! of the table restored), under a running server (an SQL-level copy of the table; the dump
//! restored), under a running server whose sections then go idle and are loaded again, and
//! under two members of a cluster. Each time the server refuses the sections that went back
//! (a 503 or `SEQ_UNAVAILABLE` saying "the table went back", also after the runbook's restart)
//! until `vesta seq raise` moves the table back above what this host remembers, then serves
//! above; every answer goes through the history checker (`vesta_tests::history`): 0
//! violations.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use vesta_tests::bin::{ServerChild, vesta_command};
use vesta_tests::db::Postgres;
use vesta_tests::seq_ops::{Calls, Refused, sqlite_backup, sqlite_put_back_table};

/// Where the table lives, and how an older copy of it is taken and put back.
enum Table<'a> {
    /// An SQLite file.
    Sqlite(PathBuf),
    /// A database of a PostgreSQL server.
    Postgres(&'a Postgres, String),
}

impl Table<'_> {
    fn url(&self) -> String {
        match self {
            Table::Sqlite(path) => format!("sqlite://{}", path.display()),
            Table::Postgres(pg, db) => pg.url(db),
        }
    }

    /// A backup of the table (the whole SQLite file; `pg_dump` of `vesta_seq`).
    fn backup(&self) -> PathBuf {
        match self {
            Table::Sqlite(path) => sqlite_backup(path),
            Table::Postgres(pg, db) => pg.backup_table(db, "vesta_seq"),
        }
    }

    /// Puts `backup` back: the file copied over (`stopped`: nothing has it open) or the table
    /// copied back in one transaction; the dump restored.
    fn put_back(&self, backup: &Path, stopped: bool) {
        match self {
            Table::Sqlite(path) if stopped => {
                std::fs::copy(backup, path).unwrap();
            }
            Table::Sqlite(path) => sqlite_put_back_table(path, backup),
            Table::Postgres(pg, db) => pg.restore(db, backup),
        }
    }
}

/// How long the servers wait on the table for a call (`seq.store_timeout_ms`).
const STORE_MS: u64 = 2000;
/// How long `vesta seq raise`, run once as an operator runs it, waits on the table for a row.
const RAISE_STORE_MS: u64 = 10_000;

/// Whether a refusal is one a client waits out and retries (a term lapsed, a load or raise not
/// answered within `STORE_MS`, a cluster's set between owners): on a loaded host an SQLite or
/// PostgreSQL write can wait seconds for the disk. The table going back is never one.
fn waited_out(said: &str) -> bool {
    !said.contains("the table went back")
        && [
            "retry shortly",
            "no answer within",
            "SEQ_UNAVAILABLE",
            "SEQ_MOVED",
            "SEQ_MOVING",
        ]
        .iter()
        .any(|s| said.contains(s))
}

/// A `[seq]` config on the table (a step of 1000: many raises; `extra`: more lines).
fn config(dir: &Path, table: &Table, extra: &str) -> String {
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let path = dir.join(format!("seq-{n}.toml"));
    std::fs::write(
        &path,
        format!(
            "[seq]\ndb = \"{}\"\nstep = 1000\nstore_timeout_ms = {STORE_MS}\ncluster_ttl_ms = 3000\n\
             {extra}",
            table.url()
        ),
    )
    .unwrap();
    path.to_str().unwrap().to_owned()
}

/// The host a test's servers and `vesta seq raise` run on (its hold directory).
struct Host(tempfile::TempDir);

impl Host {
    fn new() -> Host {
        Host(tempfile::tempdir().unwrap())
    }

    fn env(&self) -> (&str, &str) {
        ("VESTA_HOLD_DIR", self.0.path().to_str().unwrap())
    }

    fn serve(&self, kind: &str, cfg: &str, machine: &str, member: bool) -> ServerChild {
        let mut args = vec![
            "--type",
            "min-granularity",
            "--machine",
            machine,
            "--config",
            cfg,
        ];
        if member {
            args.push("--seq-cluster");
        }
        ServerChild::start(kind, &args, &[self.env()])
    }

    /// `vesta seq raise` on this host, on the servers' config but waiting [`RAISE_STORE_MS`]
    /// for the table: the rows it moved.
    fn raise(&self, cfg: &str) -> String {
        let (k, v) = self.env();
        let servers = std::fs::read_to_string(cfg).unwrap();
        let (from, to) = (
            format!("store_timeout_ms = {STORE_MS}\n"),
            format!("store_timeout_ms = {RAISE_STORE_MS}\n"),
        );
        assert!(servers.contains(&from), "{servers}");
        let own = format!("{cfg}.raise.toml");
        std::fs::write(&own, servers.replace(&from, &to)).unwrap();
        let out = vesta_command()
            .env(k, v)
            .args(["seq", "raise", "--config", &own])
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "{said}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        eprintln!("vesta seq raise:\n{said}");
        said
    }
}

const KEYS: [&str; 3] = ["7", "chat:7", "4300000017"];

/// Calls every key `rounds` times on a REST server; all must be answered.
fn call_all(calls: &Calls, addr: &str, rounds: usize) {
    for _ in 0..rounds {
        for k in KEYS {
            let deadline = Instant::now() + Duration::from_secs(10);
            loop {
                match calls.rest(addr, k) {
                    Ok(_) => break,
                    Err(r) if waited_out(&r.said) && Instant::now() < deadline => {
                        std::thread::sleep(Duration::from_millis(50));
                    }
                    Err(r) => panic!("{k}: {r:?}"),
                }
            }
        }
    }
}

/// Calls `key` until it is refused (at most 5,000 calls): the refusal must say the table
/// went back. A call answered meanwhile (from memory, under a confirmed maximum) is recorded;
/// how many were, and the refusal.
fn until_refused(calls: &Calls, addr: &str, key: &str) -> (usize, String) {
    let mut served = 0;
    for _ in 0..5000 {
        match calls.rest(addr, key) {
            Ok(_) => served += 1,
            Err(r) if waited_out(&r.said) => {
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(r) => {
                assert_eq!(r.status, 503, "{key}: {r:?}");
                assert!(r.said.contains("the table went back"), "{key}: {r:?}");
                return (served, r.said);
            }
        }
    }
    panic!("{key}: served 5,000 more times on a table that went back");
}

/// Calls `key` until it is served again (within 10 s) after a raise.
fn until_served(calls: &Calls, addr: &str, key: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match calls.rest(addr, key) {
            Ok(_) => return,
            Err(r)
                if Instant::now() < deadline
                    && (r.said.contains("went back") || waited_out(&r.said)) =>
            {
                std::thread::sleep(Duration::from_millis(100));
            }
            Err(r) => panic!("{key}: not served after the raise: {r:?}"),
        }
    }
}

/// Put back while the server is stopped: refused at the start's first call of each key, then
/// after `vesta seq raise` served above.
fn put_back_while_stopped(table: &Table, dir: &Path, machine: &str) {
    let (calls, host) = (Calls::default(), Host::new());
    let cfg = config(dir, table, "");
    let a = host.serve("rest", &cfg, machine, false);
    call_all(&calls, &a.addr, 20);
    let backup = table.backup();
    call_all(&calls, &a.addr, 1200);
    a.stop_cleanly();
    table.put_back(&backup, true);
    let a = host.serve("rest", &cfg, machine, false);
    for k in KEYS {
        let (served, said) = until_refused(&calls, &a.addr, k);
        assert_eq!(
            served, 0,
            "{k}: served after a restart on a table that went back"
        );
        eprintln!("{said}");
    }
    let raised = host.raise(&cfg);
    assert_eq!(raised.lines().count(), KEYS.len(), "{raised}");
    for k in KEYS {
        until_served(&calls, &a.addr, k);
    }
    call_all(&calls, &a.addr, 100);
    a.stop_cleanly();
    eprintln!("put back while stopped: {:?}", calls.check());
}

/// Put back under a running server: each key refused at its next raise (never followed); the
/// runbook's restart does not serve it either; `vesta seq raise` does.
fn put_back_under_a_server(table: &Table, dir: &Path, machine: &str) {
    let (calls, host) = (Calls::default(), Host::new());
    let cfg = config(dir, table, "");
    let a = host.serve("rest", &cfg, machine, false);
    call_all(&calls, &a.addr, 20);
    let backup = table.backup();
    call_all(&calls, &a.addr, 1200);
    table.put_back(&backup, false);
    for k in KEYS {
        until_refused(&calls, &a.addr, k);
    }
    // The runbook's restart: still refused, not a number twice.
    a.stop_cleanly();
    let a = host.serve("rest", &cfg, machine, false);
    for k in KEYS {
        let (served, _) = until_refused(&calls, &a.addr, k);
        assert_eq!(served, 0, "{k}: served after the restart");
    }
    host.raise(&cfg);
    for k in KEYS {
        until_served(&calls, &a.addr, k);
    }
    call_all(&calls, &a.addr, 100);
    a.stop_cleanly();
    eprintln!("put back under a server: {:?}", calls.check());
}

/// Put back under a running server whose sections then go idle (`idle_s = 4`), are evicted
/// and loaded again: refused at the load, never followed.
fn put_back_then_evicted(table: &Table, dir: &Path, machine: &str) {
    let (calls, host) = (Calls::default(), Host::new());
    let cfg = config(dir, table, "idle_s = 4\n");
    let a = host.serve("rest", &cfg, machine, false);
    call_all(&calls, &a.addr, 20);
    let backup = table.backup();
    call_all(&calls, &a.addr, 1500);
    // Untouched for four sweeps of a second each, every section leaves memory: at least 4 s
    // after its last call (which ended before this reading, by at most a call's answer: half a
    // second spares it), however long the put-back takes; waited for up to 30 s (a loaded
    // host's sweeps come late).
    let earliest = Instant::now() + Duration::from_millis(3500);
    table.put_back(&backup, false);
    let latest = Instant::now() + Duration::from_secs(30);
    let health = loop {
        std::thread::sleep(Duration::from_millis(200));
        let (_, health) = vesta_tests::bin::http(&a.addr, "GET", "/healthz");
        let health: serde_json::Value = serde_json::from_str(&health).unwrap();
        if health["seq"]["sections"] == 0 || Instant::now() > latest {
            break health;
        }
    };
    // A raise ahead of need still under way at the put-back finds the row below and drops its
    // section at once (counted by the guard as went back, not as an eviction): the same
    // refusal below, reached sooner.
    let raised_into_it = health["seq"]["guard"]["went_back"].as_u64() > Some(0);
    assert!(
        raised_into_it || Instant::now() >= earliest,
        "evicted before four sweeps: {health}"
    );
    assert_eq!(health["seq"]["sections"], 0, "{health}");
    assert!(
        raised_into_it || health["seq"]["evictions"].as_u64() >= Some(1),
        "{health}"
    );
    for k in KEYS {
        let (served, _) = until_refused(&calls, &a.addr, k);
        assert_eq!(
            served, 0,
            "{k}: reloaded and served on a table that went back"
        );
    }
    let (_, health) = vesta_tests::bin::http(&a.addr, "GET", "/healthz");
    let health: serde_json::Value = serde_json::from_str(&health).unwrap();
    assert_eq!(health["status"], "degraded", "{health}");
    assert_eq!(health["seq"]["guard"]["went_back"], KEYS.len(), "{health}");
    host.raise(&cfg);
    for k in KEYS {
        until_served(&calls, &a.addr, k);
    }
    a.stop_cleanly();
    eprintln!("put back, evicted, reloaded: {:?}", calls.check());
}

/// `n` numbers of `key` from the members `both`, a refusal the client could not wait out within
/// its 8 s budget ([`waited_out`]: a member that cannot reach the table in time answers
/// `SEQ_UNAVAILABLE`, the other `SEQ_MOVED` back to it) retried for up to a minute in all.
fn patiently(calls: &Calls, both: &[&str], key: &str, n: u64) -> Result<u64, Refused> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match calls.tcp(both, key, n, Duration::from_secs(8)) {
            Err(r) if waited_out(&r.said) && Instant::now() < deadline => {
                eprintln!("{key}: {} (waited out)", r.said);
                std::thread::sleep(Duration::from_millis(200));
            }
            answer => return answer,
        }
    }
}

/// Put back under two members of a cluster (on one host, coordinated in the database): the
/// members refuse the sets that went back, whichever serves them; `vesta seq raise` ends it.
fn put_back_under_two_members(table: &Table, dir: &Path) {
    let (calls, host) = (Calls::default(), Host::new());
    let cfg = config(dir, table, "");
    let (a, b) = (
        host.serve("tcp", &cfg, "990", true),
        host.serve("tcp", &cfg, "991", true),
    );
    let both = [a.addr.as_str(), b.addr.as_str()];
    let keys: Vec<String> = (0..8).map(|k| format!("member:{k}")).collect();
    let call = |k: &str, n| patiently(&calls, &both, k, n);
    for k in &keys {
        call(k, 1).unwrap();
    }
    let backup = table.backup();
    for _ in 0..100 {
        for k in &keys {
            call(k, 50).unwrap();
        }
    }
    table.put_back(&backup, false);
    let mut refused = 0;
    // Until its section needs a raise: its maximum may run ahead of the 5,000 numbers by a few
    // doubled steps (raises sooner than a second apart double the step), never by 100,000.
    for k in &keys {
        for _ in 0..2000 {
            match call(k, 50) {
                Ok(_) => {}
                Err(r) => {
                    assert!(r.said.contains("the table went back"), "{k}: {r:?}");
                    refused += 1;
                    break;
                }
            }
        }
    }
    assert_eq!(
        refused,
        keys.len(),
        "every key refused once its section needed a raise"
    );
    let raised = host.raise(&cfg);
    // A line per section the keys live in, and one per row a load created alongside them
    // (a bucket's load creates its kind's others on SQLite) that the backup lacks.
    assert!(raised.lines().count() >= keys.len(), "{raised}");
    assert!(raised.lines().all(|l| l.contains("max_seq")), "{raised}");
    let deadline = Instant::now() + Duration::from_secs(10);
    for k in &keys {
        loop {
            match call(k, 1) {
                Ok(_) => break,
                Err(r) => assert!(
                    Instant::now() < deadline,
                    "{k}: not served after the raise: {r:?}"
                ),
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    a.stop_cleanly();
    b.stop_cleanly();
    eprintln!("put back under two members: {:?}", calls.check());
}

#[test]
fn on_sqlite_a_table_put_back_is_refused_until_raised() {
    let dir = tempfile::tempdir().unwrap();
    for (i, case) in [
        put_back_while_stopped as fn(&Table, &Path, &str),
        put_back_under_a_server,
        put_back_then_evicted,
    ]
    .into_iter()
    .enumerate()
    {
        let table = Table::Sqlite(dir.path().join(format!("seq-{i}.db")));
        case(&table, dir.path(), &format!("{}", 980 + i));
    }
    let table = Table::Sqlite(dir.path().join("members.db"));
    put_back_under_two_members(&table, dir.path());
}

#[test]
fn on_postgres_a_table_put_back_is_refused_until_raised() {
    let pg = Postgres::start();
    let dir = tempfile::tempdir().unwrap();
    for (i, case) in [
        put_back_while_stopped as fn(&Table, &Path, &str),
        put_back_under_a_server,
        put_back_then_evicted,
    ]
    .into_iter()
    .enumerate()
    {
        let name = format!("restore{i}");
        pg.create_database(&name);
        case(
            &Table::Postgres(&pg, name),
            dir.path(),
            &format!("{}", 984 + i),
        );
    }
    pg.create_database("members");
    put_back_under_two_members(&Table::Postgres(&pg, "members".into()), dir.path());
}
