//! `HELLO`: the handshake. Picks the newest protocol version both sides speak.

use bytes::BytesMut;
use vesta_core::Clock;

use super::Ctx;
use crate::proto::{ErrorCode, MIN_VERSION, Response, VERSION};

/// Answers `HELLO_OK`, or a fatal `UNSUPPORTED_VERSION` (returns false: close the connection).
pub(crate) fn apply<C: Clock>(
    ctx: &Ctx<C>,
    request_id: u32,
    min_version: u8,
    max_version: u8,
    out: &mut BytesMut,
) -> bool {
    let version = max_version.min(VERSION);
    if min_version > max_version || version < min_version || version < MIN_VERSION {
        let msg = format!(
            "client speaks protocol versions {min_version}..={max_version}, \
             this server {MIN_VERSION}..={VERSION}"
        );
        Response::encode_error(request_id, ErrorCode::UnsupportedVersion, &msg, out);
        return false;
    }
    Response::HelloOk {
        version,
        max_frame_bytes: ctx.limits.max_frame_bytes,
        max_batch: ctx.limits.max_batch,
    }
    .encode(request_id, out);
    true
}
