//! `MAKE`: an ID from chosen fields (to repair data). Every field is range-checked; an error
//! names the field and its allowed range, nothing is masked.

use bytes::BytesMut;
use vesta_core::Clock;

use super::Ctx;
use crate::proto::{ErrorCode, RawFields, Response};

/// Answers `MADE`, or `FIELD_OUT_OF_RANGE`.
pub(crate) fn apply<C: Clock>(ctx: &Ctx<C>, request_id: u32, f: &RawFields, out: &mut BytesMut) {
    match f.to_fields().and_then(|fields| ctx.issuer.make(&fields)) {
        Ok(id) => Response::Made(id).encode(request_id, out),
        Err(e) => {
            Response::encode_error(request_id, ErrorCode::FieldOutOfRange, &e.to_string(), out)
        }
    }
}
