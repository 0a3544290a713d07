//! The gRPC side of the REST server under arbitrary request bodies, served by one `Grpc` over a
//! real `Service` made once for the process.

use super::*;

/// The gRPC side of the REST server (`vesta_grpc::Grpc`, what `vesta serve rest` routes
/// `application/grpc` requests to) with arbitrary request bodies: the first byte picks the
/// method (vesta.v1's eight, health's `Check`, an unknown one) and whether the rest is sent as
/// one gRPC message (framed here: flag 0, its length) or as raw bytes (framing included).
/// Every answer is an HTTP 200 carrying a `grpc-status` (in its headers or trailers), never
/// `UNKNOWN`, and `INTERNAL` only for bytes that are not the method's message (what gRPC's
/// spec answers to a protocol violation): a well-formed request gets its op's answer or a
/// refusal naming what was wrong.
pub fn grpc_request(data: &[u8]) {
    use http_body_util::BodyExt;

    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    const PATHS: [&str; 12] = [
        "/vesta.v1.Vesta/NextId",
        "/vesta.v1.Vesta/NextIds",
        "/vesta.v1.Vesta/StreamIds",
        "/vesta.v1.Vesta/Explain",
        "/vesta.v1.Vesta/Make",
        "/vesta.v1.Vesta/TransTime",
        "/vesta.v1.Vesta/Segment",
        "/vesta.v1.Vesta/Segments",
        "/grpc.health.v1.Health/Check",
        "/vesta.v1.Vesta/Nope",
        "/vesta.v1.Vesta/SeqNext",
        "/vesta.v1.Vesta/SeqCurrent",
    ];
    let method = usize::from(pick & 0x7f) % PATHS.len();
    let path = PATHS[method];
    let framed = pick & 0x80 == 0;
    let well_formed = framed && {
        use prost::Message;
        use vesta_grpc::pb;
        match method {
            0 => pb::NextIdRequest::decode(rest).is_ok(),
            1 => pb::NextIdsRequest::decode(rest).is_ok(),
            2 => pb::StreamIdsRequest::decode(rest).is_ok(),
            3 => pb::ExplainRequest::decode(rest).is_ok(),
            4 => pb::MakeRequest::decode(rest).is_ok(),
            5 => pb::TransTimeRequest::decode(rest).is_ok(),
            6 => pb::SegmentRequest::decode(rest).is_ok(),
            7 => pb::SegmentsRequest::decode(rest).is_ok(),
            8 => tonic_health::pb::HealthCheckRequest::decode(rest).is_ok(),
            10 => pb::SeqNextRequest::decode(rest).is_ok(),
            11 => pb::SeqCurrentRequest::decode(rest).is_ok(),
            _ => true,
        }
    };
    let body = if framed {
        let mut framed = Vec::with_capacity(5 + rest.len());
        framed.push(0);
        framed.extend_from_slice(&u32::try_from(rest.len()).unwrap_or(u32::MAX).to_be_bytes());
        framed.extend_from_slice(rest);
        framed
    } else {
        rest.to_vec()
    };
    let grpc = grpc_server();
    let req = http::Request::builder()
        .method("POST")
        .uri(path)
        .version(http::Version::HTTP_2)
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(http_body_util::Full::new(Bytes::from(body)))
        .expect("a request");
    let runtime = &grpc.runtime;
    let (status, code) = runtime.block_on(async {
        let resp = match grpc.grpc.call(&grpc.flow, req).await {
            Ok(resp) => resp,
            Err(never) => match never {},
        };
        let http_status = resp.status();
        if let Some(code) = resp.headers().get("grpc-status") {
            return (http_status, code.to_str().unwrap_or("?").to_owned());
        }
        // A streamed answer: read a bounded number of frames (a stream may ask for 10^9 IDs),
        // then its trailers if it ended.
        let mut body = resp.into_body();
        for _ in 0..4 {
            match body.frame().await {
                Some(Ok(frame)) => {
                    if let Ok(trailers) = frame.into_trailers() {
                        let code = trailers
                            .get("grpc-status")
                            .map(|v| v.to_str().unwrap_or("?").to_owned());
                        return (http_status, code.unwrap_or_else(|| "none".into()));
                    }
                }
                Some(Err(e)) => panic!("{path}: the answer's body failed: {e:?}"),
                None => return (http_status, "none".into()),
            }
        }
        (http_status, "0".into())
    });
    assert_eq!(status, http::StatusCode::OK, "{path}");
    let code: i32 = code
        .parse()
        .unwrap_or_else(|_| panic!("{path}: grpc-status {code:?}"));
    let code = tonic::Code::from(code);
    assert_ne!(code, tonic::Code::Unknown, "{path}");
    if well_formed {
        assert_ne!(code, tonic::Code::Internal, "{path}: a well-formed request");
    }
}

/// One gRPC server side for every input: a Vesta issuer with a static machine ID, no segment
/// store, and a current-thread runtime to drive the calls.
struct GrpcUnderTest {
    runtime: tokio::runtime::Runtime,
    grpc: std::sync::Arc<vesta_grpc::Grpc<vesta_embed::SystemClock>>,
    flow: vesta_embed::Flow<vesta_embed::SystemClock>,
}

fn grpc_server() -> &'static GrpcUnderTest {
    static SERVER: std::sync::OnceLock<GrpcUnderTest> = std::sync::OnceLock::new();
    SERVER.get_or_init(|| {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        let config = vesta_rest::RestConfig::default();
        let limits = vesta_service::ops::Limits::of(&config.server).expect("the default limits");
        let (grpc, flow) = runtime.block_on(async {
            let ids = vesta_embed::Issuer::start(config.issuer_config())
                .expect("an issuer")
                .into_async()
                .expect("its async side");
            let flow = ids.flow();
            let service = std::sync::Arc::new(vesta_service::Service::new(ids, None, limits));
            (vesta_grpc::Grpc::new(service), flow)
        });
        GrpcUnderTest {
            runtime,
            grpc,
            flow,
        }
    })
}
