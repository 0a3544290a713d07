//! What a mark means and whose IDs it covers.
//!
//! A mark is an instant, but the IDs it protects are numbers counted from an epoch in a layout:
//! the same instant gives other numbers in another epoch or another time field, so a mark
//! counted in one says nothing about IDs counted in the other (an epoch moved later makes new
//! IDs equal to IDs issued before). Every mark therefore records what it was counted in
//! ([`CountedIn`]), and a start whose layout or epoch differs is refused, unless the two can
//! never issue the same ID (a fixed bit differs: Vesta's type, its genMethod).
//!
//! [`IdSpace`] is the other half: which IDs two issuers share. Two issuers of one machine ID
//! can issue the same ID only if every fixed field and the genMethod agree too; the host hold
//! and `vesta gen`'s own state file are keyed by it (and not by the epoch, so an epoch changed
//! under one of them meets the refusal instead of a fresh file).

use vesta_core::{Epoch, FieldKind, GenMethod, Layout, Remedy};

use crate::error::StartError;

/// What a mark was counted in: the time, seq and node fields, the time unit and the epoch, and
/// the bits every ID of it carries (fixed fields and genMethod).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct CountedIn {
    /// The fields' bits and the unit, e.g. `time 30-59, seq 10-29, node 0-9, 1000 ms units`.
    pub layout: String,
    /// The epoch, ms since the Unix epoch.
    pub epoch_ms: u64,
    /// The bits fixed in every ID: `(mask, value)` (unknown in marks written before it was
    /// recorded).
    pub fixed: Option<(u64, u64)>,
}

impl CountedIn {
    /// What marks written under `layout` (with its epoch) by issuers of `gen_method` are
    /// counted in.
    pub(crate) fn of(layout: &Layout, gen_method: GenMethod) -> Self {
        let span = |s: vesta_core::FieldSpan| format!("{}-{}", s.low_bit, s.high_bit());
        CountedIn {
            layout: format!(
                "time {}, seq {}, node {}, {} ms units",
                span(layout.time_span()),
                span(layout.seq_span()),
                span(layout.node_span()),
                layout.unit_ms()
            ),
            epoch_ms: layout.epoch().unix_ms(),
            fixed: Some(fixed_bits(layout, gen_method)),
        }
    }

    /// Rebuilds what a record says, if it says it (records written before marks carried it
    /// say nothing, and are taken as counted in the layout in force).
    #[cfg(any(feature = "state-file", feature = "etcd"))]
    pub(crate) fn from_record(
        layout: Option<&str>,
        epoch_ms: Option<u64>,
        fixed: Option<&str>,
    ) -> Option<Self> {
        Some(CountedIn {
            layout: layout?.to_owned(),
            epoch_ms: epoch_ms?,
            fixed: fixed.and_then(parse_fixed),
        })
    }

    /// The fixed bits as records keep them: `0xMASK/0xVALUE` (16 hex digits each).
    pub(crate) fn fixed_text(&self) -> Option<String> {
        self.fixed.map(|(m, v)| format!("{m:#018x}/{v:#018x}"))
    }

    /// One line for a store that keeps it in one text column (the SQL lease table, the host
    /// hold): `time 30-59, seq 10-29, node 0-9, 1000 ms units; epoch 1420041600000; fixed
    /// 0x...`.
    #[cfg(any(test, feature = "state-file", feature = "sql"))]
    pub(crate) fn encode(&self) -> String {
        match self.fixed_text() {
            Some(fixed) => format!("{}; epoch {}; fixed {fixed}", self.layout, self.epoch_ms),
            None => format!("{}; epoch {}", self.layout, self.epoch_ms),
        }
    }

    /// Reads [`encode`](Self::encode)'s line (with or without its fixed bits); an empty one (a
    /// row written before marks carried it, or a retired mark) is none.
    #[cfg(any(test, feature = "state-file", feature = "sql"))]
    pub(crate) fn decode(text: &str) -> Option<Self> {
        let (rest, fixed) = match text.rsplit_once("; fixed ") {
            Some((rest, fixed)) => (rest, parse_fixed(fixed)),
            None => (text, None),
        };
        let (layout, epoch) = rest.rsplit_once("; epoch ")?;
        Some(CountedIn {
            layout: layout.to_owned(),
            epoch_ms: epoch.parse().ok()?,
            fixed,
        })
    }

    /// For people: the fields and unit, and the epoch as a date.
    pub(crate) fn describe(&self) -> String {
        format!(
            "{} from {} ({} ms)",
            self.layout,
            Epoch::rfc3339(self.epoch_ms),
            self.epoch_ms
        )
    }

    /// True when no ID of one can be an ID of the other: a bit fixed in both is set
    /// differently (Vesta's max-peak and min-granularity; a TCP and a REST server).
    fn disjoint(&self, theirs: &CountedIn) -> bool {
        match (self.fixed, theirs.fixed) {
            (Some((ma, va)), Some((mb, vb))) => ma & mb & (va ^ vb) != 0,
            _ => false,
        }
    }

    /// Refuses a mark of `machine` that another layout or epoch counted (`theirs`; `None` for
    /// a record older than this check), unless no ID of the two can be equal. `held_in` says
    /// where the mark is, `retire` what retires it.
    pub(crate) fn check(
        &self,
        theirs: Option<&CountedIn>,
        machine: u64,
        held_in: &str,
        retire: Remedy,
    ) -> Result<(), StartError> {
        match theirs {
            Some(theirs)
                if (theirs.layout != self.layout || theirs.epoch_ms != self.epoch_ms)
                    && !self.disjoint(theirs) =>
            {
                Err(StartError::CountedElsewhere {
                    machine,
                    held_in: held_in.to_owned(),
                    theirs: theirs.describe(),
                    ours: self.describe(),
                    remedy: Box::new(retire),
                })
            }
            _ => Ok(()),
        }
    }
}

/// `0xMASK/0xVALUE` as [`CountedIn::fixed_text`] writes it.
fn parse_fixed(text: &str) -> Option<(u64, u64)> {
    let (m, v) = text.trim().split_once('/')?;
    let hex = |t: &str| u64::from_str_radix(t.trim().strip_prefix("0x")?, 16).ok();
    Some((hex(m)?, hex(v)?))
}

/// The bits every ID of `layout` issued with `gen_method` carries, `(mask, value)`: its fixed
/// fields, its genMethod field, and the bits no field covers (0 in every ID: the sign bit of
/// the peers' layouts).
fn fixed_bits(layout: &Layout, gen_method: GenMethod) -> (u64, u64) {
    let mask = layout
        .fields()
        .iter()
        .filter(|f| matches!(f.kind, FieldKind::Fixed(_) | FieldKind::Method))
        .fold(!layout.used_bits(), |m, f| m | f.span.mask());
    (mask, layout.header(gen_method) & mask)
}

/// Which IDs one machine ID can issue in a layout, whatever the layout is called and whatever
/// its epoch or time unit: where the node field sits and the bits every ID carries (fixed
/// fields, the genMethod, bits no field covers). Leaf and Twitter are one space (Twitter's
/// datacenter and worker are Leaf's worker, bit for bit); so is a custom layout with Leaf's
/// bits, whatever its name. Two issuers of one machine ID can issue the same ID when their
/// spaces [`meet`](Self::meets): node fields alike and no bit fixed differently in the two
/// (Vesta's max-peak and min-granularity differ in the type bit, a TCP and a REST server in
/// the genMethod: they never meet).
#[cfg(feature = "state-file")]
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct IdSpace {
    /// The node field (the machine ID's bits).
    pub node: vesta_core::FieldSpan,
    /// The bits every ID carries: `(mask, value)`.
    pub fixed: (u64, u64),
}

#[cfg(feature = "state-file")]
impl IdSpace {
    /// The bits whose fixed values tell the host's holds apart ([`classes`](Self::classes)):
    /// the top four, where Vesta's version, type and genMethod and every peer's sign bit lie.
    const CLASS_SHIFT: u32 = 60;

    /// The space of `layout` issued with `gen_method`.
    pub(crate) fn of(layout: &Layout, gen_method: GenMethod) -> Self {
        IdSpace {
            node: layout.node_span(),
            fixed: fixed_bits(layout, gen_method),
        }
    }

    /// True when an ID of one can be an ID of the other for one machine ID.
    pub(crate) fn meets(&self, other: &IdSpace) -> bool {
        let ((ma, va), (mb, vb)) = (self.fixed, other.fixed);
        self.node == other.node && ma & mb & (va ^ vb) == 0
    }

    /// The values of the ID's top four bits that IDs of this space can carry: every value
    /// agreeing with the bits fixed there (a bit not fixed there takes both). Two spaces of one
    /// node field that share a class may meet; two that share none never do (a fixed bit there
    /// differs). A fixed bit lower down does not split classes, so two spaces that differ only
    /// there share a class: held as one, which is never less safe.
    pub(crate) fn classes(&self) -> impl Iterator<Item = u64> + '_ {
        let (mask, value) = (
            self.fixed.0 >> Self::CLASS_SHIFT,
            self.fixed.1 >> Self::CLASS_SHIFT,
        );
        (0..16u64).filter(move |c| c & mask == value & mask)
    }

    /// 16 hex digits of a stable hash of the node field and the fixed bits: names `vesta gen`'s
    /// own state files and the host's hold records, one per space however its layout is named.
    pub(crate) fn key(&self) -> String {
        format!("{:016x}", fnv1a(self.canonical().as_bytes()))
    }

    /// The node field for file and claim names: `node12-21`.
    pub(crate) fn node_name(&self) -> String {
        format!("node{}-{}", self.node.low_bit, self.node.high_bit())
    }

    fn canonical(&self) -> String {
        format!(
            "node {}-{}; fixed {:#018x}/{:#018x}",
            self.node.low_bit,
            self.node.high_bit(),
            self.fixed.0,
            self.fixed.1
        )
    }

    /// For people: `node bits 12-21, fixed bits 0x8000000000000000 = 0x0000000000000000`.
    pub(crate) fn describe(&self) -> String {
        format!(
            "node bits {}-{}, fixed bits {:#018x} = {:#018x}",
            self.node.low_bit,
            self.node.high_bit(),
            self.fixed.0,
            self.fixed.1
        )
    }
}

/// FNV-1a, 64 bits: stable across builds and platforms (file names depend on it).
#[cfg(feature = "state-file")]
pub(crate) fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use vesta_core::{IdType, Preset};

    #[test]
    fn the_same_layout_and_epoch_pass_and_another_epoch_or_unit_is_refused_naming_both() {
        let ours = CountedIn::of(IdType::MaxPeak.layout(), GenMethod::Embed);
        assert_eq!(
            ours.layout,
            "time 30-59, seq 10-29, node 0-9, 1000 ms units"
        );
        let file = || Remedy::RetireStateFile { path: "/s".into() };
        ours.check(Some(&ours.clone()), 5, "x", file()).unwrap();
        ours.check(None, 5, "x", file()).unwrap();

        let moved = CountedIn::of(
            &IdType::MaxPeak
                .layout()
                .with_epoch(Epoch::from_unix_ms(1_420_070_400_000)),
            GenMethod::Embed,
        );
        let refused = ours
            .check(Some(&moved), 5, "the state file /s", file())
            .unwrap_err();
        assert_eq!(refused.remedy(), Some(&file()));
        let err = refused.to_string();
        assert!(err.contains("machine 5"), "{err}");
        assert!(err.contains("the state file /s"), "{err}");
        assert!(err.contains("2015-01-01T00:00:00.000Z"), "{err}");
        assert!(err.contains("2014-12-31T16:00:00.000Z"), "{err}");
        assert!(
            err.ends_with("can never meet the new ones: retire the state file /s"),
            "{err}"
        );
        // Max-peak and min-granularity IDs never meet (the type bit): no refusal; nor a
        // REST server's mark under a TCP server of another epoch (the genMethod bits).
        let millis = CountedIn::of(IdType::MinGranularity.layout(), GenMethod::Embed);
        assert!(ours.check(Some(&millis), 5, "x", file()).is_ok());
        let rest = CountedIn::of(
            &IdType::MaxPeak
                .layout()
                .with_epoch(Epoch::from_unix_ms(1_420_070_400_000)),
            GenMethod::Rest,
        );
        let tcp = CountedIn::of(IdType::MaxPeak.layout(), GenMethod::Server);
        assert!(tcp.check(Some(&rest), 930, "x", file()).is_ok());
        // A mark of unknown fixed bits (written before they were recorded) may meet anything.
        let unknown = CountedIn {
            fixed: None,
            ..millis.clone()
        };
        assert!(ours.check(Some(&unknown), 5, "x", file()).is_err());
        // Leaf and Vesta max-peak may meet (no fixed bit tells them apart).
        let leaf = CountedIn::of(&vesta_core::Preset::Leaf.layout(), GenMethod::Embed);
        assert!(ours.check(Some(&leaf), 5, "x", file()).is_err());
        assert_eq!(CountedIn::decode(&ours.encode()), Some(ours.clone()));
        assert_eq!(CountedIn::decode(&unknown.encode()), Some(unknown));
        assert_eq!(CountedIn::decode(""), None);
    }

    #[test]
    fn one_space_whatever_the_layout_is_called_its_epoch_or_unit() {
        let vesta = IdType::MaxPeak.layout();
        let a = IdSpace::of(vesta, GenMethod::Embed);
        assert_eq!(a.key().len(), 16);
        let moved = IdSpace::of(
            &vesta.with_epoch(Epoch::from_unix_ms(1_000)),
            GenMethod::Embed,
        );
        assert_eq!(a, moved);
        // Vesta's type bit and genMethod: spaces that never meet, in classes of their own.
        let rest = IdSpace::of(vesta, GenMethod::Rest);
        let millis = IdSpace::of(IdType::MinGranularity.layout(), GenMethod::Embed);
        let version1 = IdSpace::of(&vesta.with_fixed("version", 1).unwrap(), GenMethod::Embed);
        for other in [&rest, &millis, &version1] {
            assert_ne!(a.key(), other.key());
            assert!(!a.meets(other), "{other:?}");
            assert!(a.classes().all(|c| !other.classes().any(|o| o == c)));
        }
        assert_eq!(a.classes().collect::<Vec<_>>(), vec![0]);
        // Leaf and Twitter: one space (one key), whatever the names; the genMethod does not
        // exist in either, so a server and `vesta gen` are one space too.
        let leaf = IdSpace::of(&Preset::Leaf.layout(), GenMethod::Embed);
        let twitter = IdSpace::of(&Preset::Twitter.layout(), GenMethod::Rest);
        assert_eq!(leaf, twitter);
        assert_eq!(leaf.key(), twitter.key());
        assert_eq!(leaf.node_name(), "node12-21");
        assert_eq!(
            leaf.classes().collect::<Vec<_>>(),
            (0..8).collect::<Vec<_>>()
        );
        // Sonyflake v1 and v2: one space (epochs differ); UidGenerator's node sits elsewhere.
        let sony = IdSpace::of(&Preset::Sonyflake.layout(), GenMethod::Embed);
        let sony2 = IdSpace::of(&Preset::SonyflakeV2.layout(), GenMethod::Embed);
        assert_eq!(sony, sony2);
        let uid = IdSpace::of(&Preset::UidGenerator.layout(), GenMethod::Embed);
        assert!(!uid.meets(&leaf) && !sony.meets(&leaf));
        // A layout with no bit fixed (time up to bit 63) meets Leaf where Leaf's sign bit is 0:
        // another key, but classes in common, so the host holds one of them at a time.
        let spec = vesta_core::LayoutSpec {
            name: "unsigned".into(),
            unit_ms: 1,
            epoch: Epoch::from_unix_ms(1_288_834_974_657),
            signed: false,
            fields: vec![
                vesta_core::FieldSpec::new("time", FieldKind::Time, 42),
                vesta_core::FieldSpec::new("worker", FieldKind::Node, 10),
                vesta_core::FieldSpec::new("seq", FieldKind::Seq, 12),
            ],
        };
        let unsigned = IdSpace::of(&spec.build().unwrap(), GenMethod::Embed);
        assert_ne!(unsigned.key(), leaf.key());
        assert!(unsigned.meets(&leaf));
        assert_eq!(unsigned.classes().count(), 16);
        // Stable across builds: file names depend on it.
        assert_eq!(fnv1a(b"vesta"), 0xee64_50b7_3492_5b16);
        assert_eq!(
            leaf.key(),
            IdSpace::of(&Preset::Leaf.layout(), GenMethod::Server).key()
        );
    }
}
