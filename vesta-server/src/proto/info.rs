//! `INFO` → `INFO_OK`: the server's machine ID, genMethod, layout, lease state and limits, so a
//! client needs no shared configuration to explain or check what it gets.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use vesta_core::{Clock, IdType};
use vesta_embed::LeaseState;

use super::{ParseError, Request, Response, ServerContext, cut, exact, op};
use crate::frame;

/// `INFO_OK` before the reason: machine u16, genMethod, type, version, lease_state, seq_bits,
/// time_bits (u8 each), unit_ms u32, epoch_ms u64, server_pool_start u16, last_issued_time u64,
/// end_of_life_ms u64, max_batch u32, max_frame_bytes u32, connections u32.
const FIXED_LEN: usize = 2 + 6 + 4 + 8 + 2 + 8 + 8 + 4 + 4 + 4;
/// Then reason_len u16 and that many bytes of reason.
const REASON_LEN_LEN: usize = 2;

/// The server's description, answered to `INFO`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerInfo {
    /// Machine ID in use.
    pub machine: u16,
    /// genMethod of issued IDs (1).
    pub gen_method: u8,
    /// Layout type of issued IDs.
    pub id_type: u8,
    /// Version bit of issued IDs.
    pub id_version: u8,
    /// Lease state code: 0 static, 1 acquiring, 2 held, 3 fenced, 4 released.
    pub lease_state: u8,
    /// Width of the sequence field.
    pub seq_bits: u8,
    /// Width of the time field.
    pub time_bits: u8,
    /// Length of one time unit.
    pub unit_ms: u32,
    /// The epoch, ms since 1970.
    pub epoch_ms: u64,
    /// First machine ID of the server pool.
    pub server_pool_start: u16,
    /// Time value of the last issued ID.
    pub last_issued_time: u64,
    /// The layout's last representable instant, ms since 1970.
    pub end_of_life_ms: u64,
    /// Largest `NEXT_IDS` count.
    pub max_batch: u32,
    /// Largest frame length.
    pub max_frame_bytes: u32,
    /// Connections open now.
    pub connections: u32,
    /// Why the server is not issuing, or empty.
    pub reason: String,
}

impl ServerInfo {
    /// The lease state as a name (`static`, `held`, ...), `unknown` for a code this version does
    /// not know.
    pub fn lease_state_name(&self) -> &'static str {
        self.lease_state().map_or("unknown", LeaseState::name)
    }

    /// The lease state, if the code is one this version knows (a client skips a server that
    /// cannot issue).
    pub fn lease_state(&self) -> Option<LeaseState> {
        lease_state_from_code(self.lease_state)
    }

    /// The layout type, if the code is valid.
    pub fn layout_type(&self) -> Option<IdType> {
        IdType::from_code(u64::from(self.id_type)).ok()
    }
}

/// The wire code of a lease state.
const fn lease_state_code(s: LeaseState) -> u8 {
    match s {
        LeaseState::Static => 0,
        LeaseState::Acquiring => 1,
        LeaseState::Held => 2,
        LeaseState::Fenced => 3,
        LeaseState::Released => 4,
    }
}

/// The lease state of a wire code.
const fn lease_state_from_code(c: u8) -> Option<LeaseState> {
    match c {
        0 => Some(LeaseState::Static),
        1 => Some(LeaseState::Acquiring),
        2 => Some(LeaseState::Held),
        3 => Some(LeaseState::Fenced),
        4 => Some(LeaseState::Released),
        _ => None,
    }
}

pub(super) fn parse_request(payload: &Bytes) -> Result<Request, ParseError> {
    exact("INFO", payload, 0)?;
    Ok(Request::Info)
}

pub(super) fn encode_request(request_id: u32, out: &mut BytesMut) {
    frame::put_header(out, op::INFO, request_id, 0);
}

pub(super) fn encode_answer(request_id: u32, i: &ServerInfo, out: &mut BytesMut) {
    let reason = cut(&i.reason);
    let len = FIXED_LEN + REASON_LEN_LEN + reason.len();
    frame::put_header(out, op::INFO | op::ANSWER, request_id, len);
    out.put_u16(i.machine);
    out.put_u8(i.gen_method);
    out.put_u8(i.id_type);
    out.put_u8(i.id_version);
    out.put_u8(i.lease_state);
    out.put_u8(i.seq_bits);
    out.put_u8(i.time_bits);
    out.put_u32(i.unit_ms);
    out.put_u64(i.epoch_ms);
    out.put_u16(i.server_pool_start);
    out.put_u64(i.last_issued_time);
    out.put_u64(i.end_of_life_ms);
    out.put_u32(i.max_batch);
    out.put_u32(i.max_frame_bytes);
    out.put_u32(i.connections);
    out.put_u16(reason.len() as u16);
    out.put_slice(reason.as_bytes());
}

pub(super) fn parse_answer(payload: &Bytes) -> Result<Response, ParseError> {
    let bad = || ParseError::BadLength {
        name: "INFO_OK",
        expected: format!("{} + reason_len", FIXED_LEN + REASON_LEN_LEN),
        got: payload.len(),
    };
    if payload.len() < FIXED_LEN + REASON_LEN_LEN {
        return Err(bad());
    }
    let mut b = payload.clone();
    let mut i = ServerInfo {
        machine: b.get_u16(),
        gen_method: b.get_u8(),
        id_type: b.get_u8(),
        id_version: b.get_u8(),
        lease_state: b.get_u8(),
        seq_bits: b.get_u8(),
        time_bits: b.get_u8(),
        unit_ms: b.get_u32(),
        epoch_ms: b.get_u64(),
        server_pool_start: b.get_u16(),
        last_issued_time: b.get_u64(),
        end_of_life_ms: b.get_u64(),
        max_batch: b.get_u32(),
        max_frame_bytes: b.get_u32(),
        connections: b.get_u32(),
        reason: String::new(),
    };
    let reason_len = b.get_u16() as usize;
    if b.remaining() != reason_len {
        return Err(bad());
    }
    i.reason = String::from_utf8_lossy(&b).into_owned();
    Ok(Response::Info(i))
}

/// The description of the server behind `ctx`.
pub(crate) fn describe<C: Clock>(ctx: &ServerContext<C>) -> ServerInfo {
    let s = ctx.issuer.status();
    let layout = s.id_type.layout();
    let config = ctx.issuer.config();
    ServerInfo {
        machine: s.machine as u16,
        gen_method: s.gen_method.code() as u8,
        id_type: s.id_type.code() as u8,
        id_version: config.id.version,
        lease_state: lease_state_code(s.lease.state),
        seq_bits: layout.seq_bits as u8,
        time_bits: layout.time_bits as u8,
        unit_ms: layout.unit_ms as u32,
        epoch_ms: s.epoch.unix_ms(),
        server_pool_start: config.machine.server_pool_start as u16,
        last_issued_time: s.last_issued_time,
        end_of_life_ms: s.end_of_life_ms,
        max_batch: ctx.limits.max_batch_u32(),
        max_frame_bytes: ctx.limits.max_frame_bytes,
        connections: u32::try_from(ctx.metrics.connections.get()).unwrap_or(0),
        reason: s.lease.reason.unwrap_or_default(),
    }
}

/// Answers `INFO_OK`.
pub(crate) fn apply<C: Clock>(ctx: &ServerContext<C>, request_id: u32, out: &mut BytesMut) {
    encode_answer(request_id, &describe(ctx), out);
}
