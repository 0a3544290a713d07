//! Making an ID of any layout from chosen field values, to repair data: every field is named
//! (by the layout's own name or by its role: `time`, `seq`, `node`/`machine`, `genMethod`),
//! range-checked and never masked.

use crate::error::FieldError;
use crate::layout::{FieldKind, FieldSpan, IdType, Layout};

/// Field values by name, to make an ID from with [`Layout::make`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FieldValues {
    entries: Vec<(String, u64)>,
}

impl FieldValues {
    /// No values yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// These values and `name = value`.
    pub fn with(mut self, name: impl Into<String>, value: u64) -> Self {
        self.set(name, value);
        self
    }

    /// Sets `name = value`, replacing an earlier value of the same name.
    pub fn set(&mut self, name: impl Into<String>, value: u64) {
        let name = name.into();
        match self.entries.iter_mut().find(|(n, _)| *n == name) {
            Some(entry) => entry.1 = value,
            None => self.entries.push((name, value)),
        }
    }

    /// The value set for `name`, if any.
    pub fn get(&self, name: &str) -> Option<u64> {
        self.entries
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| *v)
    }

    /// The values given, in order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, u64)> {
        self.entries.iter().map(|(n, v)| (n.as_str(), *v))
    }
}

impl Layout {
    /// The ID with `values`: time, seq and the node (whole, or every one of its parts) are
    /// required; fixed fields default to the layout's value and genMethod to 0 (embed). For
    /// Vesta, `type` picks which of the two layouts makes the ID. A name the layout does not
    /// have, a field given twice or a value out of its field's range is an error naming it.
    pub fn make(&self, values: &FieldValues) -> Result<u64, FieldError> {
        let layout = self.vesta_type_from(values)?;
        let context = match layout.id_type() {
            Some(t) => t.name().to_owned(),
            None => layout.name().to_owned(),
        };
        let mut id = 0u64;
        let mut covered = 0u64;
        for (name, value) in values.iter() {
            let span = layout.span_named(name).ok_or_else(|| {
                FieldError::invalid(
                    name.to_owned(),
                    &value.to_string(),
                    format!(
                        "a field of the {} layout: {}",
                        layout.name(),
                        layout.names()
                    ),
                )
            })?;
            if covered & span.mask() != 0 {
                return Err(FieldError::invalid(
                    name.to_owned(),
                    &value.to_string(),
                    "each field once (a node is given whole or by its parts, not both)",
                ));
            }
            if value > span.max() {
                // Vesta names the type only where the widths differ by type: time and seq.
                let err = FieldError::out_of_range(name.to_owned(), value, 0, span.max());
                let by_type = span == layout.time_span() || span == layout.seq_span();
                return Err(if layout.id_type().is_none() || by_type {
                    err.within(&context)
                } else {
                    err
                });
            }
            covered |= span.mask();
            id |= span.place(value);
        }
        for field in layout.fields() {
            if covered & field.span.mask() == field.span.mask() {
                continue;
            }
            match field.kind {
                FieldKind::Fixed(v) if covered & field.span.mask() == 0 => {
                    id |= field.span.place(v)
                }
                FieldKind::Method if covered & field.span.mask() == 0 => {}
                _ => {
                    let missing = if field.parts.is_empty() || covered & field.span.mask() == 0 {
                        field.name.clone()
                    } else {
                        let parts: Vec<&str> = field
                            .parts
                            .iter()
                            .filter(|p| covered & p.span.mask() == 0)
                            .map(|p| p.name.as_str())
                            .collect();
                        parts.join(", ")
                    };
                    return Err(FieldError::Missing {
                        field: missing.into(),
                        layout: layout.name().to_owned(),
                    });
                }
            }
        }
        Ok(id)
    }

    /// For Vesta, the sibling that `type` names (checked); otherwise this layout.
    fn vesta_type_from(&self, values: &FieldValues) -> Result<Layout, FieldError> {
        let chosen = values.iter().find(|(n, _)| *n == "type").map(|(_, v)| v);
        match (self.id_type(), chosen) {
            (Some(_), Some(code)) => {
                let t = IdType::from_code(code)?;
                Ok(self
                    .for_id(t.code() << crate::layout::TYPE_SHIFT)
                    .into_owned())
            }
            _ => Ok(self.clone()),
        }
    }

    /// The span of a field or node part by name (own or role).
    fn span_named(&self, name: &str) -> Option<FieldSpan> {
        if let Some(f) = self.field(name) {
            return Some(f.span);
        }
        self.fields()
            .iter()
            .flat_map(|f| &f.parts)
            .find(|p| p.name == name)
            .map(|p| p.span)
    }

    /// Every field and part name, for messages.
    fn names(&self) -> String {
        let mut names = Vec::new();
        for f in self.fields() {
            names.push(f.name.as_str());
            names.extend(f.parts.iter().map(|p| p.name.as_str()));
        }
        names.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fields::{GenMethod, IdFields};
    use crate::layout::Preset;

    #[test]
    fn vesta_make_matches_idfields_encode() {
        let layout = IdType::MaxPeak.layout();
        let v = FieldValues::new()
            .with("type", 1)
            .with("genMethod", 2)
            .with("time", 77)
            .with("seq", 5)
            .with("machine", 1000);
        let want = IdFields {
            version: 0,
            id_type: IdType::MinGranularity,
            gen_method: GenMethod::Rest,
            time: 77,
            seq: 5,
            machine: 1000,
        };
        assert_eq!(layout.make(&v), want.encode());
        let err = layout.make(&v.clone().with("seq", 1024)).unwrap_err();
        assert_eq!(err.field(), "seq");
    }

    #[test]
    fn vesta_range_errors_read_as_before() {
        let layout = IdType::MinGranularity.layout();
        let v = FieldValues::new()
            .with("time", 0)
            .with("seq", 1024)
            .with("machine", 0);
        assert_eq!(
            layout.make(&v).unwrap_err().to_string(),
            "seq 1024 is out of range for min-granularity: allowed 0..=1023"
        );
    }

    #[test]
    fn a_twitter_node_is_made_whole_or_from_its_parts() {
        let tw = Preset::Twitter.layout();
        let base = FieldValues::new().with("time", 9).with("sequence", 3);
        let whole = tw.make(&base.clone().with("machine", 3 << 5 | 7)).unwrap();
        let parts = tw
            .make(&base.clone().with("datacenterId", 3).with("workerId", 7))
            .unwrap();
        assert_eq!(whole, parts);
        assert_eq!(whole, 9 << 22 | (3 << 5 | 7) << 12 | 3);
        let err = tw
            .make(&base.clone().with("datacenterId", 3))
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("workerId"), "{err}");
        let err = tw
            .make(&base.clone().with("node", 1).with("workerId", 1))
            .unwrap_err()
            .to_string();
        assert!(err.contains("each field once"), "{err}");
        let err = tw
            .make(&base.with("genMethod", 1).with("node", 1))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("a field of the twitter layout: time, node"),
            "{err}"
        );
    }

    #[test]
    fn a_missing_field_is_named() {
        let leaf = Preset::Leaf.layout();
        let err = leaf
            .make(&FieldValues::new().with("time", 1).with("workerId", 2))
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "sequence is missing: the leaf layout needs it to make an ID"
        );
    }
}
