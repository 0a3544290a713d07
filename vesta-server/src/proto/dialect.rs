//! What the two ends of a connection agreed on: the protocol version and the server's layout.
//! Version 1 speaks Vesta's layouts only (an ID's type bit picks one); version 2 carries the
//! layout itself in `HELLO_OK`, so a client learns any layout — the peers' or a custom one —
//! from the server it talks to and needs no shared configuration.
//!
//! Also the layout's wire form (docs/protocol.md, "The layout"): a preset code, the epoch, the
//! unit, and every field from the top bit down, so a client rebuilds and checks it.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use vesta_core::{Epoch, FieldKind, FieldSpec, IdType, Layout, LayoutSpec, PartSpec, Preset};

use super::ParseError;

/// The protocol version and the server's layout a connection's frames are read in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dialect {
    /// The version both ends speak on this connection.
    pub version: u8,
    /// The server's layout (with its epoch).
    pub layout: Layout,
}

impl Dialect {
    /// Version 1 with Vesta's layouts and epoch: how a connection reads frames before (and
    /// without) a version-2 handshake.
    pub fn v1() -> Self {
        Dialect {
            version: 1,
            layout: IdType::MaxPeak.layout().clone(),
        }
    }

    /// A dialect of `version` over `layout`.
    pub fn new(version: u8, layout: Layout) -> Self {
        Dialect { version, layout }
    }
}

impl Default for Dialect {
    fn default() -> Self {
        Self::v1()
    }
}

/// Wire code of the preset a layout is (0: custom).
fn preset_code(layout: &Layout) -> u8 {
    match layout.preset() {
        Some(Preset::Vesta) => 1,
        Some(Preset::Leaf) => 2,
        Some(Preset::Twitter) => 3,
        Some(Preset::Sonyflake) => 4,
        Some(Preset::UidGenerator) => 5,
        Some(Preset::SonyflakeV2) => 6,
        _ => 0,
    }
}

fn kind_code(kind: FieldKind) -> (u8, u64) {
    match kind {
        FieldKind::Time => (0, 0),
        FieldKind::Seq => (1, 0),
        FieldKind::Node => (2, 0),
        FieldKind::Fixed(v) => (3, v),
        FieldKind::Method => (4, 0),
        _ => (0xff, 0),
    }
}

fn put_name(out: &mut BytesMut, name: &str) {
    // Names are at most 32 ASCII bytes (the layout rules), so one length byte holds them.
    out.put_u8(name.len() as u8);
    out.put_slice(name.as_bytes());
}

/// Appends the layout: preset u8, type u8 (Vesta's; 0xff none), unit_ms u32, epoch_ms u64,
/// signed u8, name, field_count u8, then per field kind u8, bits u8, value u64, name,
/// part_count u8 and per part bits u8 and name (names: len u8 + UTF-8).
pub(crate) fn put_layout(out: &mut BytesMut, layout: &Layout) {
    out.put_u8(preset_code(layout));
    out.put_u8(layout.id_type().map_or(0xff, |t| t.code() as u8));
    out.put_u32(layout.unit_ms() as u32);
    out.put_u64(layout.epoch().unix_ms());
    out.put_u8(u8::from(layout.signed()));
    put_name(out, layout.name());
    out.put_u8(layout.fields().len() as u8);
    for f in layout.fields() {
        let (kind, value) = kind_code(f.kind);
        out.put_u8(kind);
        out.put_u8(f.span.bits as u8);
        out.put_u64(value);
        put_name(out, &f.name);
        out.put_u8(f.parts.len() as u8);
        for p in &f.parts {
            out.put_u8(p.span.bits as u8);
            put_name(out, &p.name);
        }
    }
}

/// The wire length of a layout.
pub(crate) fn layout_len(layout: &Layout) -> usize {
    let mut out = BytesMut::new();
    put_layout(&mut out, layout);
    out.len()
}

/// Reads a layout sent by [`put_layout`]; checks it as a config would and, for a preset,
/// that it is the preset bit for bit (a server never sends anything else).
pub(crate) fn get_layout(b: &mut Bytes, name: &'static str) -> Result<Layout, ParseError> {
    let bad = |reason: String| ParseError::BadValue { name, reason };
    let short = || bad("the layout is cut short".into());
    let need = |b: &Bytes, n: usize| {
        if b.remaining() < n {
            Err(short())
        } else {
            Ok(())
        }
    };
    let get_name = |b: &mut Bytes| -> Result<String, ParseError> {
        need(b, 1)?;
        let len = b.get_u8() as usize;
        need(b, len)?;
        let raw = b.split_to(len);
        String::from_utf8(raw.to_vec()).map_err(|_| bad("a layout name is not UTF-8".into()))
    };
    need(b, 1 + 1 + 4 + 8 + 1)?;
    let preset = b.get_u8();
    let id_type = b.get_u8();
    let unit_ms = u64::from(b.get_u32());
    let epoch = Epoch::from_unix_ms(b.get_u64());
    let signed = b.get_u8() != 0;
    let layout_name = get_name(b)?;
    need(b, 1)?;
    let count = b.get_u8();
    let mut fields = Vec::with_capacity(count.into());
    for _ in 0..count {
        need(b, 1 + 1 + 8)?;
        let kind = b.get_u8();
        let bits = u32::from(b.get_u8());
        let value = b.get_u64();
        let field_name = get_name(b)?;
        need(b, 1)?;
        let part_count = b.get_u8();
        let mut parts = Vec::with_capacity(part_count.into());
        for _ in 0..part_count {
            need(b, 1)?;
            let bits = u32::from(b.get_u8());
            parts.push(PartSpec::new(get_name(b)?, bits));
        }
        let kind = match (kind, value) {
            (0, 0) => FieldKind::Time,
            (1, 0) => FieldKind::Seq,
            (2, 0) => FieldKind::Node,
            (3, v) => FieldKind::Fixed(v),
            (4, 0) => FieldKind::Method,
            _ => {
                return Err(bad(format!(
                    "field {field_name} has an unknown kind {kind}"
                )));
            }
        };
        fields.push(FieldSpec {
            name: field_name,
            kind,
            bits,
            parts,
        });
    }
    let spec = LayoutSpec {
        name: layout_name,
        unit_ms,
        epoch,
        signed,
        fields,
    };
    let sent = spec
        .build()
        .map_err(|e| bad(format!("the layout is not valid: {e}")))?;
    let preset = match preset {
        0 => return Ok(sent),
        1 => {
            let t = IdType::from_code(u64::from(id_type)).map_err(|e| bad(e.to_string()))?;
            let version = sent.fixed_value("version").unwrap_or(0);
            t.layout()
                .with_epoch(epoch)
                .with_fixed("version", version)
                .map_err(|e| bad(e.to_string()))?
        }
        2 => Preset::Leaf.layout().with_epoch(epoch),
        3 => Preset::Twitter.layout().with_epoch(epoch),
        4 => Preset::Sonyflake.layout().with_epoch(epoch),
        5 => Preset::UidGenerator.layout().with_epoch(epoch),
        6 => Preset::SonyflakeV2.layout().with_epoch(epoch),
        // A preset this version does not know: the fields say everything.
        _ => return Ok(sent),
    };
    if preset.fields() != sent.fields()
        || preset.unit_ms() != unit_ms
        || preset.name() != sent.name()
    {
        return Err(bad(format!(
            "the layout claims to be {} but its fields differ from it",
            preset.name()
        )));
    }
    Ok(preset)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(layout: &Layout) -> Layout {
        let mut out = BytesMut::new();
        put_layout(&mut out, layout);
        assert_eq!(out.len(), layout_len(layout));
        let mut b = out.freeze();
        let got = get_layout(&mut b, "TEST").unwrap();
        assert!(b.is_empty());
        got
    }

    #[test]
    fn every_preset_and_a_custom_layout_cross_the_wire_unchanged() {
        let mut all: Vec<Layout> = Preset::ALL.iter().map(|p| p.layout()).collect();
        all.push(
            IdType::MinGranularity
                .layout()
                .with_fixed("version", 1)
                .unwrap()
                .with_epoch(Epoch::from_unix_ms(5)),
        );
        let custom = LayoutSpec {
            name: "orders".into(),
            unit_ms: 7,
            epoch: Epoch::from_unix_ms(1_600_000_000_000),
            signed: true,
            fields: vec![
                FieldSpec::new("time", FieldKind::Time, 40),
                FieldSpec::new("biz", FieldKind::Fixed(3), 2),
                FieldSpec::node_of("node", vec![PartSpec::new("a", 4), PartSpec::new("b", 6)]),
                FieldSpec::new("seq", FieldKind::Seq, 11),
            ],
        };
        all.push(custom.build().unwrap());
        for layout in all {
            assert_eq!(round_trip(&layout), layout, "{layout}");
        }
    }

    #[test]
    fn a_cut_or_forged_layout_is_refused() {
        let mut out = BytesMut::new();
        put_layout(&mut out, &Preset::Leaf.layout());
        let full = out.freeze();
        for cut in 0..full.len() {
            let mut b = full.slice(..cut);
            assert!(get_layout(&mut b, "TEST").is_err(), "cut at {cut}");
        }
        // Claims to be Leaf but names its preset Twitter.
        let mut forged = full.to_vec();
        forged[0] = 3;
        let err = get_layout(&mut Bytes::from(forged), "TEST").unwrap_err();
        assert!(err.to_string().contains("claims to be twitter"), "{err}");
    }

    #[test]
    fn leafs_layout_is_the_example_in_the_doc_byte_for_byte() {
        let mut out = BytesMut::new();
        put_layout(&mut out, &Preset::Leaf.layout());
        let mut want = Vec::new();
        want.extend_from_slice(&[
            0x02, 0xff, 0, 0, 0, 1, 0, 0, 0x01, 0x2c, 0x14, 0x8d, 0x03, 0xc1, 1,
        ]);
        want.extend_from_slice(b"\x04leaf\x03");
        for (kind, bits, name) in [
            (0u8, 41u8, "time"),
            (2, 10, "workerId"),
            (1, 12, "sequence"),
        ] {
            want.extend_from_slice(&[kind, bits, 0, 0, 0, 0, 0, 0, 0, 0, name.len() as u8]);
            want.extend_from_slice(name.as_bytes());
            want.push(0);
        }
        assert_eq!(&out[..], &want[..]);
    }
}
