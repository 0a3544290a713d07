//! A layout described field by field, as a user writes one under `[id.layout]`: checked once
//! by [`LayoutSpec::build`], which places the fields from the top bit down (the last one ends
//! at bit 0) and refuses anything that could issue unordered, overlapping or unreadable IDs.

use std::collections::HashSet;

use super::{Field, FieldKind, FieldSpan, Inner, Layout, NODE_BITS, NodePart, Preset, fixed_bits};
use crate::epoch::Epoch;
use crate::layout::IdType;

/// The longest time unit: a day.
pub const MAX_UNIT_MS: u64 = 86_400_000;

/// Names an explanation uses for itself, so no field may take them.
const RESERVED_NAMES: [&str; 5] = ["id", "timestamp", "layout", "unixMs", "pool"];

/// A layout as described: its fields from the top bit down, the time unit and the epoch.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(deny_unknown_fields))]
pub struct LayoutSpec {
    /// The layout's name in output and metrics.
    #[cfg_attr(feature = "serde", serde(default = "default_name"))]
    pub name: String,
    /// Length of one time unit in milliseconds (1 ms to a day).
    pub unit_ms: u64,
    /// Time zero of the time field.
    #[cfg_attr(
        feature = "serde",
        serde(deserialize_with = "crate::epoch::deserialize")
    )]
    pub epoch: Epoch,
    /// Keep every ID below 2^63 so an SQL `BIGINT` or a Java `long` holds it as a positive
    /// number: the fields may then take at most 63 bits.
    #[cfg_attr(feature = "serde", serde(default = "default_signed"))]
    pub signed: bool,
    /// The fields from the top bit down; the last one ends at bit 0.
    pub fields: Vec<FieldSpec>,
}

#[cfg(feature = "serde")]
fn default_name() -> String {
    "custom".into()
}

#[cfg(feature = "serde")]
fn default_signed() -> bool {
    true
}

/// One field as described.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(try_from = "RawField"))]
pub struct FieldSpec {
    /// The field's name (unique in the layout, parts included).
    pub name: String,
    /// What it holds.
    pub kind: FieldKind,
    /// Width in bits (for a node with parts, their sum).
    pub bits: u32,
    /// The node field's named parts, from the top down (node only; may be empty).
    pub parts: Vec<PartSpec>,
}

impl FieldSpec {
    /// A field without parts.
    pub fn new(name: impl Into<String>, kind: FieldKind, bits: u32) -> Self {
        FieldSpec {
            name: name.into(),
            kind,
            bits,
            parts: Vec::new(),
        }
    }

    /// A node field made of named parts, from the top down.
    pub fn node_of(name: impl Into<String>, parts: Vec<PartSpec>) -> Self {
        FieldSpec {
            name: name.into(),
            kind: FieldKind::Node,
            bits: parts.iter().map(|p| p.bits).sum(),
            parts,
        }
    }
}

/// A named part of the node field.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(deny_unknown_fields))]
pub struct PartSpec {
    /// The part's name.
    pub name: String,
    /// Width in bits.
    pub bits: u32,
}

impl PartSpec {
    /// A part of `bits` bits.
    pub fn new(name: impl Into<String>, bits: u32) -> Self {
        PartSpec {
            name: name.into(),
            bits,
        }
    }
}

/// A field as written in TOML: `{ kind = "fixed", name = "version", bits = 1, value = 0 }`.
#[cfg(feature = "serde")]
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct RawField {
    kind: String,
    name: Option<String>,
    bits: Option<u32>,
    value: Option<u64>,
    #[serde(default)]
    parts: Vec<PartSpec>,
}

#[cfg(feature = "serde")]
impl TryFrom<RawField> for FieldSpec {
    type Error = String;

    fn try_from(raw: RawField) -> Result<Self, String> {
        let kind = match (raw.kind.as_str(), raw.value) {
            ("time", None) => FieldKind::Time,
            ("seq", None) => FieldKind::Seq,
            ("node", None) => FieldKind::Node,
            ("method", None) => FieldKind::Method,
            ("fixed", Some(v)) => FieldKind::Fixed(v),
            ("fixed", None) => return Err("a fixed field needs its `value`".into()),
            ("time" | "seq" | "node" | "method", Some(_)) => {
                return Err(format!(
                    "only a fixed field has a `value`, not {}",
                    raw.kind
                ));
            }
            (other, _) => {
                return Err(format!(
                    "kind `{other}` is not valid: expected time, seq, node, fixed or method"
                ));
            }
        };
        let name = match raw.name {
            Some(n) => n,
            None if matches!(kind, FieldKind::Fixed(_)) => {
                return Err("a fixed field needs a `name`".into());
            }
            None if kind == FieldKind::Method => "genMethod".into(),
            None => kind.name().into(),
        };
        if !raw.parts.is_empty() && kind != FieldKind::Node {
            return Err(format!("only the node field has `parts`, not {name}"));
        }
        let bits = match (raw.bits, raw.parts.is_empty()) {
            (Some(b), _) => b,
            (None, false) => raw.parts.iter().map(|p| p.bits).sum(),
            (None, true) => return Err(format!("field {name} needs `bits`")),
        };
        Ok(FieldSpec {
            name,
            kind,
            bits,
            parts: raw.parts,
        })
    }
}

/// A layout description that cannot be used; each message names the field and the rule.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LayoutError {
    /// The fields take more bits than an ID has.
    #[error(
        "the fields take {bits} bits: allowed at most {max}{}",
        if *signed { " (signed = true keeps the top bit 0 for SQL BIGINT and Java long)" } else { "" }
    )]
    TooWide {
        /// Bits the fields take.
        bits: u32,
        /// 63 or 64.
        max: u32,
        /// Whether the top bit must stay 0.
        signed: bool,
    },
    /// A field's width is outside what its kind allows.
    #[error("field {name} has {bits} bits: allowed {min}..={max}")]
    Bits {
        /// The field.
        name: String,
        /// Its width.
        bits: u32,
        /// Fewest allowed.
        min: u32,
        /// Most allowed.
        max: u32,
    },
    /// A kind that must appear exactly once is missing or repeated.
    #[error("a layout needs exactly one {kind} field, found {found}")]
    Count {
        /// The kind.
        kind: &'static str,
        /// How many there are.
        found: usize,
    },
    /// Time does not lie above seq and node, so IDs would not be ordered by time.
    #[error(
        "the time field must lie above the seq and node fields (IDs are ordered by time): \
         list it before them"
    )]
    TimeNotHighest,
    /// Two fields or parts share a name, or a name is reserved or malformed.
    #[error("field name `{name}` is not allowed: {reason}")]
    Name {
        /// The name.
        name: String,
        /// Why.
        reason: &'static str,
    },
    /// The node's parts do not add up to its width.
    #[error("the parts of node field {name} take {parts} bits but the field has {bits}")]
    Parts {
        /// The node field.
        name: String,
        /// Bits of the parts.
        parts: u32,
        /// Bits of the field.
        bits: u32,
    },
    /// A fixed field's value does not fit its width.
    #[error("fixed field {name} value {value} is out of range: allowed 0..={max}")]
    FixedValue {
        /// The field.
        name: String,
        /// The value.
        value: u64,
        /// Its largest value.
        max: u64,
    },
    /// The time unit is outside 1 ms..=1 day.
    #[error("unit_ms {0} is out of range: allowed 1..={MAX_UNIT_MS}")]
    Unit(u64),
}

impl LayoutSpec {
    /// Checks the description and places its fields: a layout ready to issue.
    pub fn build(&self) -> Result<Layout, LayoutError> {
        self.build_as(None, None)
    }

    pub(super) fn build_as(
        &self,
        preset: Option<Preset>,
        id_type: Option<IdType>,
    ) -> Result<Layout, LayoutError> {
        if !(1..=MAX_UNIT_MS).contains(&self.unit_ms) {
            return Err(LayoutError::Unit(self.unit_ms));
        }
        self.check_names()?;
        for (kind, name) in [
            (FieldKind::Time, "time"),
            (FieldKind::Seq, "seq"),
            (FieldKind::Node, "node"),
        ] {
            let found = self.fields.iter().filter(|f| f.kind == kind).count();
            if found != 1 {
                return Err(LayoutError::Count { kind: name, found });
            }
        }
        let methods = self
            .fields
            .iter()
            .filter(|f| f.kind == FieldKind::Method)
            .count();
        if methods > 1 {
            return Err(LayoutError::Count {
                kind: "method (at most one)",
                found: methods,
            });
        }
        let max_total = if self.signed { 63 } else { 64 };
        for f in &self.fields {
            let (min, max) = match f.kind {
                FieldKind::Node => (*NODE_BITS.start(), *NODE_BITS.end()),
                FieldKind::Method => (2, 2),
                _ => (1, max_total),
            };
            if !(min..=max).contains(&f.bits) {
                return Err(LayoutError::Bits {
                    name: f.name.clone(),
                    bits: f.bits,
                    min,
                    max,
                });
            }
        }
        let total: u32 = self.fields.iter().map(|f| f.bits).sum();
        if total > max_total {
            return Err(LayoutError::TooWide {
                bits: total,
                max: max_total,
                signed: self.signed,
            });
        }
        let position = |kind| self.fields.iter().position(|f| f.kind == kind);
        let time_at = position(FieldKind::Time);
        if time_at > position(FieldKind::Seq) || time_at > position(FieldKind::Node) {
            return Err(LayoutError::TimeNotHighest);
        }
        let fields = self.place(total)?;
        let span = |kind| {
            fields
                .iter()
                .find(|f| f.kind == kind)
                .map(|f| f.span)
                .expect("counted above")
        };
        let inner = Inner {
            name: self.name.clone(),
            preset,
            id_type,
            unit_ms: self.unit_ms,
            epoch: self.epoch,
            signed: self.signed,
            time: span(FieldKind::Time),
            seq: span(FieldKind::Seq),
            node: span(FieldKind::Node),
            method: fields
                .iter()
                .find(|f| f.kind == FieldKind::Method)
                .map(|f| f.span),
            fixed: fixed_bits(&fields),
            used: fields.iter().fold(0, |acc, f| acc | f.span.mask()),
            fields,
        };
        Ok(Layout(std::sync::Arc::new(inner)))
    }

    /// Every name (fields and parts) is an identifier, unique and not reserved.
    fn check_names(&self) -> Result<(), LayoutError> {
        let mut seen = HashSet::new();
        let names = self
            .fields
            .iter()
            .flat_map(|f| std::iter::once(&f.name).chain(f.parts.iter().map(|p| &p.name)));
        for name in names {
            let bad = |reason| {
                Err(LayoutError::Name {
                    name: name.clone(),
                    reason,
                })
            };
            let mut chars = name.chars();
            let starts_with_letter = chars.next().is_some_and(|c| c.is_ascii_alphabetic());
            if !starts_with_letter
                || name.len() > 32
                || !chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
            {
                return bad("use 1-32 of A-Z a-z 0-9 _ -, starting with a letter");
            }
            if RESERVED_NAMES.contains(&name.as_str()) {
                return bad("it is reserved for the explanation itself");
            }
            if !seen.insert(name.as_str()) {
                return bad("two fields or parts share it");
            }
        }
        Ok(())
    }

    /// The fields with their bit positions, from the top down, the last ending at bit 0.
    fn place(&self, total: u32) -> Result<Vec<Field>, LayoutError> {
        let mut next_high = total;
        let mut out = Vec::with_capacity(self.fields.len());
        for f in &self.fields {
            let low_bit = next_high - f.bits;
            next_high = low_bit;
            let span = FieldSpan {
                low_bit,
                bits: f.bits,
            };
            if let FieldKind::Fixed(value) = f.kind
                && value > span.max()
            {
                return Err(LayoutError::FixedValue {
                    name: f.name.clone(),
                    value,
                    max: span.max(),
                });
            }
            let parts = if f.parts.is_empty() {
                Vec::new()
            } else {
                let sum: u32 = f.parts.iter().map(|p| p.bits).sum();
                if sum != f.bits || f.parts.iter().any(|p| p.bits == 0) {
                    return Err(LayoutError::Parts {
                        name: f.name.clone(),
                        parts: sum,
                        bits: f.bits,
                    });
                }
                let mut part_high = low_bit + f.bits;
                f.parts
                    .iter()
                    .map(|p| {
                        part_high -= p.bits;
                        NodePart {
                            name: p.name.clone(),
                            span: FieldSpan {
                                low_bit: part_high,
                                bits: p.bits,
                            },
                        }
                    })
                    .collect()
            };
            out.push(Field {
                name: f.name.clone(),
                kind: f.kind,
                span,
                parts,
            });
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seed_example() -> LayoutSpec {
        // The seeds' company variant: 41 ms + 6 IDC + 6 business + 10 seq.
        LayoutSpec {
            name: "orders".into(),
            unit_ms: 1,
            epoch: Epoch::from_unix_ms(1_577_836_800_000),
            signed: true,
            fields: vec![
                FieldSpec::new("time", FieldKind::Time, 41),
                FieldSpec::node_of(
                    "node",
                    vec![PartSpec::new("idc", 6), PartSpec::new("business", 6)],
                ),
                FieldSpec::new("seq", FieldKind::Seq, 10),
            ],
        }
    }

    #[test]
    fn the_seeds_company_layout_places_its_fields_from_the_top() {
        let l = seed_example().build().unwrap();
        assert_eq!(l.describe_bits(), "time 22-62, node 10-21, seq 0-9");
        let node = l.node_field();
        assert_eq!(
            node.parts[0].span,
            FieldSpan {
                low_bit: 16,
                bits: 6
            }
        );
        assert_eq!(
            node.parts[1].span,
            FieldSpan {
                low_bit: 10,
                bits: 6
            }
        );
        assert_eq!(l.seq_step(), 1);
        assert_eq!(l.used_bits(), u64::MAX >> 1);
    }

    #[test]
    fn bad_descriptions_are_refused_naming_the_rule() {
        let err = |f: &dyn Fn(&mut LayoutSpec)| {
            let mut s = seed_example();
            f(&mut s);
            s.build().unwrap_err().to_string()
        };
        assert_eq!(
            err(&|s| s.fields[0].bits = 42),
            "the fields take 64 bits: allowed at most 63 (signed = true keeps the top bit 0 for \
             SQL BIGINT and Java long)"
        );
        assert!(err(&|s| s.fields.swap(0, 2)).contains("time field must lie above"));
        assert!(err(&|s| s.fields[2].kind = FieldKind::Time).contains("exactly one time"));
        assert!(err(&|s| s.fields[1].parts[1].name = "idc".into()).contains("share it"));
        assert!(err(&|s| s.fields[2].name = "timestamp".into()).contains("reserved"));
        assert!(err(&|s| s.fields[1].parts[0].bits = 5).contains("parts of node field"));
        assert_eq!(
            err(&|s| s.fields[1] = FieldSpec::new("node", FieldKind::Node, 4)),
            "field node has 4 bits: allowed 5..=22"
        );
        assert_eq!(
            err(&|s| s.unit_ms = 0),
            "unit_ms 0 is out of range: allowed 1..=86400000"
        );
        assert!(
            err(&|s| {
                s.fields[0].bits = 40;
                s.fields
                    .insert(0, FieldSpec::new("biz", FieldKind::Fixed(2), 1));
            })
            .contains("fixed field biz value 2")
        );
    }

    #[test]
    fn an_unsigned_layout_may_use_all_64_bits() {
        let mut s = seed_example();
        s.signed = false;
        s.fields[0].bits = 42;
        assert_eq!(s.build().unwrap().used_bits(), u64::MAX);
    }
}
