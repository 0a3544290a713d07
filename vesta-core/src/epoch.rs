//! The epoch a layout counts time from: ms since 1970, written as a number or an RFC 3339
//! date-time. Conversions between time fields and instants are the layout's (they need its unit).

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

impl std::str::FromStr for Epoch {
    type Err = FieldError;

    /// Accepts ms since the Unix epoch (`1420041600000`) or an RFC 3339 date-time
    /// (`2015-01-01T00:00:00+08:00`).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let t = s.trim();
        let ms = if t.bytes().all(|b| b.is_ascii_digit()) && !t.is_empty() {
            t.parse::<u64>().ok()
        } else {
            DateTime::parse_from_rfc3339(t)
                .ok()
                .and_then(|dt| u64::try_from(dt.timestamp_millis()).ok())
        };
        ms.map(Epoch).ok_or_else(|| {
            FieldError::invalid(
                "epoch",
                t,
                "ms since 1970 or an RFC 3339 date-time after 1970",
            )
        })
    }
}

/// Reads an epoch written as ms since 1970 (a number) or as text (digits or RFC 3339).
#[cfg(feature = "serde")]
pub(crate) fn deserialize<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Epoch, D::Error> {
    use serde::Deserialize;

    #[derive(serde::Deserialize)]
    #[serde(untagged)]
    enum Raw {
        Ms(u64),
        Text(String),
    }
    match Raw::deserialize(d)? {
        Raw::Ms(ms) => Ok(Epoch(ms)),
        Raw::Text(t) => t.parse().map_err(serde::de::Error::custom),
    }
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
}
