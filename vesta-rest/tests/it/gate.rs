//! The one gate (`vesta_service::gate`) on the REST port and its gRPC calls: a method a path
//! does not serve is a 405 with `Allow` naming what it serves (Leaf's paths: Spring's eight),
//! the console off is the 404 the TCP server's side listener gives too, and a sequence call's
//! count over the step is refused by the op with the one text every transport gives.

use hyper::Method;
use tonic::Code;
use vesta_grpc::VestaClient;
use vesta_grpc::pb;

use crate::common::{H2Conn, leaf_issuer, rest, seq_db, spawn, spawn_with_stores, system_issuer};

/// What a seq call of 10,001 numbers is refused with on every transport (the default step).
const OVER_THE_STEP: &str = "count 10001 is out of range: allowed 1..=10000";

/// What a console page answers while the console is off, in a process with no remedy renderer
/// (a library user's): the remedy in words, naming no flag.
const CONSOLE_OFF_WORDS: &str =
    "the console is off on this server: turn it on with [server] console = true in its config";

#[tokio::test]
async fn an_undeclared_method_is_a_405_with_allow_on_rest_and_grpc() {
    let server = spawn(leaf_issuer(), rest()).await;
    let c = server.client();
    let query = Method::from_bytes(b"QUERY").unwrap();
    let r = c
        .request(query.clone(), "/decodeSnowflakeId?snowflakeId=1")
        .await;
    assert_eq!(r.status, 405, "{r:?}");
    let spring = "GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS, TRACE";
    assert_eq!(r.header("allow"), spring);
    assert_eq!(
        r.error(),
        format!("method QUERY is not allowed on /decodeSnowflakeId: use one of {spring}")
    );
    let r = c.request(query, "/genid").await;
    assert_eq!((r.status, r.header("allow")), (405, "GET"), "{r:?}");
    let r = c.request(Method::TRACE, "/seq/42").await;
    assert_eq!(
        r.error(),
        "method TRACE is not allowed on /seq/{key}: use GET"
    );

    // A gRPC call that is not a POST.
    let h2 = H2Conn::connect(server.addr, None).await;
    let req = hyper::Request::get(format!("http://{}/vesta.v1.Vesta/NextId", server.addr))
        .header("content-type", "application/grpc")
        .body(())
        .unwrap();
    let mut send = h2.send.clone().ready().await.unwrap();
    let (resp, _) = send.send_request(req, true).unwrap();
    let resp = resp.await.unwrap();
    assert_eq!(resp.status(), 405);
    assert_eq!(resp.headers()["allow"], "POST");
    server.stop().await;
}

#[tokio::test]
async fn the_console_off_is_the_gates_404() {
    let server = spawn(system_issuer(), rest()).await;
    for path in ["/ui", "/ui/status", "/ui/make?time=1&seq=1"] {
        let r = server.client().get(path).await;
        assert_eq!(r.status, 404, "{path}: {r:?}");
        assert_eq!(r.error(), CONSOLE_OFF_WORDS, "{path}");
    }
    server.stop().await;
}

#[tokio::test]
async fn a_seq_count_over_the_step_is_the_ops_one_refusal_on_rest_and_grpc() {
    let dir = tempfile::tempdir().unwrap();
    let seq = seq_db(dir.path()).await;
    let server = spawn_with_stores(system_issuer(), rest(), None, Some(seq)).await;
    let c = server.client();
    let r = c.get("/seq/42?count=10001").await;
    assert_eq!(r.status, 400, "{r:?}");
    assert_eq!(
        r.error(),
        format!("invalid parameter count: {OVER_THE_STEP}")
    );
    let r = c.get("/seq/42?count=0").await;
    assert_eq!(
        r.error(),
        "invalid parameter count: count 0 is out of range: allowed 1..=10000"
    );

    let channel = tonic::transport::Endpoint::from_shared(format!("http://{}", server.addr))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut g = VestaClient::new(channel);
    let s = g
        .seq_next(pb::SeqNextRequest {
            key: "42".into(),
            count: Some(10_001),
        })
        .await
        .unwrap_err();
    assert_eq!(s.code(), Code::InvalidArgument, "{s:?}");
    assert_eq!(s.message(), OVER_THE_STEP);
    assert_eq!(s.metadata().get("vesta-field").unwrap(), "count");
    // Refused whole: nothing was taken.
    assert_eq!(c.get("/seq/42").await.body, "1");
    server.stop().await;
}
