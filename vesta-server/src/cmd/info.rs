//! `INFO`: the server's machine ID, genMethod, layout, lease state and limits, so a client needs
//! no shared configuration to explain or check what it gets.

use std::sync::atomic::Ordering;

use bytes::BytesMut;
use vesta_core::Clock;

use super::Ctx;
use crate::proto::{Response, ServerInfo, lease_state_code};

/// The description of the server behind `ctx`.
pub(crate) fn describe<C: Clock>(ctx: &Ctx<C>) -> ServerInfo {
    let s = ctx.issuer.status();
    let layout = s.id_type.layout();
    ServerInfo {
        machine: s.machine as u16,
        gen_method: s.gen_method.code() as u8,
        id_type: s.id_type.code() as u8,
        id_version: ctx.issuer.config().id.version,
        lease_state: lease_state_code(s.lease.state),
        seq_bits: layout.seq_bits as u8,
        time_bits: layout.time_bits as u8,
        unit_ms: layout.unit_ms as u32,
        epoch_ms: s.epoch.unix_ms(),
        server_pool_start: ctx.issuer.config().machine.server_pool_start as u16,
        last_issued_time: s.last_issued_time,
        end_of_life_ms: s.end_of_life_ms,
        max_batch: ctx.limits.max_batch,
        max_frame_bytes: ctx.limits.max_frame_bytes,
        connections: ctx.connections.load(Ordering::Relaxed),
        reason: s.lease.reason.unwrap_or_default(),
    }
}

/// Answers `INFO_OK`.
pub(crate) fn apply<C: Clock>(ctx: &Ctx<C>, request_id: u32, out: &mut BytesMut) {
    Response::Info(describe(ctx)).encode(request_id, out);
}
