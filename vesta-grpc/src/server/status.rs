//! An op's refusal ([`OpError`]) as a gRPC status: the code from its kind, its sentence as the
//! message, and two metadata entries a client can act on: `vesta-field` (the request field at
//! fault) and `retry-after` (seconds) with gRPC's own `grpc-retry-pushback-ms`, which gRPC
//! clients with a retry policy honour; and for a per-key sequence another member of the
//! cluster serves, `vesta-seq-owner` (that member's `host:port`, gRPC on its REST port) and
//! `vesta-seq-member` (its machine ID).

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
