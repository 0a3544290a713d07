//! `MAKE` → `MADE`: an ID from chosen fields (to repair data). The request carries the fields
//! wider than they are, so the server can range-check every one: an error names the field and
//! its allowed range, nothing is masked.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use vesta_core::{Clock, GenMethod, IdFields, IdType};

use super::{ErrorCode, ParseError, Request, Response, ServerContext, exact, op};
use crate::frame;

/// `MAKE`: version u8, type u8, genMethod u8, time u64, seq u64, machine u64.
const REQUEST_LEN: usize = 1 + 1 + 1 + 8 + 8 + 8;
/// `MADE`: id u64.
const ANSWER_LEN: usize = 8;

/// Field values as sent in `MAKE`: wider than the fields, so the server can name a value that
/// does not fit instead of the wire silently truncating it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RawFields {
    /// 0 or 1.
    pub version: u8,
    /// 0 max-peak, 1 min-granularity.
    pub id_type: u8,
    /// 0..=3.
    pub gen_method: u8,
    /// Whole units since the epoch.
    pub time: u64,
    /// Sequence within the unit.
    pub seq: u64,
    /// Machine ID.
    pub machine: u64,
}

impl From<&IdFields> for RawFields {
    fn from(f: &IdFields) -> Self {
        RawFields {
            version: f.version,
            id_type: f.id_type.code() as u8,
            gen_method: f.gen_method.code() as u8,
            time: f.time,
            seq: f.seq,
            machine: f.machine,
        }
    }
}

impl RawFields {
    /// The typed fields, or the first field that does not fit, named.
    pub fn to_fields(&self) -> Result<IdFields, vesta_core::FieldError> {
        let fields = IdFields {
            version: self.version,
            id_type: IdType::from_code(u64::from(self.id_type))?,
            gen_method: GenMethod::from_code(u64::from(self.gen_method))?,
            time: self.time,
            seq: self.seq,
            machine: self.machine,
        };
        fields.encode()?;
        Ok(fields)
    }
}

pub(super) fn parse_request(payload: &Bytes) -> Result<Request, ParseError> {
    let mut b = exact("MAKE", payload, REQUEST_LEN)?;
    Ok(Request::Make(RawFields {
        version: b.get_u8(),
        id_type: b.get_u8(),
        gen_method: b.get_u8(),
        time: b.get_u64(),
        seq: b.get_u64(),
        machine: b.get_u64(),
    }))
}

pub(super) fn encode_request(request_id: u32, f: &RawFields, out: &mut BytesMut) {
    frame::put_header(out, op::MAKE, request_id, REQUEST_LEN);
    out.put_u8(f.version);
    out.put_u8(f.id_type);
    out.put_u8(f.gen_method);
    out.put_u64(f.time);
    out.put_u64(f.seq);
    out.put_u64(f.machine);
}

pub(super) fn encode_answer(request_id: u32, id: u64, out: &mut BytesMut) {
    frame::put_header(out, op::MAKE | op::ANSWER, request_id, ANSWER_LEN);
    out.put_u64(id);
}

pub(super) fn parse_answer(payload: &Bytes) -> Result<Response, ParseError> {
    let mut b = exact("MADE", payload, ANSWER_LEN)?;
    Ok(Response::Made(b.get_u64()))
}

/// Answers `MADE`, or `FIELD_OUT_OF_RANGE` naming the field.
pub(crate) fn apply<C: Clock>(
    ctx: &ServerContext<C>,
    request_id: u32,
    f: &RawFields,
    out: &mut BytesMut,
) {
    match f.to_fields().and_then(|fields| ctx.issuer.make(&fields)) {
        Ok(id) => encode_answer(request_id, id, out),
        Err(e) => {
            Response::encode_error(request_id, ErrorCode::FieldOutOfRange, &e.to_string(), out)
        }
    }
}
