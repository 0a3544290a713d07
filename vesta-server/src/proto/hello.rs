//! `HELLO` → `HELLO_OK`: the handshake. The client names the versions it speaks; the server
//! picks the newest both speak and announces its limits, or refuses and closes.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use vesta_core::Clock;

use super::{
    ErrorCode, MAGIC, MIN_VERSION, ParseError, Request, Response, ServerContext, VERSION, exact, op,
};
use crate::frame;

/// `HELLO`: magic (4), min_version u8, max_version u8.
const REQUEST_LEN: usize = MAGIC.len() + 1 + 1;
/// `HELLO_OK`: version u8, max_frame_bytes u32, max_batch u32.
const ANSWER_LEN: usize = 1 + 4 + 4;

pub(super) fn parse_request(payload: &Bytes) -> Result<Request, ParseError> {
    let mut b = exact("HELLO", payload, REQUEST_LEN)?;
    if b[..MAGIC.len()] != MAGIC {
        return Err(ParseError::BadMagic);
    }
    b.advance(MAGIC.len());
    Ok(Request::Hello {
        min_version: b.get_u8(),
        max_version: b.get_u8(),
    })
}

pub(super) fn encode_request(
    request_id: u32,
    min_version: u8,
    max_version: u8,
    out: &mut BytesMut,
) {
    frame::put_header(out, op::HELLO, request_id, REQUEST_LEN);
    out.put_slice(&MAGIC);
    out.put_u8(min_version);
    out.put_u8(max_version);
}

pub(super) fn encode_answer(
    request_id: u32,
    version: u8,
    max_frame_bytes: u32,
    max_batch: u32,
    out: &mut BytesMut,
) {
    frame::put_header(out, op::HELLO | op::ANSWER, request_id, ANSWER_LEN);
    out.put_u8(version);
    out.put_u32(max_frame_bytes);
    out.put_u32(max_batch);
}

pub(super) fn parse_answer(payload: &Bytes) -> Result<Response, ParseError> {
    let mut b = exact("HELLO_OK", payload, ANSWER_LEN)?;
    Ok(Response::HelloOk {
        version: b.get_u8(),
        max_frame_bytes: b.get_u32(),
        max_batch: b.get_u32(),
    })
}

/// Answers the connection's first `HELLO` with `HELLO_OK`, or a fatal `UNSUPPORTED_VERSION`
/// (returns false: close the connection).
pub(crate) fn apply<C: Clock>(
    ctx: &ServerContext<C>,
    request_id: u32,
    min_version: u8,
    max_version: u8,
    out: &mut BytesMut,
) -> bool {
    let version = max_version.min(VERSION);
    if min_version > max_version || version < min_version || version < MIN_VERSION {
        let msg = format!(
            "client speaks protocol versions {min_version}..={max_version}, \
             this server {MIN_VERSION}..={VERSION}"
        );
        Response::encode_error(request_id, ErrorCode::UnsupportedVersion, &msg, out);
        return false;
    }
    let limits = &ctx.limits;
    encode_answer(
        request_id,
        version,
        limits.max_frame_bytes,
        limits.max_batch_u32(),
        out,
    );
    true
}

/// Answers a first frame that is not a valid `HELLO` (fatal: the connection closes).
pub(crate) fn required(request_id: u32, out: &mut BytesMut) {
    let msg = "the first frame must be HELLO with magic \"VSTA\" (docs/protocol.md)";
    Response::encode_error(request_id, ErrorCode::HandshakeRequired, msg, out);
}

/// Answers a `HELLO` after the handshake: the connection goes on with its version.
pub(crate) fn repeated(request_id: u32, out: &mut BytesMut) {
    let msg = "HELLO was already received on this connection";
    Response::encode_error(request_id, ErrorCode::BadPayload, msg, out);
}
