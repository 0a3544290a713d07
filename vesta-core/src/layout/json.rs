//! A layout as JSON (`vesta layout --json`), for decoders in other languages: everything
//! explaining an ID needs and nothing else (docs/layout-json.md has the format and the rules a
//! decoder follows). Vesta's family carries both of its layouts, so an ID explains itself by
//! its type bit there too. The client packages (`clients/python`, `clients/node`) read it.

use serde::ser::{Serialize, SerializeMap, SerializeStruct, Serializer};

use super::{Field, FieldKind, IdType, Layout, TYPE_SHIFT};
use crate::epoch::Epoch;

/// The format's version: a decoder refuses a number it does not know.
pub const LAYOUT_JSON_FORMAT: u64 = 1;

/// `{"format", "name", "preset", "type", "unit_ms", "epoch_ms", "epoch", "signed", "fields"}`
/// and, for Vesta's layouts, `"types"`: each type's `unit_ms` and `fields`.
impl Serialize for Layout {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("format", &LAYOUT_JSON_FORMAT)?;
        m.serialize_entry("name", self.name())?;
        m.serialize_entry("preset", &self.preset().map(|p| p.name()))?;
        m.serialize_entry("type", &self.id_type().map(IdType::name))?;
        m.serialize_entry("unit_ms", &self.unit_ms())?;
        m.serialize_entry("epoch_ms", &self.epoch().unix_ms())?;
        m.serialize_entry("epoch", &Epoch::rfc3339(self.epoch().unix_ms()))?;
        m.serialize_entry("signed", &self.signed())?;
        m.serialize_entry("fields", &Fields(self.fields()))?;
        if self.id_type().is_some() {
            let types: Vec<TypeEntry> = IdType::ALL
                .iter()
                .map(|t| TypeEntry(*t, self.for_id(t.code() << TYPE_SHIFT).into_owned()))
                .collect();
            m.serialize_entry("types", &types)?;
        }
        m.end()
    }
}

/// One of Vesta's types: `{"type", "code", "unit_ms", "fields"}`.
struct TypeEntry(IdType, Layout);

impl Serialize for TypeEntry {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut st = s.serialize_struct("TypeEntry", 4)?;
        st.serialize_field("type", self.0.name())?;
        st.serialize_field("code", &self.0.code())?;
        st.serialize_field("unit_ms", &self.1.unit_ms())?;
        st.serialize_field("fields", &Fields(self.1.fields()))?;
        st.end()
    }
}

/// The fields from the top bit down: `{"name", "kind", "bits", "low_bit"}`, plus `value` for a
/// fixed field and `parts` (`{"name", "bits", "low_bit"}`) for a node made of parts.
struct Fields<'a>(&'a [Field]);

impl Serialize for Fields<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeSeq;
        let mut seq = s.serialize_seq(Some(self.0.len()))?;
        for f in self.0 {
            seq.serialize_element(&FieldJson(f))?;
        }
        seq.end()
    }
}

struct FieldJson<'a>(&'a Field);

impl Serialize for FieldJson<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let f = self.0;
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("name", &f.name)?;
        m.serialize_entry("kind", f.kind.name())?;
        m.serialize_entry("bits", &f.span.bits)?;
        m.serialize_entry("low_bit", &f.span.low_bit)?;
        if let FieldKind::Fixed(v) = f.kind {
            m.serialize_entry("value", &v)?;
        }
        if !f.parts.is_empty() {
            let parts: Vec<PartJson> = f
                .parts
                .iter()
                .map(|p| PartJson(&p.name, p.span.bits, p.span.low_bit))
                .collect();
            m.serialize_entry("parts", &parts)?;
        }
        m.end()
    }
}

struct PartJson<'a>(&'a str, u32, u32);

impl Serialize for PartJson<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut st = s.serialize_struct("Part", 3)?;
        st.serialize_field("name", self.0)?;
        st.serialize_field("bits", &self.1)?;
        st.serialize_field("low_bit", &self.2)?;
        st.end()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::layout::Preset;

    #[test]
    fn leaf_is_its_fields_from_the_top_down() {
        let v = serde_json::to_value(Preset::Leaf.layout()).unwrap();
        assert_eq!(
            v,
            json!({
                "format": 1, "name": "leaf", "preset": "leaf", "type": null, "unit_ms": 1,
                "epoch_ms": 1_288_834_974_657u64, "epoch": "2010-11-04T01:42:54.657Z",
                "signed": true,
                "fields": [
                    {"name": "time", "kind": "time", "bits": 41, "low_bit": 22},
                    {"name": "workerId", "kind": "node", "bits": 10, "low_bit": 12},
                    {"name": "sequence", "kind": "seq", "bits": 12, "low_bit": 0},
                ],
            })
        );
    }

    #[test]
    fn twitter_has_node_parts_and_vesta_both_types() {
        let tw = serde_json::to_value(Preset::Twitter.layout()).unwrap();
        assert_eq!(
            tw["fields"][1]["parts"],
            json!([
                {"name": "datacenterId", "bits": 5, "low_bit": 17},
                {"name": "workerId", "bits": 5, "low_bit": 12},
            ])
        );
        let layout = IdType::MinGranularity
            .layout()
            .with_fixed("version", 1)
            .unwrap();
        let v = serde_json::to_value(&layout).unwrap();
        assert_eq!(v["type"], "min-granularity");
        assert_eq!(v["unit_ms"], 1);
        assert!(v.get("types").is_some());
        let types = v["types"].as_array().unwrap();
        let summary: Vec<(Value, Value, Value)> = types
            .iter()
            .map(|t| {
                (
                    t["code"].clone(),
                    t["unit_ms"].clone(),
                    t["fields"][0].clone(),
                )
            })
            .collect();
        let version =
            json!({"name": "version", "kind": "fixed", "bits": 1, "low_bit": 63, "value": 1});
        assert_eq!(
            summary,
            vec![
                (json!(0), json!(1000), version.clone()),
                (json!(1), json!(1), version)
            ]
        );
        assert_eq!(
            types[1]["fields"][2],
            json!({"name": "genMethod", "kind": "method", "bits": 2, "low_bit": 60})
        );
    }
}
