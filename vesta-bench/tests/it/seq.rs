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
use vesta_server::{Client, ClientConfig};

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

    // Above the server's step (100) a SEQ holds fewer numbers than asked: the run fails,
    // naming the counts, rather than count what it did not ask for.
    let mut too_many = tcp_load(addr.to_string());
    too_many.load.batch = Some(101);
    let err = run_tcp(too_many).await.unwrap_err();
    assert!(matches!(err, BenchError::Connection { .. }), "{err:?}");
    assert!(
        err.to_string()
            .contains("SEQ_NEXT of 101 answered a SEQ of 100 (last "),
        "{err}"
    );
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
