//! Segment numbers (segment mode, `[segment] db`) on vesta's paths: `/segment/{tag}` (one
//! number as text) and `/segments/{tag}?count=N` (`{"ids":["…",…]}`, streamed and charged to
//! the unsent-bytes budget like `/genids`), from the service's segment ops. Leaf's own path is
//! Leaf's (`endpoints/leaf.rs`).
//!
//! A warm buffer answers at once (a map lookup and one atomic add); otherwise the request waits
//! on the async store, never on a worker, at most `segment.wait_ms` (or fails fast while the
//! database is down). Errors: no database configured → 404, unknown tag → 404, bad tag or
//! count → 400, nothing buffered and the database down or slow → 503.

use std::borrow::Cow;
use std::ops::Range;

use hyper::Response;
use vesta_core::Clock;
use vesta_segment::SegmentError;
use vesta_segment::error::shown_tag;
use vesta_service::OpError;
use vesta_service::ops::Turn;

use crate::body::Body;
use crate::budget::Reservation;
use crate::ctx::{Ctx, Reply};
use crate::endpoints::metrics::METRICS_HEADROOM_BYTES;
use crate::error::ApiError;
use crate::query::Query;
use crate::query::parse_count;
use crate::response;

/// `GET /segment/{tag}`: the next number of the tag as decimal text.
pub fn one<C: Clock + 'static>(cx: Ctx<'_, C>) -> Reply {
    let checked = (|| {
        cx.service().segments_on()?;
        if cx.query.is_some_and(|q| !q.is_empty()) {
            Query::parse(cx.query, cx.documented_path(), &[])?;
        }
        Ok::<_, ApiError>(decode(cx.param())?)
    })();
    let tag = match checked {
        Ok(tag) => tag,
        Err(e) => return cx.now(Err(e)),
    };
    let number = cx.service().segment_number(&tag, Turn::Now);
    cx.answer(number, decimal)
}

fn decimal(n: Result<u64, OpError>) -> Result<Response<Body>, ApiError> {
    Ok(response::decimal(n?))
}

/// `GET /segments/{tag}?count=N`: N numbers, `{"ids":["…",…]}` in increasing order.
pub fn many<C: Clock + 'static>(cx: Ctx<'_, C>) -> Reply {
    let checked = (|| {
        let service = cx.service();
        service.segments_on()?;
        let q = Query::parse(cx.query, cx.documented_path(), &["count"])?;
        let tag = decode(cx.param())?;
        let count = parse_count(q.required("count")?, service.max_segment_batch())?;
        let reservation = cx
            .rest
            .budget
            .reserve_leaving(Body::ids_reservation(count), METRICS_HEADROOM_BYTES)?;
        Ok::<_, ApiError>((tag, count, reservation))
    })();
    let (tag, count, reservation) = match checked {
        Ok(c) => c,
        Err(e) => return cx.now(Err(e)),
    };
    let numbers = cx.service().segment_numbers(&tag, count, None, Turn::Now);
    cx.answer(numbers, move |r| list(r, reservation))
}

fn list(
    ranges: Result<Vec<Range<u64>>, OpError>,
    reservation: Reservation,
) -> Result<Response<Body>, ApiError> {
    let body = Body::numbers(&ranges?, reservation);
    Ok(response::with_body(response::APPLICATION_JSON, body))
}

/// The tag as written in the path, percent-decoded (the store checks the naming rule). Bytes
/// that do not decode to UTF-8 are refused, never replaced: the server serves only the tag the
/// client sent.
pub fn decode(raw: &str) -> Result<Cow<'_, str>, OpError> {
    percent_encoding::percent_decode_str(raw)
        .decode_utf8()
        .map_err(|_| {
            SegmentError::InvalidTag {
                tag: shown_tag(raw),
                reason: "its percent-decoded bytes are not valid UTF-8".into(),
            }
            .into()
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_are_percent_decoded_or_refused_naming_the_tag() {
        assert_eq!(decode("a%3Ab").unwrap(), "a:b");
        assert_eq!(decode("a%zz").unwrap(), "a%zz");
        let err = ApiError::from(decode("a%CF").unwrap_err());
        assert_eq!(err.status(), 400);
        assert!(err.message.starts_with("invalid parameter tag: "), "{err}");
        assert!(
            err.message.contains("\"a%CF\"") && err.message.contains("UTF-8"),
            "{err}"
        );
    }

    #[test]
    fn store_refusals_map_to_statuses_naming_the_parameter() {
        let e = ApiError::from(OpError::from(SegmentError::UnknownTag {
            tag: "x".into(),
            db: "sqlite://d".into(),
        }));
        assert_eq!(e.status(), 404);
        assert!(e.message.contains("unknown tag \"x\""), "{e}");
        let e = ApiError::from(OpError::from(SegmentError::Timeout {
            tag: "x".into(),
            waited_ms: 5,
        }));
        assert_eq!((e.status().as_u16(), e.retry_after_s), (503, Some(1)));
        assert_eq!(
            ApiError::from(OpError::from(SegmentError::Closed)).status(),
            503
        );
    }
}
