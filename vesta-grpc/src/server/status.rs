//! An op's refusal ([`OpError`]) as a gRPC status: the code from its kind, its sentence as the
//! message, and two metadata entries a client can act on: `vesta-field` (the request field at
//! fault) and `retry-after` (seconds) with gRPC's own `grpc-retry-pushback-ms`, which gRPC
//! clients with a retry policy honour; and for a per-key sequence another member of the
//! cluster serves, `vesta-seq-owner` (that member's `host:port`, gRPC on its REST port) and
//! `vesta-seq-member` (its machine ID). And a request whose message does not decode, which
//! tonic answers `INTERNAL`, as `INVALID_ARGUMENT` ([`undecodable`]).

use http::Response;
use tonic::body::Body;
use tonic::metadata::MetadataValue;
use tonic::{Code, Status};
use vesta_service::{ErrorKind, OpError};

/// The gRPC code of each kind of refusal (docs/grpc.md has the table).
pub fn code(kind: ErrorKind) -> Code {
    match kind {
        ErrorKind::BadParameter | ErrorKind::OutOfRange => Code::InvalidArgument,
        ErrorKind::Off => Code::PermissionDenied,
        ErrorKind::NotConfigured => Code::Unimplemented,
        ErrorKind::UnknownTag => Code::NotFound,
        ErrorKind::Unavailable
        | ErrorKind::ClockBehind
        | ErrorKind::NoSegment
        | ErrorKind::StoreDown
        | ErrorKind::Moved
        | ErrorKind::Moving => Code::Unavailable,
        ErrorKind::TimeExhausted | ErrorKind::BeforeEpoch => Code::FailedPrecondition,
        ErrorKind::Saturated => Code::ResourceExhausted,
        // `Internal`, and any kind a later vesta-service adds before this table knows it.
        _ => Code::Internal,
    }
}

/// How tonic 0.14 says a request's message could not be read, before any method runs: bytes
/// that are not the method's protobuf message (tonic-prost), a frame cut short, no message at
/// all, a frame flag that is neither 0 nor 1 (tonic's decoder and unary path). A method here
/// never answers these.
const UNDECODABLE: [&str; 4] = [
    "failed to decode Protobuf message",
    "Unexpected EOF decoding stream",
    "Missing request message",
    "protocol error: received message with invalid compression flag",
];

/// `resp` with tonic's `INTERNAL` for a request whose message does not decode (the client's
/// fault, not the server's) turned into `INVALID_ARGUMENT`, for every service on the port.
/// tonic answers such a request before any method runs, trailers-only, so the status is in
/// the headers. (A compressed-flag without `grpc-encoding` stays `INTERNAL`: gRPC's
/// compression spec demands it.)
pub fn undecodable(resp: Response<Body>) -> Response<Body> {
    if resp.headers().get("grpc-status").map(|v| v.as_bytes()) != Some(b"13") {
        return resp;
    }
    match Status::from_header_map(resp.headers()) {
        Some(s) if UNDECODABLE.iter().any(|m| s.message().starts_with(m)) => {
            Status::invalid_argument(format!("the request does not decode: {}", s.message()))
                .into_http()
        }
        _ => resp,
    }
}

/// `e` as the status a client reads.
pub fn of(e: &OpError) -> Status {
    let mut status = Status::new(code(e.kind()), e.message());
    let metadata = status.metadata_mut();
    if let Some(field) = e.field()
        && let Ok(v) = field.parse()
    {
        metadata.insert("vesta-field", v);
    }
    if let Some(owner) = e.owner() {
        if let Ok(v) = owner.rest.parse()
            && !owner.rest.is_empty()
        {
            metadata.insert("vesta-seq-owner", v);
        }
        metadata.insert("vesta-seq-member", MetadataValue::from(owner.member));
    }
    if let Some(s) = e.retry_after_s() {
        metadata.insert("retry-after", MetadataValue::from(s));
        metadata.insert(
            "grpc-retry-pushback-ms",
            MetadataValue::from(s.saturating_mul(1000)),
        );
    }
    status
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_tonics_undecodable_requests_become_invalid_argument() {
        let code_of = |s: Status| Status::from_header_map(undecodable(s.into_http()).headers());
        let decode = tonic_prost_decode_error();
        let s = code_of(decode).unwrap();
        assert_eq!(s.code(), Code::InvalidArgument, "{s:?}");
        assert!(
            s.message()
                .starts_with("the request does not decode: failed to decode Protobuf message"),
            "{s:?}"
        );
        for m in [
            "Unexpected EOF decoding stream.",
            "Missing request message.",
        ] {
            assert_eq!(
                code_of(Status::internal(m)).unwrap().code(),
                Code::InvalidArgument
            );
        }
        // A method's own INTERNAL, the compressed flag gRPC's spec keeps INTERNAL, and other
        // codes pass unchanged.
        for kept in [
            Status::internal("no ID"),
            Status::internal(
                "protocol error: received message with compressed-flag but no grpc-encoding \
                 was specified",
            ),
            Status::unavailable("failed to decode Protobuf message"),
        ] {
            let code = kept.code();
            assert_eq!(code_of(kept).unwrap().code(), code);
        }
        let ok = http::Response::new(Body::default());
        assert!(undecodable(ok).headers().get("grpc-status").is_none());
    }

    /// The status tonic-prost's decoder gives bytes that are not the message
    /// (`from_decode_error`: INTERNAL with prost's error).
    fn tonic_prost_decode_error() -> Status {
        use prost::Message;
        let e = crate::pb::NextIdRequest::decode(&[0x0a, 0x05, 0x01][..]).unwrap_err();
        Status::internal(e.to_string())
    }

    #[test]
    fn a_refusal_keeps_its_field_message_and_retry_hint() {
        let s = of(&OpError::count_out_of_range(0, 100));
        assert_eq!(s.code(), Code::InvalidArgument);
        assert!(s.message().contains("count"), "{}", s.message());
        assert_eq!(s.metadata().get("vesta-field").unwrap(), "count");

        let s = of(&OpError::new(ErrorKind::Unavailable, "not issuing").retry_after(Some(2)));
        assert_eq!(s.code(), Code::Unavailable);
        assert_eq!(s.metadata().get("retry-after").unwrap(), "2");
        assert_eq!(s.metadata().get("grpc-retry-pushback-ms").unwrap(), "2000");

        let owner = vesta_service::SeqOwner {
            member: 931,
            set: 4,
            tcp: String::new(),
            rest: "10.0.0.2:8080".into(),
        };
        let s = of(&OpError::moved(
            owner,
            "key 4: set 4 is served by member 931",
        ));
        assert_eq!(s.code(), Code::Unavailable);
        assert_eq!(
            s.metadata().get("vesta-seq-owner").unwrap(),
            "10.0.0.2:8080"
        );
        assert_eq!(s.metadata().get("vesta-seq-member").unwrap(), "931");
    }
}
