//! `SEQ_NEXT` → `SEQ` and `SEQ_CURRENT` → `SEQ_CURRENT` answer: per-key sequences (`[seq] db`),
//! a key's next numbers and its current number.
//!
//! The key travels as the bytes the caller gave (a decimal `u64` or UTF-8 text): the codec
//! checks only that there is one; the key rule (1-128 bytes, UTF-8, no control characters) is
//! the server's op's, which refuses a bad key with `INVALID_ARGUMENT` naming it, so the server
//! can never serve a key other than the one sent. A `SEQ` answer carries the last number and
//! the count, so it says on its own which numbers the call took.

use bytes::{Buf, BufMut, Bytes, BytesMut};

use super::{ParseError, Request, Response, exact, op};
use crate::frame;

/// `SEQ_NEXT` starts with count u32, then the key.
const COUNT_LEN: usize = 4;
/// `SEQ`: last u64, count u32.
const SEQ_LEN: usize = 8 + 4;
/// `SEQ_CURRENT` answer: current u64.
const CURRENT_LEN: usize = 8;

/// The key of a payload, as sent; an empty one is a frame cut short.
fn key_of(name: &'static str, b: Bytes, before: usize) -> Result<Bytes, ParseError> {
    if b.is_empty() {
        return Err(ParseError::BadLength {
            name,
            expected: format!("{before} + the key's length (at least 1)"),
            got: before,
        });
    }
    Ok(b)
}

pub(super) fn parse_next(payload: &Bytes) -> Result<Request, ParseError> {
    if payload.len() < COUNT_LEN {
        return Err(ParseError::BadLength {
            name: "SEQ_NEXT",
            expected: format!("{COUNT_LEN} + the key's length (at least 1)"),
            got: payload.len(),
        });
    }
    let mut b = payload.clone();
    let count = b.get_u32();
    Ok(Request::SeqNext {
        count,
        key: key_of("SEQ_NEXT", b, COUNT_LEN)?,
    })
}

pub(super) fn parse_current(payload: &Bytes) -> Result<Request, ParseError> {
    Ok(Request::SeqCurrent {
        key: key_of("SEQ_CURRENT", payload.clone(), 0)?,
    })
}

pub(super) fn encode_next(request_id: u32, count: u32, key: &[u8], out: &mut BytesMut) {
    frame::put_header(out, op::SEQ_NEXT, request_id, COUNT_LEN + key.len());
    out.put_u32(count);
    out.put_slice(key);
}

pub(super) fn encode_current(request_id: u32, key: &[u8], out: &mut BytesMut) {
    frame::put_header(out, op::SEQ_CURRENT, request_id, key.len());
    out.put_slice(key);
}

pub(super) fn encode_seq(request_id: u32, last: u64, count: u32, out: &mut BytesMut) {
    frame::put_header(out, op::SEQ_NEXT | op::ANSWER, request_id, SEQ_LEN);
    out.put_u64(last);
    out.put_u32(count);
}

pub(super) fn encode_seq_current(request_id: u32, current: u64, out: &mut BytesMut) {
    frame::put_header(out, op::SEQ_CURRENT | op::ANSWER, request_id, CURRENT_LEN);
    out.put_u64(current);
}

/// A `SEQ` answer; a count of 0, or one that reaches below 1, is no call a server answers.
pub(super) fn parse_seq(payload: &Bytes) -> Result<Response, ParseError> {
    let mut b = exact("SEQ", payload, SEQ_LEN)?;
    let (last, count) = (b.get_u64(), b.get_u32());
    if count == 0 || u64::from(count) > last {
        return Err(ParseError::BadValue {
            name: "SEQ",
            reason: format!("count {count} with last {last}: numbers start at 1"),
        });
    }
    Ok(Response::Seq { last, count })
}

pub(super) fn parse_seq_current(payload: &Bytes) -> Result<Response, ParseError> {
    let mut b = exact("SEQ_CURRENT", payload, CURRENT_LEN)?;
    Ok(Response::SeqCurrent(b.get_u64()))
}
