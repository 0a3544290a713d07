//! The epoch a deployment counts time from, and conversions between ID time fields and instants.
//!
//! Explaining an ID needs only this: the layout comes from the ID's own type bit.

use chrono::{DateTime, SecondsFormat, Utc};

use crate::error::FieldError;
use crate::layout::Layout;

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

    /// The instant (ms since the Unix epoch) at which time value `time` starts.
    pub const fn unix_ms_of(self, layout: &Layout, time: u64) -> u64 {
        self.0 + time * layout.unit_ms
    }

    /// The instant at which time value `time` starts, as a UTC date-time.
    pub fn datetime_of(self, layout: &Layout, time: u64) -> DateTime<Utc> {
        Self::datetime_of_unix_ms(self.unix_ms_of(layout, time))
    }

    /// The time value of the unit containing `unix_ms`; an instant before the epoch or past the
    /// layout's end of life is an error naming the allowed range.
    pub fn time_at(self, layout: &Layout, unix_ms: u64) -> Result<u64, FieldError> {
        let end = layout.end_of_life_ms(self);
        if unix_ms < self.0 || unix_ms > end {
            return Err(FieldError::Invalid {
                field: "time",
                text: Self::rfc3339(unix_ms),
                expected: "an instant between the epoch and the layout's end of life",
            });
        }
        Ok((unix_ms - self.0) / layout.unit_ms)
    }

    /// The time value of the unit containing `at`.
    pub fn time_of_datetime(self, layout: &Layout, at: DateTime<Utc>) -> Result<u64, FieldError> {
        let ms = u64::try_from(at.timestamp_millis()).map_err(|_| FieldError::Invalid {
            field: "time",
            text: at.to_rfc3339_opts(SecondsFormat::Millis, true),
            expected: "an instant after the epoch",
        })?;
        self.time_at(layout, ms)
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

    #[test]
    fn time_at_floors_to_the_unit_and_rejects_out_of_range() {
        let e = Epoch::VESTA;
        assert_eq!(e.time_at(&Layout::MAX_PEAK, e.unix_ms() + 1999), Ok(1));
        assert_eq!(
            e.time_at(&Layout::MIN_GRANULARITY, e.unix_ms() + 1999),
            Ok(1999)
        );
        assert!(e.time_at(&Layout::MAX_PEAK, e.unix_ms() - 1).is_err());
        let end = Layout::MAX_PEAK.end_of_life_ms(e);
        assert_eq!(
            e.time_at(&Layout::MAX_PEAK, end),
            Ok(Layout::MAX_PEAK.max_time())
        );
        assert!(e.time_at(&Layout::MAX_PEAK, end + 1).is_err());
    }
}
