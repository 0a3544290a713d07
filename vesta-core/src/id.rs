//! [`Id`]: an issued ID as a typed value instead of a bare `u64` — the same 64 bits
//! (`repr(transparent)`, no cost), with the conversions users otherwise write by hand: text in
//! every form ([`Form`]), the signed `BIGINT` view, its fields in a layout, serde as a string
//! (IDs pass 2^53, where JavaScript's numbers lose digits) and SQL `BIGINT` through sqlx.

use std::fmt;
use std::str::FromStr;

use crate::explain::Explanation;
use crate::forms::{Form, FormBuf};
use crate::layout::Layout;
use crate::parse::{ParseIdError, parse_id};

/// A 64-bit ID. Orders as the number does (time first in every layout); prints as decimal;
/// parses from any form [`parse_id`] accepts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(transparent)]
pub struct Id(u64);

impl Id {
    /// The ID with these bits.
    pub const fn new(bits: u64) -> Self {
        Id(bits)
    }

    /// The bits.
    pub const fn get(self) -> u64 {
        self.0
    }

    /// The ID stored in a signed 64-bit column (SQL `BIGINT`, Java `long`): the same bits, so
    /// an ID with the top bit set (Vesta's version 1) reads back from its negative value.
    pub const fn from_i64(v: i64) -> Self {
        Id(v as u64)
    }

    /// The signed view for a `BIGINT` column or a Java `long`: the same bits. Positive for
    /// every layout that keeps the top bit 0 (Vesta's version 0, the peers', signed custom
    /// layouts); negative only when the top bit is set (Vesta's version 1), and still exact.
    pub const fn to_i64(self) -> i64 {
        self.0 as i64
    }

    /// The ID taken apart in `layout` (with its epoch).
    pub fn explain(self, layout: &Layout) -> Explanation {
        Explanation::new(self.0, layout)
    }

    /// When the ID's time unit starts, in ms since 1970, read in `layout`.
    pub fn unix_ms(self, layout: &Layout) -> u64 {
        layout.unix_ms_of(self.explain(layout).time())
    }

    /// The ID in `form`, on the stack.
    pub fn to_form(self, form: Form) -> FormBuf {
        form.encode(self.0)
    }

    /// Reads `text` in exactly `form` (surrounding whitespace ignored).
    pub fn parse_as(text: &str, form: Form) -> Result<Id, ParseIdError> {
        form.decode(text.trim()).map(Id).ok_or_else(|| {
            // The general parser says why, naming the text.
            parse_id(text)
                .err()
                .unwrap_or_else(|| parse_id("").expect_err("empty text is not an ID"))
        })
    }
}

impl From<u64> for Id {
    fn from(bits: u64) -> Self {
        Id(bits)
    }
}

impl From<Id> for u64 {
    fn from(id: Id) -> u64 {
        id.0
    }
}

impl fmt::Display for Id {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

impl FromStr for Id {
    type Err = ParseIdError;

    /// Any form: decimal, negative decimal (`BIGINT`), `0x` hex, base32, base62.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        parse_id(s).map(Id)
    }
}

/// Serialized as a decimal string (`"6592718412231917569"`): JSON readers that hold numbers
/// as doubles (JavaScript) keep every digit. Deserialized from a string in any form or from a
/// number. For a plain number, use `#[serde(with = "vesta_core::id::serde_as_number")]`.
#[cfg(feature = "serde")]
impl serde::Serialize for Id {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(Form::Decimal.encode(self.0).as_str())
    }
}

#[cfg(feature = "serde")]
impl<'de> serde::Deserialize<'de> for Id {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = Id;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an ID as a string (decimal, hex, base32, base62) or a number")
            }

            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Id, E> {
                v.parse().map_err(E::custom)
            }

            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Id, E> {
                Ok(Id(v))
            }

            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Id, E> {
                Ok(Id::from_i64(v))
            }
        }
        d.deserialize_any(Visitor)
    }
}

/// `#[serde(with = "vesta_core::id::serde_as_number")]`: an [`Id`] as a JSON number, for
/// readers known to keep 64-bit integers.
#[cfg(feature = "serde")]
pub mod serde_as_number {
    use super::Id;

    /// Writes the ID as an unsigned number.
    pub fn serialize<S: serde::Serializer>(id: &Id, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(id.get())
    }

    /// Reads the ID from a number or a string.
    pub fn deserialize<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Id, D::Error> {
        serde::Deserialize::deserialize(d)
    }
}

/// An [`Id`] in SQL as `BIGINT` (the same 64 bits as `i64`), for any sqlx database with
/// `BIGINT`: no `as i64` at each query.
#[cfg(feature = "sqlx")]
mod sql {
    use super::Id;
    use sqlx_core::database::Database;
    use sqlx_core::decode::Decode;
    use sqlx_core::encode::{Encode, IsNull};
    use sqlx_core::error::BoxDynError;
    use sqlx_core::types::Type;

    impl<DB: Database> Type<DB> for Id
    where
        i64: Type<DB>,
    {
        fn type_info() -> DB::TypeInfo {
            <i64 as Type<DB>>::type_info()
        }

        fn compatible(ty: &DB::TypeInfo) -> bool {
            <i64 as Type<DB>>::compatible(ty)
        }
    }

    impl<'q, DB: Database> Encode<'q, DB> for Id
    where
        i64: Encode<'q, DB>,
    {
        fn encode_by_ref(
            &self,
            buf: &mut <DB as Database>::ArgumentBuffer,
        ) -> Result<IsNull, BoxDynError> {
            <i64 as Encode<'q, DB>>::encode_by_ref(&self.to_i64(), buf)
        }
    }

    impl<'r, DB: Database> Decode<'r, DB> for Id
    where
        i64: Decode<'r, DB>,
    {
        fn decode(value: <DB as Database>::ValueRef<'r>) -> Result<Self, BoxDynError> {
            <i64 as Decode<'r, DB>>::decode(value).map(Id::from_i64)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::IdType;
    use proptest::prelude::*;

    #[test]
    fn signed_edges_are_exact() {
        assert_eq!(Id::new(u64::MAX).to_i64(), -1);
        assert_eq!(Id::from_i64(-1), Id::new(u64::MAX));
        assert_eq!(Id::from_i64(i64::MIN).get(), 1 << 63);
        assert_eq!(Id::new(i64::MAX as u64).to_i64(), i64::MAX);
        assert_eq!("-1".parse::<Id>(), Ok(Id::new(u64::MAX)));
    }

    #[test]
    fn an_id_explains_itself_in_its_layout() {
        let layout = IdType::MaxPeak.layout();
        let id = Id::new(
            layout
                .make(
                    &crate::FieldValues::new()
                        .with("time", 7)
                        .with("seq", 3)
                        .with("node", 5),
                )
                .unwrap(),
        );
        let x = id.explain(layout);
        assert_eq!((x.time(), x.seq(), x.node()), (7, 3, 5));
        assert_eq!(id.unix_ms(layout), layout.unix_ms_of(7));
        assert_eq!(
            Id::parse_as(id.to_form(Form::Base32).as_str(), Form::Base32),
            Ok(id)
        );
        assert!(Id::parse_as("zz", Form::Base62).is_err());
        // A base62 text that starts with `0X` (a max-peak ID of 2028) reads back as written.
        let id = Id::new(446_723_856_026_697_216);
        assert_eq!(id.to_form(Form::Base62).as_str(), "0X000000000");
        assert_eq!("0X000000000".parse::<Id>(), Ok(id));
    }

    proptest! {
        #[test]
        fn text_and_signed_views_round_trip(bits in any::<u64>()) {
            let id = Id::new(bits);
            prop_assert_eq!(id.to_string().parse::<Id>(), Ok(id));
            prop_assert_eq!(Id::from_i64(id.to_i64()), id);
            for form in Form::ALL {
                let text = id.to_form(form);
                prop_assert_eq!(Id::parse_as(text.as_str(), form), Ok(id));
                // Detected too, unless the text is digits only (then it reads as decimal) or
                // starts with `0x` (then it reads as hex, whatever form wrote it).
                let t = text.as_str();
                if !t.bytes().all(|b| b.is_ascii_digit())
                    && (form == Form::Hex || !t.starts_with("0x"))
                {
                    prop_assert_eq!(text.as_str().parse::<Id>(), Ok(id));
                }
            }
        }

        #[test]
        fn ids_order_as_their_bits(a in any::<u64>(), b in any::<u64>()) {
            prop_assert_eq!(Id::new(a).cmp(&Id::new(b)), a.cmp(&b));
        }
    }

    #[cfg(feature = "serde")]
    #[test]
    fn serde_is_a_string_by_default_and_a_number_on_request() {
        #[derive(serde::Serialize, serde::Deserialize, PartialEq, Debug)]
        struct Row {
            id: Id,
            #[serde(with = "crate::id::serde_as_number")]
            n: Id,
        }
        let row = Row {
            id: Id::new(u64::MAX),
            n: Id::new(42),
        };
        let json = serde_json::to_string(&row).unwrap();
        assert_eq!(json, r#"{"id":"18446744073709551615","n":42}"#);
        assert_eq!(serde_json::from_str::<Row>(&json).unwrap(), row);
        let any: Row = serde_json::from_str(r#"{"id":"FZZZZZZZZZZZZ","n":"0x2a"}"#).unwrap();
        assert_eq!(any, row);
        let err = serde_json::from_str::<Row>(r#"{"id":"nope","n":1}"#).unwrap_err();
        assert!(err.to_string().contains("id `nope`"), "{err}");
    }
}
