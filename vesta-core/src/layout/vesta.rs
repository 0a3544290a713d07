//! Vesta's own two layouts, a family told apart by the type bit: from bit 0 up machine (10),
//! seq, time, genMethod (2), type (1), version (1). Type 0 (max-peak) counts seconds in 30 bits
//! with a 20-bit sequence; type 1 (min-granularity) counts milliseconds in 40 bits with a
//! 10-bit sequence.

use std::fmt;
use std::str::FromStr;
use std::sync::LazyLock;

use super::spec::{FieldSpec, LayoutSpec};
use super::{FieldKind, Layout, Preset};
use crate::epoch::Epoch;
use crate::error::FieldError;

/// Width of the machine field in both Vesta layouts.
pub const MACHINE_BITS: u32 = 10;
/// Lowest bit of Vesta's 2-bit genMethod field.
pub const GEN_METHOD_SHIFT: u32 = 60;
/// Vesta's type bit: 0 max-peak, 1 min-granularity.
pub const TYPE_SHIFT: u32 = 62;
/// Vesta's version bit: 0 default, 1 reserved for extension (a negative Java `long`).
pub const VERSION_SHIFT: u32 = 63;

/// Which of Vesta's two layouts an ID uses; stored in the ID's own type bit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum IdType {
    /// Seconds, 30-bit time, 20-bit seq: 2^20 IDs per second per machine.
    MaxPeak = 0,
    /// Milliseconds, 40-bit time, 10-bit seq: 1024 IDs per millisecond per machine.
    MinGranularity = 1,
}

#[allow(non_upper_case_globals)]
impl IdType {
    /// Both types, in code order.
    pub const ALL: [IdType; 2] = [IdType::MaxPeak, IdType::MinGranularity];

    /// Plain name of [`IdType::MaxPeak`]: time in seconds.
    pub const Seconds: IdType = IdType::MaxPeak;
    /// Plain name of [`IdType::MinGranularity`]: time in milliseconds.
    pub const Millis: IdType = IdType::MinGranularity;

    /// The value of the type bit.
    pub const fn code(self) -> u64 {
        self as u64
    }

    /// The type for a type-bit value; anything but 0 or 1 is an error naming the field.
    pub fn from_code(code: u64) -> Result<Self, FieldError> {
        match code {
            0 => Ok(IdType::MaxPeak),
            1 => Ok(IdType::MinGranularity),
            _ => Err(FieldError::out_of_range("type", code, 0, 1)),
        }
    }

    /// The name used in configs, CLI flags and output.
    pub const fn name(self) -> &'static str {
        match self {
            IdType::MaxPeak => "max-peak",
            IdType::MinGranularity => "min-granularity",
        }
    }

    /// This type's layout with Vesta's epoch and version 0.
    pub fn layout(self) -> &'static Layout {
        static MAX_PEAK: LazyLock<Layout> = LazyLock::new(|| build(IdType::MaxPeak));
        static MIN_GRANULARITY: LazyLock<Layout> = LazyLock::new(|| build(IdType::MinGranularity));
        match self {
            IdType::MaxPeak => &MAX_PEAK,
            IdType::MinGranularity => &MIN_GRANULARITY,
        }
    }
}

impl fmt::Display for IdType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for IdType {
    type Err = FieldError;

    /// Accepts the name (`max-peak`, `min-granularity`), the plain aliases (`seconds`,
    /// `millis`) or the code (`0`, `1`).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim() {
            "max-peak" | "seconds" | "0" => Ok(IdType::MaxPeak),
            "min-granularity" | "millis" | "1" => Ok(IdType::MinGranularity),
            other => Err(FieldError::invalid(
                "type",
                other,
                "max-peak (seconds), min-granularity (millis), 0 or 1",
            )),
        }
    }
}

/// The type bit of `id`.
pub(super) fn type_of(id: u64) -> IdType {
    if (id >> TYPE_SHIFT) & 1 == 0 {
        IdType::MaxPeak
    } else {
        IdType::MinGranularity
    }
}

/// The other Vesta layout with `layout`'s epoch and version.
pub(super) fn sibling(layout: &Layout, id_type: IdType) -> Layout {
    let version = layout.fixed_value("version").unwrap_or(0);
    id_type
        .layout()
        .with_epoch(layout.epoch())
        .with_fixed("version", version)
        .expect("both Vesta layouts have a 1-bit version field")
}

/// Vesta's layout of `id_type` with Vesta's epoch, version 0.
fn build(id_type: IdType) -> Layout {
    let (time_bits, seq_bits, unit_ms) = match id_type {
        IdType::MaxPeak => (30, 20, 1000),
        IdType::MinGranularity => (40, 10, 1),
    };
    let spec = LayoutSpec {
        name: "vesta".into(),
        unit_ms,
        epoch: Epoch::VESTA,
        signed: false,
        fields: vec![
            FieldSpec::new("version", FieldKind::Fixed(0), 1),
            FieldSpec::new("type", FieldKind::Fixed(id_type.code()), 1),
            FieldSpec::new("genMethod", FieldKind::Method, 2),
            FieldSpec::new("time", FieldKind::Time, time_bits),
            FieldSpec::new("seq", FieldKind::Seq, seq_bits),
            FieldSpec::new("machine", FieldKind::Node, MACHINE_BITS),
        ],
    };
    spec.build_as(Some(Preset::Vesta), Some(id_type))
        .expect("Vesta's layouts are valid")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fields::GenMethod;

    #[test]
    fn vestas_bits_are_where_the_design_puts_them() {
        for t in IdType::ALL {
            let l = t.layout();
            assert_eq!(l.node_span().low_bit, 0);
            assert_eq!(l.node_bits(), MACHINE_BITS);
            assert_eq!(l.seq_shift(), MACHINE_BITS);
            assert_eq!(l.time_shift() + l.time_bits(), GEN_METHOD_SHIFT);
            assert_eq!(l.method_span().unwrap().low_bit, GEN_METHOD_SHIFT);
            assert_eq!(l.header(GenMethod::Rest), t.code() << TYPE_SHIFT | 2 << 60);
        }
        assert_eq!(IdType::MaxPeak.layout().time_shift(), 30);
        assert_eq!(IdType::MinGranularity.layout().time_shift(), 20);
    }

    #[test]
    fn names_aliases_and_codes_parse() {
        assert_eq!("max-peak".parse::<IdType>(), Ok(IdType::MaxPeak));
        assert_eq!("seconds".parse::<IdType>(), Ok(IdType::Seconds));
        assert_eq!("millis".parse::<IdType>(), Ok(IdType::MinGranularity));
        assert_eq!("1".parse::<IdType>(), Ok(IdType::MinGranularity));
        let err = "fast".parse::<IdType>().unwrap_err().to_string();
        assert!(err.contains("type") && err.contains("max-peak"), "{err}");
    }
}
