//! `MAKE` → `MADE`: an ID from chosen fields (to repair data). The request carries each value
//! as a u64, wider than its field, so the server range-checks every one: an error names the
//! field and its allowed range, nothing is masked.
//!
//! Version 1 (Vesta's layouts): version u8, type u8, genMethod u8, time u64, seq u64,
//! machine u64. Version 2 (any layout): count u8, then count × (name_len u8, name, value u64),
//! the names being the layout's own or the roles `time`, `seq`, `node`.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use vesta_core::FieldValues;

use super::{Dialect, ParseError, Request, Response, exact, op};
use crate::frame;

/// Version 1 `MAKE`.
const REQUEST_LEN_V1: usize = 1 + 1 + 1 + 8 + 8 + 8;
/// The names of version 1's fields, in wire order.
const V1_NAMES: [&str; 6] = ["version", "type", "genMethod", "time", "seq", "machine"];
/// Longest field name (the layout rules allow 32 ASCII bytes).
const MAX_NAME_BYTES: usize = 32;
/// `MADE`: id u64.
const ANSWER_LEN: usize = 8;

pub(super) fn parse_request(payload: &Bytes, dialect: &Dialect) -> Result<Request, ParseError> {
    if dialect.version < 2 {
        let mut b = exact("MAKE", payload, REQUEST_LEN_V1)?;
        let mut values = FieldValues::new();
        for name in V1_NAMES {
            let v = if matches!(name, "version" | "type" | "genMethod") {
                u64::from(b.get_u8())
            } else {
                b.get_u64()
            };
            values.set(name, v);
        }
        return Ok(Request::Make(values));
    }
    let bad = |reason: &str| ParseError::BadValue {
        name: "MAKE",
        reason: reason.into(),
    };
    let mut b = payload.clone();
    if !b.has_remaining() {
        return Err(bad("the count of values is missing"));
    }
    let count = b.get_u8();
    let mut values = FieldValues::new();
    for _ in 0..count {
        if !b.has_remaining() {
            return Err(bad("a value is cut short"));
        }
        let len = b.get_u8() as usize;
        if len == 0 || len > MAX_NAME_BYTES || b.remaining() < len + 8 {
            return Err(bad(
                "a field name must be 1..=32 bytes and be followed by its u64 value",
            ));
        }
        let name = String::from_utf8(b.split_to(len).to_vec())
            .map_err(|_| bad("a field name is not UTF-8"))?;
        if values.get(&name).is_some() {
            return Err(bad("a field name is given twice"));
        }
        values.set(name, b.get_u64());
    }
    if b.has_remaining() {
        return Err(bad("bytes follow the last value"));
    }
    Ok(Request::Make(values))
}

/// Appends `MAKE`. In version 1 only Vesta's six names are sent (a missing one as 0): the
/// client checks beforehand that the values are those.
pub(super) fn encode_request(
    request_id: u32,
    values: &FieldValues,
    dialect: &Dialect,
    out: &mut BytesMut,
) {
    if dialect.version < 2 {
        frame::put_header(out, op::MAKE, request_id, REQUEST_LEN_V1);
        for name in V1_NAMES {
            let v = values.get(name).unwrap_or(0);
            if matches!(name, "version" | "type" | "genMethod") {
                out.put_u8(v as u8);
            } else {
                out.put_u64(v);
            }
        }
        return;
    }
    let len = 1 + values.iter().map(|(n, _)| 1 + n.len() + 8).sum::<usize>();
    frame::put_header(out, op::MAKE, request_id, len);
    out.put_u8(values.iter().count() as u8);
    for (name, v) in values.iter() {
        out.put_u8(name.len() as u8);
        out.put_slice(name.as_bytes());
        out.put_u64(v);
    }
}

/// True when `values` can be sent in version 1: only Vesta's six names, time, seq and machine
/// among them, and the three one-byte ones below 256.
pub(crate) fn fits_v1(values: &FieldValues) -> bool {
    let byte = |name: &str| matches!(name, "version" | "type" | "genMethod");
    values
        .iter()
        .all(|(name, v)| V1_NAMES.contains(&name) && (v < 256 || !byte(name)))
        && ["time", "seq", "machine"]
            .iter()
            .all(|n| values.get(n).is_some())
}

pub(super) fn encode_answer(request_id: u32, id: u64, out: &mut BytesMut) {
    frame::put_header(out, op::MAKE | op::ANSWER, request_id, ANSWER_LEN);
    out.put_u64(id);
}

pub(super) fn parse_answer(payload: &Bytes) -> Result<Response, ParseError> {
    let mut b = exact("MADE", payload, ANSWER_LEN)?;
    Ok(Response::Made(b.get_u64()))
}
