//! `NEXT_ID` → `ID`: one ID, the protocol's hot path: an empty request, the ID as a u64 (the
//! server never blocks the connection for it: a used-up time unit queues the request until a
//! unit boundary serves it).

use bytes::{Buf, BufMut, Bytes, BytesMut};

use super::{ParseError, Request, Response, exact, op};
use crate::frame;

/// `ID`: id u64 (the request is empty).
const ANSWER_LEN: usize = 8;

pub(super) fn parse_request(payload: &Bytes) -> Result<Request, ParseError> {
    exact("NEXT_ID", payload, 0)?;
    Ok(Request::NextId)
}

pub(super) fn encode_request(request_id: u32, out: &mut BytesMut) {
    frame::put_header(out, op::NEXT_ID, request_id, 0);
}

#[inline]
pub(super) fn encode_answer(request_id: u32, id: u64, out: &mut BytesMut) {
    frame::put_header(out, op::NEXT_ID | op::ANSWER, request_id, ANSWER_LEN);
    out.put_u64(id);
}

pub(super) fn parse_answer(payload: &Bytes) -> Result<Response, ParseError> {
    let mut b = exact("ID", payload, ANSWER_LEN)?;
    Ok(Response::Id(b.get_u64()))
}
