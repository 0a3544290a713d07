//! Per-key sequences across servers (issue 34, docs/seq-cluster.md), with real processes on a
//! real PostgreSQL, the cluster coordinated in that database (`[seq] coordination = "sql"`), in
//! a real etcd (`"etcd"`) or in a real ZooKeeper (`"zookeeper"`), one scenario for all three:
//! `vesta serve tcp --seq-cluster` members on one sequences database, six
//! concurrent TCP clients calling four keys through every fault, each client following moves
//! (`SEQ_MOVED`) and waiting out hand-offs (`SEQ_MOVING`); the history checker
//! (`vesta_tests::history`) runs over every answer: no number twice per key, and a call that
//! began after another ended answered above it. The faults, one after another:
//!
//! 1. two members split the sets;
//! 2. one is SIGKILLed: its sets wait for its lease to expire, then move;
//! 3. it comes back (a new incarnation) and takes its share back;
//! 4. one is cut off from the coordinator (the database, etcd or ZooKeeper) by a proxy that
//!    drops every byte: it stops serving
//!    within its term, the other takes its sets once its lease expires; healed, it finds its
//!    lease lost, drops everything and joins again;
//! 5. one stops cleanly (SIGTERM): it hands its sets off before exiting;
//! 6. a third member joins and takes its share.
//!
//! No call fails: each is answered within the client's retry budget, and the longest wait of
//! each phase is printed and bounded by the lease (ttl as the coordinator counts it, plus a
//! beat and a store round trip). Mistakes are refused in one line: a second process on a live
//! member's machine ID, a server or `vesta seq next` outside the cluster on its table, an
//! unknown `seq.coordination`, etcd without endpoints, ZooKeeper without a connect string or
//! granting sessions shorter than the lease.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use vesta_tests::bin::{ServerChild, fails_in_one_line, vesta_cmd, vesta_fails, vesta_ok};
use vesta_tests::db::Postgres;
use vesta_tests::etcd::Etcd;
use vesta_tests::history::{self, History};
use vesta_tests::proxy::Proxy;
use vesta_tests::zk::{ZkOptions, ZkServer};

const KEYS: [&str; 4] = [
    "0",
    "300007",
    "chat:\u{4e2d}\u{6587}",
    "18446744073709551615",
];
/// The members' lease (`seq.cluster_ttl_ms`): short, so the test is quick.
const TTL: Duration = Duration::from_millis(3000);
/// The members' `seq.store_timeout_ms` (and `etcd.timeout_ms`).
const STORE_TIMEOUT: Duration = Duration::from_millis(2000);

/// Where the cluster is coordinated, and how its members and tools reach it.
enum Coord {
    /// In the sequences' database (`[seq] coordination = "sql"`).
    Sql,
    /// In etcd (`"etcd"`): the member cut off in the scenario reaches it through `via_proxy`.
    Etcd {
        _etcd: Etcd,
        url: String,
        via_proxy: String,
    },
    /// In ZooKeeper (`"zookeeper"`): the member cut off reaches it through `via_proxy`.
    Zookeeper {
        _zk: ZkServer,
        connect: String,
        via_proxy: String,
    },
}

/// The `[zookeeper]` sessions' timeout of the machine-ID registrations (a SIGKILLed member's
/// machine ID is free again soon after).
const ZK_SESSION: Duration = Duration::from_millis(2000);

impl Coord {
    /// How long after its last confirmed renewal a killed member's lease may still run, as
    /// the coordinator counts it: the ttl on the database's clock; in etcd whole seconds
    /// (rounded up, at least etcd's minimum of 2 s) plus its expiry check (every 500 ms); in
    /// ZooKeeper the session timeout granted (the ttl: the test server grants 200 ms to a
    /// minute) plus a tick, taken as half of it.
    fn lease(&self) -> Duration {
        match self {
            Coord::Sql => TTL,
            Coord::Etcd { .. } => {
                Duration::from_secs(TTL.as_millis().div_ceil(1000).max(2) as u64)
                    + Duration::from_millis(500)
            }
            Coord::Zookeeper { .. } => TTL + TTL / 2,
        }
    }

    /// Whether the coordinator is reached through a proxy of its own (not the database's).
    fn proxied(&self) -> bool {
        !matches!(self, Coord::Sql)
    }

    /// Waits (bounded) until no live process holds `machine` where the coordinator registers
    /// machine IDs (etcd: a static ID is registered there; SQL: nowhere).
    fn until_machine_free(&self, machine: &str) {
        let deadline = Instant::now() + self.lease() * 4 + ZK_SESSION;
        loop {
            let (held, ls) = match self {
                Coord::Sql => return,
                Coord::Etcd { url, .. } => {
                    let ls = vesta_ok(&["machine", "ls", "--etcd", url]);
                    let held = ls.lines().any(|l| {
                        let mut words = l.split_whitespace();
                        words.next() == Some(machine) && words.next().is_some_and(|h| h != "-")
                    });
                    (held, ls)
                }
                Coord::Zookeeper { connect, .. } => {
                    let mut c = vesta_embed::IssuerConfig::default();
                    c.machine.source = vesta_embed::MachineSource::Zookeeper;
                    c.zookeeper.connect = connect.clone();
                    let settings = vesta_embed::lease::ZkSettings::from_config(&c).unwrap();
                    let rows = vesta_embed::lease::inspect(&settings).unwrap();
                    let held = rows
                        .iter()
                        .any(|r| r.machine.to_string() == machine && r.held);
                    (held, format!("{rows:?}"))
                }
            };
            if !held {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "machine {machine} still held:\n{ls}"
            );
            thread::sleep(Duration::from_millis(100));
        }
    }

    /// The `[seq]` and `[etcd]` lines of a member's or tool's config, the coordinator reached
    /// directly or (`proxied`) through the proxy.
    fn config(&self, db: &str, proxied: bool) -> String {
        let (coordination, section) = match self {
            Coord::Sql => ("sql", String::new()),
            Coord::Etcd { url, via_proxy, .. } => (
                "etcd",
                // The static machine ID is registered there too, under a lease of etcd's
                // minimum (one process per machine ID, released soon after a SIGKILL).
                format!(
                    "[etcd]\nendpoints = [\"{}\"]\nttl_ms = 2000\ntimeout_ms = {}\n",
                    if proxied { via_proxy } else { url },
                    STORE_TIMEOUT.as_millis()
                ),
            ),
            Coord::Zookeeper {
                connect, via_proxy, ..
            } => (
                "zookeeper",
                // The static machine ID is registered there too, in a session of its own.
                format!(
                    "[zookeeper]\nconnect = \"{}\"\nsession_timeout_ms = {}\n\
                     connect_timeout_ms = {}\n",
                    if proxied { via_proxy } else { connect },
                    ZK_SESSION.as_millis(),
                    STORE_TIMEOUT.as_millis()
                ),
            ),
        };
        format!(
            "[seq]\ndb = \"{db}\"\nstep = 1000\nstore_timeout_ms = {}\ncluster_ttl_ms = {}\n\
             coordination = \"{coordination}\"\n{section}",
            STORE_TIMEOUT.as_millis(),
            TTL.as_millis()
        )
    }
}

/// What the callers of one phase saw.
struct Phase {
    answered: u64,
    longest: Duration,
}

struct Callers {
    history: Arc<History>,
    runtime: tokio::runtime::Runtime,
    /// [`Coord::lease`].
    lease: Duration,
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
                let lease = self.lease;
                self.runtime.spawn(async move {
                    let mut config = vesta_server::ClientConfig::new(servers);
                    // Longer than a lease, a beat and a store timeout: the longest wait for a set
                    // whose member was killed or cut off.
                    config.retry_budget = lease * 3 + STORE_TIMEOUT * 2;
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

/// A member on `db`, reaching the coordinator directly or (`proxied`) through the proxy.
fn member(machine: &str, coord: &Coord, db: &str, proxied: bool, dir: &Path) -> ServerChild {
    let args = member_args(machine, coord, db, proxied, dir);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    ServerChild::start("tcp", &args, &[])
}

/// `vesta serve tcp`'s arguments of a member (its config written in `dir`).
fn member_args(machine: &str, coord: &Coord, db: &str, proxied: bool, dir: &Path) -> Vec<String> {
    let config = dir.join(format!("member-{machine}-{proxied}.toml"));
    std::fs::write(&config, coord.config(db, proxied)).unwrap();
    [
        "--machine",
        machine,
        "--config",
        config.to_str().unwrap(),
        "--seq-cluster",
    ]
    .map(String::from)
    .to_vec()
}

/// A tool's config on the cluster (`vesta seq ls|next --config`).
fn tool_config(coord: &Coord, db: &str, dir: &Path) -> String {
    let config = dir.join("tool.toml");
    std::fs::write(&config, coord.config(db, false)).unwrap();
    config.to_str().unwrap().to_owned()
}

/// Waits (bounded) until `vesta seq ls` shows `want` live members, each owning sets, and no set
/// without an owner.
fn until_settled(tool: &str, lease: Duration, want: usize) -> String {
    let deadline = Instant::now() + lease * 8;
    loop {
        let ls = vesta_ok(&["seq", "ls", "--config", tool]);
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
    scenario(|_| Coord::Sql);
}

#[test]
fn members_coordinated_in_etcd_hand_keys_off_through_kills_partitions_stops_and_joins() {
    scenario(|proxy| {
        let etcd = Etcd::start();
        let url = etcd.url();
        let proxy = proxy(format!("127.0.0.1:{}", etcd.port()).parse().unwrap());
        Coord::Etcd {
            _etcd: etcd,
            url,
            via_proxy: format!("http://127.0.0.1:{}", proxy),
        }
    });
}

#[test]
fn members_coordinated_in_zookeeper_hand_keys_off_through_kills_partitions_stops_and_joins() {
    scenario(|proxy| {
        let zk = ZkServer::start();
        let connect = zk.connect();
        let proxy = proxy(format!("127.0.0.1:{}", zk.port()).parse().unwrap());
        Coord::Zookeeper {
            _zk: zk,
            connect,
            via_proxy: format!("127.0.0.1:{proxy}"),
        }
    });
}

#[test]
fn coordination_mistakes_are_refused_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let db = format!("sqlite://{}", dir.path().join("s.db").display());
    let serve = |coordination: &str, needles: &[&str]| {
        vesta_fails(
            &[
                "serve",
                "tcp",
                "--listen",
                "127.0.0.1:0",
                "--machine",
                "950",
                "--seq-db",
                &db,
                "--seq-cluster",
                "--seq-coordination",
                coordination,
            ],
            needles,
        )
    };
    serve(
        "consul",
        &[
            "--seq-coordination",
            "seq.coordination \"consul\" is not one of \"sql\", \"etcd\", \"zookeeper\"",
        ],
    );
    serve(
        "etcd",
        &["seq.coordination = \"etcd\"", "etcd.endpoints is empty"],
    );
    let said = serve(
        "zookeeper",
        &[
            "seq.coordination = \"zookeeper\"",
            "[zookeeper] section",
            "zookeeper.connect is empty",
        ],
    );
    eprintln!("{said}");
    // A lease longer than the sessions ZooKeeper grants (its maxSessionTimeout) could not be
    // held by a renewal: refused at the join, naming both.
    let zk = ZkServer::start_with(ZkOptions {
        max_session_ms: 1000,
        ..ZkOptions::default()
    });
    let short = dir.path().join("short.toml");
    std::fs::write(
        &short,
        format!(
            "[seq]\ndb = \"{db}\"\ncluster = true\ncluster_ttl_ms = 3000\n\
             coordination = \"zookeeper\"\n[zookeeper]\nconnect = \"{}\"\n\
             session_timeout_ms = 1000\n",
            zk.connect()
        ),
    )
    .unwrap();
    let said = vesta_fails(
        &[
            "serve",
            "tcp",
            "--listen",
            "127.0.0.1:0",
            "--machine",
            "950",
            "--config",
            short.to_str().unwrap(),
        ],
        &[
            "granted a session timeout of 1000 ms",
            "seq.cluster_ttl_ms 3000",
            "maxSessionTimeout",
        ],
    );
    eprintln!("{said}");
    let config = dir.path().join("bad.toml");
    std::fs::write(&config, "[seq]\ncoordination = \"zk\"\n").unwrap();
    vesta_fails(
        &["serve", "rest", "--config", config.to_str().unwrap()],
        &["seq.coordination \"zk\" is not one of"],
    );
}

/// The scenario of the module doc, coordinated in the store `coord` makes (given a way to put
/// a proxy before a service: it returns the proxy's port).
fn scenario(coord: impl FnOnce(&mut dyn FnMut(std::net::SocketAddr) -> u16) -> Coord) {
    let pg = Postgres::start();
    let db = pg.create_database("cluster");
    // Member 950 reaches its coordinator (the database, etcd or ZooKeeper) through a proxy that
    // can cut it off.
    let mut proxies = Vec::new();
    let coord = coord(&mut |target| {
        let proxy = Proxy::start(target);
        let port = proxy.port();
        proxies.push(proxy);
        port
    });
    let (db_950, proxy) = match coord {
        Coord::Sql => {
            let proxy = Proxy::start(format!("127.0.0.1:{}", pg.port()).parse().unwrap());
            let via = db.replace(&format!(":{}/", pg.port()), &format!(":{}/", proxy.port()));
            assert_ne!(db, via);
            (via, proxy)
        }
        Coord::Etcd { .. } | Coord::Zookeeper { .. } => (db.clone(), proxies.pop().unwrap()),
    };
    let proxied = coord.proxied();
    let dir = tempfile::tempdir().unwrap();
    let tool = tool_config(&coord, &db, dir.path());
    let lease = coord.lease();
    let callers = Callers {
        history: Arc::new(History::default()),
        runtime: tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap(),
        lease,
    };
    // The bound on any one call: the lease runs out, a beat (ttl / 6) passes, the new owner
    // takes the set and raises its section (a store round trip each), the client's pauses.
    let bound = lease + TTL / 3 + STORE_TIMEOUT * 2;

    let a = member("950", &coord, &db, false, dir.path());
    let b = member("951", &coord, &db, false, dir.path());
    let ls = until_settled(&tool, lease, 2);
    assert!(ls.contains("950 ") && ls.contains("951 "), "{ls}");
    if proxied {
        // Coordinated in etcd or ZooKeeper: the database holds the numbers, no member rows.
        let in_db = vesta_ok(&["seq", "ls", "--db", &db]);
        assert!(!in_db.contains(" live "), "{in_db}");
    }
    callers.run("two members", &[&a.addr, &b.addr], 500, || {});

    // A second process on a live member's machine ID is refused, in one line. It opens the
    // table before its machine ID (a missing table fails before any lease is taken), so it
    // gets a store timeout of its own: a CI host's database slower than the members' 2 s
    // under load would otherwise be the refusal it prints.
    let second = dir.path().join("second-951.toml");
    let patient = coord.config(&db, false).replace(
        &format!("store_timeout_ms = {}", STORE_TIMEOUT.as_millis()),
        &format!("store_timeout_ms = {}", (STORE_TIMEOUT * 10).as_millis()),
    );
    assert!(patient.contains("store_timeout_ms = 20000"), "{patient}");
    std::fs::write(&second, patient).unwrap();
    fails_in_one_line(
        &mut vesta_cmd([
            "serve",
            "tcp",
            "--listen",
            "127.0.0.1:0",
            "--machine",
            "951",
            "--config",
            second.to_str().unwrap(),
            "--seq-cluster",
        ]),
        &["951"],
    );

    // 2. SIGKILL 950 while the callers call.
    let (a_addr, b_addr) = (a.addr.clone(), b.addr.clone());
    let killed = callers.run("950 SIGKILLed", &[&a_addr, &b_addr], 300, move || drop(a));
    assert!(
        killed.longest < bound,
        "{:?} over {bound:?}",
        killed.longest
    );
    until_settled(&tool, lease, 1);

    // 3. 950 again, through the proxy: a new incarnation takes its share back (in etcd or
    //    ZooKeeper, once the killed process's registration of machine ID 950 ran out too).
    coord.until_machine_free("950");
    let a = if proxied {
        member("950", &coord, &db, true, dir.path())
    } else {
        member("950", &coord, &db_950, false, dir.path())
    };
    until_settled(&tool, lease, 2);
    callers.run("950 back", &[&a.addr, &b.addr], 300, || {});

    // 4. 950 cut off from its coordinator for two leases, then healed.
    let cut = callers.run("950 partitioned", &[&a.addr, &b.addr], 300, || {
        proxy.blackhole();
        thread::sleep(lease * 2);
    });
    assert!(cut.longest < bound, "{:?} over {bound:?}", cut.longest);
    proxy.heal();
    let ls = until_settled(&tool, lease, 2);
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
    until_settled(&tool, lease, 1);

    // 6. A third member joins and takes its share.
    let c = member("952", &coord, &db, false, dir.path());
    let ls = until_settled(&tool, lease, 2);
    assert!(ls.contains("952 ") && ls.contains("128"), "{ls}");
    callers.run("952 joined", &[&a.addr, &c.addr], 300, || {});

    // Outside the cluster, the table is refused while members are live: a server without
    // --seq-cluster, and `vesta seq next` (whose numbers would interleave with theirs).
    let outside = dir.path().join("outside.toml");
    std::fs::write(&outside, coord.config(&db, false)).unwrap();
    fails_in_one_line(
        &mut vesta_cmd([
            "serve",
            "tcp",
            "--listen",
            "127.0.0.1:0",
            "--machine",
            "953",
            "--config",
            outside.to_str().unwrap(),
        ]),
        &[
            "is served as a cluster coordinated in",
            "this server as standalone",
            "vesta seq mode --db",
        ],
    );
    fails_in_one_line(
        &mut vesta_cmd(["seq", "next", "0", "--config", &tool]),
        &["is served by a cluster (live members 950, 952", "--server"],
    );
    if matches!(coord, Coord::Sql) {
        fails_in_one_line(
            &mut vesta_cmd(["seq", "next", "0", "--db", &db]),
            &["is served by a cluster (live members 950, 952", "--server"],
        );
    } else {
        // Without the config naming the coordination, the members cannot be looked for.
        fails_in_one_line(
            &mut vesta_cmd(["seq", "next", "0", "--db", &db]),
            &["coordinated outside the database", "--config"],
        );
    }

    let summary = callers.history.check().unwrap_or_else(|v| panic!("{v}"));
    assert_eq!(summary.keys, 4, "{summary:?}");
    eprintln!("history: {summary:?}");
    a.stop_cleanly();
    c.stop_cleanly();
}
