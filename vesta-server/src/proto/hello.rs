//! `HELLO` → `HELLO_OK`: the handshake. The client names the versions it speaks; the server
//! picks the newest both speak and announces its limits (and, from version 2, its layout), or
//! refuses and closes. A server whose layout is not Vesta's speaks versions 2 and up only: version 1
//! has no way to describe another layout.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use vesta_core::Layout;

use super::dialect::{get_layout, layout_len, put_layout};
use super::{MAGIC, ParseError, Request, Response, exact, op};
use crate::frame;

/// `HELLO`: magic (4), min_version u8, max_version u8.
const REQUEST_LEN: usize = MAGIC.len() + 1 + 1;
/// `HELLO_OK`: version u8, max_frame_bytes u32, max_batch u32 (version 2: then the layout).
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
    layout: Option<&Layout>,
    out: &mut BytesMut,
) {
    let layout = layout.filter(|_| version >= 2);
    let len = ANSWER_LEN + layout.map_or(0, layout_len);
    frame::put_header(out, op::HELLO | op::ANSWER, request_id, len);
    out.put_u8(version);
    out.put_u32(max_frame_bytes);
    out.put_u32(max_batch);
    if let Some(layout) = layout {
        put_layout(out, layout);
    }
}

pub(super) fn parse_answer(payload: &Bytes) -> Result<Response, ParseError> {
    if payload.first().is_some_and(|&v| v >= 2) && payload.len() > ANSWER_LEN {
        let mut b = payload.clone();
        let (version, max_frame_bytes, max_batch) = (b.get_u8(), b.get_u32(), b.get_u32());
        let layout = get_layout(&mut b, "HELLO_OK")?;
        if b.has_remaining() {
            return Err(ParseError::BadLength {
                name: "HELLO_OK",
                expected: format!("{ANSWER_LEN} + the layout"),
                got: payload.len(),
            });
        }
        return Ok(Response::HelloOk {
            version,
            max_frame_bytes,
            max_batch,
            layout: Some(layout),
        });
    }
    let mut b = exact("HELLO_OK", payload, ANSWER_LEN)?;
    let version = b.get_u8();
    if version >= 2 {
        return Err(ParseError::BadValue {
            name: "HELLO_OK",
            reason: format!("version {version} must carry the server's layout"),
        });
    }
    Ok(Response::HelloOk {
        version,
        max_frame_bytes: b.get_u32(),
        max_batch: b.get_u32(),
        layout: None,
    })
}
