//! `EXPLAIN` → `EXPLAINED`: any 64-bit value taken apart in the server's layout; never fails.
//! The server sends every field's value; the client reads the ID in the connection's layout and
//! refuses an answer whose values disagree with it (only a broken server sends one), so what a
//! caller gets is an [`Explanation`] that is true to both.
//!
//! Version 1 (Vesta's layouts): id u64, version u8, type u8, genMethod u8, time u64, seq u32,
//! machine u16, unix_ms u64. Version 2 (any layout): id u64, unix_ms u64, count u8, then the
//! values (u64 each) of the layout's fields and node parts from the top bit down.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use vesta_core::{Epoch, Explanation, IdType};

use super::{Dialect, ParseError, Request, Response, exact, op};
use crate::frame;

/// `EXPLAIN`: id u64.
const REQUEST_LEN: usize = 8;
/// Version 1 `EXPLAINED`.
const ANSWER_LEN_V1: usize = 8 + 1 + 1 + 1 + 8 + 4 + 2 + 8;
/// Version 2 `EXPLAINED` before the values: id u64, unix_ms u64, count u8.
const ANSWER_HEAD_V2: usize = 8 + 8 + 1;

pub(super) fn parse_request(payload: &Bytes) -> Result<Request, ParseError> {
    let mut b = exact("EXPLAIN", payload, REQUEST_LEN)?;
    Ok(Request::Explain { id: b.get_u64() })
}

pub(super) fn encode_request(request_id: u32, id: u64, out: &mut BytesMut) {
    frame::put_header(out, op::EXPLAIN, request_id, REQUEST_LEN);
    out.put_u64(id);
}

pub(super) fn encode_answer(
    request_id: u32,
    x: &Explanation,
    dialect: &Dialect,
    out: &mut BytesMut,
) {
    match x.vesta_fields().filter(|_| dialect.version < 2) {
        Some(f) => {
            frame::put_header(out, op::EXPLAIN | op::ANSWER, request_id, ANSWER_LEN_V1);
            out.put_u64(x.id);
            out.put_u8(f.version);
            out.put_u8(f.id_type.code() as u8);
            out.put_u8(f.gen_method.code() as u8);
            out.put_u64(f.time);
            out.put_u32(f.seq as u32);
            out.put_u16(f.machine as u16);
            out.put_u64(x.unix_ms);
        }
        None => {
            let values = x.values();
            let len = ANSWER_HEAD_V2 + 8 * values.len();
            frame::put_header(out, op::EXPLAIN | op::ANSWER, request_id, len);
            out.put_u64(x.id);
            out.put_u64(x.unix_ms);
            out.put_u8(values.len() as u8);
            for (_, v) in values {
                out.put_u64(v);
            }
        }
    }
}

pub(super) fn parse_answer(payload: &Bytes, dialect: &Dialect) -> Result<Response, ParseError> {
    let disagrees = || ParseError::BadValue {
        name: "EXPLAINED",
        reason: "the values disagree with the ID in the server's layout".into(),
    };
    if dialect.version < 2 {
        let mut b = exact("EXPLAINED", payload, ANSWER_LEN_V1)?;
        let id = b.get_u64();
        let sent = (
            b.get_u8(),
            b.get_u8(),
            b.get_u8(),
            b.get_u64(),
            b.get_u32(),
            b.get_u16(),
        );
        let unix_ms = b.get_u64();
        // Version 1 does not carry the epoch: it is where the sent instant puts time 0.
        let t = IdType::from_code(u64::from(sent.1)).map_err(|_| disagrees())?;
        let since_epoch = sent
            .3
            .checked_mul(t.layout().unit_ms())
            .ok_or_else(disagrees)?;
        let epoch = unix_ms.checked_sub(since_epoch).ok_or_else(disagrees)?;
        // (The ID's version bit is data: any Vesta layout reads it.)
        let layout = t.layout().with_epoch(Epoch::from_unix_ms(epoch));
        let x = Explanation::new(id, &layout);
        let f = x.vesta_fields().ok_or_else(disagrees)?;
        let ours = (
            f.version,
            f.id_type.code() as u8,
            f.gen_method.code() as u8,
            f.time,
            f.seq as u32,
            f.machine as u16,
        );
        if ours != sent || x.unix_ms != unix_ms {
            return Err(disagrees());
        }
        return Ok(Response::Explained(x));
    }
    if payload.len() < ANSWER_HEAD_V2 {
        return Err(ParseError::BadLength {
            name: "EXPLAINED",
            expected: format!("{ANSWER_HEAD_V2} + 8 * count"),
            got: payload.len(),
        });
    }
    let mut b = payload.clone();
    let (id, unix_ms, count) = (b.get_u64(), b.get_u64(), b.get_u8() as usize);
    if b.remaining() != 8 * count {
        return Err(ParseError::BadLength {
            name: "EXPLAINED",
            expected: format!("{}", ANSWER_HEAD_V2 + 8 * count),
            got: payload.len(),
        });
    }
    let x = Explanation::new(id, &dialect.layout);
    let ours = x.values();
    let agrees = ours.len() == count && ours.iter().all(|(_, v)| *v == b.get_u64());
    if !agrees || x.unix_ms != unix_ms {
        return Err(disagrees());
    }
    Ok(Response::Explained(x))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use vesta_core::{Layout, Preset};

    fn round_trip(x: &Explanation, dialect: &Dialect) -> Result<Response, ParseError> {
        let mut out = BytesMut::new();
        encode_answer(1, x, dialect, &mut out);
        let frame = crate::frame::decode(&mut out, u32::MAX).unwrap().unwrap();
        parse_answer(&frame.payload, dialect)
    }

    proptest! {
        /// What the server sends is what the client gets back, for any ID, in both versions
        /// and every preset.
        #[test]
        fn explanations_cross_the_wire_unchanged(id in any::<u64>(), epoch in 0u64..(1 << 42), which in 0usize..5) {
            let e = Epoch::from_unix_ms(epoch);
            let vesta = IdType::MaxPeak.layout().with_epoch(e);
            let x = Explanation::new(id, &vesta);
            prop_assert_eq!(round_trip(&x, &Dialect::new(1, vesta.clone())), Ok(Response::Explained(x.clone())));
            let layout: Layout = Preset::ALL[which].layout().with_epoch(e);
            let x = Explanation::new(id, &layout);
            prop_assert_eq!(round_trip(&x, &Dialect::new(2, layout)), Ok(Response::Explained(x)));
        }
    }

    #[test]
    fn values_that_disagree_with_the_id_are_refused_not_passed_on() {
        let leaf = Preset::Leaf.layout();
        let x = Explanation::new(5 << 22 | 7, &leaf);
        let mut out = BytesMut::new();
        encode_answer(1, &x, &Dialect::new(2, leaf.clone()), &mut out);
        let last = out.len() - 1;
        out[last] ^= 1; // the sequence value
        let frame = crate::frame::decode(&mut out, u32::MAX).unwrap().unwrap();
        let err = parse_answer(&frame.payload, &Dialect::new(2, leaf)).unwrap_err();
        assert!(err.to_string().contains("disagree"), "{err}");
    }
}
