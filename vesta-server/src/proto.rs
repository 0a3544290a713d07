//! The messages of protocol version 1 (docs/protocol.md): typed requests and answers over
//! [`Frame`]s, their op codes and the error codes. Parsing checks every payload length exactly and
//! never panics; encoding appends to a caller's buffer so a whole pipeline goes out in one write.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use vesta_core::{Explanation, GenMethod, IdFields, IdRun, IdType};
use vesta_embed::LeaseState;

use crate::frame::{self, Frame};

/// The protocol version this crate speaks.
pub const VERSION: u8 = 1;
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
    /// Bit set on every answer op.
    pub const ANSWER: u8 = 0x80;
    /// An error answering one request (or the connection, with id 0).
    pub const ERROR: u8 = 0xfe;
    /// The server will read nothing more on this connection.
    pub const GOAWAY: u8 = 0xff;
}

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
        }
    }

    /// True if the same request may succeed on another server or a little later: a client
    /// retries these and fails over; the others go back to the caller.
    pub const fn is_retryable(self) -> bool {
        use ErrorCode::*;
        matches!(
            self,
            Unavailable | ClockBehind | TooManyConnections | ShuttingDown | IdleTimeout
        )
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
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
    /// Take an ID apart with the server's epoch.
    Explain {
        /// The ID.
        id: u64,
    },
    /// Build an ID from raw field values (range-checked by the server).
    Make(RawFields),
    /// The instant a time value's unit starts.
    TransTime {
        /// Whole units since the epoch.
        time: u64,
    },
}

/// Field values as sent in `MAKE`: wider than the fields, so the server can name a value that
/// does not fit instead of the wire silently truncating it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RawFields {
    /// 0 or 1.
    pub version: u8,
    /// 0 max-peak, 1 min-granularity.
    pub id_type: u8,
    /// 0..=3.
    pub gen_method: u8,
    /// Whole units since the epoch.
    pub time: u64,
    /// Sequence within the unit.
    pub seq: u64,
    /// Machine ID.
    pub machine: u64,
}

impl From<&IdFields> for RawFields {
    fn from(f: &IdFields) -> Self {
        RawFields {
            version: f.version,
            id_type: f.id_type.code() as u8,
            gen_method: f.gen_method.code() as u8,
            time: f.time,
            seq: f.seq,
            machine: f.machine,
        }
    }
}

impl RawFields {
    /// The typed fields, or the first field that does not fit, named.
    pub fn to_fields(&self) -> Result<IdFields, vesta_core::FieldError> {
        let fields = IdFields {
            version: self.version,
            id_type: IdType::from_code(u64::from(self.id_type))?,
            gen_method: GenMethod::from_code(u64::from(self.gen_method))?,
            time: self.time,
            seq: self.seq,
            machine: self.machine,
        };
        fields.encode()?;
        Ok(fields)
    }
}

/// An explained ID as the server sends it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct WireExplanation {
    /// The ID.
    pub id: u64,
    /// Bit 63.
    pub version: u8,
    /// Type bit.
    pub id_type: u8,
    /// genMethod field.
    pub gen_method: u8,
    /// Time field.
    pub time: u64,
    /// Sequence field.
    pub seq: u32,
    /// Machine field.
    pub machine: u16,
    /// Start of the ID's time unit, ms since 1970 (server's epoch).
    pub unix_ms: u64,
}

impl From<Explanation> for WireExplanation {
    /// The fields fit their wire widths: decoding never yields a wider value.
    fn from(x: Explanation) -> Self {
        let f = x.fields;
        WireExplanation {
            id: x.id,
            version: f.version,
            id_type: f.id_type.code() as u8,
            gen_method: f.gen_method.code() as u8,
            time: f.time,
            seq: f.seq as u32,
            machine: f.machine as u16,
            unix_ms: x.unix_ms,
        }
    }
}

/// The server's description, answered to `INFO`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerInfo {
    /// Machine ID in use.
    pub machine: u16,
    /// genMethod of issued IDs (1).
    pub gen_method: u8,
    /// Layout type of issued IDs.
    pub id_type: u8,
    /// Version bit of issued IDs.
    pub id_version: u8,
    /// Lease state code: 0 static, 1 acquiring, 2 held, 3 fenced, 4 released.
    pub lease_state: u8,
    /// Width of the sequence field.
    pub seq_bits: u8,
    /// Width of the time field.
    pub time_bits: u8,
    /// Length of one time unit.
    pub unit_ms: u32,
    /// The epoch, ms since 1970.
    pub epoch_ms: u64,
    /// First machine ID of the server pool.
    pub server_pool_start: u16,
    /// Time value of the last issued ID.
    pub last_issued_time: u64,
    /// The layout's last representable instant, ms since 1970.
    pub end_of_life_ms: u64,
    /// Largest `NEXT_IDS` count.
    pub max_batch: u32,
    /// Largest frame length.
    pub max_frame_bytes: u32,
    /// Connections open now.
    pub connections: u32,
    /// Why the server is not issuing, or empty.
    pub reason: String,
}

impl ServerInfo {
    /// The lease state as a name (`static`, `held`, ...), `unknown` for a code this version does
    /// not know.
    pub fn lease_state_name(&self) -> &'static str {
        lease_state_from_code(self.lease_state).map_or("unknown", LeaseState::name)
    }

    /// The layout type, if the code is valid.
    pub fn layout_type(&self) -> Option<IdType> {
        IdType::from_code(u64::from(self.id_type)).ok()
    }
}

/// The wire code of a lease state.
pub const fn lease_state_code(s: LeaseState) -> u8 {
    match s {
        LeaseState::Static => 0,
        LeaseState::Acquiring => 1,
        LeaseState::Held => 2,
        LeaseState::Fenced => 3,
        LeaseState::Released => 4,
    }
}

/// The lease state of a wire code.
pub const fn lease_state_from_code(c: u8) -> Option<LeaseState> {
    match c {
        0 => Some(LeaseState::Static),
        1 => Some(LeaseState::Acquiring),
        2 => Some(LeaseState::Held),
        3 => Some(LeaseState::Fenced),
        4 => Some(LeaseState::Released),
        _ => None,
    }
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
    },
    /// Answer to `PING`.
    Pong,
    /// Answer to `INFO`.
    Info(ServerInfo),
    /// One ID.
    Id(u64),
    /// IDs as runs (counts add up to the request's count).
    Ids(Vec<IdRun>),
    /// An explained ID.
    Explained(WireExplanation),
    /// A made ID.
    Made(u64),
    /// The start of a time unit, ms since 1970.
    Time(u64),
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
}

fn expect_len(name: &'static str, payload: &Bytes, len: usize) -> Result<(), ParseError> {
    if payload.len() == len {
        Ok(())
    } else {
        Err(ParseError::BadLength {
            name,
            expected: len.to_string(),
            got: payload.len(),
        })
    }
}

fn cut(text: &str) -> &str {
    if text.len() <= MAX_MESSAGE_BYTES {
        return text;
    }
    let mut end = MAX_MESSAGE_BYTES;
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
        }
    }

    /// Parses a request frame; a payload of the wrong length or an answer op is an error.
    pub fn parse(frame: &Frame) -> Result<Request, ParseError> {
        let p = &frame.payload;
        let mut b = p.clone();
        Ok(match frame.op {
            op::HELLO => {
                expect_len("HELLO", p, 6)?;
                if b[..4] != MAGIC {
                    return Err(ParseError::BadMagic);
                }
                b.advance(4);
                Request::Hello {
                    min_version: b.get_u8(),
                    max_version: b.get_u8(),
                }
            }
            op::PING => {
                expect_len("PING", p, 0)?;
                Request::Ping
            }
            op::INFO => {
                expect_len("INFO", p, 0)?;
                Request::Info
            }
            op::NEXT_ID => {
                expect_len("NEXT_ID", p, 0)?;
                Request::NextId
            }
            op::NEXT_IDS => {
                expect_len("NEXT_IDS", p, 4)?;
                Request::NextIds { count: b.get_u32() }
            }
            op::EXPLAIN => {
                expect_len("EXPLAIN", p, 8)?;
                Request::Explain { id: b.get_u64() }
            }
            op::MAKE => {
                expect_len("MAKE", p, 27)?;
                Request::Make(RawFields {
                    version: b.get_u8(),
                    id_type: b.get_u8(),
                    gen_method: b.get_u8(),
                    time: b.get_u64(),
                    seq: b.get_u64(),
                    machine: b.get_u64(),
                })
            }
            op::TRANS_TIME => {
                expect_len("TRANS_TIME", p, 8)?;
                Request::TransTime { time: b.get_u64() }
            }
            other => return Err(ParseError::UnknownOp { op: other }),
        })
    }

    /// Appends the request as a frame with `request_id`.
    pub fn encode(&self, request_id: u32, out: &mut BytesMut) {
        let op = self.op();
        match self {
            Request::Hello {
                min_version,
                max_version,
            } => {
                frame::put_header(out, op, request_id, 6);
                out.put_slice(&MAGIC);
                out.put_u8(*min_version);
                out.put_u8(*max_version);
            }
            Request::Ping | Request::Info | Request::NextId => {
                frame::put_header(out, op, request_id, 0)
            }
            Request::NextIds { count } => {
                frame::put_header(out, op, request_id, 4);
                out.put_u32(*count);
            }
            Request::Explain { id } => {
                frame::put_header(out, op, request_id, 8);
                out.put_u64(*id);
            }
            Request::Make(f) => {
                frame::put_header(out, op, request_id, 27);
                out.put_u8(f.version);
                out.put_u8(f.id_type);
                out.put_u8(f.gen_method);
                out.put_u64(f.time);
                out.put_u64(f.seq);
                out.put_u64(f.machine);
            }
            Request::TransTime { time } => {
                frame::put_header(out, op, request_id, 8);
                out.put_u64(*time);
            }
        }
    }
}

/// Bytes of an `IDS` payload with `runs` runs.
pub const fn ids_payload_len(runs: usize) -> usize {
    2 + runs * 12
}

/// Fixed bytes of an `INFO_OK` payload, before the reason text.
const INFO_FIXED: usize = 50;

impl Response {
    /// Appends a `ID` answer: the hot path, without building a `Response`.
    #[inline]
    pub fn encode_id(request_id: u32, id: u64, out: &mut BytesMut) {
        frame::put_header(out, op::NEXT_ID | op::ANSWER, request_id, 8);
        out.put_u64(id);
    }

    /// Appends an `IDS` answer from runs.
    pub fn encode_ids(request_id: u32, runs: &[IdRun], out: &mut BytesMut) {
        frame::put_header(
            out,
            op::NEXT_IDS | op::ANSWER,
            request_id,
            ids_payload_len(runs.len()),
        );
        out.put_u16(runs.len() as u16);
        for r in runs {
            out.put_u64(r.first);
            out.put_u32(r.count as u32);
        }
    }

    /// Appends an `ERROR` answer; the message is cut to [`MAX_MESSAGE_BYTES`].
    pub fn encode_error(request_id: u32, code: ErrorCode, message: &str, out: &mut BytesMut) {
        let m = cut(message);
        frame::put_header(out, op::ERROR, request_id, 2 + m.len());
        out.put_u16(code.code());
        out.put_slice(m.as_bytes());
    }

    /// Appends the answer as a frame with `request_id`.
    pub fn encode(&self, request_id: u32, out: &mut BytesMut) {
        match self {
            Response::HelloOk {
                version,
                max_frame_bytes,
                max_batch,
            } => {
                frame::put_header(out, op::HELLO | op::ANSWER, request_id, 9);
                out.put_u8(*version);
                out.put_u32(*max_frame_bytes);
                out.put_u32(*max_batch);
            }
            Response::Pong => frame::put_header(out, op::PING | op::ANSWER, request_id, 0),
            Response::Info(i) => {
                let reason = cut(&i.reason);
                frame::put_header(
                    out,
                    op::INFO | op::ANSWER,
                    request_id,
                    INFO_FIXED + 2 + reason.len(),
                );
                out.put_u16(i.machine);
                out.put_u8(i.gen_method);
                out.put_u8(i.id_type);
                out.put_u8(i.id_version);
                out.put_u8(i.lease_state);
                out.put_u8(i.seq_bits);
                out.put_u8(i.time_bits);
                out.put_u32(i.unit_ms);
                out.put_u64(i.epoch_ms);
                out.put_u16(i.server_pool_start);
                out.put_u64(i.last_issued_time);
                out.put_u64(i.end_of_life_ms);
                out.put_u32(i.max_batch);
                out.put_u32(i.max_frame_bytes);
                out.put_u32(i.connections);
                out.put_u16(reason.len() as u16);
                out.put_slice(reason.as_bytes());
            }
            Response::Id(id) => Self::encode_id(request_id, *id, out),
            Response::Ids(runs) => Self::encode_ids(request_id, runs, out),
            Response::Explained(x) => {
                frame::put_header(out, op::EXPLAIN | op::ANSWER, request_id, 33);
                out.put_u64(x.id);
                out.put_u8(x.version);
                out.put_u8(x.id_type);
                out.put_u8(x.gen_method);
                out.put_u64(x.time);
                out.put_u32(x.seq);
                out.put_u16(x.machine);
                out.put_u64(x.unix_ms);
            }
            Response::Made(id) => {
                frame::put_header(out, op::MAKE | op::ANSWER, request_id, 8);
                out.put_u64(*id);
            }
            Response::Time(ms) => {
                frame::put_header(out, op::TRANS_TIME | op::ANSWER, request_id, 8);
                out.put_u64(*ms);
            }
            Response::Error { code, message } => {
                Self::encode_error(request_id, *code, message, out)
            }
            Response::GoAway { code, message } => {
                let m = cut(message);
                frame::put_header(out, op::GOAWAY, request_id, 2 + m.len());
                out.put_u16(code.code());
                out.put_slice(m.as_bytes());
            }
        }
    }

    /// Parses an answer frame; a payload of the wrong length or a request op is an error.
    pub fn parse(frame: &Frame) -> Result<Response, ParseError> {
        let p = &frame.payload;
        let mut b = p.clone();
        Ok(match frame.op {
            x if x == op::HELLO | op::ANSWER => {
                expect_len("HELLO_OK", p, 9)?;
                Response::HelloOk {
                    version: b.get_u8(),
                    max_frame_bytes: b.get_u32(),
                    max_batch: b.get_u32(),
                }
            }
            x if x == op::PING | op::ANSWER => {
                expect_len("PONG", p, 0)?;
                Response::Pong
            }
            x if x == op::INFO | op::ANSWER => {
                let bad = |got| ParseError::BadLength {
                    name: "INFO_OK",
                    expected: format!("{} + reason_len", INFO_FIXED + 2),
                    got,
                };
                if p.len() < INFO_FIXED + 2 {
                    return Err(bad(p.len()));
                }
                let mut i = ServerInfo {
                    machine: b.get_u16(),
                    gen_method: b.get_u8(),
                    id_type: b.get_u8(),
                    id_version: b.get_u8(),
                    lease_state: b.get_u8(),
                    seq_bits: b.get_u8(),
                    time_bits: b.get_u8(),
                    unit_ms: b.get_u32(),
                    epoch_ms: b.get_u64(),
                    server_pool_start: b.get_u16(),
                    last_issued_time: b.get_u64(),
                    end_of_life_ms: b.get_u64(),
                    max_batch: b.get_u32(),
                    max_frame_bytes: b.get_u32(),
                    connections: b.get_u32(),
                    reason: String::new(),
                };
                let len = b.get_u16() as usize;
                if b.remaining() != len {
                    return Err(bad(p.len()));
                }
                i.reason = String::from_utf8_lossy(&b).into_owned();
                Response::Info(i)
            }
            x if x == op::NEXT_ID | op::ANSWER => {
                expect_len("ID", p, 8)?;
                Response::Id(b.get_u64())
            }
            x if x == op::NEXT_IDS | op::ANSWER => {
                if p.len() < 2 {
                    return Err(ParseError::BadLength {
                        name: "IDS",
                        expected: "2 + 12 * run_count".into(),
                        got: p.len(),
                    });
                }
                let n = b.get_u16() as usize;
                if b.remaining() != n * 12 {
                    return Err(ParseError::BadLength {
                        name: "IDS",
                        expected: ids_payload_len(n).to_string(),
                        got: p.len(),
                    });
                }
                let runs = (0..n)
                    .map(|_| IdRun {
                        first: b.get_u64(),
                        count: u64::from(b.get_u32()),
                    })
                    .collect();
                Response::Ids(runs)
            }
            x if x == op::EXPLAIN | op::ANSWER => {
                expect_len("EXPLAINED", p, 33)?;
                Response::Explained(WireExplanation {
                    id: b.get_u64(),
                    version: b.get_u8(),
                    id_type: b.get_u8(),
                    gen_method: b.get_u8(),
                    time: b.get_u64(),
                    seq: b.get_u32(),
                    machine: b.get_u16(),
                    unix_ms: b.get_u64(),
                })
            }
            x if x == op::MAKE | op::ANSWER => {
                expect_len("MADE", p, 8)?;
                Response::Made(b.get_u64())
            }
            x if x == op::TRANS_TIME | op::ANSWER => {
                expect_len("TIME", p, 8)?;
                Response::Time(b.get_u64())
            }
            op::ERROR | op::GOAWAY => {
                if p.len() < 2 {
                    return Err(ParseError::BadLength {
                        name: "ERROR",
                        expected: "at least 2".into(),
                        got: p.len(),
                    });
                }
                let code = ErrorCode::from_u16(b.get_u16());
                let message = String::from_utf8_lossy(&b).into_owned();
                if frame.op == op::ERROR {
                    Response::Error { code, message }
                } else {
                    Response::GoAway { code, message }
                }
            }
            other => return Err(ParseError::UnknownOp { op: other }),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn round_trip_request(r: &Request, id: u32) -> Request {
        let mut buf = BytesMut::new();
        r.encode(id, &mut buf);
        let f = frame::decode(&mut buf, frame::DEFAULT_MAX_FRAME_BYTES)
            .unwrap()
            .unwrap();
        assert_eq!(f.request_id, id);
        assert!(buf.is_empty());
        Request::parse(&f).unwrap()
    }

    fn round_trip_response(r: &Response, id: u32) -> Response {
        let mut buf = BytesMut::new();
        r.encode(id, &mut buf);
        let f = frame::decode(&mut buf, frame::MAX_MAX_FRAME_BYTES)
            .unwrap()
            .unwrap();
        assert_eq!(f.request_id, id);
        assert!(buf.is_empty());
        Response::parse(&f).unwrap()
    }

    fn request_strategy() -> impl Strategy<Value = Request> {
        prop_oneof![
            (any::<u8>(), any::<u8>()).prop_map(|(a, b)| Request::Hello {
                min_version: a,
                max_version: b
            }),
            Just(Request::Ping),
            Just(Request::Info),
            Just(Request::NextId),
            any::<u32>().prop_map(|count| Request::NextIds { count }),
            any::<u64>().prop_map(|id| Request::Explain { id }),
            (
                any::<u8>(),
                any::<u8>(),
                any::<u8>(),
                any::<u64>(),
                any::<u64>(),
                any::<u64>()
            )
                .prop_map(|(version, id_type, gen_method, time, seq, machine)| {
                    Request::Make(RawFields {
                        version,
                        id_type,
                        gen_method,
                        time,
                        seq,
                        machine,
                    })
                }),
            any::<u64>().prop_map(|time| Request::TransTime { time }),
        ]
    }

    fn response_strategy() -> impl Strategy<Value = Response> {
        let code = (1u16..=16).prop_map(ErrorCode::from_u16);
        prop_oneof![
            (any::<u8>(), any::<u32>(), any::<u32>()).prop_map(|(v, f, b)| Response::HelloOk {
                version: v,
                max_frame_bytes: f,
                max_batch: b
            }),
            Just(Response::Pong),
            (any::<[u8; 8]>(), any::<u64>(), ".{0,40}").prop_map(|(s, x, reason)| {
                Response::Info(ServerInfo {
                    machine: u16::from(s[0]) << 8 | u16::from(s[1]),
                    gen_method: s[2],
                    id_type: s[3],
                    id_version: s[4],
                    lease_state: s[5],
                    seq_bits: s[6],
                    time_bits: s[7],
                    unit_ms: x as u32,
                    epoch_ms: x,
                    server_pool_start: 924,
                    last_issued_time: x >> 3,
                    end_of_life_ms: !x,
                    max_batch: 7,
                    max_frame_bytes: 65536,
                    connections: 3,
                    reason,
                })
            }),
            any::<u64>().prop_map(Response::Id),
            proptest::collection::vec((any::<u64>(), any::<u32>()), 0..50).prop_map(|v| {
                Response::Ids(
                    v.into_iter()
                        .map(|(first, c)| IdRun {
                            first,
                            count: u64::from(c),
                        })
                        .collect(),
                )
            }),
            any::<u64>().prop_map(Response::Made),
            any::<u64>().prop_map(Response::Time),
            (code.clone(), ".{0,60}").prop_map(|(code, message)| Response::Error { code, message }),
            (code, ".{0,60}").prop_map(|(code, message)| Response::GoAway { code, message }),
        ]
    }

    proptest! {
        #[test]
        fn every_request_round_trips(r in request_strategy(), id in any::<u32>()) {
            prop_assert_eq!(round_trip_request(&r, id), r);
        }

        #[test]
        fn every_response_round_trips(r in response_strategy(), id in any::<u32>()) {
            prop_assert_eq!(round_trip_response(&r, id), r);
        }

        /// Explanations round-trip for any ID (the encoder writes what `decode` produced).
        #[test]
        fn explanations_round_trip(id in any::<u64>(), ms in any::<u64>()) {
            let x = WireExplanation::from(Explanation { id, fields: IdFields::decode(id), unix_ms: ms });
            prop_assert_eq!(round_trip_response(&Response::Explained(x), 1), Response::Explained(x));
        }

        /// A payload of any other length than the op's is refused, never misread.
        #[test]
        fn wrong_payload_lengths_are_refused(
            op in prop::sample::select(vec![op::HELLO, op::PING, op::INFO, op::NEXT_ID,
                op::NEXT_IDS, op::EXPLAIN, op::MAKE, op::TRANS_TIME]),
            len in 0usize..40,
        ) {
            let right = match op { op::HELLO => 6, op::NEXT_IDS => 4, op::EXPLAIN | op::TRANS_TIME => 8,
                op::MAKE => 27, _ => 0 };
            prop_assume!(len != right);
            let f = Frame { op, request_id: 1, payload: Bytes::from(vec![0u8; len]) };
            let is_bad_length = matches!(Request::parse(&f), Err(ParseError::BadLength { .. }));
            prop_assert!(is_bad_length);
        }
    }

    #[test]
    fn unknown_ops_and_answer_ops_are_not_requests() {
        for op in [0x00, 0x04, 0x7f, 0x90, 0xfe, 0xff] {
            let f = Frame {
                op,
                request_id: 1,
                payload: Bytes::new(),
            };
            assert_eq!(Request::parse(&f), Err(ParseError::UnknownOp { op }));
        }
        let f = Frame {
            op: op::HELLO,
            request_id: 1,
            payload: Bytes::from_static(b"VSTB\x01\x01"),
        };
        assert_eq!(Request::parse(&f), Err(ParseError::BadMagic));
    }

    #[test]
    fn long_messages_are_cut_on_a_char_boundary() {
        let msg = "é".repeat(MAX_MESSAGE_BYTES);
        let r = Response::Error {
            code: ErrorCode::Internal,
            message: msg,
        };
        let Response::Error { message, .. } = round_trip_response(&r, 9) else {
            panic!("not an error");
        };
        assert_eq!(message.len(), MAX_MESSAGE_BYTES);
    }

    #[test]
    fn the_example_in_the_doc_is_byte_exact() {
        let mut buf = BytesMut::new();
        Request::NextId.encode(7, &mut buf);
        assert_eq!(&buf[..], &[0, 0, 0, 5, 0x10, 0, 0, 0, 7]);
        let id = 0x155a_14a0_0000_039c;
        buf.clear();
        Response::Id(id).encode(7, &mut buf);
        assert_eq!(
            &buf[..],
            &[
                0, 0, 0, 0x0d, 0x90, 0, 0, 0, 7, 0x15, 0x5a, 0x14, 0xa0, 0x00, 0x00, 0x03, 0x9c
            ]
        );
        let f = IdFields::decode(id);
        assert_eq!(f.machine, 924);
        assert_eq!(f.gen_method, GenMethod::Server);
        assert_eq!(f.seq, 0);
        assert_eq!(f.time, 359_158_400);
    }
}
