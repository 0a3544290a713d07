//! gRPC on the REST port, from tonic's own client (vesta-grpc's `VestaClient`): the same
//! server answers REST over HTTP/1.1 and gRPC over HTTP/2 on one port; the ops answer as
//! their REST endpoints do; refusals are gRPC codes naming the field; the token guards
//! vesta.v1 but not health; health follows the issuer; a call that gives up at its deadline
//! takes no ID. (Python's and Node's clients: tests/tests/it/grpc_clients.rs.)

use std::collections::HashMap;
use std::time::Duration;

use tonic::transport::Channel;
use tonic::{Code, Request, Status};
use vesta_core::{GenMethod, IdFields, IdType};
use vesta_embed::LeaseState;
use vesta_grpc::VestaClient;
use vesta_grpc::pb;
use vesta_rest::RestSection;

use prost::Message;

use crate::common::{
    H2Conn, labelled_sample, manual_issuer, open_segments, rest, sample, segment_db, seq_db, spawn,
    spawn_with_segments, spawn_with_stores, system_issuer,
};

async fn client(addr: std::net::SocketAddr) -> VestaClient<Channel> {
    VestaClient::connect(format!("http://{addr}"))
        .await
        .expect("connecting over HTTP/2")
}

async fn health_client(
    addr: std::net::SocketAddr,
) -> tonic_health::pb::health_client::HealthClient<Channel> {
    let channel = Channel::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .expect("connecting over HTTP/2");
    tonic_health::pb::health_client::HealthClient::new(channel)
}

/// The status of a call that must fail.
fn refused<T: std::fmt::Debug>(r: Result<T, Status>) -> Status {
    r.expect_err("the call should have been refused")
}

#[tokio::test]
async fn ids_batches_and_streams_share_the_port_with_rest() {
    let server = spawn(system_issuer(), rest()).await;
    let mut c = client(server.addr).await;

    let one = c.next_id(pb::NextIdRequest {}).await.unwrap().into_inner();
    assert_eq!(one.id_text, one.id.to_string());
    let f = IdFields::decode(one.id);
    assert_eq!((f.machine, f.gen_method), (924, GenMethod::Rest), "{f:?}");

    let batch = c
        .next_ids(pb::NextIdsRequest { count: 1000 })
        .await
        .unwrap()
        .into_inner()
        .ids;
    assert_eq!(batch.len(), 1000);
    assert!(batch[0] > one.id && batch.windows(2).all(|w| w[0] < w[1]));

    let mut stream = c
        .stream_ids(pb::StreamIdsRequest { count: 20_000 })
        .await
        .unwrap()
        .into_inner();
    let mut streamed = Vec::new();
    let mut chunks = 0;
    while let Some(chunk) = stream.message().await.unwrap() {
        chunks += 1;
        streamed.extend(chunk.ids);
    }
    assert_eq!(streamed.len(), 20_000);
    assert!(chunks > 1, "one chunk of 20,000 IDs");
    assert!(streamed[0] > batch[999] && streamed.windows(2).all(|w| w[0] < w[1]));

    // REST on the same port, still: a later ID.
    let rest_id = server.client().get("/genid").await.id();
    assert!(rest_id > streamed[19_999]);
    let metrics = server.client().get("/metrics").await.body;
    assert_eq!(sample(&metrics, "vesta_ids_issued_total"), 21_002.0);
    for (method, calls) in [("NextId", 1.0), ("NextIds", 1.0), ("StreamIds", 1.0)] {
        let series =
            format!("vesta_grpc_calls_total{{method=\"vesta.v1.Vesta/{method}\",code=\"OK\"}}");
        assert_eq!(labelled_sample(&metrics, &series), calls, "{series}");
    }
    server.stop().await;
}

#[tokio::test]
async fn explain_make_and_trans_time_answer_as_the_rest_endpoints_do() {
    let server = spawn(system_issuer(), rest()).await;
    let mut c = client(server.addr).await;
    let id = c
        .next_id(pb::NextIdRequest {})
        .await
        .unwrap()
        .into_inner()
        .id;

    let x = c
        .explain(pb::ExplainRequest { id })
        .await
        .unwrap()
        .into_inner();
    let rest = server.client().get(&format!("/expid?id={id}")).await.json();
    assert_eq!(x.id_text, rest["id"].as_str().unwrap());
    assert_eq!(x.timestamp, rest["timestamp"].as_str().unwrap());
    assert_eq!(x.layout, "vesta");
    assert!(x.warning.is_empty(), "{}", x.warning);
    let fields: HashMap<String, u64> = x.fields.iter().map(|f| (f.name.clone(), f.value)).collect();
    for name in ["machine", "seq", "time", "genMethod", "type", "version"] {
        assert_eq!(fields[name], rest[name].as_u64().unwrap(), "{name}");
    }

    // Made back from its time and seq (the rest: the server's own values), it is itself.
    let made = c
        .make(pb::MakeRequest {
            fields: HashMap::from([
                ("time".into(), fields["time"]),
                ("seq".into(), fields["seq"]),
            ]),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!((made.id, made.id_text), (id, id.to_string()));

    let t = c
        .trans_time(pb::TransTimeRequest {
            time: fields["time"],
        })
        .await
        .unwrap()
        .into_inner();
    let rest_t = server
        .client()
        .get(&format!("/transtime?time={}", fields["time"]))
        .await
        .body;
    assert_eq!(t.timestamp, rest_t);
    assert_eq!(t.unix_ms, x.unix_ms);
    server.stop().await;
}

#[tokio::test]
async fn refusals_are_grpc_codes_naming_the_field() {
    let server = spawn(
        system_issuer(),
        RestSection {
            max_batch: 100,
            ..rest()
        },
    )
    .await;
    let mut c = client(server.addr).await;

    for count in [0, 101] {
        let s = refused(c.next_ids(pb::NextIdsRequest { count }).await);
        assert_eq!(s.code(), Code::InvalidArgument, "{s:?}");
        assert!(s.message().contains("count"), "{s:?}");
        assert_eq!(s.metadata().get("vesta-field").unwrap(), "count");
    }
    let s = refused(c.stream_ids(pb::StreamIdsRequest { count: 0 }).await);
    assert_eq!(s.code(), Code::InvalidArgument, "{s:?}");

    let s = refused(
        c.make(pb::MakeRequest {
            fields: HashMap::from([("time".into(), 1), ("seq".into(), 1), ("machin".into(), 5)]),
        })
        .await,
    );
    assert_eq!(s.code(), Code::InvalidArgument, "{s:?}");
    assert!(s.message().contains("\"machin\""), "{s:?}");
    let s = refused(
        c.make(pb::MakeRequest {
            fields: HashMap::from([("time".into(), 1)]),
        })
        .await,
    );
    assert!(s.message().contains("seq"), "{s:?}");
    let s = refused(
        c.make(pb::MakeRequest {
            fields: HashMap::from([
                ("time".into(), 1),
                ("seq".into(), 1),
                ("machine".into(), 1024),
            ]),
        })
        .await,
    );
    assert_eq!(s.code(), Code::InvalidArgument, "{s:?}");
    assert!(s.message().contains("machine"), "{s:?}");

    let s = refused(
        c.segment(pb::SegmentRequest {
            tag: "orders".into(),
        })
        .await,
    );
    assert_eq!(s.code(), Code::Unimplemented, "{s:?}");
    assert!(s.message().contains("segment mode is off"), "{s:?}");

    // An unknown method or service: UNIMPLEMENTED, and the server keeps serving.
    let mut raw = tonic::client::Grpc::new(
        Channel::from_shared(format!("http://{}", server.addr))
            .unwrap()
            .connect()
            .await
            .unwrap(),
    );
    raw.ready().await.unwrap();
    let s = refused(
        raw.unary::<_, pb::NextIdResponse, _>(
            Request::new(pb::NextIdRequest {}),
            "/vesta.v1.Nope/NextId".parse().unwrap(),
            tonic_prost::ProstCodec::default(),
        )
        .await,
    );
    assert_eq!(s.code(), Code::Unimplemented, "{s:?}");
    c.next_id(pb::NextIdRequest {}).await.unwrap();
    // Counted by method and code; an unknown method under `other`, adding no series.
    let metrics = server.client().get("/metrics").await.body;
    for (series, calls) in [
        (
            r#"method="vesta.v1.Vesta/NextIds",code="INVALID_ARGUMENT""#,
            2.0,
        ),
        (
            r#"method="vesta.v1.Vesta/Make",code="INVALID_ARGUMENT""#,
            3.0,
        ),
        (r#"method="other",code="UNIMPLEMENTED""#, 1.0),
        (r#"method="vesta.v1.Vesta/NextId",code="OK""#, 1.0),
    ] {
        let series = format!("vesta_grpc_calls_total{{{series}}}");
        assert_eq!(labelled_sample(&metrics, &series), calls, "{series}");
    }
    assert!(!metrics.contains("Nope"), "{metrics}");
    server.stop().await;
}

fn with_token<T>(msg: T) -> Request<T> {
    let mut r = Request::new(msg);
    r.metadata_mut()
        .insert("authorization", "Bearer s3cret-token".parse().unwrap());
    r
}

#[tokio::test]
async fn the_token_guards_vesta_but_not_health_and_make_can_be_off() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("token");
    std::fs::write(&file, "s3cret-token\n").unwrap();
    let server = spawn(
        system_issuer(),
        RestSection {
            auth_token_file: Some(file),
            make: false,
            ..rest()
        },
    )
    .await;
    let mut c = client(server.addr).await;
    let s = refused(c.next_id(pb::NextIdRequest {}).await);
    assert_eq!(s.code(), Code::Unauthenticated, "{s:?}");
    let mut wrong = Request::new(pb::NextIdRequest {});
    wrong
        .metadata_mut()
        .insert("authorization", "Bearer s3cret-toke".parse().unwrap());
    assert_eq!(
        refused(c.next_id(wrong).await).code(),
        Code::Unauthenticated
    );

    c.next_id(with_token(pb::NextIdRequest {})).await.unwrap();
    let s = refused(
        c.make(with_token(pb::MakeRequest {
            fields: HashMap::from([("time".into(), 1), ("seq".into(), 1)]),
        }))
        .await,
    );
    assert_eq!(s.code(), Code::PermissionDenied, "{s:?}");

    let mut health = health_client(server.addr).await;
    let r = health
        .check(tonic_health::pb::HealthCheckRequest {
            service: String::new(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        r.status(),
        tonic_health::pb::health_check_response::ServingStatus::Serving
    );
    server.stop().await;
}

#[tokio::test]
async fn health_is_serving_only_while_the_issuer_issues() {
    use tonic_health::pb::HealthCheckRequest;
    use tonic_health::pb::health_check_response::ServingStatus;

    let server = spawn(system_issuer(), rest()).await;
    let mut health = health_client(server.addr).await;
    let check = |service: &str| HealthCheckRequest {
        service: service.into(),
    };
    for name in ["", "vesta.v1.Vesta"] {
        let r = health.check(check(name)).await.unwrap().into_inner();
        assert_eq!(r.status(), ServingStatus::Serving, "{name:?}");
    }
    let s = refused(health.check(check("vesta.v1.Nope")).await);
    assert_eq!(s.code(), Code::NotFound, "{s:?}");

    let mut watch = health.watch(check("")).await.unwrap().into_inner();
    assert_eq!(
        watch.message().await.unwrap().unwrap().status(),
        ServingStatus::Serving
    );
    server
        .issuer
        .fence_for_test(LeaseState::Fenced, "the machine-ID lease was lost");
    let r = health.check(check("")).await.unwrap().into_inner();
    assert_eq!(r.status(), ServingStatus::NotServing);
    // Watch sends the change (it reads every 250 ms; bounded here by 10 s).
    let next = tokio::time::timeout(Duration::from_secs(10), watch.message())
        .await
        .expect("Watch sent the change")
        .unwrap()
        .unwrap();
    assert_eq!(next.status(), ServingStatus::NotServing);
    // And vesta.v1 refuses, as /genid does: UNAVAILABLE with a retry hint.
    let s = refused(
        client(server.addr)
            .await
            .next_id(pb::NextIdRequest {})
            .await,
    );
    assert_eq!(s.code(), Code::Unavailable, "{s:?}");
    server.issuer.resume_for_test(LeaseState::Held);
    let r = health.check(check("")).await.unwrap().into_inner();
    assert_eq!(r.status(), ServingStatus::Serving);
    server.stop().await;
}

#[tokio::test]
async fn a_call_that_gives_up_at_its_deadline_takes_no_id() {
    // Min-granularity: 1,024 IDs a millisecond, and a clock that moves only when told.
    let (issuer, clock) = manual_issuer(IdType::MinGranularity);
    let server = spawn(issuer, rest()).await;
    let mut c = client(server.addr).await;
    let first = c
        .next_ids(pb::NextIdsRequest { count: 1000 })
        .await
        .unwrap()
        .into_inner()
        .ids;
    // The millisecond's last 24, then nothing is left in it: a call waits for the next
    // millisecond, which never comes before its 200 ms deadline.
    c.next_ids(pb::NextIdsRequest { count: 24 }).await.unwrap();
    // By hand, so the server's deadline is what ends them (200 ms; its own bound is 3 s).
    let h2 = H2Conn::connect(server.addr, None).await;
    let timeout = [("grpc-timeout", "200m")];
    let (bytes, code) = h2.grpc_call("/vesta.v1.Vesta/NextId", &[], &timeout).await;
    assert_eq!((bytes, code.as_str()), (0, "4"), "DEADLINE_EXCEEDED");
    let count = pb::StreamIdsRequest { count: 5000 }.encode_to_vec();
    let (bytes, code) = h2
        .grpc_call("/vesta.v1.Vesta/StreamIds", &count, &timeout)
        .await;
    assert_eq!(
        (bytes, code.as_str()),
        (0, "4"),
        "no chunk, then DEADLINE_EXCEEDED"
    );

    clock.advance(1);
    let next = c
        .next_ids(pb::NextIdsRequest { count: 10 })
        .await
        .unwrap()
        .into_inner()
        .ids;
    let (a, b) = (IdFields::decode(first[999]), IdFields::decode(next[0]));
    // Nothing was taken for the calls that gave up: the next millisecond starts at seq 0.
    assert_eq!((a.time, a.seq), (IdFields::decode(first[0]).time, 999));
    assert_eq!((b.time, b.seq), (a.time + 1, 0));
    let metrics = server.client().get("/metrics").await.body;
    assert_eq!(sample(&metrics, "vesta_ids_issued_total"), 1034.0);
    server.stop().await;
}

#[tokio::test]
async fn segment_numbers_over_grpc() {
    let dir = tempfile::tempdir().unwrap();
    let section = segment_db(dir.path(), &[("orders", 100)]).await;
    let server =
        spawn_with_segments(system_issuer(), rest(), Some(open_segments(&section).await)).await;
    let mut c = client(server.addr).await;
    let one = c
        .segment(pb::SegmentRequest {
            tag: "orders".into(),
        })
        .await
        .unwrap()
        .into_inner()
        .number;
    assert_eq!(one, 1);
    let many = c
        .segments(pb::SegmentsRequest {
            tag: "orders".into(),
            count: 5,
        })
        .await
        .unwrap()
        .into_inner()
        .numbers;
    assert_eq!(many, vec![2, 3, 4, 5, 6]);
    let s = refused(c.segment(pb::SegmentRequest { tag: "nope".into() }).await);
    assert_eq!(s.code(), Code::NotFound, "{s:?}");
    let s = refused(
        c.segment(pb::SegmentRequest {
            tag: "bad tag!".into(),
        })
        .await,
    );
    assert_eq!(s.code(), Code::InvalidArgument, "{s:?}");
    server.stop().await;
}

#[tokio::test]
async fn per_key_sequences_over_grpc() {
    let dir = tempfile::tempdir().unwrap();
    let seq = seq_db(dir.path()).await;
    let server = spawn_with_stores(system_issuer(), rest(), None, Some(seq)).await;
    let mut c = client(server.addr).await;
    let next = |key: &str, count: Option<u64>| pb::SeqNextRequest {
        key: key.into(),
        count,
    };
    let one = c.seq_next(next("42", None)).await.unwrap().into_inner();
    assert_eq!((one.first, one.last, one.last_text.as_str()), (1, 1, "1"));
    let batch = c.seq_next(next("42", Some(5))).await.unwrap().into_inner();
    assert_eq!((batch.first, batch.last), (2, 6));
    // A string key, and the same key over REST: one sequence.
    let chat = c.seq_next(next("会话:7", None)).await.unwrap().into_inner();
    assert_eq!(chat.last, 1);
    let rest_next: u64 = server.client().get("/seq/42").await.body.parse().unwrap();
    assert_eq!(rest_next, 7);
    let cur = c
        .seq_current(pb::SeqCurrentRequest { key: "42".into() })
        .await
        .unwrap()
        .into_inner();
    assert_eq!((cur.current, cur.current_text.as_str()), (7, "7"));
    for (req, field) in [(next("", None), "key"), (next("42", Some(0)), "count")] {
        let s = refused(c.seq_next(req).await);
        assert_eq!(s.code(), Code::InvalidArgument, "{s:?}");
        assert_eq!(s.metadata().get("vesta-field").unwrap(), field, "{s:?}");
    }
    server.stop().await;
    // Without [seq] db: said so, as UNIMPLEMENTED.
    let off = spawn(system_issuer(), rest()).await;
    let mut c = client(off.addr).await;
    let s = refused(c.seq_next(next("42", None)).await);
    assert_eq!(s.code(), Code::Unimplemented, "{s:?}");
    assert!(s.message().contains("[seq] db"), "{s:?}");
    off.stop().await;
}

#[tokio::test]
async fn a_stream_nobody_reads_stops_issuing_and_others_are_served() {
    let server = spawn(system_issuer(), rest()).await;
    // A client that grants no window at all: the server can send it no message.
    let hog = H2Conn::connect(server.addr, Some(0)).await;
    let resp = hog
        .grpc_start("/vesta.v1.Vesta/StreamIds", &a_billion_ids(), &[])
        .await
        .expect("a stream opens")
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let metrics = server.client().get("/metrics").await.body;
    let issued = sample(&metrics, "vesta_ids_issued_total");
    // What the server may hold for it: its body's window (32 KiB of chunks alive) and one
    // frame of tonic's (it yields at 32 KiB, plus the message that crossed that), at 8 bytes
    // or more an ID: under 5 chunks of 2,048 IDs. The other 999,990,000 are never issued.
    assert!(
        issued <= 5.0 * 2048.0,
        "issued {issued} IDs for a stream nobody reads"
    );
    // Others are served meanwhile, over gRPC and REST.
    let mut c = client(server.addr).await;
    c.next_id(pb::NextIdRequest {}).await.unwrap();
    server.client().get("/genid").await.id();
    drop(resp);
    server.stop().await;
}

/// A `StreamIds` request for the most IDs a stream may ask for, encoded.
fn a_billion_ids() -> Vec<u8> {
    pb::StreamIdsRequest {
        count: 1_000_000_000,
    }
    .encode_to_vec()
}

#[tokio::test]
async fn many_streams_nobody_reads_are_bounded_per_stream_and_others_are_served() {
    const STREAMS: u64 = 8;
    const HOGS: u64 = 3;
    let mut limits = rest();
    limits.max_streams_per_connection = STREAMS;
    let server = spawn(system_issuer(), limits).await;
    // Each hog grants no window and opens as many billion-ID streams as it may, and more.
    let mut hogs = Vec::new();
    let mut answers = Vec::new();
    for _ in 0..HOGS {
        let hog = H2Conn::connect(server.addr, Some(0)).await;
        for _ in 0..STREAMS {
            let resp = hog
                .grpc_start("/vesta.v1.Vesta/StreamIds", &a_billion_ids(), &[])
                .await
                .expect("a stream within the limit opens");
            answers.push(resp.await.unwrap());
        }
        // One more is held back by the server's SETTINGS_MAX_CONCURRENT_STREAMS: the client
        // may queue it, but it never reaches the server while the others stay open.
        let over = tokio::time::timeout(
            Duration::from_millis(300),
            hog.grpc_start("/vesta.v1.Vesta/StreamIds", &a_billion_ids(), &[]),
        )
        .await;
        if let Ok(Some(resp)) = over {
            assert!(
                tokio::time::timeout(Duration::from_millis(300), resp)
                    .await
                    .is_err(),
                "a stream over max_streams_per_connection was answered"
            );
        }
        hogs.push(hog);
    }
    assert!(answers.iter().all(|r| r.status() == 200));
    tokio::time::sleep(Duration::from_millis(500)).await;
    let metrics = server.client().get("/metrics").await.body;
    let issued = sample(&metrics, "vesta_ids_issued_total");
    // Per stream at most what one unread stream may hold (under 5 chunks of 2,048 IDs: see
    // the test above), so at most that times max_streams_per_connection per connection.
    assert!(
        issued <= (HOGS * STREAMS * 5 * 2048) as f64,
        "issued {issued} IDs for {} streams nobody reads",
        HOGS * STREAMS
    );
    // Others are served meanwhile, over gRPC and REST, a batch and a stream read whole.
    let mut c = client(server.addr).await;
    c.next_id(pb::NextIdRequest {}).await.unwrap();
    let mut read = c
        .stream_ids(pb::StreamIdsRequest { count: 10_000 })
        .await
        .unwrap()
        .into_inner();
    let mut got = 0;
    while let Some(chunk) = read.message().await.unwrap() {
        got += chunk.ids.len();
    }
    assert_eq!(got, 10_000);
    server.client().get("/genid").await.id();
    drop((answers, hogs));
    server.stop().await;
}

#[tokio::test]
async fn a_message_over_the_request_limit_is_refused_and_others_are_served() {
    let server = spawn(system_issuer(), rest()).await;
    let h2 = H2Conn::connect(server.addr, None).await;
    // A `Make` with one field name of 20 KB: a well-formed message, over 16 KiB.
    let big = pb::MakeRequest {
        fields: HashMap::from([("x".repeat(20_000), 1)]),
    }
    .encode_to_vec();
    assert!(big.len() > vesta_grpc::MAX_REQUEST_BYTES);
    let (bytes, code) = h2.grpc_call("/vesta.v1.Vesta/Make", &big, &[]).await;
    // tonic's code for it (gRPC's Go and C++ servers answer RESOURCE_EXHAUSTED).
    assert_eq!((bytes, code.as_str()), (0, "11"), "OUT_OF_RANGE");
    let mut c = client(server.addr).await;
    c.next_id(pb::NextIdRequest {}).await.unwrap();
    server.stop().await;
}
