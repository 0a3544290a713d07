//! The epoch a layout counts time from: ms since 1970, written as a number or an RFC 3339
//! date-time; a config key holding one names itself in every refusal. Conversions between time
//! fields and instants are the layout's (they need its unit).

use chrono::{DateTime, SecondsFormat, Utc};

use crate::error::FieldError;

/// Milliseconds since the Unix epoch at which time field 0 starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Epoch(u64);

impl Epoch {
    /// Vesta's epoch: 2015-01-01T00:00:00+08:00 (1420041600000 ms), so IDs interoperate with Vesta's.
    pub const VESTA: Epoch = Epoch(1_420_041_600_000);

    /// An epoch at `unix_ms` milliseconds since the Unix epoch.
    pub const fn from_unix_ms(unix_ms: u64) -> Self {
        Epoch(unix_ms)
    }

    /// Milliseconds since the Unix epoch.
    pub const fn unix_ms(self) -> u64 {
        self.0
    }

    /// Converts ms since the Unix epoch to a UTC date-time (clamped to chrono's range).
    pub fn datetime_of_unix_ms(unix_ms: u64) -> DateTime<Utc> {
        i64::try_from(unix_ms)
            .ok()
            .and_then(DateTime::from_timestamp_millis)
            .unwrap_or(DateTime::<Utc>::MAX_UTC)
    }

    /// RFC 3339 UTC text with millisecond precision, e.g. `2015-01-01T00:00:00.000Z`.
    pub fn rfc3339(unix_ms: u64) -> String {
        Self::datetime_of_unix_ms(unix_ms).to_rfc3339_opts(SecondsFormat::Millis, true)
    }
}

/// The forms an epoch is accepted in, for messages.
const ACCEPTED: &str = "ms since 1970 (0 or more) or an RFC 3339 date-time after 1970";

impl std::str::FromStr for Epoch {
    type Err = FieldError;

    /// Accepts ms since the Unix epoch (`1420041600000`) or an RFC 3339 date-time
    /// (`2015-01-01T00:00:00+08:00`).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse_as("epoch", s)
    }
}

impl Epoch {
    /// [`FromStr`](std::str::FromStr), with errors naming `key`.
    fn parse_as(key: &str, s: &str) -> Result<Self, FieldError> {
        let t = s.trim();
        let ms = if t.bytes().all(|b| b.is_ascii_digit()) && !t.is_empty() {
            t.parse::<u64>().ok()
        } else {
            DateTime::parse_from_rfc3339(t)
                .ok()
                .and_then(|dt| u64::try_from(dt.timestamp_millis()).ok())
        };
        ms.map(Epoch)
            .ok_or_else(|| FieldError::invalid(key.to_owned(), t, ACCEPTED))
    }

    /// Reads the config key `key` (`id.epoch`, say) holding an epoch, as ms since 1970 (a
    /// number or digits) or an RFC 3339 date-time, for a `#[serde(deserialize_with)]` reader.
    /// Every refusal names `key` and the accepted forms (a negative number, a float or a
    /// boolean included), where an untagged enum would say only that nothing matched.
    #[cfg(feature = "serde")]
    pub fn deserialize_key<'de, D: serde::Deserializer<'de>>(
        d: D,
        key: &'static str,
    ) -> Result<Epoch, D::Error> {
        struct Visitor(&'static str);

        impl serde::de::Visitor<'_> for Visitor {
            type Value = Epoch;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, "{} as {ACCEPTED}", self.0)
            }

            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Epoch, E> {
                Ok(Epoch(v))
            }

            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Epoch, E> {
                u64::try_from(v)
                    .map(Epoch)
                    .map_err(|_| E::custom(FieldError::invalid(self.0, &v.to_string(), ACCEPTED)))
            }

            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Epoch, E> {
                Epoch::parse_as(self.0, v).map_err(E::custom)
            }
        }

        d.deserialize_any(Visitor(key))
    }
}

/// Reads a custom layout's epoch (`[id.layout] epoch`): see [`Epoch::deserialize_key`].
#[cfg(feature = "serde")]
pub(crate) fn deserialize<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Epoch, D::Error> {
    Epoch::deserialize_key(d, "id.layout.epoch")
}

impl Default for Epoch {
    fn default() -> Self {
        Epoch::VESTA
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vesta_epoch_is_new_year_2015_in_beijing() {
        assert_eq!(
            Epoch::rfc3339(Epoch::VESTA.unix_ms()),
            "2014-12-31T16:00:00.000Z"
        );
    }

    #[test]
    fn parses_ms_and_rfc3339() {
        assert_eq!("1420041600000".parse(), Ok(Epoch::VESTA));
        assert_eq!("2015-01-01T00:00:00+08:00".parse(), Ok(Epoch::VESTA));
        assert!("2015-01-01".parse::<Epoch>().is_err());
        assert!("1969-12-31T23:59:59Z".parse::<Epoch>().is_err());
    }

    /// A config key holding an epoch: a refusal of any kind names the key and the forms.
    #[cfg(feature = "serde")]
    #[test]
    fn a_bad_epoch_in_a_config_names_its_key() {
        use serde::de::IntoDeserializer;
        use serde::de::value::Error;

        fn read<'de>(d: impl serde::Deserializer<'de, Error = Error>) -> Result<Epoch, String> {
            Epoch::deserialize_key(d, "id.epoch").map_err(|e| e.to_string())
        }
        let ok = |v: Result<Epoch, String>| v.unwrap().unix_ms();
        assert_eq!(ok(read(5u64.into_deserializer())), 5);
        assert_eq!(ok(read(7i64.into_deserializer())), 7);
        assert_eq!(
            ok(read("2015-01-01T00:00:00+08:00".into_deserializer())),
            Epoch::VESTA.unix_ms()
        );
        let accepted = "ms since 1970 (0 or more) or an RFC 3339 date-time after 1970";
        assert_eq!(
            read((-5i64).into_deserializer()).unwrap_err(),
            format!("id.epoch `-5` is not valid: expected {accepted}")
        );
        assert_eq!(
            read("yesterday".into_deserializer()).unwrap_err(),
            format!("id.epoch `yesterday` is not valid: expected {accepted}")
        );
        assert_eq!(
            read(1.5f64.into_deserializer()).unwrap_err(),
            format!("invalid type: floating point `1.5`, expected id.epoch as {accepted}")
        );
        assert_eq!(
            read(true.into_deserializer()).unwrap_err(),
            format!("invalid type: boolean `true`, expected id.epoch as {accepted}")
        );
    }
}
