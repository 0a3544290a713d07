//! Layouts as data: where each field of an ID sits, how long a time unit is and when time 0
//! starts, so the codec, the generator, the servers and the tools share one description.
//!
//! A [`Layout`] is checked once when it is built ([`LayoutSpec::build`] for a custom layout,
//! the constructors of `presets` for the peers' and Vesta's own) and is cheap to clone: the
//! generator copies the few shifts and masks it needs, everything else reads the description.
//!
//! Every layout has exactly one time, one sequence and one node (machine) field, with time the
//! highest of the three so that IDs are ordered by time; fixed fields (a value every ID
//! carries, such as Vesta's type bit) and a genMethod field may sit anywhere. Vesta's two
//! layouts form a family: the type bit of an ID names which of the two reads it, which is what
//! makes a Vesta ID explain itself with nothing but its epoch.

mod field;
#[cfg(feature = "serde")]
mod json;
mod presets;
mod spec;
mod vesta;

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

use chrono::{DateTime, Utc};

pub use field::{Field, FieldKind, FieldSpan, NodePart};
#[cfg(feature = "serde")]
pub use json::LAYOUT_JSON_FORMAT;
pub use presets::Preset;
pub use spec::{FieldSpec, LayoutError, LayoutSpec, PartSpec};
pub use vesta::{GEN_METHOD_SHIFT, IdType, MACHINE_BITS, TYPE_SHIFT, VERSION_SHIFT};

use crate::epoch::Epoch;
use crate::error::FieldError;
use crate::fields::GenMethod;
use crate::pool::MachinePools;

/// Fewest and most bits a node (machine) field may have: the machine-ID pools and leases work
/// from 32 to about 4 million machine IDs.
pub const NODE_BITS: std::ops::RangeInclusive<u32> = 5..=22;

/// A checked bit layout with its time unit and epoch: everything needed to explain, make and
/// issue its IDs. Cheap to clone (shared).
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Layout(Arc<Inner>);

#[derive(Debug, PartialEq, Eq, Hash)]
struct Inner {
    name: String,
    preset: Option<Preset>,
    id_type: Option<IdType>,
    unit_ms: u64,
    epoch: Epoch,
    signed: bool,
    /// From the top bit down.
    fields: Vec<Field>,
    time: FieldSpan,
    seq: FieldSpan,
    node: FieldSpan,
    method: Option<FieldSpan>,
    /// Every fixed field's value in its place.
    fixed: u64,
    /// The bits some field covers.
    used: u64,
}

impl Layout {
    /// The layout's name: a preset's (`vesta`, `leaf`, `twitter`, `sonyflake`,
    /// `uid-generator`) or a custom layout's own.
    pub fn name(&self) -> &str {
        &self.0.name
    }

    /// The preset this layout is, if any (custom layouts are none).
    pub fn preset(&self) -> Option<Preset> {
        self.0.preset
    }

    /// Vesta's type (max-peak or min-granularity) of a Vesta layout; `None` for the others.
    pub fn id_type(&self) -> Option<IdType> {
        self.0.id_type
    }

    /// The name with Vesta's type where there is one: `vesta max-peak`, `leaf`.
    pub fn full_name(&self) -> String {
        match self.0.id_type {
            Some(t) => format!("{} {t}", self.0.name),
            None => self.0.name.clone(),
        }
    }

    /// Length of one time unit in milliseconds.
    pub fn unit_ms(&self) -> u64 {
        self.0.unit_ms
    }

    /// The time unit in words, for messages: `millisecond`, `second`, `10 ms unit`.
    pub fn unit_name(&self) -> &'static str {
        match self.0.unit_ms {
            1 => "millisecond",
            10 => "10 ms unit",
            100 => "100 ms unit",
            1000 => "second",
            60_000 => "minute",
            _ => "time unit",
        }
    }

    /// Time zero of the time field.
    pub fn epoch(&self) -> Epoch {
        self.0.epoch
    }

    /// True when IDs must stay below 2^63, so an SQL `BIGINT` or a Java `long` holds them as
    /// positive numbers.
    pub fn signed(&self) -> bool {
        self.0.signed
    }

    /// The fields from the top bit down.
    pub fn fields(&self) -> &[Field] {
        &self.0.fields
    }

    /// The field called `name` (a field's own name, or the role names `time`, `seq`, `node`).
    pub fn field(&self, name: &str) -> Option<&Field> {
        self.0
            .fields
            .iter()
            .find(|f| f.name == name)
            .or_else(|| self.0.fields.iter().find(|f| role_matches(f.kind, name)))
    }

    /// The node field.
    pub fn node_field(&self) -> &Field {
        self.fields()
            .iter()
            .find(|f| f.kind == FieldKind::Node)
            .expect("a built layout has a node field")
    }

    /// Where the time field sits.
    pub fn time_span(&self) -> FieldSpan {
        self.0.time
    }

    /// Where the sequence field sits.
    pub fn seq_span(&self) -> FieldSpan {
        self.0.seq
    }

    /// Where the node (machine) field sits.
    pub fn node_span(&self) -> FieldSpan {
        self.0.node
    }

    /// Where the genMethod field sits, if the layout has one.
    pub fn method_span(&self) -> Option<FieldSpan> {
        self.0.method
    }

    /// Lowest bit of the time field.
    pub fn time_shift(&self) -> u32 {
        self.0.time.low_bit
    }

    /// Lowest bit of the sequence field: consecutive sequence numbers differ by `1 << seq_shift`.
    pub fn seq_shift(&self) -> u32 {
        self.0.seq.low_bit
    }

    /// The distance between IDs whose sequence numbers differ by one.
    pub fn seq_step(&self) -> u64 {
        1 << self.0.seq.low_bit
    }

    /// Width of the sequence field.
    pub fn seq_bits(&self) -> u32 {
        self.0.seq.bits
    }

    /// Width of the time field.
    pub fn time_bits(&self) -> u32 {
        self.0.time.bits
    }

    /// Width of the node field.
    pub fn node_bits(&self) -> u32 {
        self.0.node.bits
    }

    /// Largest node (machine) ID.
    pub fn max_node(&self) -> u64 {
        self.0.node.max()
    }

    /// IDs one machine can issue per time unit.
    pub fn capacity_per_unit(&self) -> u64 {
        1u64 << self.0.seq.bits
    }

    /// IDs one machine can issue per second, rounded down: the layout's cap.
    pub fn capacity_per_second(&self) -> u64 {
        self.capacity_per_unit() * 1000 / self.0.unit_ms
    }

    /// Largest sequence number.
    pub fn max_seq(&self) -> u64 {
        self.0.seq.max()
    }

    /// Largest time value, in units since the epoch.
    pub fn max_time(&self) -> u64 {
        self.0.time.max()
    }

    /// The bits every ID carries besides time, seq and node: the fixed fields' values and
    /// `gen_method` where the layout has a genMethod field.
    pub fn header(&self, gen_method: GenMethod) -> u64 {
        let method = self.0.method.map_or(0, |s| s.place(gen_method.code()));
        self.0.fixed | method
    }

    /// The bits some field covers (the others are 0 in every ID of the layout).
    pub fn used_bits(&self) -> u64 {
        self.0.used
    }

    /// The last representable instant (ms since the Unix epoch): the layout's end of life.
    pub fn end_of_life_ms(&self) -> u64 {
        let units = u128::from(self.max_time()) + 1;
        let end = u128::from(self.0.epoch.unix_ms()) + units * u128::from(self.0.unit_ms) - 1;
        u64::try_from(end).unwrap_or(u64::MAX)
    }

    /// The instant (ms since the Unix epoch) at which time value `time` starts.
    pub fn unix_ms_of(&self, time: u64) -> u64 {
        self.0
            .epoch
            .unix_ms()
            .saturating_add(time.saturating_mul(self.0.unit_ms))
    }

    /// The instant at which time value `time` starts, as a UTC date-time.
    pub fn datetime_of(&self, time: u64) -> DateTime<Utc> {
        Epoch::datetime_of_unix_ms(self.unix_ms_of(time))
    }

    /// The time value of the unit containing `unix_ms`; an instant before the epoch or past the
    /// end of life is an error naming the allowed range.
    pub fn time_at(&self, unix_ms: u64) -> Result<u64, FieldError> {
        let epoch = self.0.epoch.unix_ms();
        if unix_ms < epoch || unix_ms > self.end_of_life_ms() {
            return Err(FieldError::invalid(
                "time",
                &Epoch::rfc3339(unix_ms),
                "an instant between the epoch and the layout's end of life",
            ));
        }
        Ok((unix_ms - epoch) / self.0.unit_ms)
    }

    /// The time value of the unit containing `at`.
    pub fn time_of_datetime(&self, at: DateTime<Utc>) -> Result<u64, FieldError> {
        let ms = u64::try_from(at.timestamp_millis()).map_err(|_| {
            FieldError::invalid(
                "time",
                &at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
                "an instant after the epoch",
            )
        })?;
        self.time_at(ms)
    }

    /// The machine-ID pools of this layout: Vesta's split for Vesta's layouts (servers get the
    /// top tenth or so: 924..=1023 of 10 bits; see [`MachinePools::for_node_bits`]); the whole
    /// node field in every mode for the others, as their own systems use it
    /// ([`MachinePools::whole`]).
    pub fn default_pools(&self) -> MachinePools {
        if self.0.id_type.is_some() {
            MachinePools::for_node_bits(self.node_bits())
        } else {
            MachinePools::whole(self.node_bits())
        }
    }

    /// How far back the clock may step before issuing fails, by default: one unit, at least
    /// 5 ms and at most [`MAX_ROLLBACK_TOLERANCE_MS`](crate::MAX_ROLLBACK_TOLERANCE_MS), the
    /// largest accepted (Vesta: 1 s for seconds, 5 ms for milliseconds; Leaf waits out 5 ms
    /// too; a custom layout of minutes or hours rides out a minute).
    pub fn default_rollback_tolerance_ms(&self) -> u64 {
        self.0.unit_ms.clamp(5, crate::MAX_ROLLBACK_TOLERANCE_MS)
    }

    /// The same layout counting from another epoch.
    pub fn with_epoch(&self, epoch: Epoch) -> Layout {
        let mut inner = self.clone_inner();
        inner.epoch = epoch;
        Layout(Arc::new(inner))
    }

    /// The same layout with the fixed field `name` holding `value` (Vesta's `version`).
    pub fn with_fixed(&self, name: &str, value: u64) -> Result<Layout, FieldError> {
        let mut inner = self.clone_inner();
        let field = inner
            .fields
            .iter_mut()
            .find(|f| f.name == name && matches!(f.kind, FieldKind::Fixed(_)))
            .ok_or_else(|| {
                FieldError::invalid(
                    name.to_owned(),
                    &value.to_string(),
                    format!("a fixed field of the {} layout", self.name()),
                )
            })?;
        if value > field.span.max() {
            return Err(FieldError::out_of_range(
                name.to_owned(),
                value,
                0,
                field.span.max(),
            ));
        }
        field.kind = FieldKind::Fixed(value);
        inner.fixed = fixed_bits(&inner.fields);
        Ok(Layout(Arc::new(inner)))
    }

    /// The value of the fixed field `name`, if the layout has one.
    pub fn fixed_value(&self, name: &str) -> Option<u64> {
        self.0.fields.iter().find_map(|f| match f.kind {
            FieldKind::Fixed(v) if f.name == name => Some(v),
            _ => None,
        })
    }

    /// The layout that reads `id`: itself, or for Vesta the sibling the ID's type bit names.
    pub fn for_id(&self, id: u64) -> Cow<'_, Layout> {
        match self.0.id_type {
            Some(t) if vesta::type_of(id) != t => {
                Cow::Owned(vesta::sibling(self, vesta::type_of(id)))
            }
            _ => Cow::Borrowed(self),
        }
    }

    /// Every field's bit range for people: `time 22-62, workerId 12-21, sequence 0-11`.
    pub fn describe_bits(&self) -> String {
        let mut out = Vec::new();
        for f in self.fields() {
            out.push(format!(
                "{} {}-{}",
                f.name,
                f.span.low_bit,
                f.span.high_bit()
            ));
        }
        out.join(", ")
    }

    fn clone_inner(&self) -> Inner {
        let i = &*self.0;
        Inner {
            name: i.name.clone(),
            preset: i.preset,
            id_type: i.id_type,
            unit_ms: i.unit_ms,
            epoch: i.epoch,
            signed: i.signed,
            fields: i.fields.clone(),
            time: i.time,
            seq: i.seq,
            node: i.node,
            method: i.method,
            fixed: i.fixed,
            used: i.used,
        }
    }
}

impl fmt::Debug for Layout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Layout")
            .field("name", &self.full_name())
            .field("unit_ms", &self.0.unit_ms)
            .field("epoch_ms", &self.0.epoch.unix_ms())
            .field("bits", &self.describe_bits())
            .finish()
    }
}

/// `vesta max-peak`, `leaf`, or a custom layout's name.
impl fmt::Display for Layout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.full_name())
    }
}

impl Default for Layout {
    /// Vesta's max-peak layout with Vesta's epoch, the default of every issuer.
    fn default() -> Self {
        IdType::MaxPeak.layout().clone()
    }
}

/// True when `name` is the role name of a field of this kind (`machine` also names the node).
fn role_matches(kind: FieldKind, name: &str) -> bool {
    match kind {
        FieldKind::Time => name == "time",
        FieldKind::Seq => name == "seq" || name == "sequence",
        FieldKind::Node => name == "node" || name == "machine",
        FieldKind::Method => name == "genMethod",
        FieldKind::Fixed(_) => false,
    }
}

fn fixed_bits(fields: &[Field]) -> u64 {
    fields.iter().fold(0, |acc, f| match f.kind {
        FieldKind::Fixed(v) => acc | f.span.place(v),
        _ => acc,
    })
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

    fn all_presets() -> Vec<Layout> {
        let mut v = vec![
            IdType::MaxPeak.layout().clone(),
            IdType::MinGranularity.layout().clone(),
        ];
        v.extend(
            [
                Preset::Leaf,
                Preset::Twitter,
                Preset::Sonyflake,
                Preset::UidGenerator,
            ]
            .map(Preset::layout),
        );
        v
    }

    #[test]
    fn spans_never_overlap_and_vesta_tiles_all_64_bits() {
        for layout in all_presets() {
            let mut covered = 0u64;
            for f in layout.fields() {
                assert_eq!(
                    covered & f.span.mask(),
                    0,
                    "{} overlaps in {layout}",
                    f.name
                );
                covered |= f.span.mask();
            }
            assert_eq!(covered, layout.used_bits());
            let expect = if layout.signed() {
                u64::MAX >> 1
            } else {
                u64::MAX
            };
            assert_eq!(covered, expect, "{layout} leaves bits unused");
        }
    }

    #[test]
    fn capacities_match_the_designs() {
        let cap = |p: Preset| p.layout().capacity_per_second();
        assert_eq!(IdType::MaxPeak.layout().capacity_per_second(), 1 << 20);
        assert_eq!(
            IdType::MinGranularity.layout().capacity_per_second(),
            1_024_000
        );
        assert_eq!(cap(Preset::Leaf), 4_096_000);
        assert_eq!(cap(Preset::Sonyflake), 25_600);
        assert_eq!(cap(Preset::UidGenerator), 8_192);
    }

    #[test]
    fn max_peak_ends_in_2049_with_the_vesta_epoch() {
        let eol = IdType::MaxPeak.layout().end_of_life_ms();
        let year = Epoch::datetime_of_unix_ms(eol).format("%Y").to_string();
        assert_eq!(year, "2049");
    }

    #[test]
    fn peer_layouts_end_when_their_projects_say() {
        let year = |p: Preset| {
            let eol = p.layout().end_of_life_ms();
            Epoch::datetime_of_unix_ms(eol).format("%Y").to_string()
        };
        // 41 bits of ms from 2010-11-04: 2080; 39 bits of 10 ms from 2014-09-01: 2188;
        // 28 bits of seconds from 2016-05-20: 2024 (UidGenerator's own README says ~8.7 years).
        assert_eq!(year(Preset::Leaf), "2080");
        assert_eq!(year(Preset::Sonyflake), "2188");
        assert_eq!(year(Preset::UidGenerator), "2024");
    }

    #[test]
    fn time_left_is_counted_down_to_zero_and_described_in_days() {
        let eol = IdType::MaxPeak.layout().end_of_life_ms();
        assert_eq!(time_left_ms(eol, eol + 5), 0);
        assert_eq!(time_left_ms(eol, eol - 86_400_000), 86_400_000);
        assert_eq!(describe_span(3 * 86_400_000 + 5), "3 days");
        assert_eq!(describe_span(3653 * 86_400_000), "3653 days (10.0 years)");
    }

    #[test]
    fn time_at_floors_to_the_unit_and_rejects_out_of_range() {
        let mp = IdType::MaxPeak.layout();
        let mg = IdType::MinGranularity.layout();
        let e = mp.epoch().unix_ms();
        assert_eq!(mp.time_at(e + 1999), Ok(1));
        assert_eq!(mg.time_at(e + 1999), Ok(1999));
        assert!(mp.time_at(e - 1).is_err());
        let end = mp.end_of_life_ms();
        assert_eq!(mp.time_at(end), Ok(mp.max_time()));
        assert!(mp.time_at(end + 1).is_err());
        let sony = Preset::Sonyflake.layout();
        assert_eq!(sony.time_at(sony.epoch().unix_ms() + 25), Ok(2));
    }

    #[test]
    fn roles_and_own_names_find_fields() {
        let leaf = Preset::Leaf.layout();
        assert_eq!(leaf.field("workerId").unwrap().kind, FieldKind::Node);
        assert_eq!(leaf.field("machine").unwrap().name, "workerId");
        assert_eq!(leaf.field("seq").unwrap().name, "sequence");
        assert!(leaf.field("genMethod").is_none());
        let v = IdType::MinGranularity.layout();
        assert_eq!(v.field("type").unwrap().kind, FieldKind::Fixed(1));
    }

    #[test]
    fn with_fixed_sets_vestas_version_and_checks_its_range() {
        let v = IdType::MaxPeak.layout().with_fixed("version", 1).unwrap();
        assert_eq!(v.header(GenMethod::Embed), 1 << 63);
        let err = v.with_fixed("version", 2).unwrap_err().to_string();
        assert_eq!(err, "version 2 is out of range: allowed 0..=1");
        let err = Preset::Leaf
            .layout()
            .with_fixed("version", 1)
            .unwrap_err()
            .to_string();
        assert!(err.contains("a fixed field of the leaf layout"), "{err}");
    }

    #[test]
    fn a_vesta_id_is_read_by_the_layout_its_type_bit_names() {
        let mp = IdType::MaxPeak.layout().with_epoch(Epoch::from_unix_ms(5));
        let id = 1u64 << TYPE_SHIFT;
        let read = mp.for_id(id);
        assert_eq!(read.id_type(), Some(IdType::MinGranularity));
        assert_eq!(read.epoch(), Epoch::from_unix_ms(5));
        assert_eq!(mp.for_id(0).id_type(), Some(IdType::MaxPeak));
        let leaf = Preset::Leaf.layout();
        assert_eq!(leaf.for_id(u64::MAX).name(), "leaf");
    }
}
