//! Segment numbers (segment mode, `[segment] db`): `/segment/{tag}` (one number as text),
//! `/segments/{tag}?count=N` (`{"ids":["…",…]}`, streamed and charged to the unsent-bytes
//! budget like `/genids`) and Leaf's own `/api/segment/get/{tag}`, answered as Leaf's
//! `LeafController` does so Leaf's clients switch by host name.
//!
//! A warm buffer answers at once (a map lookup and one atomic add); otherwise the request waits
//! on the async store, never on a worker, at most `segment.wait_ms` (or fails fast while the
//! database is down). Errors on the vesta paths: no database configured → 404, unknown tag →
//! 404, bad tag or count → 400, nothing buffered and the database down or slow → 503. On
//! Leaf's path every failure is Leaf's 500 with `Result{id=CODE, status=EXCEPTION}`.

use std::borrow::Cow;
use std::future::Future;
use std::ops::Range;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::{SystemTime, UNIX_EPOCH};

use hyper::{Response, StatusCode};
use vesta_core::Clock;
use vesta_segment::error::shown_tag;
use vesta_segment::{MAX_BATCH, SegmentError};
use vesta_service::Segments;

use crate::app::App;
use crate::body::Body;
use crate::endpoints::issue::parse_count;
use crate::endpoints::metrics::METRICS_HEADROOM_BYTES;
use crate::error::ApiError;
use crate::query::{Query, shorten};
use crate::response;

/// An answer that needs the database (or a fetch under way): runs on the connection's task.
pub type Waiting = Pin<Box<dyn Future<Output = Result<Response<Body>, ApiError>> + Send>>;

/// The answer of a segment endpoint: ready now, or after a bounded wait.
pub enum Answer {
    /// Answered without waiting.
    Now(Result<Response<Body>, ApiError>),
    /// Waiting for a segment (at most `segment.wait_ms`) or for the tag's first lookup.
    Later(Waiting),
}

/// `GET /segment/{tag}`: the next number of the tag as decimal text.
pub fn one<C: Clock + 'static>(app: &App<C>, raw_tag: &str, query: Option<&str>) -> Answer {
    single(app, raw_tag, query, "/segment/{tag}", None)
}

/// `GET /api/segment/get/{tag}`: Leaf's path, answered as Leaf answers — the number as text,
/// or a 500 whose JSON is Spring Boot's error body with Leaf's `Result{id=CODE,
/// status=EXCEPTION}` as the message (-1 not initialised, -2 no such tag, -3 no segment).
/// Without a database, or with a bad query, it answers like the other paths (404, 400).
pub fn leaf<C: Clock + 'static>(
    app: &App<C>,
    raw_tag: &str,
    path: &str,
    query: Option<&str>,
) -> Answer {
    single(app, raw_tag, query, "/api/segment/get/{tag}", Some(path))
}

/// One number; `leaf_path` answers failures Leaf's way, echoing that path.
fn single<C: Clock + 'static>(
    app: &App<C>,
    raw_tag: &str,
    query: Option<&str>,
    endpoint: &str,
    leaf_path: Option<&str>,
) -> Answer {
    let segments = match segments_on(app) {
        Ok(s) => s,
        Err(e) => return e.into(),
    };
    if query.is_some_and(|q| !q.is_empty())
        && let Err(e) = Query::parse(query, endpoint, &[])
    {
        return ApiError::from(e).into();
    }
    let tag = match decode(raw_tag) {
        Ok(tag) => tag,
        Err(e) => return failed(e, leaf_path).into(),
    };
    let store = match segments.store() {
        Ok(store) => store,
        Err(e) => return failed(e, leaf_path).into(),
    };
    if let Some(n) = store.next_buffered(&tag) {
        segments.issued(1);
        return Answer::Now(Ok(response::decimal(n)));
    }
    let segments = Arc::clone(segments);
    let tag = tag.into_owned();
    let leaf_path = leaf_path.map(|p| shorten(p).into_owned());
    Answer::Later(Box::pin(async move {
        let next = match segments.store() {
            Ok(store) => store.next(&tag).await,
            Err(e) => Err(e),
        };
        match next {
            Ok(n) => {
                segments.issued(1);
                Ok(response::decimal(n))
            }
            Err(e) => failed(e, leaf_path.as_deref()).into_result(),
        }
    }))
}

/// `GET /segments/{tag}?count=N`: N numbers, `{"ids":["…",…]}` in increasing order.
pub fn many<C: Clock + 'static>(app: &App<C>, raw_tag: &str, query: Option<&str>) -> Answer {
    let prepared = (|| {
        let segments = segments_on(app)?;
        let q = Query::parse(query, "/segments/{tag}", &["count"])?;
        let tag = decode(raw_tag).map_err(api_error)?.into_owned();
        let count = parse_count(q.required("count")?, app.max_batch.min(MAX_BATCH))?;
        let reservation = app
            .budget
            .reserve_leaving(Body::ids_reservation(count), METRICS_HEADROOM_BYTES)?;
        segments.store().map_err(api_error)?;
        Ok::<_, ApiError>((Arc::clone(segments), tag, count, reservation))
    })();
    let (segments, tag, count, reservation) = match prepared {
        Ok(p) => p,
        Err(e) => return e.into(),
    };
    let waiting: Waiting = Box::pin(async move {
        let store = segments.store().map_err(api_error)?;
        let ranges: Vec<Range<u64>> = store.next_n(&tag, count).await.map_err(api_error)?;
        segments.issued(count);
        let body = Body::numbers(&ranges, reservation);
        Ok(response::with_body(response::APPLICATION_JSON, body))
    });
    poll_once(waiting)
}

/// The server's segments, or 404 when segment mode is off.
fn segments_on<C: Clock + 'static>(app: &App<C>) -> Result<&Arc<Segments>, ApiError> {
    app.segments.as_ref().ok_or_else(segments_off)
}

/// A failure: the vesta answer, or Leaf's when answering on Leaf's path.
enum Failed {
    Api(ApiError),
    Leaf(Response<Body>),
}

impl Failed {
    fn into_result(self) -> Result<Response<Body>, ApiError> {
        match self {
            Failed::Api(e) => Err(e),
            Failed::Leaf(r) => Ok(r),
        }
    }
}

impl From<Failed> for Answer {
    fn from(f: Failed) -> Self {
        Answer::Now(f.into_result())
    }
}

impl From<ApiError> for Answer {
    fn from(e: ApiError) -> Self {
        Answer::Now(Err(e))
    }
}

fn failed(e: SegmentError, leaf_path: Option<&str>) -> Failed {
    match leaf_path {
        Some(path) => Failed::Leaf(leaf_error(&e, path)),
        None => Failed::Api(api_error(e)),
    }
}

/// 404: this server has no database.
fn segments_off() -> ApiError {
    ApiError::not_found_because(
        "segment mode is off: this server has no segment database ([segment] db in its config)",
    )
}

/// The tag as written in the path, percent-decoded (the store checks the naming rule). Bytes
/// that do not decode to UTF-8 are refused, never replaced: the server serves only the tag the
/// client sent.
fn decode(raw: &str) -> Result<Cow<'_, str>, SegmentError> {
    percent_encoding::percent_decode_str(raw)
        .decode_utf8()
        .map_err(|_| SegmentError::InvalidTag {
            tag: shown_tag(raw),
            reason: "its percent-decoded bytes are not valid UTF-8".into(),
        })
}

/// A store's refusal as the client sees it on the vesta paths.
pub fn api_error(e: SegmentError) -> ApiError {
    match &e {
        SegmentError::InvalidTag { .. } => ApiError::invalid_param("tag", &e),
        SegmentError::OutOfRange { field, .. } => ApiError::invalid_param(field, &e),
        SegmentError::UnknownTag { .. } => ApiError::not_found_because(e.to_string()),
        SegmentError::Unavailable { .. }
        | SegmentError::Timeout { .. }
        | SegmentError::WouldBlock { .. }
        | SegmentError::Unreachable { .. }
        | SegmentError::Database { .. }
        | SegmentError::MissingTable { .. } => ApiError::unavailable(e.to_string(), Some(1)),
        // Refused until an operator raises the tag: no point retrying soon.
        SegmentError::MovedBack { .. } => ApiError::unavailable(e.to_string(), None),
        SegmentError::Closed => ApiError::unavailable(e.to_string(), None),
        _ => ApiError::internal(e.to_string()),
    }
}

/// Leaf's failure answer: Spring Boot 1.5's default error body for a `LeafServerException`.
fn leaf_error(e: &SegmentError, path: &str) -> Response<Body> {
    let timestamp = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let body = serde_json::json!({
        "timestamp": timestamp,
        "status": 500,
        "error": "Internal Server Error",
        "exception": "com.sankuai.inf.leaf.server.exception.LeafServerException",
        "message": format!("Result{{id={}, status=EXCEPTION}}", e.leaf_code()),
        "path": path,
    });
    let mut r = response::ok(response::JSON_UTF8, body.to_string());
    *r.status_mut() = StatusCode::INTERNAL_SERVER_ERROR;
    r
}

/// Polls `waiting` once: a batch from a warm buffer is answered without a task switch.
fn poll_once(mut waiting: Waiting) -> Answer {
    let mut cx = Context::from_waker(Waker::noop());
    match waiting.as_mut().poll(&mut cx) {
        Poll::Ready(r) => Answer::Now(r),
        Poll::Pending => Answer::Later(waiting),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn store_errors_map_to_statuses_naming_the_parameter() {
        let tag = |reason: &str| SegmentError::InvalidTag {
            tag: "a b".into(),
            reason: reason.into(),
        };
        let e = api_error(tag("character ' ' is not allowed"));
        assert_eq!(e.status(), 400);
        assert!(e.message.starts_with("invalid parameter tag: "), "{e}");
        let e = api_error(SegmentError::UnknownTag {
            tag: "x".into(),
            db: "sqlite://d".into(),
        });
        assert_eq!(e.status(), 404);
        assert!(e.message.contains("unknown tag \"x\""), "{e}");
        let e = api_error(SegmentError::Timeout {
            tag: "x".into(),
            waited_ms: 5,
        });
        assert_eq!((e.status().as_u16(), e.retry_after_s), (503, Some(1)));
        assert_eq!(api_error(SegmentError::Closed).status(), 503);
    }

    #[test]
    fn leafs_error_body_carries_leafs_code() {
        let e = SegmentError::UnknownTag {
            tag: "x".into(),
            db: "sqlite://d".into(),
        };
        let r = leaf_error(&e, "/api/segment/get/x");
        assert_eq!(r.status(), 500);
        assert_eq!(
            r.headers()["content-type"],
            "application/json;charset=UTF-8"
        );
        assert_eq!(decode("a%3Ab").unwrap(), "a:b");
        assert_eq!(decode("a%zz").unwrap(), "a%zz");
        let err = decode("a%CF").unwrap_err().to_string();
        assert!(err.contains("\"a%CF\"") && err.contains("UTF-8"), "{err}");
    }
}
