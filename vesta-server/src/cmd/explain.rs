//! `EXPLAIN`: any 64-bit value taken apart with the server's epoch; never fails.

use bytes::BytesMut;
use vesta_core::Clock;

use super::Ctx;
use crate::proto::{Response, WireExplanation};

/// Answers `EXPLAINED`.
pub(crate) fn apply<C: Clock>(ctx: &Ctx<C>, request_id: u32, id: u64, out: &mut BytesMut) {
    Response::Explained(WireExplanation::from(ctx.issuer.explain(id))).encode(request_id, out);
}
