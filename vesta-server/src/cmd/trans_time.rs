//! `TRANS_TIME`: the instant a time value of the server's layout starts (Vesta's `transTime`).

use bytes::BytesMut;
use vesta_core::Clock;

use super::Ctx;
use crate::proto::{ErrorCode, Response};

/// Answers `TIME` with ms since 1970, or `FIELD_OUT_OF_RANGE` for a time past the layout.
pub(crate) fn apply<C: Clock>(ctx: &Ctx<C>, request_id: u32, time: u64, out: &mut BytesMut) {
    match ctx.issuer.trans_time(time) {
        Ok(at) => {
            // Within the layout's range the instant is after 1970, so it is non-negative.
            let ms = u64::try_from(at.timestamp_millis()).unwrap_or(0);
            Response::Time(ms).encode(request_id, out)
        }
        Err(e) => {
            Response::encode_error(request_id, ErrorCode::FieldOutOfRange, &e.to_string(), out)
        }
    }
}
