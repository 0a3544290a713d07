//! `SEGMENT` → `NUMBER` and `SEGMENTS` → `NUMBERS`: Leaf-compatible segment numbers of a tag
//! (segment mode, `[segment] db`), one or a batch as ranges of consecutive numbers.
//!
//! A tag is taken exactly as sent or refused at parse (not UTF-8, outside the naming rule). A
//! batch answer never outgrows a frame: it holds at most [`max_ranges`] ranges, so a tag with
//! a tiny step may answer fewer numbers than asked (at least one; the client asks again for
//! the rest).

use std::ops::Range;

use bytes::{Buf, BufMut, Bytes, BytesMut};

use super::{ParseError, Request, Response, exact, op};
use crate::frame;

/// `SEGMENTS` starts with count u32, then the tag.
const COUNT_LEN: usize = 4;
/// `NUMBER`: number u64.
const NUMBER_LEN: usize = 8;
/// `NUMBERS` starts with range_count u16 ...
const RANGE_COUNT_LEN: usize = 2;
/// ... then range_count × (first u64, count u32).
const RANGE_LEN: usize = 8 + 4;

/// Bytes of a `NUMBERS` payload with `ranges` ranges.
pub const fn numbers_payload_len(ranges: usize) -> usize {
    RANGE_COUNT_LEN + ranges * RANGE_LEN
}

/// The most ranges a `NUMBERS` answer may carry in frames of `max_frame_bytes`.
pub fn max_ranges(max_frame_bytes: u32) -> usize {
    let room = (max_frame_bytes as usize).saturating_sub(frame::HEADER_BYTES + RANGE_COUNT_LEN);
    (room / RANGE_LEN).clamp(1, usize::from(u16::MAX))
}

/// The tag of a payload, exactly as sent: bytes that are not UTF-8 or a tag that breaks the
/// naming rule are refused here (`INVALID_ARGUMENT`, the reason named), never replaced, so the
/// server cannot serve a tag other than the one the client asked for.
fn tag_of(b: &[u8]) -> Result<String, ParseError> {
    let tag = std::str::from_utf8(b).map_err(|e| {
        let shown = String::from_utf8_lossy(&b[..b.len().min(64)]).into_owned();
        ParseError::InvalidTag(format!(
            "tag {shown:?} is not valid UTF-8 (byte {} of {})",
            e.valid_up_to(),
            b.len()
        ))
    })?;
    vesta_core::tag::check_tag(tag).map_err(|e| ParseError::InvalidTag(e.to_string()))?;
    Ok(tag.to_owned())
}

pub(super) fn parse_one(payload: &Bytes) -> Result<Request, ParseError> {
    Ok(Request::Segment {
        tag: tag_of(payload)?,
    })
}

pub(super) fn parse_many(payload: &Bytes) -> Result<Request, ParseError> {
    if payload.len() < COUNT_LEN {
        return Err(ParseError::BadLength {
            name: "SEGMENTS",
            expected: format!("{COUNT_LEN} + the tag's length"),
            got: payload.len(),
        });
    }
    let mut b = payload.clone();
    let count = b.get_u32();
    Ok(Request::Segments {
        count,
        tag: tag_of(&b)?,
    })
}

pub(super) fn encode_one(request_id: u32, tag: &str, out: &mut BytesMut) {
    frame::put_header(out, op::SEGMENT, request_id, tag.len());
    out.put_slice(tag.as_bytes());
}

pub(super) fn encode_many(request_id: u32, count: u32, tag: &str, out: &mut BytesMut) {
    frame::put_header(out, op::SEGMENTS, request_id, COUNT_LEN + tag.len());
    out.put_u32(count);
    out.put_slice(tag.as_bytes());
}

pub(super) fn encode_number(request_id: u32, number: u64, out: &mut BytesMut) {
    frame::put_header(out, op::SEGMENT | op::ANSWER, request_id, NUMBER_LEN);
    out.put_u64(number);
}

pub(super) fn encode_numbers(request_id: u32, ranges: &[Range<u64>], out: &mut BytesMut) {
    let len = numbers_payload_len(ranges.len());
    frame::put_header(out, op::SEGMENTS | op::ANSWER, request_id, len);
    out.put_u16(ranges.len() as u16);
    for r in ranges {
        out.put_u64(r.start);
        out.put_u32((r.end - r.start) as u32);
    }
}

pub(super) fn parse_number(payload: &Bytes) -> Result<Response, ParseError> {
    let mut b = exact("NUMBER", payload, NUMBER_LEN)?;
    Ok(Response::Number(b.get_u64()))
}

pub(super) fn parse_numbers(payload: &Bytes) -> Result<Response, ParseError> {
    let bad = |expected: String| ParseError::BadLength {
        name: "NUMBERS",
        expected,
        got: payload.len(),
    };
    if payload.len() < RANGE_COUNT_LEN {
        return Err(bad(format!(
            "{RANGE_COUNT_LEN} + {RANGE_LEN} * range_count"
        )));
    }
    let mut b = payload.clone();
    let n = b.get_u16() as usize;
    if payload.len() != numbers_payload_len(n) {
        return Err(bad(numbers_payload_len(n).to_string()));
    }
    let ranges = (0..n)
        .map(|_| {
            let first = b.get_u64();
            first..first.saturating_add(u64::from(b.get_u32()))
        })
        .collect();
    Ok(Response::Numbers(ranges))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_numbers_answer_of_max_ranges_fits_its_frame() {
        for frame in [2048, 65536, 16 << 20] {
            let n = max_ranges(frame);
            assert!(
                frame::HEADER_BYTES + numbers_payload_len(n) <= frame as usize,
                "{frame}"
            );
            assert!(n <= usize::from(u16::MAX));
        }
        assert_eq!(max_ranges(2048), 170);
    }
}
