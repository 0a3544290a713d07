//! `vesta_grpc_calls_total{method, code}`: gRPC calls by method and the status they were
//! answered with (a stream's is its first answer; one that fails later is counted OK). The
//! labels come from fixed lists, so no request can add a series: an unknown method is
//! `other`. IDs and segment numbers are counted by the ops (`vesta_ids_issued_total`), as for
//! every transport.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;
use tonic::Code;

type Labels = [(&'static str, &'static str); 2];

/// The methods a call is counted under.
const METHODS: [&str; 14] = [
    "vesta.v1.Vesta/NextId",
    "vesta.v1.Vesta/NextIds",
    "vesta.v1.Vesta/StreamIds",
    "vesta.v1.Vesta/Explain",
    "vesta.v1.Vesta/Make",
    "vesta.v1.Vesta/TransTime",
    "vesta.v1.Vesta/Segment",
    "vesta.v1.Vesta/Segments",
    "vesta.v1.Vesta/SeqNext",
    "vesta.v1.Vesta/SeqCurrent",
    "grpc.health.v1.Health/Check",
    "grpc.health.v1.Health/Watch",
    "grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
    "grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
];

/// The calls counter.
#[derive(Debug, Default)]
pub struct Calls(Family<Labels, Counter>);

impl Calls {
    /// Adds the counter to `registry` (prefixed there, e.g. `vesta_`).
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "grpc_calls",
            "gRPC calls by method and the status they were answered with",
            self.0.clone(),
        );
    }

    /// Counts a call to `path` answered with `code`.
    pub fn count(&self, path: &str, code: Code) {
        let method = METHODS
            .iter()
            .find(|m| path.strip_prefix('/') == Some(**m))
            .copied()
            .unwrap_or("other");
        self.0
            .get_or_create(&[("method", method), ("code", code_label(code))])
            .inc();
    }
}

/// The code's name as gRPC's documentation spells it.
fn code_label(code: Code) -> &'static str {
    match code {
        Code::Ok => "OK",
        Code::Cancelled => "CANCELLED",
        Code::Unknown => "UNKNOWN",
        Code::InvalidArgument => "INVALID_ARGUMENT",
        Code::DeadlineExceeded => "DEADLINE_EXCEEDED",
        Code::NotFound => "NOT_FOUND",
        Code::AlreadyExists => "ALREADY_EXISTS",
        Code::PermissionDenied => "PERMISSION_DENIED",
        Code::ResourceExhausted => "RESOURCE_EXHAUSTED",
        Code::FailedPrecondition => "FAILED_PRECONDITION",
        Code::Aborted => "ABORTED",
        Code::OutOfRange => "OUT_OF_RANGE",
        Code::Unimplemented => "UNIMPLEMENTED",
        Code::Internal => "INTERNAL",
        Code::Unavailable => "UNAVAILABLE",
        Code::DataLoss => "DATA_LOSS",
        Code::Unauthenticated => "UNAUTHENTICATED",
    }
}
