//! `TRANS_TIME` → `TIME`: the instant a time value of the server's layout starts, in ms since
//! 1970 (Vesta's `transTime`).

use bytes::{Buf, BufMut, Bytes, BytesMut};

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
