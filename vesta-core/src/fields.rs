//! Vesta's fields of an ID and the codec between them and the 64-bit value: [`IdFields`] is the
//! typed view of Vesta's two layouts (other layouts are read through
//! [`Explanation`](crate::Explanation) and made with [`FieldValues`](crate::FieldValues)).
//!
//! Decoding reads the ID's own type bit to pick the layout, so any `u64` decodes without config.
//! Encoding rejects every value outside its field's width: nothing is masked.

use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, Utc};

use crate::epoch::Epoch;
use crate::error::FieldError;
use crate::layout::{GEN_METHOD_SHIFT, IdType, Layout, MACHINE_BITS, TYPE_SHIFT, VERSION_SHIFT};
use crate::pool::MAX_MACHINE;

/// How the ID was issued; recorded in bits 60-61.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum GenMethod {
    /// The in-process issuer (`vesta-embed`).
    #[default]
    Embed = 0,
    /// The central TCP server (`vesta-server`).
    Server = 1,
    /// The REST server (`vesta-rest`).
    Rest = 2,
    /// Reserved by the design; never issued, but accepted by `make` and `explain`.
    Reserved = 3,
}

impl GenMethod {
    /// All four values, in code order.
    pub const ALL: [GenMethod; 4] = [
        GenMethod::Embed,
        GenMethod::Server,
        GenMethod::Rest,
        GenMethod::Reserved,
    ];

    /// The field's value.
    pub const fn code(self) -> u64 {
        self as u64
    }

    /// The genMethod for a field value; anything above 3 is an error naming the field.
    pub fn from_code(code: u64) -> Result<Self, FieldError> {
        match code {
            0 => Ok(GenMethod::Embed),
            1 => Ok(GenMethod::Server),
            2 => Ok(GenMethod::Rest),
            3 => Ok(GenMethod::Reserved),
            _ => Err(FieldError::out_of_range("genMethod", code, 0, 3)),
        }
    }

    /// The name used in configs, CLI flags and output.
    pub const fn name(self) -> &'static str {
        match self {
            GenMethod::Embed => "embed",
            GenMethod::Server => "server",
            GenMethod::Rest => "rest",
            GenMethod::Reserved => "reserved",
        }
    }
}

impl fmt::Display for GenMethod {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for GenMethod {
    type Err = FieldError;

    /// Accepts the name (`embed`, `server`, `rest`, `reserved`) or the code (`0`..`3`).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim() {
            "embed" | "0" => Ok(GenMethod::Embed),
            "server" | "1" => Ok(GenMethod::Server),
            "rest" | "2" => Ok(GenMethod::Rest),
            "reserved" | "3" => Ok(GenMethod::Reserved),
            other => Err(FieldError::invalid(
                "genMethod",
                other,
                "embed, server, rest, reserved or 0..=3",
            )),
        }
    }
}

/// A Vesta ID taken apart, with Vesta's field names. Build one to make an ID; decode one to
/// explain it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct IdFields {
    /// Bit 63: 0 default, 1 reserved for extension.
    pub version: u8,
    /// Bit 62: which layout the rest uses.
    pub id_type: IdType,
    /// Bits 60-61.
    pub gen_method: GenMethod,
    /// Whole time units since the epoch (seconds or milliseconds, by type).
    pub time: u64,
    /// Sequence number within the time unit.
    pub seq: u64,
    /// Machine ID, 0..=1023.
    pub machine: u64,
}

impl IdFields {
    /// Largest version value.
    pub const MAX_VERSION: u8 = 1;

    /// Takes an ID apart. Every `u64` is a valid Vesta ID: the type bit picks the layout.
    pub fn decode(id: u64) -> Self {
        let id_type = if (id >> TYPE_SHIFT) & 1 == 0 {
            IdType::MaxPeak
        } else {
            IdType::MinGranularity
        };
        let layout = id_type.layout();
        let gen_method = match (id >> GEN_METHOD_SHIFT) & 0b11 {
            0 => GenMethod::Embed,
            1 => GenMethod::Server,
            2 => GenMethod::Rest,
            _ => GenMethod::Reserved,
        };
        IdFields {
            version: (id >> VERSION_SHIFT) as u8,
            id_type,
            gen_method,
            time: (id >> layout.time_shift()) & layout.max_time(),
            seq: (id >> MACHINE_BITS) & layout.max_seq(),
            machine: id & MAX_MACHINE,
        }
    }

    /// Builds the ID, rejecting any field outside its width with an error naming the field.
    pub fn encode(&self) -> Result<u64, FieldError> {
        let layout = self.layout();
        let context = match self.id_type {
            IdType::MaxPeak => " for max-peak",
            IdType::MinGranularity => " for min-granularity",
        };
        let check = |field: &'static str, value: u64, max: u64, context: &'static str| {
            if value > max {
                Err(FieldError::OutOfRange {
                    field: field.into(),
                    value,
                    min: 0,
                    max,
                    context: context.into(),
                })
            } else {
                Ok(value)
            }
        };
        check(
            "version",
            u64::from(self.version),
            u64::from(Self::MAX_VERSION),
            "",
        )?;
        check("time", self.time, layout.max_time(), context)?;
        check("seq", self.seq, layout.max_seq(), context)?;
        check("machine", self.machine, MAX_MACHINE, "")?;
        Ok(self.header()
            | self.time << layout.time_shift()
            | self.seq << MACHINE_BITS
            | self.machine)
    }

    /// The bits above the time field (version, type, genMethod).
    pub(crate) const fn header(&self) -> u64 {
        (self.version as u64) << VERSION_SHIFT
            | self.id_type.code() << TYPE_SHIFT
            | self.gen_method.code() << GEN_METHOD_SHIFT
    }

    /// The layout named by the type field (with Vesta's epoch).
    pub fn layout(&self) -> &'static Layout {
        self.id_type.layout()
    }

    /// The instant the ID's time unit starts, ms since the Unix epoch.
    pub fn unix_ms(&self, epoch: Epoch) -> u64 {
        epoch.unix_ms() + self.time * self.layout().unit_ms()
    }

    /// The instant the ID's time unit starts, as a UTC date-time.
    pub fn datetime(&self, epoch: Epoch) -> DateTime<Utc> {
        Epoch::datetime_of_unix_ms(self.unix_ms(epoch))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(id_type: IdType, time: u64, seq: u64, machine: u64) -> IdFields {
        IdFields {
            version: 0,
            id_type,
            gen_method: GenMethod::Embed,
            time,
            seq,
            machine,
        }
    }

    #[test]
    fn max_peak_field_positions_match_vesta() {
        let id = fields(IdType::MaxPeak, 1, 1, 1).encode().unwrap();
        assert_eq!(id, 1 << 30 | 1 << 10 | 1);
        let id = IdFields {
            gen_method: GenMethod::Rest,
            ..fields(IdType::MaxPeak, 0, 0, 0)
        };
        assert_eq!(id.encode().unwrap(), 2 << 60);
    }

    #[test]
    fn min_granularity_field_positions_match_vesta() {
        let id = fields(IdType::MinGranularity, 1, 1, 1).encode().unwrap();
        assert_eq!(id, 1 << 62 | 1 << 20 | 1 << 10 | 1);
    }

    #[test]
    fn version_one_sets_the_sign_bit() {
        let id = IdFields {
            version: 1,
            ..fields(IdType::MaxPeak, 0, 0, 0)
        }
        .encode()
        .unwrap();
        assert_eq!(id, 1 << 63);
        assert!((id as i64) < 0);
    }

    #[test]
    fn out_of_range_fields_are_named() {
        let err = fields(IdType::MinGranularity, 0, 1024, 0)
            .encode()
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "seq 1024 is out of range for min-granularity: allowed 0..=1023"
        );
        let err = fields(IdType::MaxPeak, 0, 0, 1024).encode().unwrap_err();
        assert_eq!(err.field(), "machine");
        let err = IdFields {
            version: 2,
            ..fields(IdType::MaxPeak, 0, 0, 0)
        }
        .encode()
        .unwrap_err();
        assert_eq!(err.field(), "version");
        assert!(fields(IdType::MaxPeak, 1 << 30, 0, 0).encode().is_err());
    }
}
