//! Segment mode over the TCP protocol against a real SQLite database: `SEGMENT` and `SEGMENTS`
//! in raw bytes (answers in request order next to ID requests, every bad input), a batch whose
//! ranges would not fit a frame, the client's `next_segment`/`next_segments`, `/metrics` and
//! `/healthz` per tag, and the unused tail given back at shutdown.

use crate::common;

use std::collections::BTreeSet;
use std::ops::Range;
use std::path::Path;
use std::time::Duration;

use common::{Raw, config, get, raw_frame};
use vesta_segment::{Database, DbUrl, GiveBackOutcome};
use vesta_server::proto::{ErrorCode, Request, Response, op};
use vesta_server::{Client, ClientConfig, ClientError, ServerHandle, TcpConfig, TcpServer};

/// An SQLite database in `dir` with `leaf_alloc` and `(tag, step)` rows starting at 1.
async fn database(dir: &Path, tags: &[(&str, i64)]) -> String {
    let url = format!("sqlite://{}/segments.db", dir.display());
    let db = Database::connect_or_create(&DbUrl::parse(&url).unwrap(), Duration::from_secs(5))
        .await
        .unwrap();
    db.init().await.unwrap();
    for (tag, step) in tags {
        db.create_tag(tag, *step, 1, None).await.unwrap();
    }
    db.close().await;
    url
}

/// A server config with segment mode on `url` and a metrics listener.
fn segment_config(machine: u64, url: &str) -> TcpConfig {
    let mut c = config(machine);
    c.segment.db = Some(url.to_owned());
    c.segment.wait_ms = 2_000;
    c.server.metrics_listen = Some("127.0.0.1:0".parse().unwrap());
    c
}

fn error_code(r: &Response) -> ErrorCode {
    match r {
        Response::Error { code, .. } => *code,
        other => panic!("expected an error, got {other:?}"),
    }
}

fn count(ranges: &[Range<u64>]) -> u64 {
    ranges.iter().map(|r| r.end - r.start).sum()
}

#[tokio::test]
async fn segment_ops_answer_in_order_and_refuse_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    let url = database(dir.path(), &[("orders", 100)]).await;
    let server = TcpServer::start(segment_config(960, &url)).await.unwrap();
    let http = server.metrics_addr().unwrap();
    let handle = ServerHandle::spawn(server);
    let mut c = Raw::hello(handle.addr()).await;

    // The first request of a tag loads it (a database round) and waits: the ID request behind
    // it waits its turn, the PING does not (as documented for waiting ID requests).
    let tag = || "orders".to_owned();
    c.send(2, &Request::Segment { tag: tag() }).await;
    c.send(3, &Request::NextId).await;
    c.send(
        4,
        &Request::Segments {
            count: 250,
            tag: tag(),
        },
    )
    .await;
    c.send(5, &Request::Ping).await;
    let mut answers = Vec::new();
    for _ in 0..4 {
        answers.push(c.recv().await.unwrap());
    }
    assert_eq!(answers[0], (5, Response::Pong), "{answers:?}");
    assert_eq!(answers[1], (2, Response::Number(1)), "{answers:?}");
    assert!(matches!(answers[2], (3, Response::Id(_))), "{answers:?}");
    let (4, Response::Numbers(ranges)) = &answers[3] else {
        panic!("{answers:?}");
    };
    assert_eq!(count(ranges), 250);
    assert_eq!(ranges[0].start, 2, "right after the single number");
    assert!(
        ranges.windows(2).all(|w| w[0].end <= w[1].start),
        "{ranges:?}"
    );
    // Warm: answered at once.
    c.send(6, &Request::Segment { tag: tag() }).await;
    let (6, Response::Number(n)) = c.recv().await.unwrap() else {
        panic!("not a number");
    };
    assert_eq!(n, ranges.last().unwrap().end);

    // Bad input: named, and the connection goes on.
    c.send(7, &Request::Segment { tag: "nope".into() }).await;
    let (7, r) = c.recv().await.unwrap() else {
        panic!()
    };
    assert_eq!(error_code(&r), ErrorCode::UnknownTag);
    assert!(
        format!("{r:?}").contains("unknown tag \\\"nope\\\""),
        "{r:?}"
    );
    for (id, request, code, needle) in [
        (
            8,
            Request::Segment { tag: String::new() },
            ErrorCode::InvalidArgument,
            "a tag cannot be empty",
        ),
        (
            9,
            Request::Segment { tag: "a b".into() },
            ErrorCode::InvalidArgument,
            "not allowed",
        ),
        (
            10,
            Request::Segments {
                count: 0,
                tag: tag(),
            },
            ErrorCode::InvalidArgument,
            "SEGMENTS count 0 is out of range: allowed 1..=65536",
        ),
        (
            11,
            Request::Segments {
                count: 65_537,
                tag: tag(),
            },
            ErrorCode::InvalidArgument,
            "allowed 1..=65536",
        ),
        (
            12,
            Request::Segments {
                count: 3,
                tag: "t".repeat(129),
            },
            ErrorCode::InvalidArgument,
            "129 characters is too long",
        ),
    ] {
        c.send(id, &request).await;
        let (got, r) = c.recv().await.unwrap();
        assert_eq!(got, id);
        assert_eq!(error_code(&r), code, "{r:?}");
        assert!(format!("{r:?}").contains(needle), "{id}: {r:?}");
    }
    c.write(&raw_frame(op::SEGMENTS, 13, &[0, 1])).await;
    let (13, r) = c.recv().await.unwrap() else {
        panic!()
    };
    assert_eq!(error_code(&r), ErrorCode::BadPayload);
    c.send(14, &Request::Segment { tag: tag() }).await;
    assert_eq!(c.recv().await.unwrap(), (14, Response::Number(n + 1)));
    // A tag that is not UTF-8 is refused as sent, never served as another tag.
    c.write(&raw_frame(op::SEGMENT, 15, b"or\xffders")).await;
    let (15, r) = c.recv().await.unwrap() else {
        panic!()
    };
    assert_eq!(error_code(&r), ErrorCode::InvalidArgument);
    assert!(format!("{r:?}").contains("not valid UTF-8"), "{r:?}");

    // Metrics and health name the tag; requests and refusals are counted by op and code.
    let m = get(http, "/metrics").await.1;
    for line in [
        "vesta_segment_up 1",
        "vesta_segment_numbers_issued_total 253",
        "vesta_segment_step{tag=\"orders\"} ",
        "vesta_segment_buffered{tag=\"orders\"} ",
        // Tags that break the rule are refused at parse, before an op is counted.
        "vesta_tcp_requests_total{op=\"segment\"} 4",
        "vesta_tcp_requests_total{op=\"segments\"} 3",
        "vesta_tcp_errors_total{code=\"UNKNOWN_TAG\"} 1",
    ] {
        assert!(m.contains(line), "{line} not in\n{m}");
    }
    let h: serde_json::Value = serde_json::from_str(&get(http, "/healthz").await.1).unwrap();
    assert_eq!(h["segments"]["state"], "ok", "{h}");
    assert_eq!(h["segments"]["tags"][0]["tag"], "orders", "{h}");

    // Shutdown gives the unused tail back.
    drop(c);
    let report = handle.shutdown().await.unwrap();
    assert_eq!(report.give_back.len(), 1, "{report:?}");
    let GiveBackOutcome::Returned { max_id, .. } = report.give_back[0].outcome else {
        panic!("{report:?}");
    };
    assert_eq!(max_id, n + 2);
}

#[tokio::test]
async fn a_batch_never_outgrows_a_frame_and_the_client_completes_it() {
    let dir = tempfile::tempdir().unwrap();
    let url = database(dir.path(), &[("tiny", 10), ("orders", 1000)]).await;
    let mut c = segment_config(961, &url);
    // Step 10 every time: 600 numbers span 60 segments. In one process they are contiguous
    // (one range); with other allocators they could be up to 60 ranges, and past 170 (what a
    // 2 KiB frame holds) the answer would stop there (vesta-segment's tests interleave one).
    c.segment.adaptive_step = false;
    c.server.max_frame_bytes = 2048;
    c.server.max_batch = 1000;
    let handle = ServerHandle::spawn(TcpServer::start(c).await.unwrap());
    let mut raw = Raw::hello(handle.addr()).await;
    raw.send(
        2,
        &Request::Segments {
            count: 600,
            tag: "tiny".into(),
        },
    )
    .await;
    let (2, Response::Numbers(ranges)) = raw.recv().await.unwrap() else {
        panic!("not numbers");
    };
    assert!(ranges.len() <= 170, "{} ranges", ranges.len());
    let first = count(&ranges);
    assert!((1..=600).contains(&first), "{first}");

    let client = Client::connect(ClientConfig::new([handle.addr().to_string()]))
        .await
        .unwrap();
    let got = client.next_segments("tiny", 600).await.unwrap();
    assert_eq!(count(&got), 600);
    let mut seen: BTreeSet<u64> = ranges.iter().flat_map(Clone::clone).collect();
    for n in got.iter().flat_map(Clone::clone) {
        assert!(seen.insert(n), "{n} twice");
    }
    let a = client.next_segment("orders").await.unwrap();
    let b = client.next_segment("orders").await.unwrap();
    assert_eq!((a, b), (1, 2));
    let batch = client.next_segments("orders", 2500).await.unwrap();
    assert_eq!(count(&batch), 2500);
    assert_eq!(batch[0].start, 3);
    let err = client.next_segment("nope").await.unwrap_err();
    assert!(
        matches!(
            err,
            ClientError::Refused {
                code: ErrorCode::UnknownTag,
                ..
            }
        ),
        "{err}"
    );
    handle.shutdown().await.unwrap();

    // A server without segments says so; its IDs work.
    let plain = ServerHandle::spawn(TcpServer::start(config(962)).await.unwrap());
    let client = Client::connect(ClientConfig::new([plain.addr().to_string()]))
        .await
        .unwrap();
    client.next_id().await.unwrap();
    let err = client.next_segment("orders").await.unwrap_err();
    let ClientError::Refused { code, message, .. } = &err else {
        panic!("{err}");
    };
    assert_eq!(*code, ErrorCode::SegmentsOff);
    assert!(message.starts_with("segment mode is off"), "{message}");
    plain.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_missing_table_fails_the_start_before_anything_listens() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}/empty.db", dir.path().display());
    Database::connect_or_create(&DbUrl::parse(&url).unwrap(), Duration::from_secs(5))
        .await
        .unwrap()
        .close()
        .await;
    let err = TcpServer::start(segment_config(963, &url))
        .await
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        format!(
            "segments: table leaf_alloc does not exist at {url} (to create it: create table \
             leaf_alloc at {url})"
        )
    );
    let missing = format!("sqlite://{}/none.db", dir.path().display());
    let err = TcpServer::start(segment_config(963, &missing))
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("none.db does not exist"), "{err}");
    // The machine ID was never taken: the same one starts at once.
    let ok = TcpServer::start(config(963)).await.unwrap();
    ServerHandle::spawn(ok).shutdown().await.unwrap();
}
