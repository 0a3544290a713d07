//! `PING`: liveness, used by clients to re-check endpoints they marked dead.

use bytes::BytesMut;

use crate::proto::Response;

/// Answers `PONG`.
pub(crate) fn apply(request_id: u32, out: &mut BytesMut) {
    Response::Pong.encode(request_id, out);
}
