//! Refusals as the TCP protocol says them: the one place an op's [`OpError`] becomes an
//! `ERROR` frame (its [`ErrorKind`] picks the code), and where every `ERROR` the server sends
//! is counted by code.
//!
//! | kind | code |
//! | --- | --- |
//! | `BadParameter` | `INVALID_ARGUMENT` (the message after the op's name) |
//! | `OutOfRange` | `FIELD_OUT_OF_RANGE` |
//! | `Off` | `INVALID_ARGUMENT` |
//! | `NotConfigured` | `SEQ_OFF` on a sequence op, else `SEGMENTS_OFF` |
//! | `UnknownTag` | `UNKNOWN_TAG` |
//! | `Unavailable` | `UNAVAILABLE` |
//! | `ClockBehind` | `CLOCK_BEHIND` |
//! | `TimeExhausted` | `TIME_EXHAUSTED` |
//! | `BeforeEpoch` | `BEFORE_EPOCH` |
//! | `Saturated` | `SATURATED` |
//! | `NoSegment`, `StoreDown` | `SEQ_UNAVAILABLE` on a sequence op, else `SEGMENT_UNAVAILABLE` |
//! | `Moved` | `SEQ_MOVED`, the message the owner's TCP address (`-`: none), a space, the sentence |
//! | `Moving` | `SEQ_MOVING` |
//! | `Internal` (and kinds added later) | `INTERNAL` |

use bytes::BytesMut;
use vesta_service::{ErrorKind, OpError};

use crate::metrics::TcpMetrics;
use crate::proto::{ErrorCode, Response, op};

/// The code of a refusal of `kind` answering a request of `op`.
pub(crate) fn code_of(op: u8, kind: ErrorKind) -> ErrorCode {
    let seq = matches!(op, op::SEQ_NEXT | op::SEQ_CURRENT);
    match kind {
        ErrorKind::NotConfigured if seq => ErrorCode::SeqOff,
        ErrorKind::NoSegment | ErrorKind::StoreDown if seq => ErrorCode::SeqUnavailable,
        ErrorKind::BadParameter | ErrorKind::Off => ErrorCode::InvalidArgument,
        ErrorKind::OutOfRange => ErrorCode::FieldOutOfRange,
        ErrorKind::NotConfigured => ErrorCode::SegmentsOff,
        ErrorKind::UnknownTag => ErrorCode::UnknownTag,
        ErrorKind::Unavailable => ErrorCode::Unavailable,
        ErrorKind::ClockBehind => ErrorCode::ClockBehind,
        ErrorKind::TimeExhausted => ErrorCode::TimeExhausted,
        ErrorKind::BeforeEpoch => ErrorCode::BeforeEpoch,
        ErrorKind::Saturated => ErrorCode::Saturated,
        ErrorKind::NoSegment | ErrorKind::StoreDown => ErrorCode::SegmentUnavailable,
        ErrorKind::Moved => ErrorCode::SeqMoved,
        ErrorKind::Moving => ErrorCode::SeqMoving,
        _ => ErrorCode::Internal,
    }
}

/// Appends the `ERROR` frame refusing request `request_id` of `op` for `e`, and counts it.
#[cold]
pub(crate) fn refuse(
    request_id: u32,
    op: u8,
    e: &OpError,
    metrics: &TcpMetrics,
    out: &mut BytesMut,
) {
    let code = code_of(op, e.kind());
    if e.kind() == ErrorKind::BadParameter {
        // "NEXT_IDS count 0 is out of range: allowed 1..=10"
        let message = format!("{} {}", op::name(op), e.message());
        send(request_id, code, &message, metrics, out);
    } else if let Some(owner) = e.owner() {
        // "127.0.0.1:7931 key 42: set 42 is served by member 931 (...)"
        let addr = if owner.tcp.is_empty() {
            "-"
        } else {
            &owner.tcp
        };
        send(
            request_id,
            code,
            &format!("{addr} {}", e.message()),
            metrics,
            out,
        );
    } else {
        send(request_id, code, e.message(), metrics, out);
    }
}

/// Appends an `ERROR` frame with `code` and `message`, and counts it.
pub(crate) fn send(
    request_id: u32,
    code: ErrorCode,
    message: &str,
    metrics: &TcpMetrics,
    out: &mut BytesMut,
) {
    metrics.error(code);
    Response::encode_error(request_id, code, message, out);
}

#[cfg(test)]
mod tests {
    use vesta_segment::SegmentError;

    use super::*;

    #[test]
    fn refusals_get_their_codes() {
        let code = |e: SegmentError| code_of(op::SEGMENT, OpError::from(e).kind());
        let unknown = SegmentError::UnknownTag {
            tag: "x".into(),
            db: "d".into(),
        };
        assert_eq!(code(unknown), ErrorCode::UnknownTag);
        let timeout = SegmentError::Timeout {
            tag: "x".into(),
            waited_ms: 1,
        };
        assert_eq!(code(timeout), ErrorCode::SegmentUnavailable);
        let bad = SegmentError::InvalidTag {
            tag: String::new(),
            reason: "empty".into(),
        };
        assert_eq!(code(bad), ErrorCode::InvalidArgument);
        assert_eq!(code(SegmentError::Closed), ErrorCode::SegmentUnavailable);
        let saturated = vesta_embed::IssueError::Saturated { waited_ms: 1 };
        assert_eq!(
            code_of(op::NEXT_ID, OpError::from(saturated).kind()),
            ErrorCode::Saturated
        );
        // The same kinds name the sequences on their ops.
        let down = ErrorKind::StoreDown;
        assert_eq!(code_of(op::SEQ_NEXT, down), ErrorCode::SeqUnavailable);
        assert_eq!(code_of(op::SEGMENTS, down), ErrorCode::SegmentUnavailable);
        let off = ErrorKind::NotConfigured;
        assert_eq!(code_of(op::SEQ_CURRENT, off), ErrorCode::SeqOff);
        assert_eq!(code_of(op::SEGMENT, off), ErrorCode::SegmentsOff);
    }
}
