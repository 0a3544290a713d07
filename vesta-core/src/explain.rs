//! An ID explained in its layout: every field under the layout's own names plus the instant, as
//! a table for people or as JSON, so the CLI, the TCP server and the REST server all print the
//! same thing. Vesta's IDs keep Vesta's table and Vesta's JSON keys exactly.

use std::fmt;

use crate::epoch::Epoch;
use crate::fields::{GenMethod, IdFields};
use crate::layout::{Field, FieldKind, IdType, Layout};

/// An ID with the layout that reads it and the instant its time unit starts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Explanation {
    /// The ID.
    pub id: u64,
    /// Start of its time unit, ms since the Unix epoch.
    pub unix_ms: u64,
    layout: Layout,
}

impl Explanation {
    /// Explains `id` in `layout` (for Vesta's layouts, in the one the ID's type bit names).
    pub fn new(id: u64, layout: &Layout) -> Self {
        let layout = layout.for_id(id).into_owned();
        let time = layout.time_span().get(id);
        Explanation {
            id,
            unix_ms: layout.unix_ms_of(time),
            layout,
        }
    }

    /// Explains a Vesta ID counted from `epoch`: the ID's own type bit picks the layout.
    pub fn vesta(id: u64, epoch: Epoch) -> Self {
        Self::new(id, &IdType::MaxPeak.layout().with_epoch(epoch))
    }

    /// The layout that reads the ID.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// Whole time units since the epoch.
    pub fn time(&self) -> u64 {
        self.layout.time_span().get(self.id)
    }

    /// The sequence number within the unit.
    pub fn seq(&self) -> u64 {
        self.layout.seq_span().get(self.id)
    }

    /// The node (machine) ID.
    pub fn node(&self) -> u64 {
        self.layout.node_span().get(self.id)
    }

    /// The genMethod the ID records, if its layout has that field.
    pub fn gen_method(&self) -> Option<GenMethod> {
        let span = self.layout.method_span()?;
        GenMethod::from_code(span.get(self.id)).ok()
    }

    /// The value of a field or node part called `name` (own or role name).
    pub fn value(&self, name: &str) -> Option<u64> {
        if let Some(f) = self.layout.field(name) {
            return Some(f.span.get(self.id));
        }
        self.layout
            .fields()
            .iter()
            .flat_map(|f| &f.parts)
            .find(|p| p.name == name)
            .map(|p| p.span.get(self.id))
    }

    /// Every field and node part with its value, from the top bit down (parts follow their
    /// node).
    pub fn values(&self) -> Vec<(&str, u64)> {
        let mut out = Vec::new();
        for f in self.layout.fields() {
            out.push((f.name.as_str(), f.span.get(self.id)));
            for p in &f.parts {
                out.push((p.name.as_str(), p.span.get(self.id)));
            }
        }
        out
    }

    /// Vesta's typed fields, when the layout is Vesta's.
    pub fn vesta_fields(&self) -> Option<IdFields> {
        self.layout.id_type().map(|_| IdFields::decode(self.id))
    }

    /// Set bits that no field of the layout covers: an ID of another layout.
    pub fn stray_bits(&self) -> u64 {
        self.id & !self.layout.used_bits()
    }

    /// Fixed fields whose value differs from the layout's (never for Vesta, whose version bit
    /// may be either): `(name, found, expected)`.
    pub fn unexpected_fixed(&self) -> Vec<(&str, u64, u64)> {
        if self.layout.id_type().is_some() {
            return Vec::new();
        }
        self.layout
            .fields()
            .iter()
            .filter_map(|f| match f.kind {
                FieldKind::Fixed(want) if f.span.get(self.id) != want => {
                    Some((f.name.as_str(), f.span.get(self.id), want))
                }
                _ => None,
            })
            .collect()
    }

    /// Why this ID looks foreign to its layout, if it does (one line, for people).
    pub fn warning(&self) -> Option<String> {
        let stray = self.stray_bits();
        if stray != 0 {
            return Some(format!(
                "bits outside the {} layout are set ({stray:#018x}): not an ID of this layout",
                self.layout.name()
            ));
        }
        let odd = self.unexpected_fixed();
        let (name, found, want) = odd.first()?;
        Some(format!(
            "fixed field {name} is {found}, but the {} layout's IDs carry {want}",
            self.layout.name()
        ))
    }

    /// The instant as RFC 3339 UTC text with millisecond precision.
    pub fn timestamp(&self) -> String {
        Epoch::rfc3339(self.unix_ms)
    }

    /// The ID as a Java/SQL `BIGINT` sees it (negative when bit 63 is set).
    pub fn as_java_long(&self) -> i64 {
        self.id as i64
    }

    /// A field's value for people: genMethod and Vesta's type with their names beside the
    /// number (`2 (rest)`, `0 (max-peak)`), the others as the number.
    pub fn shown(&self, field: &Field) -> String {
        let (kind, name, value) = (field.kind, field.name.as_str(), field.span.get(self.id));
        match kind {
            FieldKind::Method => match GenMethod::from_code(value) {
                Ok(m) => format!("{value} ({m})"),
                Err(_) => value.to_string(),
            },
            FieldKind::Fixed(_) if name == "type" && self.layout.id_type().is_some() => {
                match IdType::from_code(value) {
                    Ok(t) => format!("{value} ({t})"),
                    Err(_) => value.to_string(),
                }
            }
            _ => value.to_string(),
        }
    }
}

/// A readable multi-line table: the ID, its fields from the top bit down (the time followed by
/// its instant), and the layout's bits.
impl fmt::Display for Explanation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let width = self
            .values()
            .iter()
            .map(|(n, _)| n.len() + 1)
            .max()
            .unwrap_or(0)
            .max(11);
        let row = |f: &mut fmt::Formatter<'_>, name: &str, value: &str| {
            writeln!(f, "{name:<width$}{value}")
        };
        row(f, "id", &self.id.to_string())?;
        if self.as_java_long() < 0 {
            row(f, "java long", &self.as_java_long().to_string())?;
        }
        row(f, "hex", &format!("{:#018x}", self.id))?;
        for field in self.layout.fields() {
            let value = field.span.get(self.id);
            let shown = if field.kind == FieldKind::Time {
                format!("{value} {}s since the epoch", self.layout.unit_name())
            } else {
                self.shown(field)
            };
            row(f, &field.name, &shown)?;
            for p in &field.parts {
                row(f, &p.name, &p.span.get(self.id).to_string())?;
            }
            if field.kind == FieldKind::Time {
                row(f, "timestamp", &self.timestamp())?;
            }
        }
        if let Some(w) = self.warning() {
            row(f, "warning", &w)?;
        }
        let name = match self.layout.id_type() {
            Some(t) => t.name().to_owned(),
            None => self.layout.name().to_owned(),
        };
        write!(
            f,
            "{:<width$}{name}: {}",
            "layout",
            self.layout.describe_bits()
        )
    }
}

#[cfg(feature = "serde")]
impl serde::Serialize for Explanation {
    /// Vesta's layouts: Vesta's keys (`id` as a string, the fields, `timestamp`, `typeName`,
    /// `genMethodName`). Other layouts: `id`, `layout`, every field and node part under its own
    /// name, `timestamp`.
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        if let Some(x) = self.vesta_fields() {
            use serde::ser::SerializeStruct;
            let mut st = s.serialize_struct("Explanation", 10)?;
            st.serialize_field("id", &self.id.to_string())?;
            st.serialize_field("version", &x.version)?;
            st.serialize_field("type", &x.id_type.code())?;
            st.serialize_field("genMethod", &x.gen_method.code())?;
            st.serialize_field("time", &x.time)?;
            st.serialize_field("seq", &x.seq)?;
            st.serialize_field("machine", &x.machine)?;
            st.serialize_field("timestamp", &self.timestamp())?;
            st.serialize_field("typeName", x.id_type.name())?;
            st.serialize_field("genMethodName", x.gen_method.name())?;
            return st.end();
        }
        let values = self.values();
        let mut m = s.serialize_map(Some(values.len() + 3))?;
        m.serialize_entry("id", &self.id.to_string())?;
        m.serialize_entry("layout", self.layout.name())?;
        for (name, value) in &values {
            m.serialize_entry(name, value)?;
        }
        m.serialize_entry("timestamp", &self.timestamp())?;
        if let Some(w) = self.warning() {
            m.serialize_entry("warning", &w)?;
        }
        m.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::Preset;

    #[test]
    fn vestas_table_is_unchanged() {
        let x = Explanation::vesta(402_919_754_366_452_736, Epoch::VESTA);
        let text = x.to_string();
        assert!(
            text.starts_with("id         402919754366452736\nhex        "),
            "{text}"
        );
        assert!(text.contains("\ntype       0 (max-peak)\ngenMethod  0 (embed)\ntime       "));
        assert!(text.contains(" seconds since the epoch\ntimestamp  2026-11-21T19:37:43.000Z\n"));
        assert!(text.ends_with(
            "layout     max-peak: version 63-63, type 62-62, genMethod 60-61, time 30-59, \
             seq 10-29, machine 0-9"
        ));
    }

    #[test]
    fn a_twitter_id_shows_its_node_parts_and_warns_of_stray_bits() {
        let tw = Preset::Twitter.layout();
        let id = 5u64 << 22 | 3 << 17 | 9 << 12 | 42;
        let x = Explanation::new(id, &tw);
        assert_eq!(
            x.values(),
            vec![
                ("time", 5),
                ("node", 3 << 5 | 9),
                ("datacenterId", 3),
                ("workerId", 9),
                ("sequence", 42)
            ]
        );
        assert_eq!(x.unix_ms, tw.epoch().unix_ms() + 5);
        assert!(x.warning().is_none());
        assert!(x.to_string().contains("\ndatacenterId 3\n"), "{x}");
        let foreign = Explanation::new(id | 1 << 63, &tw);
        assert!(
            foreign
                .warning()
                .unwrap()
                .contains("not an ID of this layout")
        );
    }
}
