//! gRPC requests whose message does not decode, sent by hand (h2, no client library, which
//! would never send them): on every method of every service on the port they are
//! INVALID_ARGUMENT naming why, and the server keeps serving.

use vesta_grpc::{VestaClient, pb};

use crate::common::{H2Conn, labelled_sample, rest, spawn, system_issuer};

/// A request whose message does not decode, on every method of every service here: bytes that
/// are no protobuf message, a frame cut short, no message at all. Each is INVALID_ARGUMENT
/// naming why (tonic says INTERNAL, blaming the server), counted so, and the server keeps
/// serving.
#[tokio::test]
async fn a_message_that_does_not_decode_is_invalid_argument_on_every_method() {
    let server = spawn(system_issuer(), rest()).await;
    let h2 = H2Conn::connect(server.addr, None).await;
    let frame = |body: &[u8]| {
        let mut framed = vec![0];
        framed.extend_from_slice(&u32::try_from(body.len()).unwrap().to_be_bytes());
        framed.extend_from_slice(body);
        framed
    };
    // Field 1, length-delimited, 5 bytes long, of which 1 arrives: no message type reads it.
    let not_a_message = frame(&[0x0a, 0x05, 0x01]);
    let mut cut_short = frame(&[0x08, 0x01, 0x08, 0x01]);
    cut_short.truncate(7);
    let bodies: [(&[u8], &str); 3] = [
        (&not_a_message, "failed to decode Protobuf message"),
        (&cut_short, "Unexpected EOF"),
        (&[], "Missing request message"),
    ];
    let methods = [
        "/vesta.v1.Vesta/NextId",
        "/vesta.v1.Vesta/NextIds",
        "/vesta.v1.Vesta/StreamIds",
        "/vesta.v1.Vesta/Explain",
        "/vesta.v1.Vesta/Make",
        "/vesta.v1.Vesta/TransTime",
        "/vesta.v1.Vesta/Segment",
        "/vesta.v1.Vesta/Segments",
        "/vesta.v1.Vesta/SeqNext",
        "/vesta.v1.Vesta/SeqCurrent",
        "/grpc.health.v1.Health/Check",
        "/grpc.health.v1.Health/Watch",
    ];
    for method in methods {
        for (body, why) in bodies {
            let (code, message) = h2.grpc_raw(method, body).await;
            assert_eq!(code, "3", "{method} {why}: {message}");
            assert!(
                message.starts_with("the request does not decode") && message.contains(why),
                "{method}: {message}"
            );
        }
    }
    let mut c = VestaClient::connect(format!("http://{}", server.addr))
        .await
        .expect("connecting over HTTP/2");
    c.next_id(pb::NextIdRequest {}).await.unwrap();
    let metrics = server.client().get("/metrics").await.body;
    for series in [
        r#"method="vesta.v1.Vesta/SeqNext",code="INVALID_ARGUMENT""#,
        r#"method="grpc.health.v1.Health/Check",code="INVALID_ARGUMENT""#,
    ] {
        let series = format!("vesta_grpc_calls_total{{{series}}}");
        assert_eq!(labelled_sample(&metrics, &series), 3.0, "{series}");
    }
    assert!(!metrics.contains(r#"code="INTERNAL""#), "{metrics}");
    server.stop().await;
}
