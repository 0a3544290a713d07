//! Per-key sequences across servers (issue 34, docs/seq-cluster.md), with real processes on a
//! real PostgreSQL: `vesta serve tcp --seq-cluster` members on one sequences database, six
//! concurrent TCP clients calling four keys through every fault, each client following moves
//! (`SEQ_MOVED`) and waiting out hand-offs (`SEQ_MOVING`); the history checker
//! (`vesta_tests::history`) runs over every answer: no number twice per key, and a call that
//! began after another ended answered above it. The faults, one after another:
//!
//! 1. two members split the sets;
//! 2. one is SIGKILLed: its sets wait for its lease to expire, then move;
//! 3. it comes back (a new incarnation) and takes its share back;
//! 4. one is cut off from the database by a proxy that drops every byte: it stops serving
//!    within its term, the other takes its sets once its lease expires; healed, it finds its
//!    lease lost, drops everything and joins again;
//! 5. one stops cleanly (SIGTERM): it hands its sets off before exiting;
//! 6. a third member joins and takes its share.
//!
//! No call fails: each is answered within the client's retry budget, and the longest wait of
//! each phase is printed and bounded by the lease (ttl, plus a beat and a store round trip).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use vesta_tests::bin::{ServerChild, fails_in_one_line, vesta_cmd, vesta_ok};
use vesta_tests::db::Postgres;
use vesta_tests::history::{self, History};
use vesta_tests::proxy::Proxy;

const KEYS: [&str; 4] = [
    "0",
    "300007",
    "chat:\u{4e2d}\u{6587}",
    "18446744073709551615",
];
/// The members' lease (`seq.cluster_ttl_ms`): short, so the test is quick.
const TTL: Duration = Duration::from_millis(1500);
/// The members' `seq.store_timeout_ms`.
const STORE_TIMEOUT: Duration = Duration::from_millis(1000);

/// What the callers of one phase saw.
struct Phase {
    answered: u64,
    longest: Duration,
}

struct Callers {
    history: Arc<History>,
    runtime: tokio::runtime::Runtime,
}

impl Callers {
    /// Six callers on `servers` until `until` returns; every call must be answered.
    fn run(&self, name: &str, servers: &[&str], min_calls: u64, until: impl FnOnce()) -> Phase {
        let stop = Arc::new(AtomicBool::new(false));
        let answered = Arc::new(AtomicU64::new(0));
        let tasks: Vec<_> = (0..6u64)
            .map(|task| {
                let servers: Vec<String> = servers.iter().map(|s| (*s).to_owned()).collect();
                let (history, stop, answered) =
                    (self.history.clone(), stop.clone(), answered.clone());
                self.runtime.spawn(async move {
                    let mut config = vesta_server::ClientConfig::new(servers);
                    // Longer than a lease, a beat and a store timeout: the longest wait for a set
                    // whose member was killed or cut off.
                    config.retry_budget = TTL * 3 + STORE_TIMEOUT * 2;
                    let client = vesta_server::Client::connect(config).await.unwrap();
                    let mut mine = Vec::new();
                    let mut longest = Duration::ZERO;
                    let mut i = task;
                    while !stop.load(Ordering::Relaxed) {
                        let key = KEYS[(i % 4) as usize];
                        let n = 1 + (i * 7 + task) % 5;
                        let start = Instant::now();
                        let ranges = client
                            .seq_next_n(key, n)
                            .await
                            .unwrap_or_else(|e| panic!("key {key}: {e}"));
                        let end = Instant::now();
                        longest = longest.max(end - start);
                        answered.fetch_add(1, Ordering::Relaxed);
                        mine.extend(history::calls(key, ranges, start, end));
                        i += 1;
                    }
                    history.extend(mine);
                    longest
                })
            })
            .collect();
        let deadline = Instant::now() + Duration::from_secs(60);
        while answered.load(Ordering::Relaxed) < min_calls {
            assert!(
                Instant::now() < deadline,
                "{name}: {min_calls} calls not answered in 60 s"
            );
            thread::sleep(Duration::from_millis(20));
        }
        until();
        let floor = answered.load(Ordering::Relaxed) + min_calls;
        while answered.load(Ordering::Relaxed) < floor {
            assert!(
                Instant::now() < deadline,
                "{name}: calls stopped being answered"
            );
            thread::sleep(Duration::from_millis(20));
        }
        stop.store(true, Ordering::Relaxed);
        let longest = tasks
            .into_iter()
            .map(|t| self.runtime.block_on(t).unwrap())
            .max()
            .unwrap_or_default();
        let phase = Phase {
            answered: answered.load(Ordering::Relaxed),
            longest,
        };
        eprintln!(
            "{name}: {} calls answered, the longest in {} ms",
            phase.answered,
            phase.longest.as_millis()
        );
        phase
    }
}

fn member(machine: &str, db: &str, dir: &std::path::Path) -> ServerChild {
    let config = dir.join("seq-cluster.toml");
    std::fs::write(
        &config,
        format!(
            "[seq]\nstep = 1000\nstore_timeout_ms = {}\ncluster_ttl_ms = {}\n",
            STORE_TIMEOUT.as_millis(),
            TTL.as_millis()
        ),
    )
    .unwrap();
    ServerChild::start(
        "tcp",
        &[
            "--machine",
            machine,
            "--config",
            config.to_str().unwrap(),
            "--seq-db",
            db,
            "--seq-cluster",
        ],
        &[],
    )
}

/// Waits (bounded) until `vesta seq ls` shows `want` live members, each owning sets, and no set
/// without an owner.
fn until_settled(db: &str, want: usize) -> String {
    let deadline = Instant::now() + TTL * 8;
    loop {
        let ls = vesta_ok(&["seq", "ls", "--db", db]);
        let live = ls.lines().filter(|l| l.contains(" live ")).count();
        let owners = ls
            .lines()
            .skip_while(|l| !l.starts_with("owner "))
            .skip(1)
            .filter(|l| {
                l.split(' ')
                    .next()
                    .is_some_and(|o| o.parse::<u64>().is_ok())
            })
            .count();
        if live == want && owners == want && !ls.lines().any(|l| l.starts_with("none ")) {
            return ls;
        }
        assert!(
            Instant::now() < deadline,
            "not settled on {want} members:\n{ls}"
        );
        thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn members_hand_keys_off_through_kills_partitions_stops_and_joins() {
    let pg = Postgres::start();
    let db = pg.create_database("cluster");
    // Member 952 reaches the database through a proxy that can cut it off.
    let proxy = Proxy::start(format!("127.0.0.1:{}", pg.port()).parse().unwrap());
    let db_via_proxy = db.replace(&format!(":{}/", pg.port()), &format!(":{}/", proxy.port()));
    assert_ne!(db, db_via_proxy);
    let dir = tempfile::tempdir().unwrap();
    let callers = Callers {
        history: Arc::new(History::default()),
        runtime: tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap(),
    };
    // The bound on any one call: the lease runs out, a beat (ttl / 6) passes, the new owner
    // takes the set and raises its section (a store round trip each), the client's pauses.
    let bound = TTL + TTL / 3 + STORE_TIMEOUT * 2;

    let a = member("950", &db, dir.path());
    let b = member("951", &db, dir.path());
    let ls = until_settled(&db, 2);
    assert!(ls.contains("950 ") && ls.contains("951 "), "{ls}");
    callers.run("two members", &[&a.addr, &b.addr], 500, || {});

    // 2. SIGKILL 950 while the callers call.
    let (a_addr, b_addr) = (a.addr.clone(), b.addr.clone());
    let killed = callers.run("950 SIGKILLed", &[&a_addr, &b_addr], 300, move || drop(a));
    assert!(
        killed.longest < bound,
        "{:?} over {bound:?}",
        killed.longest
    );
    until_settled(&db, 1);

    // 3. 950 again, through the proxy: a new incarnation takes its share back.
    let a = member("950", &db_via_proxy, dir.path());
    until_settled(&db, 2);
    callers.run("950 back", &[&a.addr, &b.addr], 300, || {});

    // 4. 950 cut off from the database for two leases, then healed.
    let cut = callers.run("950 partitioned", &[&a.addr, &b.addr], 300, || {
        proxy.blackhole();
        thread::sleep(TTL * 2);
    });
    assert!(cut.longest < bound, "{:?} over {bound:?}", cut.longest);
    proxy.heal();
    let ls = until_settled(&db, 2);
    callers.run("950 healed", &[&a.addr, &b.addr], 300, || {});
    // It lost its lease (the proxy dropped its renewals past the expiry) and joined again as
    // a new incarnation: its holder's count (after the last '.') went up from 1.
    let row = ls
        .lines()
        .find(|l| l.starts_with("950 "))
        .unwrap_or_default();
    let incarnation: u32 = row
        .rsplit('.')
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert!(
        incarnation >= 2,
        "950 joined again after losing its lease:\n{ls}"
    );

    // 5. 951 stops cleanly: it hands its sets off before it exits, so they move at 950's next
    //    beat instead of after a lease.
    let b_addr = b.addr.clone();
    let stopped = callers.run("951 stopped", &[&a.addr, &b_addr], 300, move || {
        let said = b.stop_cleanly();
        assert!(said.contains("stopped"), "{said}");
    });
    assert!(stopped.longest < bound, "{:?}", stopped.longest);
    until_settled(&db, 1);

    // 6. A third member joins and takes its share.
    let c = member("952", &db, dir.path());
    let ls = until_settled(&db, 2);
    assert!(ls.contains("952 ") && ls.contains("128"), "{ls}");
    callers.run("952 joined", &[&a.addr, &c.addr], 300, || {});

    // Outside the cluster, the table is refused while members are live: a server without
    // --seq-cluster, and `vesta seq next --db` (whose numbers would interleave with theirs).
    fails_in_one_line(
        &mut vesta_cmd([
            "serve",
            "tcp",
            "--listen",
            "127.0.0.1:0",
            "--machine",
            "953",
            "--seq-db",
            &db,
        ]),
        &[
            "is served by a cluster (live members 950, 952)",
            "--seq-cluster",
        ],
    );
    fails_in_one_line(
        &mut vesta_cmd(["seq", "next", "0", "--db", &db]),
        &["is served by a cluster", "--server"],
    );

    let summary = callers.history.check().unwrap_or_else(|v| panic!("{v}"));
    assert_eq!(summary.keys, 4, "{summary:?}");
    eprintln!("history: {summary:?}");
    a.stop_cleanly();
    c.stop_cleanly();
}
