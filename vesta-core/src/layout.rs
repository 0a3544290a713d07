//! The two bit layouts as data, so the codec, the generator and the tools share one description.
//!
//! From bit 0 up: machine (10 bits), seq, time, genMethod (2), type (1), version (1). The type bit
//! selects the widths of seq and time, which is what makes every ID self-describing.

use std::fmt;
use std::str::FromStr;

use crate::epoch::Epoch;
use crate::error::FieldError;

/// Width of the machine field, the same in both layouts.
pub const MACHINE_BITS: u32 = 10;
/// Lowest bit of the 2-bit genMethod field.
pub const GEN_METHOD_SHIFT: u32 = 60;
/// The type bit: 0 max-peak, 1 min-granularity.
pub const TYPE_SHIFT: u32 = 62;
/// The version bit: 0 default, 1 reserved for extension (a negative Java `long`).
pub const VERSION_SHIFT: u32 = 63;

/// Which of the two layouts an ID uses; stored in the ID's own type bit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum IdType {
    /// Seconds, 30-bit time, 20-bit seq: 2^20 IDs per second per machine.
    MaxPeak = 0,
    /// Milliseconds, 40-bit time, 10-bit seq: 1024 IDs per millisecond per machine.
    MinGranularity = 1,
}

impl IdType {
    /// Both types, in code order.
    pub const ALL: [IdType; 2] = [IdType::MaxPeak, IdType::MinGranularity];

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

    /// The bit layout of this type.
    pub const fn layout(self) -> &'static Layout {
        match self {
            IdType::MaxPeak => &Layout::MAX_PEAK,
            IdType::MinGranularity => &Layout::MIN_GRANULARITY,
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

    /// Accepts the name (`max-peak`, `min-granularity`) or the code (`0`, `1`).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim() {
            "max-peak" | "0" => Ok(IdType::MaxPeak),
            "min-granularity" | "1" => Ok(IdType::MinGranularity),
            other => Err(FieldError::invalid(
                "type",
                other,
                "max-peak, min-granularity, 0 or 1",
            )),
        }
    }
}

/// One field's place in the 64 bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FieldSpan {
    /// Vesta's field name (`machine`, `seq`, `time`, `genMethod`, `type`, `version`).
    pub name: &'static str,
    /// Lowest bit of the field.
    pub low_bit: u32,
    /// Width in bits.
    pub bits: u32,
}

impl FieldSpan {
    /// Highest bit of the field.
    pub const fn high_bit(&self) -> u32 {
        self.low_bit + self.bits - 1
    }

    /// Largest value the field holds.
    pub const fn max(&self) -> u64 {
        (1u64 << self.bits) - 1
    }
}

/// The widths and time unit of one ID type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    /// The type this layout belongs to.
    pub id_type: IdType,
    /// Width of the sequence field (bits above the machine field).
    pub seq_bits: u32,
    /// Width of the time field (bits above the sequence field, up to bit 59).
    pub time_bits: u32,
    /// Length of one time unit in milliseconds.
    pub unit_ms: u64,
    /// Name of the time unit, for messages.
    pub unit_name: &'static str,
}

impl Layout {
    /// Type 0: seq bits 10-29, time bits 30-59 in seconds.
    pub const MAX_PEAK: Layout = Layout {
        id_type: IdType::MaxPeak,
        seq_bits: 20,
        time_bits: 30,
        unit_ms: 1000,
        unit_name: "second",
    };

    /// Type 1: seq bits 10-19, time bits 20-59 in milliseconds.
    pub const MIN_GRANULARITY: Layout = Layout {
        id_type: IdType::MinGranularity,
        seq_bits: 10,
        time_bits: 40,
        unit_ms: 1,
        unit_name: "millisecond",
    };

    /// Lowest bit of the time field.
    pub const fn time_shift(&self) -> u32 {
        MACHINE_BITS + self.seq_bits
    }

    /// IDs one machine can issue per time unit.
    pub const fn capacity_per_unit(&self) -> u64 {
        1u64 << self.seq_bits
    }

    /// IDs one machine can issue per second: the layout's cap.
    pub const fn capacity_per_second(&self) -> u64 {
        self.capacity_per_unit() * (1000 / self.unit_ms)
    }

    /// Largest sequence number.
    pub const fn max_seq(&self) -> u64 {
        self.capacity_per_unit() - 1
    }

    /// Largest time value, in units since the epoch.
    pub const fn max_time(&self) -> u64 {
        (1u64 << self.time_bits) - 1
    }

    /// Every field's bit range, from bit 0 up.
    pub const fn spans(&self) -> [FieldSpan; 6] {
        [
            FieldSpan {
                name: "machine",
                low_bit: 0,
                bits: MACHINE_BITS,
            },
            FieldSpan {
                name: "seq",
                low_bit: MACHINE_BITS,
                bits: self.seq_bits,
            },
            FieldSpan {
                name: "time",
                low_bit: self.time_shift(),
                bits: self.time_bits,
            },
            FieldSpan {
                name: "genMethod",
                low_bit: GEN_METHOD_SHIFT,
                bits: 2,
            },
            FieldSpan {
                name: "type",
                low_bit: TYPE_SHIFT,
                bits: 1,
            },
            FieldSpan {
                name: "version",
                low_bit: VERSION_SHIFT,
                bits: 1,
            },
        ]
    }

    /// The last representable instant (ms since the Unix epoch): the layout's end of life.
    pub const fn end_of_life_ms(&self, epoch: Epoch) -> u64 {
        epoch.unix_ms() + (self.max_time() + 1) * self.unit_ms - 1
    }
}

/// How long a layout has left at `now_ms` (0 once it has ended), for operators who must pick a
/// new epoch long before the time field fills.
pub const fn time_left_ms(end_of_life_ms: u64, now_ms: u64) -> u64 {
    end_of_life_ms.saturating_sub(now_ms)
}

/// A span of time for people: whole days, with years beside them (`8083 days (22.1 years)`).
pub fn describe_span(ms: u64) -> String {
    const DAY_MS: u64 = 86_400_000;
    let days = ms / DAY_MS;
    if days >= 365 {
        format!("{days} days ({:.1} years)", days as f64 / 365.25)
    } else {
        format!("{days} days")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_tile_all_64_bits_without_overlap() {
        for t in IdType::ALL {
            let mut covered = 0u64;
            for span in t.layout().spans() {
                let mask = span.max() << span.low_bit;
                assert_eq!(covered & mask, 0, "{} overlaps in {t}", span.name);
                covered |= mask;
            }
            assert_eq!(covered, u64::MAX, "{t} leaves bits unused");
        }
    }

    #[test]
    fn capacities_match_the_design() {
        assert_eq!(Layout::MAX_PEAK.capacity_per_second(), 1 << 20);
        assert_eq!(Layout::MIN_GRANULARITY.capacity_per_second(), 1_024_000);
    }

    #[test]
    fn max_peak_ends_in_2049_with_the_vesta_epoch() {
        let eol = Layout::MAX_PEAK.end_of_life_ms(Epoch::VESTA);
        let year = Epoch::datetime_of_unix_ms(eol).format("%Y").to_string();
        assert_eq!(year, "2049");
    }

    #[test]
    fn time_left_is_counted_down_to_zero_and_described_in_days() {
        let eol = Layout::MAX_PEAK.end_of_life_ms(Epoch::VESTA);
        assert_eq!(time_left_ms(eol, eol + 5), 0);
        assert_eq!(time_left_ms(eol, eol - 86_400_000), 86_400_000);
        assert_eq!(describe_span(3 * 86_400_000 + 5), "3 days");
        assert_eq!(describe_span(3653 * 86_400_000), "3653 days (10.0 years)");
    }

    #[test]
    fn names_and_codes_parse() {
        assert_eq!("max-peak".parse::<IdType>(), Ok(IdType::MaxPeak));
        assert_eq!("1".parse::<IdType>(), Ok(IdType::MinGranularity));
        let err = "fast".parse::<IdType>().unwrap_err().to_string();
        assert!(err.contains("type") && err.contains("max-peak"), "{err}");
    }
}
