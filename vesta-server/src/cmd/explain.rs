//! `EXPLAIN`: any 64-bit value taken apart with the server's epoch; never fails.

use bytes::BytesMut;
use vesta_core::Clock;

use super::Ctx;
use crate::proto::{Response, WireExplanation};

/// Answers `EXPLAINED`.
pub(crate) fn apply<C: Clock>(ctx: &Ctx<C>, request_id: u32, id: u64, out: &mut BytesMut) {
    let x = ctx.issuer.explain(id);
    let f = x.fields;
    Response::Explained(WireExplanation {
        id,
        version: f.version,
        id_type: f.id_type.code() as u8,
        gen_method: f.gen_method.code() as u8,
        time: f.time,
        seq: f.seq as u32,
        machine: f.machine as u16,
        unix_ms: x.unix_ms,
    })
    .encode(request_id, out);
}
