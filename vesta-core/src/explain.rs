//! An ID explained for people and JSON: its fields under Vesta's names plus the instant, so the
//! CLI, the TCP server and the REST server all print the same thing.

use std::fmt;

use crate::epoch::Epoch;
use crate::fields::IdFields;

/// An ID with its fields and the instant its time unit starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Explanation {
    /// The ID.
    pub id: u64,
    /// Its fields.
    pub fields: IdFields,
    /// Start of its time unit, ms since the Unix epoch.
    pub unix_ms: u64,
}

impl Explanation {
    /// Explains `id`; needs only the epoch (the layout comes from the ID's type bit).
    pub fn new(id: u64, epoch: Epoch) -> Self {
        let fields = IdFields::decode(id);
        Explanation {
            id,
            fields,
            unix_ms: fields.unix_ms(epoch),
        }
    }

    /// The instant as RFC 3339 UTC text with millisecond precision.
    pub fn timestamp(&self) -> String {
        Epoch::rfc3339(self.unix_ms)
    }

    /// The ID as a Java/SQL `BIGINT` sees it (negative for version 1).
    pub fn as_java_long(&self) -> i64 {
        self.id as i64
    }
}

/// A readable multi-line table.
impl fmt::Display for Explanation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let x = &self.fields;
        let layout = x.layout();
        writeln!(f, "id         {}", self.id)?;
        if self.as_java_long() < 0 {
            writeln!(f, "java long  {}", self.as_java_long())?;
        }
        writeln!(f, "hex        {:#018x}", self.id)?;
        writeln!(f, "version    {}", x.version)?;
        writeln!(f, "type       {} ({})", x.id_type.code(), x.id_type)?;
        writeln!(f, "genMethod  {} ({})", x.gen_method.code(), x.gen_method)?;
        writeln!(
            f,
            "time       {} {}s since the epoch",
            x.time, layout.unit_name
        )?;
        writeln!(f, "timestamp  {}", self.timestamp())?;
        writeln!(f, "seq        {}", x.seq)?;
        writeln!(f, "machine    {}", x.machine)?;
        let spans = layout.spans();
        let bits: Vec<String> = spans
            .iter()
            .rev()
            .map(|s| format!("{} {}-{}", s.name, s.low_bit, s.high_bit()))
            .collect();
        write!(f, "layout     {}: {}", x.id_type, bits.join(", "))
    }
}

#[cfg(feature = "serde")]
impl serde::Serialize for Explanation {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let x = &self.fields;
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
        st.end()
    }
}
