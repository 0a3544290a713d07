//! `EXPLAIN` → `EXPLAINED`: any 64-bit value taken apart with the server's epoch; never fails.
//! Also the two conversions between [`Explanation`] and its wire form, one each way: the server
//! sends its fields, the client uses them as sent.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use vesta_core::{Clock, Explanation, FieldError};

use super::{ParseError, RawFields, Request, Response, ServerContext, exact, op};
use crate::frame;

/// `EXPLAIN`: id u64.
const REQUEST_LEN: usize = 8;
/// `EXPLAINED`: id u64, version u8, type u8, genMethod u8, time u64, seq u32, machine u16,
/// unix_ms u64.
const ANSWER_LEN: usize = 8 + 1 + 1 + 1 + 8 + 4 + 2 + 8;

/// An explained ID as the server sends it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct WireExplanation {
    /// The ID.
    pub id: u64,
    /// Bit 63.
    pub version: u8,
    /// Type bit.
    pub id_type: u8,
    /// genMethod field.
    pub gen_method: u8,
    /// Time field.
    pub time: u64,
    /// Sequence field.
    pub seq: u32,
    /// Machine field.
    pub machine: u16,
    /// Start of the ID's time unit, ms since 1970 (server's epoch).
    pub unix_ms: u64,
}

impl From<Explanation> for WireExplanation {
    /// The fields fit their wire widths: decoding never yields a wider value.
    fn from(x: Explanation) -> Self {
        let f = x.fields;
        WireExplanation {
            id: x.id,
            version: f.version,
            id_type: f.id_type.code() as u8,
            gen_method: f.gen_method.code() as u8,
            time: f.time,
            seq: f.seq as u32,
            machine: f.machine as u16,
            unix_ms: x.unix_ms,
        }
    }
}

impl TryFrom<WireExplanation> for Explanation {
    type Error = FieldError;

    /// The server's fields as sent, range-checked like `MAKE`'s: a field that does not fit its
    /// layout (only a broken server sends one) is named, not masked.
    fn try_from(x: WireExplanation) -> Result<Self, FieldError> {
        let raw = RawFields {
            version: x.version,
            id_type: x.id_type,
            gen_method: x.gen_method,
            time: x.time,
            seq: u64::from(x.seq),
            machine: u64::from(x.machine),
        };
        Ok(Explanation {
            id: x.id,
            fields: raw.to_fields()?,
            unix_ms: x.unix_ms,
        })
    }
}

pub(super) fn parse_request(payload: &Bytes) -> Result<Request, ParseError> {
    let mut b = exact("EXPLAIN", payload, REQUEST_LEN)?;
    Ok(Request::Explain { id: b.get_u64() })
}

pub(super) fn encode_request(request_id: u32, id: u64, out: &mut BytesMut) {
    frame::put_header(out, op::EXPLAIN, request_id, REQUEST_LEN);
    out.put_u64(id);
}

pub(super) fn encode_answer(request_id: u32, x: &WireExplanation, out: &mut BytesMut) {
    frame::put_header(out, op::EXPLAIN | op::ANSWER, request_id, ANSWER_LEN);
    out.put_u64(x.id);
    out.put_u8(x.version);
    out.put_u8(x.id_type);
    out.put_u8(x.gen_method);
    out.put_u64(x.time);
    out.put_u32(x.seq);
    out.put_u16(x.machine);
    out.put_u64(x.unix_ms);
}

pub(super) fn parse_answer(payload: &Bytes) -> Result<Response, ParseError> {
    let mut b = exact("EXPLAINED", payload, ANSWER_LEN)?;
    Ok(Response::Explained(WireExplanation {
        id: b.get_u64(),
        version: b.get_u8(),
        id_type: b.get_u8(),
        gen_method: b.get_u8(),
        time: b.get_u64(),
        seq: b.get_u32(),
        machine: b.get_u16(),
        unix_ms: b.get_u64(),
    }))
}

/// Answers `EXPLAINED`.
pub(crate) fn apply<C: Clock>(
    ctx: &ServerContext<C>,
    request_id: u32,
    id: u64,
    out: &mut BytesMut,
) {
    let x = WireExplanation::from(ctx.issuer.explain(id));
    encode_answer(request_id, &x, out);
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use vesta_core::IdFields;

    proptest! {
        /// What the server sends is what the client gets back, for any ID.
        #[test]
        fn explanations_convert_to_the_wire_and_back_unchanged(id in any::<u64>(), ms in any::<u64>()) {
            let x = Explanation { id, fields: IdFields::decode(id), unix_ms: ms };
            prop_assert_eq!(Explanation::try_from(WireExplanation::from(x)), Ok(x));
        }
    }

    #[test]
    fn a_field_out_of_its_range_is_named_not_masked() {
        let good = WireExplanation::from(Explanation::new(1 << 62, vesta_core::Epoch::VESTA));
        let bad_type = WireExplanation { id_type: 2, ..good };
        let e = Explanation::try_from(bad_type).unwrap_err();
        assert_eq!(e.to_string(), "type 2 is out of range: allowed 0..=1");
        let bad_seq = WireExplanation {
            seq: u32::MAX,
            ..good
        };
        assert_eq!(Explanation::try_from(bad_seq).unwrap_err().field(), "seq");
    }
}
