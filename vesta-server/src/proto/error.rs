//! `ERROR` and `GOAWAY`: the error codes and the payload both frames share (code u16, then the
//! message as the rest of the payload, cut to [`MAX_MESSAGE_BYTES`](super::MAX_MESSAGE_BYTES)).

use bytes::{Buf, BufMut, Bytes, BytesMut};

use super::{ParseError, cut};
use crate::frame;

/// Bytes of the code before the message.
const CODE_LEN: usize = 2;

/// Why a request failed, as carried in an `ERROR` or `GOAWAY` frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u16)]
pub enum ErrorCode {
    /// Frame length below 5 (fatal).
    MalformedFrame = 1,
    /// Frame length above the limit (fatal).
    FrameTooLarge = 2,
    /// First frame not a valid `HELLO` (fatal).
    HandshakeRequired = 3,
    /// No protocol version in common (fatal).
    UnsupportedVersion = 4,
    /// An op the server does not know.
    UnknownOp = 5,
    /// Payload length does not match the op, or a second `HELLO`.
    BadPayload = 6,
    /// A batch count of 0 or above the cap; request id 0.
    InvalidArgument = 7,
    /// A field outside its range in `MAKE` or `TRANS_TIME`.
    FieldOutOfRange = 8,
    /// The server is not issuing now (lease not held): try another.
    Unavailable = 9,
    /// The clock stepped back beyond the tolerance: try later or another.
    ClockBehind = 10,
    /// The layout's time field is full.
    TimeExhausted = 11,
    /// The server's clock reads before the epoch.
    BeforeEpoch = 12,
    /// `max_connections` reached (fatal).
    TooManyConnections = 13,
    /// `GOAWAY`: the server is shutting down.
    ShuttingDown = 14,
    /// `GOAWAY`: no complete frame within the idle timeout.
    IdleTimeout = 15,
    /// A bug in the server (also any code this version does not know).
    Internal = 16,
    /// An ID request waited `max_wait_ms` for sequence space: the server is saturated; retry
    /// later or on another server.
    Saturated = 17,
    /// A segment request named a tag with no row in `leaf_alloc`.
    UnknownTag = 18,
    /// No segment number could be had: both segments of the tag used up and the database
    /// down or slower than `segment.wait_ms`, or the store not connected yet.
    SegmentUnavailable = 19,
    /// A segment request to a server without a segment database.
    SegmentsOff = 20,
    /// A sequence request to a server without a sequence database (`[seq] db`).
    SeqOff = 21,
    /// No number for the key now: its section needed the table, which failed, was slower than
    /// `seq.store_timeout_ms`, or moved under another process (the section is fenced).
    SeqUnavailable = 22,
    /// The key's set is served by another member of the sequences cluster: the message is that
    /// member's TCP address (`-` if it serves no TCP), a space, then the sentence. A client
    /// sends the request there.
    SeqMoved = 23,
    /// The key's set is between members of the sequences cluster (handed off, or its owner's
    /// lease ran out): retry shortly, at most a lease's length (`seq.cluster_ttl_ms`).
    SeqMoving = 24,
}

impl ErrorCode {
    /// The code for a wire value; unknown values read as `Internal`, as the protocol says.
    pub fn from_u16(code: u16) -> Self {
        use ErrorCode::*;
        match code {
            1 => MalformedFrame,
            2 => FrameTooLarge,
            3 => HandshakeRequired,
            4 => UnsupportedVersion,
            5 => UnknownOp,
            6 => BadPayload,
            7 => InvalidArgument,
            8 => FieldOutOfRange,
            9 => Unavailable,
            10 => ClockBehind,
            11 => TimeExhausted,
            12 => BeforeEpoch,
            13 => TooManyConnections,
            14 => ShuttingDown,
            15 => IdleTimeout,
            17 => Saturated,
            18 => UnknownTag,
            19 => SegmentUnavailable,
            20 => SegmentsOff,
            21 => SeqOff,
            22 => SeqUnavailable,
            23 => SeqMoved,
            24 => SeqMoving,
            _ => Internal,
        }
    }

    /// The wire value.
    pub const fn code(self) -> u16 {
        self as u16
    }

    /// The upper-case name used in docs/protocol.md.
    pub const fn name(self) -> &'static str {
        use ErrorCode::*;
        match self {
            MalformedFrame => "MALFORMED_FRAME",
            FrameTooLarge => "FRAME_TOO_LARGE",
            HandshakeRequired => "HANDSHAKE_REQUIRED",
            UnsupportedVersion => "UNSUPPORTED_VERSION",
            UnknownOp => "UNKNOWN_OP",
            BadPayload => "BAD_PAYLOAD",
            InvalidArgument => "INVALID_ARGUMENT",
            FieldOutOfRange => "FIELD_OUT_OF_RANGE",
            Unavailable => "UNAVAILABLE",
            ClockBehind => "CLOCK_BEHIND",
            TimeExhausted => "TIME_EXHAUSTED",
            BeforeEpoch => "BEFORE_EPOCH",
            TooManyConnections => "TOO_MANY_CONNECTIONS",
            ShuttingDown => "SHUTTING_DOWN",
            IdleTimeout => "IDLE_TIMEOUT",
            Internal => "INTERNAL",
            Saturated => "SATURATED",
            UnknownTag => "UNKNOWN_TAG",
            SegmentUnavailable => "SEGMENT_UNAVAILABLE",
            SegmentsOff => "SEGMENTS_OFF",
            SeqOff => "SEQ_OFF",
            SeqUnavailable => "SEQ_UNAVAILABLE",
            SeqMoved => "SEQ_MOVED",
            SeqMoving => "SEQ_MOVING",
        }
    }

    /// True if the same request may succeed on another server or a little later: a client
    /// retries these and fails over; the others go back to the caller.
    pub const fn is_retryable(self) -> bool {
        use ErrorCode::*;
        matches!(
            self,
            Unavailable | ClockBehind | TooManyConnections | ShuttingDown | IdleTimeout | Saturated
        )
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Appends an `ERROR` or `GOAWAY` frame (`frame_op`); the message is cut.
pub(super) fn encode(
    frame_op: u8,
    request_id: u32,
    code: ErrorCode,
    message: &str,
    out: &mut BytesMut,
) {
    let m = cut(message);
    frame::put_header(out, frame_op, request_id, CODE_LEN + m.len());
    out.put_u16(code.code());
    out.put_slice(m.as_bytes());
}

/// The code and message of an `ERROR` or `GOAWAY` payload; invalid UTF-8 is replaced, not
/// refused, so a client always sees the code.
pub(super) fn parse(payload: &Bytes) -> Result<(ErrorCode, String), ParseError> {
    if payload.len() < CODE_LEN {
        return Err(ParseError::BadLength {
            name: "ERROR",
            expected: format!("at least {CODE_LEN}"),
            got: payload.len(),
        });
    }
    let mut b = payload.clone();
    let code = ErrorCode::from_u16(b.get_u16());
    Ok((code, String::from_utf8_lossy(&b).into_owned()))
}
