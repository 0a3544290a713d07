//! The peers' layouts, bit for bit and with their own epochs, so a team can switch to vesta-rs
//! without changing the IDs already in its tables. Each is written from the peer's source:
//!
//! - `leaf`: Meituan Leaf's `SnowflakeIDGenImpl`: sign 0 | 41 bits of ms since 1288834974657 |
//!   10 worker bits | 12 sequence bits.
//! - `twitter`: Twitter's IdWorker, the same 64 bits with the worker split into datacenter (5)
//!   and worker (5).
//! - `sonyflake`: Sonyflake v1 (`sony/sonyflake`): sign 0 | 39 bits of 10 ms since
//!   2014-09-01T00:00:00Z | 8 sequence bits | 16 machine bits.
//! - `sonyflake-v2`: Sonyflake v2 (`sony/sonyflake/v2`, since May 2025) with its defaults: the
//!   same bits, counted from 2025-01-01T00:00:00Z. v2's settings (`BitsSequence`,
//!   `BitsMachineID`, `TimeUnit` in whole ms, `StartTime`) are a custom layout (docs/migrate.md).
//! - `uid-generator`: Baidu's `DefaultUidGenerator`: sign 0 | 28 bits of seconds since
//!   2016-05-20T00:00:00+08:00 | 22 worker bits | 13 sequence bits.
//!
//! And `vesta`, Vesta's own two layouts (module `vesta`).

use std::fmt;
use std::str::FromStr;

use super::spec::{FieldSpec, LayoutSpec, PartSpec};
use super::{FieldKind, IdType, Layout};
use crate::epoch::Epoch;
use crate::error::FieldError;

/// Twitter's epoch, which Leaf keeps: 2010-11-04T01:42:54.657Z.
pub const TWITTER_EPOCH_MS: u64 = 1_288_834_974_657;
/// Sonyflake's default start time: 2014-09-01T00:00:00Z.
pub const SONYFLAKE_EPOCH_MS: u64 = 1_409_529_600_000;
/// Sonyflake v2's default start time: 2025-01-01T00:00:00Z.
pub const SONYFLAKE_V2_EPOCH_MS: u64 = 1_735_689_600_000;
/// UidGenerator's default epoch: 2016-05-20T00:00:00+08:00.
pub const UID_GENERATOR_EPOCH_MS: u64 = 1_463_673_600_000;

/// A named layout a config or flag can choose (`custom` layouts are described instead).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Preset {
    /// Vesta's own: max-peak or min-granularity by `type`.
    Vesta,
    /// Meituan Leaf's snowflake mode.
    Leaf,
    /// Twitter's snowflake: Leaf's bits with the node shown as datacenter + worker.
    Twitter,
    /// Sony's Sonyflake v1 (10 ms units, 16-bit machine, from 2014-09-01).
    Sonyflake,
    /// Sony's Sonyflake v2 with its defaults (v1's bits, from 2025-01-01).
    SonyflakeV2,
    /// Baidu's UidGenerator (seconds, 22-bit worker).
    UidGenerator,
}

impl Preset {
    /// Every preset, in the order docs list them.
    pub const ALL: [Preset; 6] = [
        Preset::Vesta,
        Preset::Leaf,
        Preset::Twitter,
        Preset::Sonyflake,
        Preset::SonyflakeV2,
        Preset::UidGenerator,
    ];

    /// The name used in configs, flags and output.
    pub const fn name(self) -> &'static str {
        match self {
            Preset::Vesta => "vesta",
            Preset::Leaf => "leaf",
            Preset::Twitter => "twitter",
            Preset::Sonyflake => "sonyflake",
            Preset::SonyflakeV2 => "sonyflake-v2",
            Preset::UidGenerator => "uid-generator",
        }
    }

    /// The preset's layout with its own epoch; `id_type` picks Vesta's type and is ignored by
    /// the peers' layouts.
    pub fn layout_of(self, id_type: IdType) -> Layout {
        match self {
            Preset::Vesta => id_type.layout().clone(),
            other => other.layout(),
        }
    }

    /// The preset's layout with its own epoch (Vesta's: max-peak).
    pub fn layout(self) -> Layout {
        let ms = |unit_ms, epoch_ms, fields| LayoutSpec {
            name: self.name().into(),
            unit_ms,
            epoch: Epoch::from_unix_ms(epoch_ms),
            signed: true,
            fields,
        };
        let spec = match self {
            Preset::Vesta => return IdType::MaxPeak.layout().clone(),
            Preset::Leaf => ms(
                1,
                TWITTER_EPOCH_MS,
                vec![
                    FieldSpec::new("time", FieldKind::Time, 41),
                    FieldSpec::new("workerId", FieldKind::Node, 10),
                    FieldSpec::new("sequence", FieldKind::Seq, 12),
                ],
            ),
            Preset::Twitter => ms(
                1,
                TWITTER_EPOCH_MS,
                vec![
                    FieldSpec::new("time", FieldKind::Time, 41),
                    FieldSpec::node_of(
                        "node",
                        vec![
                            PartSpec::new("datacenterId", 5),
                            PartSpec::new("workerId", 5),
                        ],
                    ),
                    FieldSpec::new("sequence", FieldKind::Seq, 12),
                ],
            ),
            Preset::Sonyflake => ms(
                10,
                SONYFLAKE_EPOCH_MS,
                vec![
                    FieldSpec::new("time", FieldKind::Time, 39),
                    FieldSpec::new("sequence", FieldKind::Seq, 8),
                    FieldSpec::new("machine-id", FieldKind::Node, 16),
                ],
            ),
            Preset::SonyflakeV2 => ms(
                10,
                SONYFLAKE_V2_EPOCH_MS,
                vec![
                    FieldSpec::new("time", FieldKind::Time, 39),
                    FieldSpec::new("sequence", FieldKind::Seq, 8),
                    FieldSpec::new("machine", FieldKind::Node, 16),
                ],
            ),
            Preset::UidGenerator => ms(
                1000,
                UID_GENERATOR_EPOCH_MS,
                vec![
                    FieldSpec::new("time", FieldKind::Time, 28),
                    FieldSpec::new("workerId", FieldKind::Node, 22),
                    FieldSpec::new("sequence", FieldKind::Seq, 13),
                ],
            ),
        };
        spec.build_as(Some(self), None)
            .expect("the presets are valid layouts")
    }
}

impl fmt::Display for Preset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Preset {
    type Err = FieldError;

    /// Accepts a preset's name.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let t = s.trim();
        Preset::ALL
            .into_iter()
            .find(|p| p.name() == t)
            .ok_or_else(|| {
                FieldError::invalid(
                    "layout",
                    t,
                    "vesta, leaf, twitter, sonyflake, sonyflake-v2, uid-generator (or a custom \
                     layout under [id.layout])",
                )
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_peers_bits_sit_where_their_code_puts_them() {
        // Leaf: id = (ts - twepoch) << 22 | workerId << 12 | sequence.
        let leaf = Preset::Leaf.layout();
        assert_eq!((leaf.time_shift(), leaf.node_span().low_bit), (22, 12));
        assert_eq!((leaf.seq_shift(), leaf.seq_bits()), (0, 12));
        // Twitter: datacenterId << 17 | workerId << 12.
        let tw = Preset::Twitter.layout();
        let parts = &tw.node_field().parts;
        assert_eq!((parts[0].span.low_bit, parts[1].span.low_bit), (17, 12));
        // Sonyflake: time << (8 + 16) | sequence << 16 | machine.
        let sf = Preset::Sonyflake.layout();
        assert_eq!(
            (sf.time_shift(), sf.seq_shift(), sf.node_bits()),
            (24, 16, 16)
        );
        assert_eq!(sf.unit_ms(), 10);
        // UidGenerator: deltaSeconds << (22 + 13) | workerId << 13 | sequence.
        let uid = Preset::UidGenerator.layout();
        assert_eq!((uid.time_shift(), uid.node_span().low_bit), (35, 13));
        assert_eq!(uid.time_bits(), 28);
        for p in Preset::ALL {
            assert_eq!(p.name().parse::<Preset>(), Ok(p));
        }
        assert!("snowflake".parse::<Preset>().is_err());
    }

    #[test]
    fn the_epochs_are_the_peers() {
        assert_eq!(
            Epoch::rfc3339(UID_GENERATOR_EPOCH_MS),
            "2016-05-19T16:00:00.000Z"
        );
        assert_eq!(
            Epoch::rfc3339(SONYFLAKE_EPOCH_MS),
            "2014-09-01T00:00:00.000Z"
        );
        assert_eq!(Epoch::rfc3339(TWITTER_EPOCH_MS), "2010-11-04T01:42:54.657Z");
        assert_eq!(
            Epoch::rfc3339(SONYFLAKE_V2_EPOCH_MS),
            "2025-01-01T00:00:00.000Z"
        );
        let v2 = Preset::SonyflakeV2.layout();
        let v1 = Preset::Sonyflake.layout();
        assert_eq!(
            v2.describe_bits(),
            "time 24-62, sequence 16-23, machine 0-15"
        );
        assert_eq!(v2.unit_ms(), v1.unit_ms());
        assert_eq!(v2.epoch().unix_ms(), SONYFLAKE_V2_EPOCH_MS);
    }
}
