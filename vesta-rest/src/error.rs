//! Why a request failed ([`ApiError`], which becomes a JSON `{"error": "..."}` body whose
//! sentence names the parameter at fault), and the one place an op's refusal becomes an HTTP
//! status (`From<OpError>`; Leaf's paths answer Leaf's bodies instead, see
//! `endpoints/leaf.rs`). Why the server did not start is the shared `vesta_service::ServeError`.

use hyper::StatusCode;
use vesta_service::{ErrorKind as OpKind, OpError};

/// The category of a failed request; decides the status code and the metrics label.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// 400: missing, malformed or out-of-range parameter.
    BadRequest,
    /// 401: `[server] auth_token_file` is set and the request has no or another token.
    Unauthorized,
    /// 404: unknown path, unknown segment tag, or segment mode off.
    NotFound,
    /// 405: a method the path does not serve.
    MethodNotAllowed,
    /// 414: the request target is longer than `rest.max_uri_bytes`.
    UriTooLong,
    /// 500: a bug; the server keeps serving.
    Internal,
    /// 503: the issuer may not issue now (fenced, start guard, clock behind, end of life), or
    /// no segment number could be had (database down or slow).
    Unavailable,
    /// 307: a per-key sequence served by another member of the cluster, at `Location`.
    Moved,
}

impl ErrorKind {
    /// The HTTP status of this kind.
    pub const fn status(self) -> StatusCode {
        match self {
            ErrorKind::BadRequest => StatusCode::BAD_REQUEST,
            ErrorKind::Unauthorized => StatusCode::UNAUTHORIZED,
            ErrorKind::NotFound => StatusCode::NOT_FOUND,
            ErrorKind::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            ErrorKind::UriTooLong => StatusCode::URI_TOO_LONG,
            ErrorKind::Internal => StatusCode::INTERNAL_SERVER_ERROR,
            ErrorKind::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
            ErrorKind::Moved => StatusCode::TEMPORARY_REDIRECT,
        }
    }
}

/// A request that failed: the status and the one sentence the client sees.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ApiError {
    /// Decides the status code.
    pub kind: ErrorKind,
    /// The sentence in the JSON body.
    pub message: String,
    /// Seconds for a `Retry-After` header (transient 503s).
    pub retry_after_s: Option<u64>,
    /// The `Location` of a 307.
    pub location: Option<String>,
    /// The `Allow` of a 405: the methods the path serves.
    pub allow: Option<&'static str>,
}

impl ApiError {
    fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        ApiError {
            kind,
            message: message.into(),
            retry_after_s: None,
            location: None,
            allow: None,
        }
    }

    /// 307 to `location` (the member serving a key, `//HOST:PORT/PATH`: same scheme).
    pub fn moved(message: impl Into<String>, location: String) -> Self {
        ApiError {
            location: Some(location),
            ..Self::new(ErrorKind::Moved, message)
        }
    }

    /// 400 with `message`.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::BadRequest, message)
    }

    /// 400 for a parameter whose value was rejected; `why` usually names the field again.
    pub fn invalid_param(name: &str, why: impl std::fmt::Display) -> Self {
        Self::bad_request(format!("invalid parameter {name}: {why}"))
    }

    /// 401 for a request without the server's bearer token (or with another).
    pub fn unauthorized(why: &str) -> Self {
        Self::new(ErrorKind::Unauthorized, why.to_owned())
    }

    /// 404 for `path`.
    pub fn not_found(path: &str) -> Self {
        Self::new(
            ErrorKind::NotFound,
            format!(
                "no endpoint at {path}: the endpoints are /genid, /genids, /expid, /makeid, \
                 /transtime, /healthz, /metrics, /segment/{{tag}}, /segments/{{tag}} and \
                 /api/segment/get/{{tag}}"
            ),
        )
    }

    /// 404 for a known path whose resource is not there (an unknown tag, segment mode off).
    pub fn not_found_because(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::NotFound, message)
    }

    /// 405 saying `why` (the gate's sentence), with `Allow: allow`.
    pub fn method_not_allowed(why: Option<String>, allow: &'static str) -> Self {
        ApiError {
            allow: Some(allow),
            ..Self::new(ErrorKind::MethodNotAllowed, why.unwrap_or_default())
        }
    }

    /// 414 saying `why` (the gate's sentence).
    pub fn uri_too_long(why: Option<String>) -> Self {
        Self::new(ErrorKind::UriTooLong, why.unwrap_or_default())
    }

    /// 500: something that should not happen; the message says what.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Internal, message)
    }

    /// 503: not issuing now; `retry_after_s` when waiting is likely to help.
    pub fn unavailable(message: impl Into<String>, retry_after_s: Option<u64>) -> Self {
        ApiError {
            retry_after_s,
            ..Self::new(ErrorKind::Unavailable, message)
        }
    }

    /// The status code.
    pub fn status(&self) -> StatusCode {
        self.kind.status()
    }
}

/// An op's refusal as the client sees it on vesta's paths:
///
/// | kind | status |
/// | --- | --- |
/// | `BadParameter`, `OutOfRange` | 400, "invalid parameter FIELD: ..." |
/// | `Off`, `NotConfigured`, `UnknownTag` | 404 |
/// | `Unavailable`, `ClockBehind`, `TimeExhausted`, `BeforeEpoch`, `Saturated`, `NoSegment`, `StoreDown` | 503, `Retry-After` when waiting helps |
/// | `Moving` | 503 with `Retry-After` |
/// | `Moved` | 503 here; the seq endpoints answer 307 with `Location` (`endpoints/seq.rs`) |
/// | `Internal` (and kinds added later) | 500 |
impl From<OpError> for ApiError {
    fn from(e: OpError) -> Self {
        match e.kind() {
            OpKind::BadParameter | OpKind::OutOfRange => {
                ApiError::invalid_param(e.field().unwrap_or("?"), e.message())
            }
            OpKind::Off | OpKind::NotConfigured | OpKind::UnknownTag => {
                ApiError::not_found_because(e.message())
            }
            OpKind::Unavailable
            | OpKind::ClockBehind
            | OpKind::TimeExhausted
            | OpKind::BeforeEpoch
            | OpKind::Saturated
            | OpKind::NoSegment
            | OpKind::StoreDown
            | OpKind::Moving
            | OpKind::Moved => ApiError::unavailable(e.message(), e.retry_after_s()),
            _ => ApiError::internal(e.message()),
        }
    }
}
