//! Per-key sequences over the TCP protocol against a real SQLite table: `SEQ_NEXT` and
//! `SEQ_CURRENT` in raw bytes (answers in request order next to ID requests, a call above the
//! step, every bad input on a connection that goes on), the client's `seq_next`/`seq_next_n`/
//! `seq_current`, numbers above the last run's after a restart, the table locked (`SEQ_UNAVAILABLE`
//! within the bound, warm keys still served), a server without `[seq] db` (`SEQ_OFF`), and the
//! requests counted in `/metrics`. Every number answered is checked per key.

use crate::common;

use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::{Raw, config, get, raw_frame, sample};
use sqlx::sqlite::{SqliteConnectOptions, SqlitePool};
use vesta_server::proto::{ErrorCode, Request, Response, op};
use vesta_server::{Client, ClientConfig, ClientError, ServerHandle, TcpConfig, TcpServer};

/// A server config with per-key sequences on `dir/seq.db` (step `step`) and a metrics listener.
fn seq_config(machine: u64, dir: &Path, step: u64) -> TcpConfig {
    let mut c = config(machine);
    c.seq.db = Some(format!("sqlite://{}/seq.db", dir.display()));
    c.seq.step = step;
    c.seq.max_step = step;
    c.seq.store_timeout_ms = 500;
    c.server.metrics_listen = Some("127.0.0.1:0".parse().unwrap());
    c
}

/// Every number each key was answered, checked as it comes: strictly above the key's last.
#[derive(Default)]
struct Checker(HashMap<Vec<u8>, u64>);

impl Checker {
    /// A call on `key` answered `first..=last`.
    fn saw(&mut self, key: &[u8], first: u64, last: u64) {
        assert!(first >= 1 && first <= last, "{first}..={last}");
        let before = self.0.insert(key.to_vec(), last).unwrap_or(0);
        assert!(
            first > before,
            "key {:?}: {first} after {before}",
            String::from_utf8_lossy(key)
        );
    }

    fn last(&self, key: &[u8]) -> u64 {
        self.0[key]
    }
}

fn next(count: u32, key: &[u8]) -> Request {
    Request::SeqNext {
        count,
        key: Bytes::copy_from_slice(key),
    }
}

fn current(key: &[u8]) -> Request {
    Request::SeqCurrent {
        key: Bytes::copy_from_slice(key),
    }
}

/// Writes `requests` in one write.
async fn send_all(c: &mut Raw, requests: &[(u32, Request)]) {
    let mut b = bytes::BytesMut::new();
    for (id, r) in requests {
        r.encode(*id, &c.dialect, &mut b);
    }
    c.write(&b).await;
}

fn refused(r: &Response) -> (ErrorCode, &str) {
    match r {
        Response::Error { code, message } => (*code, message),
        other => panic!("expected an error, got {other:?}"),
    }
}

#[tokio::test]
async fn seq_ops_answer_in_order_and_refuse_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    let server = TcpServer::start(seq_config(961, dir.path(), 100))
        .await
        .unwrap();
    let http = server.metrics_addr().unwrap();
    let handle = ServerHandle::spawn(server);
    let mut check = Checker::default();
    let mut c = Raw::hello(handle.addr()).await;

    // Cold keys wait for their sections' loads: the ID request behind them waits its turn,
    // the PING does not; the current number is read after the calls ahead of it.
    let (num, text, max) = (
        &b"42"[..],
        "chat:\u{4e2d}\u{6587}".as_bytes(),
        &b"18446744073709551615"[..],
    );
    // One write, so the server reads every frame before any answer is there.
    let first = [
        (2, next(1, num)),
        (3, next(5, text)),
        (4, Request::NextId),
        (5, next(250, max)),
        (6, current(text)),
        (7, Request::Ping),
    ];
    send_all(&mut c, &first).await;
    let mut answers = Vec::new();
    for _ in 0..6 {
        answers.push(c.recv().await.unwrap());
    }
    // A call above the step (100) is refused at once by the op, as a bad count is, in the words
    // REST and gRPC use; the PING does not wait either.
    let (5, over) = answers.remove(0) else {
        panic!("the refusal first: {answers:?}");
    };
    let (code, message) = refused(&over);
    assert_eq!(code, ErrorCode::InvalidArgument, "{message}");
    assert!(
        message.ends_with("count 250 is out of range: allowed 1..=100"),
        "{message}"
    );
    assert_eq!(answers[0], (7, Response::Pong), "{answers:?}");
    let ids: Vec<u32> = answers[1..].iter().map(|(id, _)| *id).collect();
    assert_eq!(ids, [2, 3, 4, 6], "request order: {answers:?}");
    for (i, key, asked) in [(1, num, 1), (2, text, 5)] {
        let Response::Seq { last, count } = answers[i].1 else {
            panic!("{answers:?}");
        };
        assert_eq!(count, asked, "{answers:?}");
        check.saw(key, last + 1 - u64::from(count), last);
    }
    assert!(matches!(answers[3].1, Response::Id(_)), "{answers:?}");
    assert_eq!(answers[4].1, Response::SeqCurrent(check.last(text)));

    // Warm: a pipeline of calls on interleaved keys, each answered at once and in order.
    let mut id = 10;
    let mut pipeline = Vec::new();
    for round in 0..300u32 {
        for key in [num, text, max] {
            pipeline.push((id, next(1 + round % 7, key)));
            id += 1;
        }
    }
    send_all(&mut c, &pipeline).await;
    for want in 10..id {
        let (got, r) = c.recv().await.unwrap();
        assert_eq!(got, want);
        let key = [num, text, max][((want - 10) % 3) as usize];
        let Response::Seq { last, count } = r else {
            panic!("{r:?}");
        };
        check.saw(key, last + 1 - u64::from(count), last);
    }
    c.send(id, &current(num)).await;
    assert_eq!(
        c.recv().await.unwrap(),
        (id, Response::SeqCurrent(check.last(num)))
    );

    // Bad input: named, and the connection goes on.
    let long = vec![b'k'; 129];
    for (request, code, needle) in [
        (
            next(1, &long),
            ErrorCode::InvalidArgument,
            "SEQ_NEXT invalid key",
        ),
        (next(1, b"\xff\xfe"), ErrorCode::InvalidArgument, "UTF-8"),
        (next(1, b"a\nb"), ErrorCode::InvalidArgument, "control"),
        (current(&long), ErrorCode::InvalidArgument, "128"),
        (
            next(0, num),
            ErrorCode::InvalidArgument,
            "SEQ_NEXT count 0 is out of range",
        ),
    ] {
        id += 1;
        c.send(id, &request).await;
        let (got, r) = c.recv().await.unwrap();
        assert_eq!(got, id);
        let (got_code, message) = refused(&r);
        assert_eq!(got_code, code, "{message}");
        assert!(message.contains(needle), "{needle:?} not in {message:?}");
    }
    // An empty key is a frame cut short.
    c.write(&raw_frame(op::SEQ_CURRENT, 99, b"")).await;
    let (99, r) = c.recv().await.unwrap() else {
        panic!("not 99");
    };
    assert_eq!(refused(&r).0, ErrorCode::BadPayload);
    c.send(100, &next(1, num)).await;
    let (100, Response::Seq { last, count: 1 }) = c.recv().await.unwrap() else {
        panic!("the connection went on");
    };
    check.saw(num, last, last);

    let metrics = get(http, "/metrics").await.1;
    assert!(sample(&metrics, "vesta_tcp_requests_total{op=\"seq_next\"}") >= 905.0);
    assert_eq!(
        sample(&metrics, "vesta_tcp_requests_total{op=\"seq_current\"}"),
        3.0
    );
    assert_eq!(
        sample(
            &metrics,
            "vesta_tcp_errors_total{code=\"INVALID_ARGUMENT\"}"
        ),
        6.0,
        "five bad inputs and the call above the step"
    );
    handle.shutdown().await.unwrap();
}

#[tokio::test]
async fn the_client_follows_a_key_across_a_restart_and_a_locked_table() {
    let dir = tempfile::tempdir().unwrap();
    let mut check = Checker::default();
    let key = b"user:7";
    // Two runs on one table: the second answers above everything the first handed out.
    for run in 0..2 {
        let handle = common::start(seq_config(962, dir.path(), 1000)).await;
        let client = Client::connect(ClientConfig::new([handle.addr().to_string()]))
            .await
            .unwrap();
        let n = client.seq_next(key).await.unwrap();
        check.saw(key, n, n);
        // 2,500 numbers: three calls of at most the step, each a range of the key's.
        let ranges = client.seq_next_n(key, 2_500).await.unwrap();
        assert_eq!(ranges.iter().map(|r| r.end - r.start).sum::<u64>(), 2_500);
        for r in &ranges {
            check.saw(key, r.start, r.end - 1);
        }
        assert_eq!(client.seq_current(key).await.unwrap(), check.last(key));
        let n = client.seq_next(b"7").await.unwrap();
        check.saw(b"7", n, n);
        if run == 0 {
            handle.shutdown().await.unwrap();
            continue;
        }

        // The table locked by another writer: a warm key goes on within its section's room;
        // a cold key (a section not loaded) is refused within the bound, naming the cause.
        let lock_pool = SqlitePool::connect_with(
            SqliteConnectOptions::new()
                .filename(dir.path().join("seq.db"))
                .busy_timeout(Duration::from_secs(5)),
        )
        .await
        .unwrap();
        let lock = lock_pool.begin_with("BEGIN EXCLUSIVE").await.unwrap();
        let n = client.seq_next(key).await.unwrap();
        check.saw(key, n, n);
        let started = Instant::now();
        let err = client.seq_next(b"100000000").await.unwrap_err();
        let waited = started.elapsed();
        let ClientError::Refused { code, message, .. } = &err else {
            panic!("{err}");
        };
        assert_eq!(*code, ErrorCode::SeqUnavailable, "{message}");
        // The bound: store_timeout_ms (500) per attempt, and the client does not retry it.
        assert!(waited < Duration::from_secs(5), "{waited:?}");
        lock.rollback().await.unwrap();
        lock_pool.close().await;
        // The table back: the cold key is served.
        let n = client.seq_next(b"100000000").await.unwrap();
        check.saw(b"100000000", n, n);
        handle.shutdown().await.unwrap();
    }
}

#[tokio::test]
async fn a_server_without_a_sequence_database_answers_seq_off() {
    let handle = common::start(config(963)).await;
    let client = Client::connect(ClientConfig::new([handle.addr().to_string()]))
        .await
        .unwrap();
    client.next_id().await.unwrap();
    for err in [
        client.seq_next("42").await.unwrap_err(),
        client.seq_current("42").await.unwrap_err(),
    ] {
        let ClientError::Refused { code, message, .. } = &err else {
            panic!("{err}");
        };
        assert_eq!(*code, ErrorCode::SeqOff);
        assert!(message.contains("[seq] db"), "{message}");
    }
    handle.shutdown().await.unwrap();
}
