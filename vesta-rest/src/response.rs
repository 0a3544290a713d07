//! Building responses: text, JSON and the JSON error body. Every response carries
//! `Cache-Control: no-store`, so no proxy can hand the same issued ID to two clients.

use bytes::Bytes;
use hyper::Response;
use hyper::header::{ALLOW, CACHE_CONTROL, CONTENT_TYPE, HeaderValue, RETRY_AFTER};

pub use crate::body::Body;
use crate::body::SMALL_BODY_BYTES;
use crate::budget::UnsentBudget;
use crate::error::{ApiError, ErrorKind};

/// `text/plain` with UTF-8.
pub const TEXT_PLAIN: HeaderValue = HeaderValue::from_static("text/plain; charset=utf-8");
/// `application/json`.
pub const APPLICATION_JSON: HeaderValue = HeaderValue::from_static("application/json");
/// JSON as Spring Boot labels it (Leaf's error answers).
pub const JSON_UTF8: HeaderValue = HeaderValue::from_static("application/json;charset=UTF-8");
/// The OpenMetrics text format that `prometheus-client` writes (Prometheus scrapes it).
pub const OPENMETRICS: HeaderValue =
    HeaderValue::from_static("application/openmetrics-text; version=1.0.0; charset=utf-8");
const NO_STORE: HeaderValue = HeaderValue::from_static("no-store");

/// A 200 response with `body` of type `content_type`.
pub fn ok(content_type: HeaderValue, body: impl Into<Bytes>) -> Response<Body> {
    with_body(content_type, Body::whole(body))
}

/// A 200 response with `text` of type `content_type`, charged to `budget` when it is larger
/// than a small body (a 503 when the budget has no room: a busy server's `/healthz` with many
/// tags, or its `/metrics`, waits like any large body).
pub fn sized(
    budget: &UnsentBudget,
    content_type: HeaderValue,
    text: String,
) -> Result<Response<Body>, ApiError> {
    if text.len() <= SMALL_BODY_BYTES {
        return Ok(ok(content_type, text));
    }
    let reservation = budget.reserve(text.len())?;
    Ok(with_body(
        content_type,
        Body::charged(text.into(), reservation),
    ))
}

/// A 200 response with `body` (a streamed or charged one) of type `content_type`.
pub fn with_body(content_type: HeaderValue, body: Body) -> Response<Body> {
    let mut r = Response::new(body);
    let h = r.headers_mut();
    h.insert(CONTENT_TYPE, content_type);
    h.insert(CACHE_CONTROL, NO_STORE);
    r
}

/// A 200 `text/plain` response.
pub fn text(body: impl Into<Bytes>) -> Response<Body> {
    ok(TEXT_PLAIN, body)
}

/// A 200 JSON response.
pub fn json(body: impl Into<Bytes>) -> Response<Body> {
    ok(APPLICATION_JSON, body)
}

/// The error's status with `{"error": "..."}`, `Allow` on 405 and `Retry-After` when set.
pub fn error(e: &ApiError) -> Response<Body> {
    let body = serde_json::json!({ "error": e.message }).to_string();
    let mut r = ok(APPLICATION_JSON, body);
    *r.status_mut() = e.status();
    let h = r.headers_mut();
    if let Some(allow) = e.allow {
        h.insert(ALLOW, HeaderValue::from_static(allow));
    }
    if e.kind == ErrorKind::Unauthorized {
        h.insert(
            hyper::header::WWW_AUTHENTICATE,
            HeaderValue::from_static("Bearer realm=\"vesta\""),
        );
    }
    if let Some(s) = e.retry_after_s {
        h.insert(RETRY_AFTER, HeaderValue::from(s));
    }
    if let Some(to) = &e.location
        && let Ok(v) = HeaderValue::from_str(to)
    {
        h.insert(hyper::header::LOCATION, v);
    }
    r
}

/// One ID as text in `form` (`?format=`).
pub fn in_form(id: u64, form: vesta_core::Form) -> Response<Body> {
    text(Bytes::copy_from_slice(form.encode(id).as_str().as_bytes()))
}

/// An ID as decimal text, the body of `/genid` and `/makeid` (Vesta's: no newline).
pub fn decimal(id: u64) -> Response<Body> {
    let mut buf = itoa::Buffer::new();
    text(Bytes::copy_from_slice(buf.format(id).as_bytes()))
}
