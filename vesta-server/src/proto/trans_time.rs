//! `TRANS_TIME` → `TIME`: the instant a time value of the server's layout starts, in ms since
//! 1970 (Vesta's `transTime`).

use bytes::{Buf, BufMut, Bytes, BytesMut};
#[cfg(feature = "server")]
use vesta_core::Clock;

#[cfg(feature = "server")]
use super::{ErrorCode, ServerContext};
use super::{ParseError, Request, Response, exact, op};
use crate::frame;

/// `TRANS_TIME`: time u64.
const REQUEST_LEN: usize = 8;
/// `TIME`: unix_ms u64.
const ANSWER_LEN: usize = 8;

pub(super) fn parse_request(payload: &Bytes) -> Result<Request, ParseError> {
    let mut b = exact("TRANS_TIME", payload, REQUEST_LEN)?;
    Ok(Request::TransTime { time: b.get_u64() })
}

pub(super) fn encode_request(request_id: u32, time: u64, out: &mut BytesMut) {
    frame::put_header(out, op::TRANS_TIME, request_id, REQUEST_LEN);
    out.put_u64(time);
}

pub(super) fn encode_answer(request_id: u32, unix_ms: u64, out: &mut BytesMut) {
    frame::put_header(out, op::TRANS_TIME | op::ANSWER, request_id, ANSWER_LEN);
    out.put_u64(unix_ms);
}

pub(super) fn parse_answer(payload: &Bytes) -> Result<Response, ParseError> {
    let mut b = exact("TIME", payload, ANSWER_LEN)?;
    Ok(Response::Time(b.get_u64()))
}

#[cfg(feature = "server")]
/// Answers `TIME`, or `FIELD_OUT_OF_RANGE` for a time past the layout.
pub(crate) fn apply<C: Clock>(
    ctx: &ServerContext<C>,
    request_id: u32,
    time: u64,
    out: &mut BytesMut,
) {
    match ctx.issuer.trans_time(time) {
        // Within the layout's range the instant is after 1970, so it is non-negative.
        Ok(at) => encode_answer(
            request_id,
            u64::try_from(at.timestamp_millis()).unwrap_or(0),
            out,
        ),
        Err(e) => {
            Response::encode_error(request_id, ErrorCode::FieldOutOfRange, &e.to_string(), out)
        }
    }
}
