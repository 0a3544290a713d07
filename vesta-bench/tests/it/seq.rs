//! The per-key sequence load against real servers: vesta's TCP and REST servers on SQLite
//! (in process), and the peers, a real `redis-server` and a real PostgreSQL. Every run is
//! checked against the store afterwards: the numbers the report counted are exactly the sum of
//! the keys' current numbers (every key starts at 0, so a key's current number is how many it
//! handed out). Assertions are on counts and statuses, never on speed.

use crate::common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use common::{bench, counts_add_up, rest_seq_server, tcp_seq_server};
use vesta_bench::{BenchError, Field, Load, Peer, Report, RestLoad, TcpLoad, rest, tcp};
use vesta_server::{Client, ClientConfig, ServerHandle};

/// Keys per run: few, so that every key is asked many times and sections are raised often.
const KEYS: u64 = 50;

fn load(target: String) -> Load {
    Load {
        targets: vec![target],
        connections: 2,
        duration: Duration::from_millis(400),
        batch: None,
        rate: None,
    }
}

fn tcp_load(target: String) -> TcpLoad {
    TcpLoad {
        load: load(target),
        pipeline: 16,
        seq_keys: Some(KEYS),
        seq_shape: vesta_bench::KeyShape::Dense,
        peer: None,
    }
}

async fn run_tcp(config: TcpLoad) -> Result<Report, BenchError> {
    bench(move || tcp::run(config, Duration::from_secs(1), |_| {})).await
}

/// The sum of the keys' current numbers over TCP (`SEQ_CURRENT`).
async fn tcp_total(addr: SocketAddr) -> u64 {
    let client = Client::connect(ClientConfig::new([addr.to_string()]))
        .await
        .unwrap();
    let mut total = 0;
    for key in 0..KEYS {
        total += client.seq_current(key.to_string()).await.unwrap();
    }
    total
}

/// `GET path` over a connection of its own: the status line and the body.
fn http_get(addr: SocketAddr, path: &str) -> (String, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    s.write_all(request.as_bytes()).unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let (head, body) = out.split_once("\r\n\r\n").unwrap();
    (head.lines().next().unwrap().to_owned(), body.to_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tcp_seq_runs_count_every_number_they_were_answered() {
    let dir = tempfile::tempdir().unwrap();
    let server = tcp_seq_server(940, dir.path(), 100).await;
    let addr = server.addr();

    // Closed loop, one number a call.
    let r = run_tcp(tcp_load(addr.to_string())).await.unwrap();
    counts_add_up(&r);
    assert!(r.requests > 0);
    assert_eq!((r.ids, r.errors), (r.requests, 0));
    assert_eq!(r.cap_per_sec(), None);
    assert!(r.per_unit.is_empty());
    let text = r.to_string();
    assert!(
        text.contains("x pipeline 16, SEQ_NEXT, random keys 0..50, closed loop"),
        "{text}"
    );
    assert!(text.contains("over 50 keys (1 per answer"), "{text}");
    let mut counted = r.ids;
    assert_eq!(tcp_total(addr).await, counted);

    // Three a call, at a fixed rate: the schedule decides the count.
    let mut open = tcp_load(addr.to_string());
    open.load.batch = Some(3);
    open.load.rate = Some(1000);
    open.load.duration = Duration::from_secs(1);
    let r = run_tcp(open).await.unwrap();
    counts_add_up(&r);
    assert_eq!((r.requests, r.ids, r.errors), (1000, 3000, 0));
    assert!(
        r.to_string()
            .contains("SEQ_NEXT count=3, random keys 0..50")
    );
    counted += r.ids;
    assert_eq!(tcp_total(addr).await, counted);

    // Above the server's step (100) the op refuses the call whole (one rule for every
    // transport): every request of the run is an error, and no number is counted.
    let mut too_many = tcp_load(addr.to_string());
    too_many.load.batch = Some(101);
    let r = run_tcp(too_many).await.unwrap();
    assert!(r.requests > 0, "{r}");
    assert_eq!((r.ids, r.errors), (0, r.requests), "{r}");
    assert_eq!(tcp_total(addr).await, counted, "nothing was taken");
    server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_without_sequences_or_a_bad_key_count_fails_before_the_run() {
    let (server, _) = common::tcp_server(941, vesta_core::IdType::MaxPeak).await;
    let err = run_tcp(tcp_load(server.addr().to_string()))
        .await
        .unwrap_err();
    assert!(matches!(err, BenchError::Target { .. }), "{err:?}");
    assert!(
        err.to_string().contains("SEQ_CURRENT refused: SEQ_OFF: "),
        "{err}"
    );
    let mut none = tcp_load(server.addr().to_string());
    none.seq_keys = Some(0);
    let err = run_tcp(none).await.unwrap_err();
    assert!(
        matches!(
            err,
            BenchError::OutOfRange {
                field: Field::SeqKeys,
                ..
            }
        ),
        "{err:?}"
    );
    server.shutdown().await.unwrap();

    let (rest_server, _) = common::rest_server(942, vesta_core::IdType::MaxPeak).await;
    let config = RestLoad {
        load: load(rest_server.addr.to_string()),
        baseline: false,
        segment: None,
        leaf: false,
        seq_keys: Some(KEYS),
        seq_shape: vesta_bench::KeyShape::Dense,
    };
    let err = bench(move || rest::run(config, Duration::from_secs(1), |_| {}))
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("the server has no per-key sequences"),
        "{err}"
    );
    rest_server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rest_seq_runs_count_every_number_they_were_answered() {
    let dir = tempfile::tempdir().unwrap();
    let server = rest_seq_server(943, dir.path(), 100).await;
    let addr = server.addr;
    let total = move || {
        (0..KEYS)
            .map(|k| {
                let (status, body) = http_get(addr, &format!("/seq/{k}/current"));
                assert!(status.contains(" 200 "), "{status}: {body}");
                body.trim().parse::<u64>().unwrap()
            })
            .sum::<u64>()
    };
    let mut counted = 0;
    for batch in [None, Some(7)] {
        let mut config = RestLoad {
            load: load(addr.to_string()),
            baseline: false,
            segment: None,
            leaf: false,
            seq_keys: Some(KEYS),
            seq_shape: vesta_bench::KeyShape::Dense,
        };
        config.load.batch = batch;
        let r = bench(move || rest::run(config, Duration::from_secs(1), |_| {}))
            .await
            .unwrap();
        counts_add_up(&r);
        assert!(r.requests > 0);
        assert_eq!(r.errors, 0);
        let text = r.to_string();
        let path = match batch {
            None => "GET /seq/{key}, random keys 0..50",
            Some(_) => "GET /seq/{key}?count=7&format=json, random keys 0..50",
        };
        assert!(text.contains(path), "{text}");
        counted += r.ids;
        assert_eq!(bench(total).await, counted);
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_redis_peer_counts_what_redis_added_up() {
    let redis = vesta_tests::redis::Redis::start();
    let mut config = tcp_load(redis.addr());
    config.peer = Some(Peer::Redis);
    let r = run_tcp(config.clone()).await.unwrap();
    counts_add_up(&r);
    assert!(r.requests > 0);
    assert_eq!((r.ids, r.errors), (r.requests, 0));
    let text = r.to_string();
    assert!(text.contains("(peer: Redis, not vesta)"), "{text}");
    assert!(
        text.contains("redis, 2 connections x pipeline 16, INCR key, random keys 0..50"),
        "{text}"
    );
    let mut counted = r.ids;
    assert_eq!(redis.sum_of_keys(KEYS), counted as i64);

    config.load.batch = Some(5);
    let r = run_tcp(config.clone()).await.unwrap();
    counts_add_up(&r);
    assert_eq!(r.ids, 5 * r.requests);
    counted += r.ids;
    assert_eq!(redis.sum_of_keys(KEYS), counted as i64);

    // An error reply is counted by its kind, and the run goes on: key 7 holds text now.
    assert_eq!(redis.command(&["SET", "7", "x"]).as_deref(), Some("+OK"));
    let r = run_tcp(config).await.unwrap();
    counts_add_up(&r);
    assert!(r.errors > 0 && r.ids > 0, "{r}");
    assert_eq!(r.errors_by_kind.keys().collect::<Vec<_>>(), ["ERR"]);
    assert!(
        r.first_error.as_deref().unwrap().contains("not an integer"),
        "{r}"
    );

    // Not Redis at all: a port nothing listens on fails before the run.
    drop(redis);
    let addr = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let mut config = tcp_load(addr.to_string());
    config.peer = Some(Peer::Redis);
    let err = run_tcp(config).await.unwrap_err();
    assert!(matches!(err, BenchError::Target { .. }), "{err:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_postgres_peer_counts_what_the_table_added_up() {
    let pg = vesta_tests::db::Postgres::start();
    let url = pg.create_database("peer");
    let mut config = tcp_load(url.clone());
    config.peer = Some(Peer::Postgres);
    let r = run_tcp(config.clone()).await.unwrap();
    counts_add_up(&r);
    assert!(r.requests > 0);
    assert_eq!((r.ids, r.errors), (r.requests, 0));
    let text = r.to_string();
    assert!(text.contains("(peer: PostgreSQL, not vesta)"), "{text}");
    assert!(
        text.contains(
            "postgres, 2 connections (1 query in flight each), UPDATE seq SET cur = cur + 1 \
             WHERE key = $1 RETURNING cur, random keys 0..50"
        ),
        "{text}"
    );
    let mut counted = r.ids;

    // Twice a call at a fixed rate, on the rows the first run made.
    config.load.batch = Some(2);
    config.load.rate = Some(500);
    config.load.duration = Duration::from_secs(1);
    let r = run_tcp(config).await.unwrap();
    counts_add_up(&r);
    assert_eq!((r.requests, r.ids, r.errors), (500, 1000, 0));
    counted += r.ids;

    let (rows, total): (i64, i64) = {
        use sqlx::Connection;
        let mut conn = sqlx::postgres::PgConnection::connect(&url).await.unwrap();
        sqlx::query_as("SELECT count(*), sum(cur)::BIGINT FROM seq")
            .fetch_one(&mut conn)
            .await
            .unwrap()
    };
    assert_eq!((rows, total), (KEYS as i64, counted as i64));
}

/// A TCP server (machine `machine`) that is a member of the sequences cluster on the SQLite
/// file `db`, with a short lease so that members settle quickly.
async fn cluster_member(machine: u64, db: &str) -> ServerHandle {
    let mut c = vesta_server::TcpConfig::default();
    c.server.listen = "127.0.0.1:0".parse().unwrap();
    c.machine.id = Some(machine);
    c.seq.db = Some(db.to_owned());
    (c.seq.cluster, c.seq.cluster_ttl_ms) = (true, 1500);
    ServerHandle::spawn(vesta_server::TcpServer::start(c).await.unwrap())
}

/// The sets among `sets` that the server at `addr` serves itself (it answers `SEQ_CURRENT` of
/// the set's first section's first key rather than naming another member).
async fn sets_served(addr: SocketAddr, sets: u64) -> Vec<u64> {
    let mut config = ClientConfig::new([addr.to_string()]);
    // A set between owners is "not served here" for now: the caller asks again.
    config.retry_budget = Duration::from_millis(200);
    let client = Client::connect(config).await.unwrap();
    let mut mine = Vec::new();
    for set in 0..sets {
        if client
            .seq_current((set * SECTION).to_string())
            .await
            .is_ok()
        {
            mine.push(set);
        }
    }
    mine
}

/// Keys per section (`vesta_segment::SECTION_KEYS`): section `s` is in set `s % 256`.
const SECTION: u64 = vesta_seq::SECTION_KEYS;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_seq_run_on_two_cluster_members_sends_each_key_to_its_owner() {
    let dir = tempfile::tempdir().unwrap();
    let db = format!("sqlite://{}/seq.db", dir.path().display());
    let a = cluster_member(943, &db).await;
    let b = cluster_member(944, &db).await;
    // 16 sections of keys: sets 0..16, dealt between the two members once both are live.
    const SETS: u64 = 16;
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let (on_a, on_b) = (
            sets_served(a.addr(), SETS).await,
            sets_served(b.addr(), SETS).await,
        );
        if !on_a.is_empty() && !on_b.is_empty() && on_a.len() + on_b.len() == SETS as usize {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "not settled: {on_a:?} {on_b:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (addr_a, addr_b) = (a.addr().to_string(), b.addr().to_string());
    let mut config = tcp_load(addr_a.clone());
    config.load.targets = vec![addr_a.clone(), addr_b.clone()];
    config.load.duration = Duration::from_millis(800);
    config.seq_keys = Some(SETS * SECTION);
    let r = run_tcp(config.clone()).await.unwrap();
    counts_add_up(&r);
    // Every answer a SEQ of one (checked by the engine), none an error: each key went to its
    // owner, learned from the moves.
    assert!(r.requests > 0);
    assert_eq!((r.ids, r.errors), (r.requests, 0), "{r}");
    assert!(r.moves > 0, "{r}");
    assert_eq!(r.served.values().sum::<u64>(), r.requests, "{r}");
    for addr in [&addr_a, &addr_b] {
        assert!(r.served.get(addr).is_some_and(|&n| n > 0), "{addr}: {r}");
    }
    let text = r.to_string();
    assert!(text.contains("moves followed (SEQ_MOVED)"), "{text}");

    // At a fixed rate too: the schedule decides the count.
    config.load.rate = Some(1000);
    config.load.duration = Duration::from_secs(1);
    let r = run_tcp(config).await.unwrap();
    counts_add_up(&r);
    assert_eq!((r.requests, r.ids, r.errors), (1000, 1000, 0), "{r}");
    assert!(r.service.is_some());
    assert!(
        r.served.values().all(|&n| n > 0) && r.served.len() == 2,
        "{r}"
    );

    // One server alone keeps the direct path: a member of a cluster answers the keys of the
    // other's sets SEQ_MOVED, counted as errors, and the report has no routing line.
    let alone = run_tcp(TcpLoad {
        seq_keys: Some(SETS * SECTION),
        seq_shape: vesta_bench::KeyShape::Dense,
        ..tcp_load(addr_a)
    })
    .await
    .unwrap();
    assert!(alone.served.is_empty() && alone.moves == 0);
    assert!(alone.errors_by_kind.contains_key("SEQ_MOVED"), "{alone}");
    a.shutdown().await.unwrap();
    b.shutdown().await.unwrap();
}
