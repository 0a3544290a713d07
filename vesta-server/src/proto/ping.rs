//! `PING` → `PONG`: liveness, used by clients to re-check endpoints they marked dead. Both
//! payloads are empty.

use bytes::{Bytes, BytesMut};

use super::{ParseError, Request, Response, exact, op};
use crate::frame;

pub(super) fn parse_request(payload: &Bytes) -> Result<Request, ParseError> {
    exact("PING", payload, 0)?;
    Ok(Request::Ping)
}

pub(super) fn encode_request(request_id: u32, out: &mut BytesMut) {
    frame::put_header(out, op::PING, request_id, 0);
}

pub(super) fn encode_answer(request_id: u32, out: &mut BytesMut) {
    frame::put_header(out, op::PING | op::ANSWER, request_id, 0);
}

pub(super) fn parse_answer(payload: &Bytes) -> Result<Response, ParseError> {
    exact("PONG", payload, 0)?;
    Ok(Response::Pong)
}
