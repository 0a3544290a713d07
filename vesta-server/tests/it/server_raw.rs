//! A real server on an ephemeral loopback port, spoken to with raw bytes: every operation, then
//! everything a broken or hostile client can send. Each abuse test also checks that another
//! connection is served meanwhile.

use crate::common;

use std::collections::HashSet;
use std::time::Duration;

use common::{Raw, config, raw_frame, start, start_with_issuer};
use tokio::time::{Instant, sleep};
use vesta_core::{Explanation, FieldValues, GenMethod, IdFields, IdType, Preset};
use vesta_embed::LeaseState;
use vesta_server::proto::{Dialect, ErrorCode, Request, Response, VERSION, op};

/// A second connection gets an ID right now: the server is still serving others.
async fn still_serving(addr: std::net::SocketAddr) {
    let mut other = Raw::hello(addr).await;
    other.send(5, &Request::NextId).await;
    let (id, r) = other.recv().await.unwrap();
    assert_eq!(id, 5);
    assert!(matches!(r, Response::Id(_)), "{r:?}");
}

fn error_code(r: &Response) -> ErrorCode {
    match r {
        Response::Error { code, .. } => *code,
        other => panic!("expected an error, got {other:?}"),
    }
}

/// Vesta's six fields of `f` as `MAKE` values.
fn vesta_values(f: &IdFields) -> FieldValues {
    FieldValues::new()
        .with("version", u64::from(f.version))
        .with("type", f.id_type.code())
        .with("genMethod", f.gen_method.code())
        .with("time", f.time)
        .with("seq", f.seq)
        .with("machine", f.machine)
}

#[tokio::test]
async fn every_operation_answers_as_documented_in_both_versions() {
    let server = start(config(930)).await;
    for version in [1, 2] {
        let mut c = if version == 1 {
            Raw::hello_v1(server.addr()).await
        } else {
            Raw::hello(server.addr()).await
        };
        every_operation(&mut c).await;
    }
    server.shutdown().await.unwrap();
}

/// `[server] make = false`: MAKE is refused with `INVALID_ARGUMENT` saying why, and the
/// connection goes on serving IDs.
#[tokio::test]
async fn make_can_be_switched_off() {
    let mut cfg = config(931);
    cfg.server.make = false;
    let server = start(cfg).await;
    let mut c = Raw::hello(server.addr()).await;
    let f = IdFields {
        version: 0,
        id_type: IdType::MaxPeak,
        gen_method: GenMethod::Server,
        time: 5,
        seq: 1,
        machine: 931,
    };
    c.send(2, &Request::Make(vesta_values(&f))).await;
    let (2, r) = c.recv().await.unwrap() else {
        panic!()
    };
    assert_eq!(error_code(&r), ErrorCode::InvalidArgument);
    assert!(format!("{r:?}").contains("[server] make = false"), "{r:?}");
    c.send(3, &Request::NextId).await;
    assert!(matches!(c.recv().await, Some((3, Response::Id(_)))));
    server.shutdown().await.unwrap();
}

async fn every_operation(c: &mut Raw) {
    c.send(2, &Request::Ping).await;
    assert_eq!(c.recv().await.unwrap(), (2, Response::Pong));

    c.send(3, &Request::Info).await;
    let (_, Response::Info(info)) = c.recv().await.unwrap() else {
        panic!("not info")
    };
    assert_eq!((info.machine, info.gen_method), (930, 1));
    assert_eq!(info.layout_type(), Some(IdType::MaxPeak));
    assert_eq!(&info.layout, IdType::MaxPeak.layout());
    assert_eq!(info.lease_state_name(), "static");
    assert_eq!(info.server_pool_start, 924);
    assert!(info.connections >= 1);
    assert_eq!(info.max_batch, 65_536);

    c.send(4, &Request::NextId).await;
    let (_, Response::Id(id)) = c.recv().await.unwrap() else {
        panic!("not an id")
    };
    let f = IdFields::decode(id);
    assert_eq!(
        (f.machine, f.gen_method, f.id_type),
        (930, GenMethod::Server, IdType::MaxPeak)
    );

    c.send(5, &Request::NextIds { count: 5000 }).await;
    let (_, Response::Ids(runs)) = c.recv().await.unwrap() else {
        panic!("not ids")
    };
    let ids: Vec<u64> = runs.iter().flat_map(|r| r.iter()).collect();
    assert_eq!(ids.len(), 5000);
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "increasing");
    assert!(ids[0] > id, "after the single ID");
    assert!(ids.iter().all(|&i| IdFields::decode(i).machine == 930));

    c.send(6, &Request::Explain { id }).await;
    let (_, Response::Explained(x)) = c.recv().await.unwrap() else {
        panic!("not explained")
    };
    assert_eq!(x.vesta_fields(), Some(f));
    assert_eq!(x.unix_ms, f.unix_ms(vesta_core::Epoch::VESTA));

    c.send(7, &Request::Make(vesta_values(&f))).await;
    assert_eq!(c.recv().await.unwrap(), (7, Response::Made(id)));
    let bad = vesta_values(&IdFields { seq: 1 << 20, ..f });
    c.send(8, &Request::Make(bad)).await;
    let (_, r) = c.recv().await.unwrap();
    assert_eq!(error_code(&r), ErrorCode::FieldOutOfRange);
    let Response::Error { message, .. } = r else {
        unreachable!()
    };
    assert_eq!(
        message,
        "seq 1048576 is out of range for max-peak: allowed 0..=1048575"
    );
    let bad = vesta_values(&f).with("type", 2);
    c.send(9, &Request::Make(bad)).await;
    assert_eq!(
        error_code(&c.recv().await.unwrap().1),
        ErrorCode::FieldOutOfRange
    );

    c.send(10, &Request::TransTime { time: f.time }).await;
    assert_eq!(
        c.recv().await.unwrap(),
        (10, Response::Time(f.unix_ms(vesta_core::Epoch::VESTA)))
    );
    c.send(11, &Request::TransTime { time: 1 << 30 }).await;
    let (_, r) = c.recv().await.unwrap();
    let Response::Error { code, message } = r else {
        panic!("{r:?}")
    };
    assert_eq!(code, ErrorCode::FieldOutOfRange);
    assert!(
        message.contains("time 1073741824 is out of range"),
        "{message}"
    );
}

/// A server in Leaf's layout speaks version 2 and up only, tells its layout in the handshake, and
/// every op reads and makes IDs in that layout.
#[tokio::test]
async fn a_peer_layout_server_speaks_version_2_in_its_own_layout() {
    let mut cfg = config(930);
    cfg.id.layout = vesta_embed::config::LayoutChoice::Preset(Preset::Leaf);
    let server = start(cfg).await;
    let mut old = Raw::connect(server.addr()).await;
    old.send(
        1,
        &Request::Hello {
            min_version: 1,
            max_version: 1,
        },
    )
    .await;
    let (_, r) = old.recv().await.unwrap();
    let Response::Error { code, message } = r else {
        panic!("{r:?}")
    };
    assert_eq!(code, ErrorCode::UnsupportedVersion);
    assert!(
        message.contains("issues the leaf layout, which needs version 2"),
        "{message}"
    );
    assert!(old.closed().await);

    let mut c = Raw::hello(server.addr()).await;
    assert_eq!(c.dialect, Dialect::new(VERSION, Preset::Leaf.layout()));
    c.send(2, &Request::NextIds { count: 3000 }).await;
    let (_, Response::Ids(runs)) = c.recv().await.unwrap() else {
        panic!("not ids")
    };
    assert!(runs.iter().all(|r| r.step == 1), "{runs:?}");
    let ids: Vec<u64> = runs.iter().flat_map(|r| r.iter()).collect();
    assert_eq!(ids.len(), 3000);
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "increasing");
    let leaf = Preset::Leaf.layout();
    for &id in &ids {
        let x = Explanation::new(id, &leaf);
        assert_eq!((x.node(), x.warning()), (930, None));
        assert!((id as i64) > 0);
    }
    let id = ids[17];
    c.send(3, &Request::Explain { id }).await;
    assert_eq!(
        c.recv().await.unwrap(),
        (3, Response::Explained(Explanation::new(id, &leaf)))
    );
    let x = Explanation::new(id, &leaf);
    let values = FieldValues::new()
        .with("time", x.time())
        .with("workerId", 930)
        .with("sequence", x.seq());
    c.send(4, &Request::Make(values)).await;
    assert_eq!(c.recv().await.unwrap(), (4, Response::Made(id)));
    c.send(5, &Request::Make(FieldValues::new().with("genMethod", 1)))
        .await;
    let (_, r) = c.recv().await.unwrap();
    let Response::Error { code, message } = r else {
        panic!("{r:?}")
    };
    assert_eq!(code, ErrorCode::FieldOutOfRange);
    assert!(
        message.contains("a field of the leaf layout: time, workerId, sequence"),
        "{message}"
    );
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn pipelined_requests_are_matched_by_id() {
    let server = start(config(924)).await;
    let mut c = Raw::hello(server.addr()).await;
    let mut wire = Vec::new();
    for id in 100..1100u32 {
        let r = if id % 10 == 0 {
            Request::Ping
        } else {
            Request::NextId
        };
        let mut b = bytes::BytesMut::new();
        r.encode(id, &c.dialect, &mut b);
        wire.extend_from_slice(&b);
    }
    c.write(&wire).await;
    let mut seen = HashSet::new();
    let mut ids = Vec::new();
    for _ in 0..1000 {
        let (rid, r) = c.recv().await.unwrap();
        assert!(seen.insert(rid), "answer {rid} twice");
        match r {
            Response::Pong => assert_eq!(rid % 10, 0),
            Response::Id(id) => ids.push((rid, id)),
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(seen, (100..1100).collect());
    // ID requests on one connection are answered in order, so the IDs follow the request ids.
    assert!(ids.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 < w[1].1));
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn the_first_frame_must_be_a_valid_hello() {
    let server = start(config(924)).await;
    let addr = server.addr();

    let mut c = Raw::connect(addr).await;
    c.send(3, &Request::NextId).await;
    let (id, r) = c.recv().await.unwrap();
    assert_eq!((id, error_code(&r)), (3, ErrorCode::HandshakeRequired));
    assert!(c.closed().await);

    let mut c = Raw::connect(addr).await;
    c.write(&raw_frame(op::HELLO, 1, b"HTTP\x01\x01")).await;
    assert_eq!(
        error_code(&c.recv().await.unwrap().1),
        ErrorCode::HandshakeRequired
    );
    assert!(c.closed().await);

    let mut c = Raw::connect(addr).await;
    c.send(
        1,
        &Request::Hello {
            min_version: 4,
            max_version: 9,
        },
    )
    .await;
    let (_, r) = c.recv().await.unwrap();
    let Response::Error { code, message } = r else {
        panic!("{r:?}")
    };
    assert_eq!(code, ErrorCode::UnsupportedVersion);
    assert_eq!(
        message,
        "client speaks protocol versions 4..=9, this server 1..=3"
    );
    assert!(c.closed().await);

    // An HTTP request reads as a huge length: refused without buffering it.
    let mut c = Raw::connect(addr).await;
    c.write(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").await;
    let (id, r) = c.recv().await.unwrap();
    assert_eq!((id, error_code(&r)), (0, ErrorCode::FrameTooLarge));
    assert!(c.closed().await);

    still_serving(addr).await;
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn bad_frames_close_only_their_connection() {
    let mut cfg = config(924);
    cfg.server.max_frame_bytes = 2048;
    let server = start(cfg).await;
    let addr = server.addr();
    let mut bystander = Raw::hello(addr).await;

    // Oversize: the length alone is enough to refuse; requests before it are still answered.
    let mut c = Raw::hello(addr).await;
    let mut wire = raw_frame(op::PING, 2, b"");
    wire.extend_from_slice(&2049u32.to_be_bytes());
    wire.extend_from_slice(&[op::PING, 0, 0, 0, 3]);
    c.write(&wire).await;
    assert_eq!(c.recv().await.unwrap(), (2, Response::Pong));
    let (id, r) = c.recv().await.unwrap();
    let Response::Error { code, message } = r else {
        panic!("{r:?}")
    };
    assert_eq!((id, code), (0, ErrorCode::FrameTooLarge));
    assert_eq!(message, "frame length 2049 is too large: allowed 5..=2048");
    assert!(c.closed().await);

    // A length below the header.
    let mut c = Raw::hello(addr).await;
    c.write(&[0, 0, 0, 2, 0xaa, 0xbb]).await;
    assert_eq!(
        error_code(&c.recv().await.unwrap().1),
        ErrorCode::MalformedFrame
    );
    assert!(c.closed().await);

    // A frame exactly at the limit is fine (it is an unknown op, answered and survived).
    let mut c = Raw::hello(addr).await;
    c.write(&raw_frame(0x42, 9, &[0u8; 2043])).await;
    assert_eq!((9, ErrorCode::UnknownOp), {
        let (id, r) = c.recv().await.unwrap();
        (id, error_code(&r))
    });
    c.send(10, &Request::Ping).await;
    assert_eq!(c.recv().await.unwrap(), (10, Response::Pong));

    bystander.send(7, &Request::Ping).await;
    assert_eq!(bystander.recv().await.unwrap(), (7, Response::Pong));
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn recoverable_errors_answer_the_request_and_keep_the_connection() {
    let server = start(config(924)).await;
    let mut c = Raw::hello(server.addr()).await;
    let cases: Vec<(Vec<u8>, u32, ErrorCode)> = vec![
        (raw_frame(0x7f, 20, b""), 20, ErrorCode::UnknownOp),
        (raw_frame(0x90, 21, &[0; 8]), 21, ErrorCode::UnknownOp),
        (raw_frame(op::NEXT_ID, 22, b"x"), 22, ErrorCode::BadPayload),
        (
            raw_frame(op::NEXT_IDS, 23, &[0, 0, 1]),
            23,
            ErrorCode::BadPayload,
        ),
        (
            raw_frame(op::EXPLAIN, 24, &[0; 9]),
            24,
            ErrorCode::BadPayload,
        ),
        (
            raw_frame(op::NEXT_IDS, 25, &0u32.to_be_bytes()),
            25,
            ErrorCode::InvalidArgument,
        ),
        (
            raw_frame(op::NEXT_IDS, 26, &65_537u32.to_be_bytes()),
            26,
            ErrorCode::InvalidArgument,
        ),
        (
            raw_frame(op::NEXT_ID, 0, b""),
            0,
            ErrorCode::InvalidArgument,
        ),
        (
            raw_frame(op::HELLO, 27, b"VSTA\x01\x01"),
            27,
            ErrorCode::BadPayload,
        ),
    ];
    for (wire, want_id, want_code) in cases {
        c.write(&wire).await;
        let (id, r) = c.recv().await.unwrap();
        assert_eq!((id, error_code(&r)), (want_id, want_code), "{r:?}");
    }
    c.send(30, &Request::NextId).await;
    assert!(matches!(c.recv().await.unwrap(), (30, Response::Id(_))));
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn half_frames_wait_and_stalled_ones_time_out() {
    let mut cfg = config(924);
    cfg.server.idle_timeout_ms = 400;
    let server = start(cfg).await;
    let addr = server.addr();

    // A frame in pieces, slower than nothing but faster than the timeout, is answered.
    let mut c = Raw::hello(addr).await;
    let wire = raw_frame(op::EXPLAIN, 4, &42u64.to_be_bytes());
    for piece in wire.chunks(3) {
        c.write(piece).await;
        sleep(Duration::from_millis(30)).await;
    }
    assert!(matches!(
        c.recv().await.unwrap(),
        (4, Response::Explained(_))
    ));

    // A frame that never completes: GOAWAY IDLE_TIMEOUT and close, even though bytes trickle in
    // (one byte every 100 ms would reset a naive byte-based idle timer forever).
    let mut c = Raw::hello(addr).await;
    let started = Instant::now();
    let wire = raw_frame(op::EXPLAIN, 5, &42u64.to_be_bytes());
    let trickle = async {
        for b in &wire[..10] {
            if c.stream.try_write(std::slice::from_ref(b)).is_err() {
                break;
            }
            sleep(Duration::from_millis(100)).await;
        }
    };
    let (_, ()) = tokio::join!(still_serving(addr), trickle);
    let (id, r) = c.recv().await.unwrap();
    assert_eq!(id, 0);
    assert!(
        matches!(
            r,
            Response::GoAway {
                code: ErrorCode::IdleTimeout,
                ..
            }
        ),
        "{r:?}"
    );
    assert!(c.closed().await);
    let waited = started.elapsed();
    assert!(
        // Not before the idle timeout (timers never fire early); 10 s tells "never" from "late".
        waited >= Duration::from_millis(400) && waited < Duration::from_secs(10),
        "{waited:?}"
    );

    // A silent connection is closed too, and others are still served.
    let mut idle = Raw::hello(addr).await;
    assert!(matches!(
        idle.recv().await.unwrap().1,
        Response::GoAway {
            code: ErrorCode::IdleTimeout,
            ..
        }
    ));
    still_serving(addr).await;
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_client_that_never_reads_does_not_stall_the_others() {
    let mut cfg = config(924);
    cfg.server.idle_timeout_ms = 1500;
    let server = start(cfg).await;
    let addr = server.addr();
    let mut hog = Raw::connect_small_window(addr).await;
    // 1M pipelined PINGs (9 MB) with a 4 KB receive window, never reading the 9 MB of answers:
    // the socket buffers fill, the server's write blocks for this connection only.
    let mut wire = Vec::with_capacity(1_000_000 * 9);
    wire.extend_from_slice(&raw_frame(op::HELLO, 1_000_001, b"VSTA\x01\x01"));
    for id in 1..=1_000_000u32 {
        wire.extend_from_slice(&raw_frame(op::PING, id, b""));
    }
    let writer = tokio::spawn(async move {
        use tokio::io::AsyncWriteExt;
        let _ = tokio::time::timeout(Duration::from_secs(4), hog.stream.write_all(&wire)).await;
        hog
    });
    sleep(Duration::from_millis(200)).await;
    for _ in 0..20 {
        still_serving(addr).await;
    }
    // Others were served while the hog's write was still blocked (the server neither waited
    // for it nor had closed it yet): an order of events, not a reading of wall time.
    assert!(
        !writer.is_finished(),
        "others were served only after the hog's write ended"
    );
    // The blocked write passes the idle timeout: the hog is disconnected.
    let mut hog = writer.await.unwrap();
    let mut answers = 0u32;
    let closed = tokio::time::timeout(Duration::from_secs(5), async {
        while hog.recv_frame().await.is_some() {
            answers += 1;
        }
    })
    .await;
    assert!(closed.is_ok(), "hog never closed");
    assert!(answers < 1_000_000, "the hog got all {answers} answers");
    still_serving(addr).await;
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn connections_beyond_the_limit_are_refused_at_once() {
    let mut cfg = config(924);
    cfg.server.max_connections = 2;
    let server = start(cfg).await;
    let addr = server.addr();
    let a = Raw::hello(addr).await;
    let _b = Raw::hello(addr).await;
    let mut c = Raw::connect(addr).await;
    let (id, r) = c.recv().await.unwrap();
    assert_eq!((id, error_code(&r)), (0, ErrorCode::TooManyConnections));
    assert!(c.closed().await);
    drop(a);
    // The freed permit is reusable once the server notices the close (10 s: "never", not
    // "late").
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let mut c = Raw::connect(addr).await;
        c.send(
            1,
            &Request::Hello {
                min_version: 1,
                max_version: 1,
            },
        )
        .await;
        match c.recv().await {
            Some((1, Response::HelloOk { .. })) => break,
            other => assert!(Instant::now() < deadline, "still refused: {other:?}"),
        }
        sleep(Duration::from_millis(20)).await;
    }
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn batches_span_units_without_blocking_the_connection() {
    // min-granularity: 1024 IDs per ms, so 50,000 IDs need at least 49 units and timer waits.
    let mut cfg = config(924);
    cfg.id.id_type = Some(IdType::MinGranularity);
    let server = start(cfg).await;
    let mut c = Raw::hello(server.addr()).await;
    c.send(1, &Request::NextIds { count: 50_000 }).await;
    c.send(2, &Request::Ping).await;
    let mut got = Vec::new();
    for _ in 0..2 {
        got.push(c.recv().await.unwrap());
    }
    // The ping behind the batch is answered first: the batch waits on a timer, not a thread.
    assert_eq!(got[0], (2, Response::Pong));
    let (1, Response::Ids(runs)) = &got[1] else {
        panic!("{:?}", got[1])
    };
    assert!(runs.len() >= 49, "{} runs", runs.len());
    let ids: Vec<u64> = runs.iter().flat_map(|r| r.iter()).collect();
    assert_eq!(ids.len(), 50_000);
    assert!(ids.windows(2).all(|w| w[0] < w[1]));
    for r in runs {
        let a = IdFields::decode(r.first);
        let b = IdFields::decode(r.first + (r.count - 1) * 1024);
        assert_eq!(a.time, b.time, "a run stays in one unit");
    }
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn shutdown_answers_in_flight_work_then_says_goaway_and_releases() {
    let (server, issuer) = start_with_issuer(config(924)).await;
    let addr = server.addr();
    let mut c = Raw::hello(addr).await;
    // 20 × 65,536 IDs > 2^20: some must wait for the next second.
    for id in 1..=20u32 {
        c.send(id, &Request::NextIds { count: 65_536 }).await;
    }
    c.send(99, &Request::Ping).await;
    let mut answered = HashSet::new();
    let mut ids = HashSet::new();
    // Once the PONG is back the server has read every request.
    loop {
        let (id, r) = c.recv().await.unwrap();
        match r {
            Response::Pong => break,
            Response::Ids(runs) => {
                answered.insert(id);
                ids.extend(runs.iter().flat_map(|r| r.iter()));
            }
            other => panic!("{other:?}"),
        }
    }
    let stopping = tokio::spawn(server.shutdown());
    loop {
        let (id, r) = c.recv().await.expect("closed before GOAWAY");
        match r {
            Response::Ids(runs) => {
                assert!(answered.insert(id));
                ids.extend(runs.iter().flat_map(|r| r.iter()));
            }
            Response::GoAway { code, .. } => {
                assert_eq!((id, code), (0, ErrorCode::ShuttingDown));
                break;
            }
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(answered, (1..=20).collect(), "every batch answered");
    assert_eq!(ids.len(), 20 * 65_536, "all distinct");
    assert!(c.closed().await);
    stopping.await.unwrap().unwrap();
    assert_eq!(issuer.status().lease.state, LeaseState::Released);
    assert!(
        issuer.next_id().is_err(),
        "a released issuer issues nothing"
    );
    assert!(
        tokio::net::TcpStream::connect(addr).await.is_err(),
        "no longer accepting"
    );
}
