//! `INFO` → `INFO_OK`: the server's machine ID, genMethod, layout, lease state and limits, so a
//! client needs no shared configuration to explain or check what it gets.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use vesta_core::{IdType, Layout};
use vesta_embed::LeaseState;

use super::{Dialect, ParseError, Request, Response, cut, exact, op};
use crate::frame;

/// Version 1 `INFO_OK` before the reason: machine u16, genMethod, type, version, lease_state,
/// seq_bits, time_bits (u8 each), unit_ms u32, epoch_ms u64, server_pool_start u16,
/// last_issued_time u64, end_of_life_ms u64, max_batch u32, max_frame_bytes u32,
/// connections u32.
const FIXED_LEN_V1: usize = 2 + 6 + 4 + 8 + 2 + 8 + 8 + 4 + 4 + 4;
/// Version 2 `INFO_OK` before the reason: machine u32, genMethod u8, lease_state u8,
/// server_pool_start u32, last_issued_time u64, end_of_life_ms u64, max_batch u32,
/// max_frame_bytes u32, connections u32 (the layout came with `HELLO_OK`).
const FIXED_LEN_V2: usize = 4 + 1 + 1 + 4 + 8 + 8 + 4 + 4 + 4;
/// Then reason_len u16 and that many bytes of reason.
const REASON_LEN_LEN: usize = 2;

/// The server's description, answered to `INFO`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerInfo {
    /// Machine ID in use.
    pub machine: u32,
    /// genMethod of issued IDs (1), recorded in them where the layout has the field.
    pub gen_method: u8,
    /// Lease state code: 0 static, 1 acquiring, 2 held, 3 fenced, 4 released.
    pub lease_state: u8,
    /// First machine ID of the server pool.
    pub server_pool_start: u32,
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
    /// The layout of issued IDs, with its epoch (from the handshake; in version 1 from the
    /// type, version and epoch of `INFO_OK`).
    pub layout: Layout,
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

    /// Vesta's type of the issued IDs; `None` for the peers' and custom layouts.
    pub fn layout_type(&self) -> Option<IdType> {
        self.layout.id_type()
    }

    /// The wire code of a lease state (what a server puts in `lease_state`).
    pub const fn lease_state_code(s: LeaseState) -> u8 {
        match s {
            LeaseState::Static => 0,
            LeaseState::Acquiring => 1,
            LeaseState::Held => 2,
            LeaseState::Fenced => 3,
            LeaseState::Released => 4,
            // A state added after this protocol version: clients read it as unknown.
            _ => u8::MAX,
        }
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

pub(super) fn encode_answer(
    request_id: u32,
    i: &ServerInfo,
    dialect: &Dialect,
    out: &mut BytesMut,
) {
    let reason = cut(&i.reason);
    let fixed = if dialect.version >= 2 {
        FIXED_LEN_V2
    } else {
        FIXED_LEN_V1
    };
    let len = fixed + REASON_LEN_LEN + reason.len();
    frame::put_header(out, op::INFO | op::ANSWER, request_id, len);
    if dialect.version >= 2 {
        out.put_u32(i.machine);
        out.put_u8(i.gen_method);
        out.put_u8(i.lease_state);
        out.put_u32(i.server_pool_start);
    } else {
        // Version 1 speaks Vesta's layouts only, whose machine IDs fit 10 bits.
        let layout = &i.layout;
        out.put_u16(i.machine as u16);
        out.put_u8(i.gen_method);
        out.put_u8(layout.id_type().map_or(0, |t| t.code() as u8));
        out.put_u8(layout.fixed_value("version").unwrap_or(0) as u8);
        out.put_u8(i.lease_state);
        out.put_u8(layout.seq_bits() as u8);
        out.put_u8(layout.time_bits() as u8);
        out.put_u32(layout.unit_ms() as u32);
        out.put_u64(layout.epoch().unix_ms());
        out.put_u16(i.server_pool_start as u16);
    }
    out.put_u64(i.last_issued_time);
    out.put_u64(i.end_of_life_ms);
    out.put_u32(i.max_batch);
    out.put_u32(i.max_frame_bytes);
    out.put_u32(i.connections);
    out.put_u16(reason.len() as u16);
    out.put_slice(reason.as_bytes());
}

pub(super) fn parse_answer(payload: &Bytes, dialect: &Dialect) -> Result<Response, ParseError> {
    let fixed = if dialect.version >= 2 {
        FIXED_LEN_V2
    } else {
        FIXED_LEN_V1
    };
    let bad = || ParseError::BadLength {
        name: "INFO_OK",
        expected: format!("{} + reason_len", fixed + REASON_LEN_LEN),
        got: payload.len(),
    };
    if payload.len() < fixed + REASON_LEN_LEN {
        return Err(bad());
    }
    let mut b = payload.clone();
    let (machine, gen_method, lease_state, server_pool_start, layout);
    if dialect.version >= 2 {
        machine = b.get_u32();
        gen_method = b.get_u8();
        lease_state = b.get_u8();
        server_pool_start = b.get_u32();
        layout = dialect.layout.clone();
    } else {
        machine = u32::from(b.get_u16());
        gen_method = b.get_u8();
        let (id_type, version) = (b.get_u8(), b.get_u8());
        lease_state = b.get_u8();
        let (seq_bits, time_bits, unit_ms) = (b.get_u8(), b.get_u8(), b.get_u32());
        let epoch = vesta_core::Epoch::from_unix_ms(b.get_u64());
        server_pool_start = u32::from(b.get_u16());
        layout = v1_layout(id_type, version, seq_bits, time_bits, unit_ms, epoch)?;
    }
    let mut i = ServerInfo {
        machine,
        gen_method,
        lease_state,
        server_pool_start,
        last_issued_time: b.get_u64(),
        end_of_life_ms: b.get_u64(),
        max_batch: b.get_u32(),
        max_frame_bytes: b.get_u32(),
        connections: b.get_u32(),
        reason: String::new(),
        layout,
    };
    let reason_len = b.get_u16() as usize;
    if b.remaining() != reason_len {
        return Err(bad());
    }
    i.reason = String::from_utf8_lossy(&b).into_owned();
    Ok(Response::Info(i))
}

/// The Vesta layout a version-1 `INFO_OK` describes; its widths and unit must be the type's.
fn v1_layout(
    id_type: u8,
    version: u8,
    seq_bits: u8,
    time_bits: u8,
    unit_ms: u32,
    epoch: vesta_core::Epoch,
) -> Result<Layout, ParseError> {
    let bad = |reason: String| ParseError::BadValue {
        name: "INFO_OK",
        reason,
    };
    let t = IdType::from_code(u64::from(id_type)).map_err(|e| bad(e.to_string()))?;
    let layout = t
        .layout()
        .with_epoch(epoch)
        .with_fixed("version", u64::from(version))
        .map_err(|e| bad(e.to_string()))?;
    let sent = (
        u32::from(seq_bits),
        u32::from(time_bits),
        u64::from(unit_ms),
    );
    if sent != (layout.seq_bits(), layout.time_bits(), layout.unit_ms()) {
        return Err(bad(format!(
            "seq_bits {seq_bits}, time_bits {time_bits} and unit_ms {unit_ms} are not those of \
             {t}"
        )));
    }
    Ok(layout)
}
