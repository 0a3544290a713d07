//! The messages of protocol versions 1 to 3 (docs/protocol.md): typed requests and answers over
//! [`Frame`]s, their op codes and the error codes. Parsing checks every payload length exactly and
//! never panics; encoding appends to a caller's buffer so a whole pipeline goes out in one write.
//! What differs between the versions (the layout, `INFO`, `EXPLAIN`, `MAKE`) is read and written
//! in the connection's [`Dialect`].
//!
//! The codec only, shared by the client and the server alike (mini-redis's `frame` and `cmd`
//! without the `apply`): one module per op owns its request and its answer — the payload
//! layout with its length as a named constant, parse and encode of both directions.
//! [`Request`] and [`Response`] only dispatch to them. What the server does with a request is
//! in the server (`server/apply.rs`, onto `vesta_service`'s ops).
//! Adding an op: a new `<op>.rs` here, its code and name in [`op`], a variant in [`Request`]
//! and [`Response`] with one dispatch line in each of their `parse`/`encode`, then its server
//! side, and its section in docs/protocol.md.

mod dialect;
mod error;
mod explain;
mod hello;
mod info;
mod make;
mod next_id;
mod next_ids;
mod ping;
mod segment;
mod seq;
mod trans_time;

#[cfg(test)]
mod tests;

use std::ops::Range;

use bytes::{Bytes, BytesMut};
use vesta_core::{Explanation, FieldValues, IdRun, Layout};

use crate::frame::Frame;

pub use dialect::Dialect;
pub use error::ErrorCode;
pub use info::{ServerInfo, ServerMachine};
pub(crate) use make::fits_v1;
pub use next_ids::ids_payload_len;
pub use segment::{max_ranges, numbers_payload_len};

/// The newest protocol version this crate speaks (2: any layout, carried in `HELLO_OK`; 3:
/// `INFO_OK` lists every machine ID the server holds).
pub const VERSION: u8 = 3;
/// Oldest version this crate speaks.
pub const MIN_VERSION: u8 = 1;
/// The magic at the start of a `HELLO` payload.
pub const MAGIC: [u8; 4] = *b"VSTA";
/// The default cap on `NEXT_IDS` counts.
pub const DEFAULT_MAX_BATCH: u32 = 65_536;
/// Longest message text in an error, `GOAWAY` or info reason; longer text is cut.
pub const MAX_MESSAGE_BYTES: usize = 1024;

/// Op codes. Answers are the request's op with the top bit set.
pub mod op {
    /// Handshake.
    pub const HELLO: u8 = 0x01;
    /// Liveness check.
    pub const PING: u8 = 0x02;
    /// Server description.
    pub const INFO: u8 = 0x03;
    /// One ID.
    pub const NEXT_ID: u8 = 0x10;
    /// A batch of IDs as runs.
    pub const NEXT_IDS: u8 = 0x11;
    /// Take an ID apart.
    pub const EXPLAIN: u8 = 0x12;
    /// Build an ID from fields.
    pub const MAKE: u8 = 0x13;
    /// Time value to instant.
    pub const TRANS_TIME: u8 = 0x14;
    /// One segment number of a tag (segment mode).
    pub const SEGMENT: u8 = 0x20;
    /// Segment numbers of a tag as ranges (segment mode).
    pub const SEGMENTS: u8 = 0x21;
    /// A key's next numbers (per-key sequences).
    pub const SEQ_NEXT: u8 = 0x30;
    /// A key's current number (per-key sequences).
    pub const SEQ_CURRENT: u8 = 0x31;
    /// Bit set on every answer op.
    pub const ANSWER: u8 = 0x80;
    /// An error answering one request (or the connection, with id 0).
    pub const ERROR: u8 = 0xfe;
    /// The server will read nothing more on this connection.
    pub const GOAWAY: u8 = 0xff;

    /// The name of a request op in docs/protocol.md (`NEXT_IDS`), `UNKNOWN` for another.
    pub const fn name(op: u8) -> &'static str {
        match op {
            HELLO => "HELLO",
            PING => "PING",
            INFO => "INFO",
            NEXT_ID => "NEXT_ID",
            NEXT_IDS => "NEXT_IDS",
            EXPLAIN => "EXPLAIN",
            MAKE => "MAKE",
            TRANS_TIME => "TRANS_TIME",
            SEGMENT => "SEGMENT",
            SEGMENTS => "SEGMENTS",
            SEQ_NEXT => "SEQ_NEXT",
            SEQ_CURRENT => "SEQ_CURRENT",
            _ => "UNKNOWN",
        }
    }
}

/// A request, as a client sends it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Request {
    /// Handshake: magic and the versions the client speaks.
    Hello {
        /// Oldest version spoken.
        min_version: u8,
        /// Newest version spoken.
        max_version: u8,
    },
    /// Liveness check.
    Ping,
    /// Server description.
    Info,
    /// One ID.
    NextId,
    /// `count` IDs as contiguous runs.
    NextIds {
        /// How many (1..=max_batch).
        count: u32,
    },
    /// Take an ID apart in the server's layout.
    Explain {
        /// The ID.
        id: u64,
    },
    /// Build an ID from field values by name (range-checked by the server).
    Make(FieldValues),
    /// The instant a time value's unit starts.
    TransTime {
        /// Whole units since the epoch.
        time: u64,
    },
    /// The next segment number of a tag.
    Segment {
        /// The tag (`biz_tag` of `leaf_alloc`).
        tag: String,
    },
    /// `count` segment numbers of a tag, as ranges.
    Segments {
        /// How many (1..=max_batch); the answer may hold fewer when its ranges fill a frame.
        count: u32,
        /// The tag.
        tag: String,
    },
    /// The next `count` numbers of a key (the last one answered).
    SeqNext {
        /// How many (1..=the server's step).
        count: u32,
        /// The key as sent: a decimal `u64` or UTF-8 text (checked by the server).
        key: Bytes,
    },
    /// A key's current number, not moved.
    SeqCurrent {
        /// The key as sent.
        key: Bytes,
    },
}

/// An answer, as the server sends it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Response {
    /// Handshake accepted.
    HelloOk {
        /// The version in use on this connection.
        version: u8,
        /// Largest frame length the server accepts and sends.
        max_frame_bytes: u32,
        /// Largest `NEXT_IDS` count.
        max_batch: u32,
        /// The server's layout (version 2 and later).
        layout: Option<Layout>,
    },
    /// Answer to `PING`.
    Pong,
    /// Answer to `INFO`.
    Info(ServerInfo),
    /// One ID.
    Id(u64),
    /// IDs as runs (counts add up to the request's count).
    Ids(Vec<IdRun>),
    /// An explained ID (checked against the connection's layout).
    Explained(Explanation),
    /// A made ID.
    Made(u64),
    /// The start of a time unit, ms since 1970.
    Time(u64),
    /// A segment number.
    Number(u64),
    /// Segment numbers as ranges of consecutive numbers, increasing.
    Numbers(Vec<Range<u64>>),
    /// A key's numbers: `last - count + 1 ..= last`.
    Seq {
        /// The last number of the call.
        last: u64,
        /// How many the call took.
        count: u32,
    },
    /// A key's current number.
    SeqCurrent(u64),
    /// The request failed.
    Error {
        /// Why.
        code: ErrorCode,
        /// One line for people.
        message: String,
    },
    /// The server reads nothing more on this connection.
    GoAway {
        /// Why (`SHUTTING_DOWN`, `IDLE_TIMEOUT`).
        code: ErrorCode,
        /// One line for people.
        message: String,
    },
}

/// A frame whose payload does not fit its op.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// The op is not one this version knows in this direction.
    #[error("unknown op {op:#04x}")]
    UnknownOp {
        /// The op.
        op: u8,
    },
    /// The payload has the wrong length for the op.
    #[error("{name} payload must be {expected} bytes, got {got}")]
    BadLength {
        /// The op's name.
        name: &'static str,
        /// Expected length (or a description).
        expected: String,
        /// Actual length.
        got: usize,
    },
    /// The `HELLO` magic is wrong.
    #[error("HELLO magic must be \"VSTA\"")]
    BadMagic,
    /// A value breaks the protocol's rules, e.g. an `IDS` run that leaves its time unit: a
    /// broken or hostile server's answer, refused rather than handed on as IDs.
    #[error("{name} is not valid: {reason}")]
    BadValue {
        /// The op's name.
        name: &'static str,
        /// Which value and why.
        reason: String,
    },
    /// A `SEGMENT`/`SEGMENTS` tag that is not UTF-8 or breaks the tag rule: refused as it
    /// was sent, never decoded lossily into a different tag.
    #[error("{0}")]
    InvalidTag(String),
}

impl ParseError {
    /// The code a server answers this with: `UNKNOWN_OP` for an op it does not know,
    /// `INVALID_ARGUMENT` for a tag that breaks the tag rule, else `BAD_PAYLOAD`.
    pub const fn code(&self) -> ErrorCode {
        match self {
            ParseError::UnknownOp { .. } => ErrorCode::UnknownOp,
            ParseError::InvalidTag(_) => ErrorCode::InvalidArgument,
            _ => ErrorCode::BadPayload,
        }
    }
}

/// The payload, to read from, if it is exactly `len` bytes long (`name`: the message, for the
/// error).
fn exact(name: &'static str, payload: &Bytes, len: usize) -> Result<Bytes, ParseError> {
    if payload.len() == len {
        Ok(payload.clone())
    } else {
        Err(ParseError::BadLength {
            name,
            expected: len.to_string(),
            got: payload.len(),
        })
    }
}

/// `text` cut to [`MAX_MESSAGE_BYTES`] on a character boundary.
fn cut(text: &str) -> &str {
    cut_to(text, MAX_MESSAGE_BYTES)
}

/// `text` cut to at most `max` bytes, on a character boundary.
fn cut_to(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

impl Request {
    /// The op code.
    pub const fn op(&self) -> u8 {
        match self {
            Request::Hello { .. } => op::HELLO,
            Request::Ping => op::PING,
            Request::Info => op::INFO,
            Request::NextId => op::NEXT_ID,
            Request::NextIds { .. } => op::NEXT_IDS,
            Request::Explain { .. } => op::EXPLAIN,
            Request::Make(_) => op::MAKE,
            Request::TransTime { .. } => op::TRANS_TIME,
            Request::Segment { .. } => op::SEGMENT,
            Request::Segments { .. } => op::SEGMENTS,
            Request::SeqNext { .. } => op::SEQ_NEXT,
            Request::SeqCurrent { .. } => op::SEQ_CURRENT,
        }
    }

    /// Parses a request frame of a connection speaking `dialect`; a payload of the wrong length
    /// or an answer op is an error.
    pub fn parse(frame: &Frame, dialect: &Dialect) -> Result<Request, ParseError> {
        let p = &frame.payload;
        match frame.op {
            op::HELLO => hello::parse_request(p),
            op::PING => ping::parse_request(p),
            op::INFO => info::parse_request(p),
            op::NEXT_ID => next_id::parse_request(p),
            op::NEXT_IDS => next_ids::parse_request(p),
            op::EXPLAIN => explain::parse_request(p),
            op::MAKE => make::parse_request(p, dialect),
            op::TRANS_TIME => trans_time::parse_request(p),
            op::SEGMENT => segment::parse_one(p),
            op::SEGMENTS => segment::parse_many(p),
            op::SEQ_NEXT => seq::parse_next(p),
            op::SEQ_CURRENT => seq::parse_current(p),
            other => Err(ParseError::UnknownOp { op: other }),
        }
    }

    /// Appends the request as a frame with `request_id`, in `dialect`.
    pub fn encode(&self, request_id: u32, dialect: &Dialect, out: &mut BytesMut) {
        match self {
            Request::Hello {
                min_version,
                max_version,
            } => hello::encode_request(request_id, *min_version, *max_version, out),
            Request::Ping => ping::encode_request(request_id, out),
            Request::Info => info::encode_request(request_id, out),
            Request::NextId => next_id::encode_request(request_id, out),
            Request::NextIds { count } => next_ids::encode_request(request_id, *count, out),
            Request::Explain { id } => explain::encode_request(request_id, *id, out),
            Request::Make(f) => make::encode_request(request_id, f, dialect, out),
            Request::TransTime { time } => trans_time::encode_request(request_id, *time, out),
            Request::Segment { tag } => segment::encode_one(request_id, tag, out),
            Request::Segments { count, tag } => segment::encode_many(request_id, *count, tag, out),
            Request::SeqNext { count, key } => seq::encode_next(request_id, *count, key, out),
            Request::SeqCurrent { key } => seq::encode_current(request_id, key, out),
        }
    }
}

impl Response {
    /// Appends a `ID` answer: the hot path, without building a `Response`.
    #[inline]
    pub fn encode_id(request_id: u32, id: u64, out: &mut BytesMut) {
        next_id::encode_answer(request_id, id, out);
    }

    /// Appends an `IDS` answer from runs.
    pub fn encode_ids(request_id: u32, runs: &[IdRun], out: &mut BytesMut) {
        next_ids::encode_answer(request_id, runs, out);
    }

    /// Appends a `NUMBER` answer.
    pub fn encode_number(request_id: u32, number: u64, out: &mut BytesMut) {
        segment::encode_number(request_id, number, out);
    }

    /// Appends a `NUMBERS` answer from ranges (at most [`max_ranges`] of the frame limit).
    pub fn encode_numbers(request_id: u32, ranges: &[Range<u64>], out: &mut BytesMut) {
        segment::encode_numbers(request_id, ranges, out);
    }

    /// Appends a `SEQ` answer: the last number of a call of `count`.
    pub fn encode_seq(request_id: u32, last: u64, count: u32, out: &mut BytesMut) {
        seq::encode_seq(request_id, last, count, out);
    }

    /// Appends a `SEQ_CURRENT` answer.
    pub fn encode_seq_current(request_id: u32, current: u64, out: &mut BytesMut) {
        seq::encode_seq_current(request_id, current, out);
    }

    /// Appends an `ERROR` answer; the message is cut to [`MAX_MESSAGE_BYTES`].
    pub fn encode_error(request_id: u32, code: ErrorCode, message: &str, out: &mut BytesMut) {
        error::encode(op::ERROR, request_id, code, message, out);
    }

    /// Appends the answer as a frame with `request_id`, in `dialect`.
    pub fn encode(&self, request_id: u32, dialect: &Dialect, out: &mut BytesMut) {
        match self {
            Response::HelloOk {
                version,
                max_frame_bytes,
                max_batch,
                layout,
            } => hello::encode_answer(
                request_id,
                *version,
                *max_frame_bytes,
                *max_batch,
                layout.as_ref(),
                out,
            ),
            Response::Pong => ping::encode_answer(request_id, out),
            Response::Info(i) => info::encode_answer(request_id, i, dialect, out),
            Response::Id(id) => next_id::encode_answer(request_id, *id, out),
            Response::Ids(runs) => next_ids::encode_answer(request_id, runs, out),
            Response::Explained(x) => explain::encode_answer(request_id, x, dialect, out),
            Response::Made(id) => make::encode_answer(request_id, *id, out),
            Response::Time(ms) => trans_time::encode_answer(request_id, *ms, out),
            Response::Number(n) => segment::encode_number(request_id, *n, out),
            Response::Numbers(ranges) => segment::encode_numbers(request_id, ranges, out),
            Response::Seq { last, count } => seq::encode_seq(request_id, *last, *count, out),
            Response::SeqCurrent(n) => seq::encode_seq_current(request_id, *n, out),
            Response::Error { code, message } => {
                error::encode(op::ERROR, request_id, *code, message, out)
            }
            Response::GoAway { code, message } => {
                error::encode(op::GOAWAY, request_id, *code, message, out)
            }
        }
    }

    /// Parses an answer frame of a connection speaking `dialect`; a payload of the wrong length
    /// or a request op is an error.
    pub fn parse(frame: &Frame, dialect: &Dialect) -> Result<Response, ParseError> {
        let p = &frame.payload;
        match frame.op {
            op::ERROR => error::parse(p).map(|(code, message)| Response::Error { code, message }),
            op::GOAWAY => error::parse(p).map(|(code, message)| Response::GoAway { code, message }),
            // An answer op without its top bit is the request op; a request op gets it set and
            // matches nothing below.
            answer => match answer ^ op::ANSWER {
                op::HELLO => hello::parse_answer(p),
                op::PING => ping::parse_answer(p),
                op::INFO => info::parse_answer(p, dialect),
                op::NEXT_ID => next_id::parse_answer(p),
                op::NEXT_IDS => next_ids::parse_answer(p, dialect),
                op::EXPLAIN => explain::parse_answer(p, dialect),
                op::MAKE => make::parse_answer(p),
                op::TRANS_TIME => trans_time::parse_answer(p),
                op::SEGMENT => segment::parse_number(p),
                op::SEGMENTS => segment::parse_numbers(p),
                op::SEQ_NEXT => seq::parse_seq(p),
                op::SEQ_CURRENT => seq::parse_seq_current(p),
                _ => Err(ParseError::UnknownOp { op: answer }),
            },
        }
    }
}
