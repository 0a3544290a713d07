//! `SEGMENT` → `NUMBER` and `SEGMENTS` → `NUMBERS`: Leaf-compatible segment numbers of a tag
//! (segment mode, `[segment] db`), one or a batch as ranges of consecutive numbers.
//!
//! A warm buffer answers at once; otherwise the request waits on the store (never blocking the
//! connection's task, at most `segment.wait_ms`) in the connection's queue of [`Pending`]
//! requests, so answers keep the order of the requests, ID requests included. A batch answer
//! never outgrows a frame: it holds at most as many ranges as fit, so a tag with a tiny step
//! may answer fewer numbers than asked (at least one; the client asks again for the rest).

#[cfg(feature = "server")]
use std::collections::VecDeque;
use std::ops::Range;
#[cfg(feature = "server")]
use std::sync::Arc;

use bytes::{Buf, BufMut, Bytes, BytesMut};
#[cfg(feature = "server")]
use vesta_core::Clock;
#[cfg(feature = "server")]
use vesta_segment::{MAX_BATCH, SegmentError};
#[cfg(feature = "server")]
use vesta_service::Segments;

#[cfg(feature = "server")]
use super::ErrorCode;
#[cfg(feature = "server")]
use super::apply::{EncodeNumbers, Numbers, Pending, ServerContext};
use super::{ParseError, Request, Response, exact, op};
use crate::frame;
#[cfg(feature = "server")]
use crate::metrics::TcpMetrics;

/// `SEGMENTS` starts with count u32, then the tag.
const COUNT_LEN: usize = 4;
/// `NUMBER`: number u64.
const NUMBER_LEN: usize = 8;
/// `NUMBERS` starts with range_count u16 ...
const RANGE_COUNT_LEN: usize = 2;
/// ... then range_count × (first u64, count u32).
const RANGE_LEN: usize = 8 + 4;

/// Bytes of a `NUMBERS` payload with `ranges` ranges.
pub(crate) const fn numbers_payload_len(ranges: usize) -> usize {
    RANGE_COUNT_LEN + ranges * RANGE_LEN
}

#[cfg(feature = "server")]
/// The most ranges a `NUMBERS` answer may carry in frames of `max_frame_bytes`.
pub(crate) fn max_ranges(max_frame_bytes: u32) -> usize {
    let room = (max_frame_bytes as usize).saturating_sub(frame::HEADER_BYTES + RANGE_COUNT_LEN);
    (room / RANGE_LEN).clamp(1, usize::from(u16::MAX))
}

/// The tag of a payload, exactly as sent: bytes that are not UTF-8 or a tag that breaks the
/// naming rule are refused here (`INVALID_ARGUMENT`, the reason named), never replaced, so the
/// server cannot serve a tag other than the one the client asked for.
fn tag_of(b: &[u8]) -> Result<String, ParseError> {
    let tag = std::str::from_utf8(b).map_err(|e| {
        let shown = String::from_utf8_lossy(&b[..b.len().min(64)]).into_owned();
        ParseError::InvalidTag(format!(
            "tag {shown:?} is not valid UTF-8 (byte {} of {})",
            e.valid_up_to(),
            b.len()
        ))
    })?;
    vesta_core::tag::check_tag(tag).map_err(|e| ParseError::InvalidTag(e.to_string()))?;
    Ok(tag.to_owned())
}

pub(super) fn parse_one(payload: &Bytes) -> Result<Request, ParseError> {
    Ok(Request::Segment {
        tag: tag_of(payload)?,
    })
}

pub(super) fn parse_many(payload: &Bytes) -> Result<Request, ParseError> {
    if payload.len() < COUNT_LEN {
        return Err(ParseError::BadLength {
            name: "SEGMENTS",
            expected: format!("{COUNT_LEN} + the tag's length"),
            got: payload.len(),
        });
    }
    let mut b = payload.clone();
    let count = b.get_u32();
    Ok(Request::Segments {
        count,
        tag: tag_of(&b)?,
    })
}

pub(super) fn encode_one(request_id: u32, tag: &str, out: &mut BytesMut) {
    frame::put_header(out, op::SEGMENT, request_id, tag.len());
    out.put_slice(tag.as_bytes());
}

pub(super) fn encode_many(request_id: u32, count: u32, tag: &str, out: &mut BytesMut) {
    frame::put_header(out, op::SEGMENTS, request_id, COUNT_LEN + tag.len());
    out.put_u32(count);
    out.put_slice(tag.as_bytes());
}

pub(super) fn encode_number(request_id: u32, number: u64, out: &mut BytesMut) {
    frame::put_header(out, op::SEGMENT | op::ANSWER, request_id, NUMBER_LEN);
    out.put_u64(number);
}

pub(super) fn encode_numbers(request_id: u32, ranges: &[Range<u64>], out: &mut BytesMut) {
    let len = numbers_payload_len(ranges.len());
    frame::put_header(out, op::SEGMENTS | op::ANSWER, request_id, len);
    out.put_u16(ranges.len() as u16);
    for r in ranges {
        out.put_u64(r.start);
        out.put_u32((r.end - r.start) as u32);
    }
}

pub(super) fn parse_number(payload: &Bytes) -> Result<Response, ParseError> {
    let mut b = exact("NUMBER", payload, NUMBER_LEN)?;
    Ok(Response::Number(b.get_u64()))
}

pub(super) fn parse_numbers(payload: &Bytes) -> Result<Response, ParseError> {
    let bad = |expected: String| ParseError::BadLength {
        name: "NUMBERS",
        expected,
        got: payload.len(),
    };
    if payload.len() < RANGE_COUNT_LEN {
        return Err(bad(format!(
            "{RANGE_COUNT_LEN} + {RANGE_LEN} * range_count"
        )));
    }
    let mut b = payload.clone();
    let n = b.get_u16() as usize;
    if payload.len() != numbers_payload_len(n) {
        return Err(bad(numbers_payload_len(n).to_string()));
    }
    let ranges = (0..n)
        .map(|_| {
            let first = b.get_u64();
            first..first.saturating_add(u64::from(b.get_u32()))
        })
        .collect();
    Ok(Response::Numbers(ranges))
}

#[cfg(feature = "server")]
/// `SEGMENT`: the tag's next number, answered now from a warm buffer, else queued.
pub(crate) fn apply_one<C: Clock>(
    ctx: &ServerContext<C>,
    request_id: u32,
    tag: String,
    pending: &mut VecDeque<Pending>,
    out: &mut BytesMut,
) {
    let Some(segments) = on(ctx, request_id, out) else {
        return;
    };
    if pending.is_empty()
        && let Ok(store) = segments.store()
        && let Some(n) = store.next_buffered(&tag)
    {
        segments.issued(1);
        return encode_number(request_id, n, out);
    }
    let s = Arc::clone(segments);
    let numbers: Numbers = Box::pin(async move {
        let n = s.store()?.next(&tag).await?;
        Ok(std::iter::once(n..n + 1).collect())
    });
    wait(
        ctx,
        request_id,
        encode_one_of,
        numbers,
        segments,
        pending,
        out,
    );
}

#[cfg(feature = "server")]
/// `SEGMENTS`: `count` numbers (1..=max_batch) as ranges, at most as many ranges as fit a frame.
pub(crate) fn apply_many<C: Clock>(
    ctx: &ServerContext<C>,
    request_id: u32,
    count: u32,
    tag: String,
    pending: &mut VecDeque<Pending>,
    out: &mut BytesMut,
) {
    let Some(segments) = on(ctx, request_id, out) else {
        return;
    };
    let max = ctx.limits.max_batch.min(MAX_BATCH);
    if count == 0 || u64::from(count) > max {
        let msg = format!("SEGMENTS count {count} is out of range: allowed 1..={max}");
        ctx.metrics.error(ErrorCode::InvalidArgument);
        return Response::encode_error(request_id, ErrorCode::InvalidArgument, &msg, out);
    }
    let max_ranges = max_ranges(ctx.limits.max_frame_bytes);
    let s = Arc::clone(segments);
    let numbers: Numbers = Box::pin(async move {
        s.store()?
            .next_n_within(&tag, u64::from(count), max_ranges)
            .await
    });
    wait(
        ctx,
        request_id,
        encode_numbers,
        numbers,
        segments,
        pending,
        out,
    );
}

#[cfg(feature = "server")]
fn encode_one_of(request_id: u32, ranges: &[Range<u64>], out: &mut BytesMut) {
    match ranges.first() {
        Some(r) => encode_number(request_id, r.start, out),
        None => Response::encode_error(
            request_id,
            ErrorCode::Internal,
            "the store answered no number",
            out,
        ),
    }
}

#[cfg(feature = "server")]
/// The server's segments, or the `SEGMENTS_OFF` answer.
fn on<'a, C: Clock>(
    ctx: &'a ServerContext<C>,
    request_id: u32,
    out: &mut BytesMut,
) -> Option<&'a Arc<Segments>> {
    let segments = ctx.segments.as_ref();
    if segments.is_none() {
        let msg =
            "segment mode is off: this server has no segment database ([segment] db in its config)";
        ctx.metrics.error(ErrorCode::SegmentsOff);
        Response::encode_error(request_id, ErrorCode::SegmentsOff, msg, out);
    }
    segments
}

#[cfg(feature = "server")]
/// Answers now if nothing of this connection waits and the numbers are there after one poll;
/// else queues the request behind the connection's waiting ones.
fn wait<C: Clock>(
    ctx: &ServerContext<C>,
    request_id: u32,
    encode: EncodeNumbers,
    numbers: Numbers,
    segments: &Arc<Segments>,
    pending: &mut VecDeque<Pending>,
    out: &mut BytesMut,
) {
    let mut p = Pending::numbers(request_id, encode, numbers, Arc::clone(segments));
    if pending.is_empty()
        && let Some(outcome) = p.try_take()
    {
        return p.answer(outcome, &ctx.metrics, out);
    }
    pending.push_back(p);
}

#[cfg(feature = "server")]
/// The error code of a store's refusal.
pub(crate) fn code_of(e: &SegmentError) -> ErrorCode {
    match e {
        SegmentError::InvalidTag { .. } | SegmentError::OutOfRange { .. } => {
            ErrorCode::InvalidArgument
        }
        SegmentError::UnknownTag { .. } => ErrorCode::UnknownTag,
        SegmentError::Unavailable { .. }
        | SegmentError::Timeout { .. }
        | SegmentError::WouldBlock { .. }
        | SegmentError::Unreachable { .. }
        | SegmentError::Database { .. }
        | SegmentError::MissingTable { .. }
        | SegmentError::Inconsistent { .. }
        | SegmentError::MovedBack { .. }
        | SegmentError::Closed => ErrorCode::SegmentUnavailable,
        _ => ErrorCode::Internal,
    }
}

#[cfg(feature = "server")]
/// Appends the error frame for a store's refusal, and counts it.
pub(super) fn refused(request_id: u32, e: &SegmentError, metrics: &TcpMetrics, out: &mut BytesMut) {
    let code = code_of(e);
    metrics.error(code);
    Response::encode_error(request_id, code, &e.to_string(), out);
}

#[cfg(all(test, feature = "server"))]
mod tests {
    use super::*;
    use crate::proto::apply::testing::{answer, context};
    use vesta_core::IdType;

    #[test]
    fn a_numbers_answer_of_max_ranges_fits_its_frame() {
        for frame in [2048, 65536, 16 << 20] {
            let n = max_ranges(frame);
            assert!(
                frame::HEADER_BYTES + numbers_payload_len(n) <= frame as usize,
                "{frame}"
            );
            assert!(n <= usize::from(u16::MAX));
        }
        assert_eq!(max_ranges(2048), 170);
    }

    #[tokio::test]
    async fn without_a_database_the_ops_answer_segments_off() {
        let (ctx, _clock) = context(IdType::MaxPeak, 10);
        let (mut pending, mut out) = (VecDeque::new(), BytesMut::new());
        apply_one(&ctx, 5, "orders".into(), &mut pending, &mut out);
        let (5, Response::Error { code, message }) = answer(&mut out) else {
            panic!("not an error");
        };
        assert_eq!(code, ErrorCode::SegmentsOff);
        assert!(message.contains("[segment] db"), "{message}");
        apply_many(&ctx, 6, 3, "orders".into(), &mut pending, &mut out);
        assert!(matches!(
            answer(&mut out),
            (
                6,
                Response::Error {
                    code: ErrorCode::SegmentsOff,
                    ..
                }
            )
        ));
        assert!(pending.is_empty());
    }

    #[test]
    fn refusals_get_their_codes() {
        let unknown = SegmentError::UnknownTag {
            tag: "x".into(),
            db: "d".into(),
        };
        assert_eq!(code_of(&unknown), ErrorCode::UnknownTag);
        let timeout = SegmentError::Timeout {
            tag: "x".into(),
            waited_ms: 1,
        };
        assert_eq!(code_of(&timeout), ErrorCode::SegmentUnavailable);
        let bad = SegmentError::InvalidTag {
            tag: String::new(),
            reason: "empty".into(),
        };
        assert_eq!(code_of(&bad), ErrorCode::InvalidArgument);
        assert_eq!(
            code_of(&SegmentError::Closed),
            ErrorCode::SegmentUnavailable
        );
    }
}
