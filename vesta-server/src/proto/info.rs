//! `INFO` → `INFO_OK`: the server's machine ID, genMethod, layout, lease state and limits, so a
//! client needs no shared configuration to explain or check what it gets. From version 3 the
//! answer ends with every machine ID the server holds (`machine.ids`) and whether each may
//! issue; versions 1 and 2 stay byte for byte as they were, naming the first one only.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use vesta_core::{IdType, Layout};
use vesta_embed::LeaseState;

use super::{Dialect, MAX_MESSAGE_BYTES, ParseError, Request, Response, cut_to, exact, op};
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
/// Version 3, after the reason: machine_count u16, then per machine ID:
const MACHINE_COUNT_LEN: usize = 2;
/// machine u32, lease_state u8.
const MACHINE_LEN: usize = 4 + 1;
/// A frame's bytes after its length field and before its payload: op u8, request_id u32.
const FRAME_HEAD_LEN: usize = 1 + 4;

/// One machine ID a server holds, as version 3's `INFO_OK` lists it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ServerMachine {
    /// The machine ID.
    pub machine: u32,
    /// Its own lease state code (as [`ServerInfo::lease_state`]): each machine ID is leased,
    /// fenced and resumed alone.
    pub lease_state: u8,
}

impl ServerMachine {
    /// The lease state, if the code is one this version knows.
    pub fn lease_state(&self) -> Option<LeaseState> {
        lease_state_from_code(self.lease_state)
    }

    /// Whether this machine ID may issue now (a state this version does not know: no).
    pub fn can_issue(&self) -> bool {
        self.lease_state().is_some_and(LeaseState::can_issue)
    }
}

/// The server's description, answered to `INFO`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerInfo {
    /// Machine ID in use; with several, the first one.
    pub machine: u32,
    /// genMethod of issued IDs (1), recorded in them where the layout has the field.
    pub gen_method: u8,
    /// Lease state code: 0 static, 1 acquiring, 2 held, 3 fenced, 4 released. With several
    /// machine IDs: the state of the first that may issue, else the first one's.
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
    /// Every machine ID the server holds, in slot order, each with its own lease state
    /// (version 3). Empty when the connection speaks version 1 or 2, whose answer names only
    /// [`machine`](Self::machine): an older server's answer is read as before.
    pub machines: Vec<ServerMachine>,
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

    /// The machine IDs that may issue now, of [`machines`](Self::machines) (so none from a
    /// server that answered in version 1 or 2).
    pub fn issuing_machines(&self) -> impl Iterator<Item = u32> + '_ {
        self.machines
            .iter()
            .filter(|m| m.can_issue())
            .map(|m| m.machine)
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
    let fixed = if dialect.version >= 2 {
        FIXED_LEN_V2
    } else {
        FIXED_LEN_V1
    };
    let machines: &[ServerMachine] = if dialect.version >= 3 {
        &i.machines
    } else {
        &[]
    };
    let list_len = if dialect.version >= 3 {
        MACHINE_COUNT_LEN + machines.len() * MACHINE_LEN
    } else {
        0
    };
    // The reason gives way to the list where a frame could not hold both (256 machine IDs in
    // the smallest frame allowed).
    let room = (i.max_frame_bytes as usize)
        .saturating_sub(FRAME_HEAD_LEN + fixed + REASON_LEN_LEN + list_len);
    let reason = cut_to(&i.reason, room.min(MAX_MESSAGE_BYTES));
    let len = fixed + REASON_LEN_LEN + reason.len() + list_len;
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
    if dialect.version >= 3 {
        // At most `machine.ids`' 256, so a u16 holds the count.
        out.put_u16(machines.len() as u16);
        for m in machines {
            out.put_u32(m.machine);
            out.put_u8(m.lease_state);
        }
    }
}

pub(super) fn parse_answer(payload: &Bytes, dialect: &Dialect) -> Result<Response, ParseError> {
    let fixed = if dialect.version >= 2 {
        FIXED_LEN_V2
    } else {
        FIXED_LEN_V1
    };
    let bad = || ParseError::BadLength {
        name: "INFO_OK",
        expected: if dialect.version >= 3 {
            format!(
                "{} + reason_len + {MACHINE_LEN} × machine_count",
                fixed + REASON_LEN_LEN + MACHINE_COUNT_LEN
            )
        } else {
            format!("{} + reason_len", fixed + REASON_LEN_LEN)
        },
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
        machines: Vec::new(),
    };
    let reason_len = b.get_u16() as usize;
    let list_len = if dialect.version >= 3 {
        MACHINE_COUNT_LEN
    } else {
        0
    };
    if b.remaining() < reason_len + list_len {
        return Err(bad());
    }
    i.reason = String::from_utf8_lossy(&b.split_to(reason_len)).into_owned();
    if dialect.version >= 3 {
        let count = b.get_u16() as usize;
        if b.remaining() != count * MACHINE_LEN {
            return Err(bad());
        }
        i.machines = (0..count)
            .map(|_| ServerMachine {
                machine: b.get_u32(),
                lease_state: b.get_u8(),
            })
            .collect();
    }
    if b.has_remaining() {
        return Err(bad());
    }
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

#[cfg(test)]
mod tests {
    use bytes::BytesMut;
    use vesta_core::Preset;

    use super::*;
    use crate::frame::{self, Frame};

    fn info(machines: Vec<ServerMachine>, reason: &str, max_frame_bytes: u32) -> ServerInfo {
        ServerInfo {
            machine: machines.first().map_or(930, |m| m.machine),
            gen_method: 1,
            lease_state: 0,
            server_pool_start: 924,
            last_issued_time: 77,
            end_of_life_ms: 99,
            max_batch: 7,
            max_frame_bytes,
            connections: 2,
            reason: reason.into(),
            layout: Preset::Vesta.layout(),
            machines,
        }
    }

    fn three() -> Vec<ServerMachine> {
        [(930, 0), (931, 3), (932, 0)]
            .map(|(machine, lease_state)| ServerMachine {
                machine,
                lease_state,
            })
            .to_vec()
    }

    fn encode(i: &ServerInfo, version: u8) -> Frame {
        let mut buf = BytesMut::new();
        encode_answer(1, i, &Dialect::new(version, i.layout.clone()), &mut buf);
        let f = frame::decode(&mut buf, i.max_frame_bytes).unwrap().unwrap();
        assert!(buf.is_empty());
        f
    }

    fn parse(payload: &Bytes, version: u8) -> Result<ServerInfo, ParseError> {
        match parse_answer(payload, &Dialect::new(version, Preset::Vesta.layout()))? {
            Response::Info(i) => Ok(i),
            other => panic!("not an INFO_OK: {other:?}"),
        }
    }

    #[test]
    fn version_3_lists_every_machine_id_with_its_own_state() {
        let sent = info(three(), "machine 931 fenced", 65_536);
        let got = parse(&encode(&sent, 3).payload, 3).unwrap();
        assert_eq!(got, sent);
        assert_eq!(got.issuing_machines().collect::<Vec<_>>(), [930, 932]);
    }

    /// A client of version 1 or 2 gets the answer it always got: byte for byte the same as a
    /// server of one machine ID would send, read back without a list.
    #[test]
    fn versions_1_and_2_are_unchanged_and_carry_no_list() {
        for version in [1, 2] {
            let k = info(three(), "", 65_536);
            let one = info(Vec::new(), "", 65_536);
            let (fk, f1) = (encode(&k, version), encode(&one, version));
            assert_eq!(fk.payload, f1.payload, "version {version}");
            let got = parse(&fk.payload, version).unwrap();
            assert!(got.machines.is_empty());
            assert_eq!(got.machine, 930);
        }
    }

    /// A version-3 answer must end with its list, exactly: cut or padded, it is refused.
    #[test]
    fn a_version_3_answer_of_the_wrong_length_is_refused() {
        let f = encode(&info(three(), "why", 65_536), 3);
        let p = &f.payload;
        for bad in [
            p.slice(..p.len() - 1),
            p.slice(..p.len() - 3 * MACHINE_LEN - MACHINE_COUNT_LEN),
            Bytes::from([&p[..], &[0][..]].concat()),
        ] {
            assert!(matches!(parse(&bad, 3), Err(ParseError::BadLength { .. })));
        }
        // A version-2 answer read as version 3 lacks the list.
        let v2 = encode(&info(three(), "why", 65_536), 2);
        assert!(parse(&v2.payload, 3).is_err());
    }

    /// 256 machine IDs (the most `machine.ids` allows) and the longest reason still fit the
    /// smallest frame allowed: the reason is cut to the room left.
    #[test]
    fn the_reason_gives_way_to_the_list_in_the_smallest_frame() {
        let machines = (0..256)
            .map(|n| ServerMachine {
                machine: 768 + n,
                lease_state: 3,
            })
            .collect();
        let sent = info(machines, &"é".repeat(2000), 2048);
        let f = encode(&sent, 3);
        assert!(FRAME_HEAD_LEN + f.payload.len() <= 2048);
        let got = parse(&f.payload, 3).unwrap();
        assert_eq!(got.machines, sent.machines);
        assert!(!got.reason.is_empty() && sent.reason.starts_with(&got.reason));
    }
}
