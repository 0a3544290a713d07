//! Typed errors. Each message names the field or condition and what is allowed, so a CLI or a
//! server can print it as the one line a user sees.

use std::borrow::Cow;
use std::fmt;

use crate::epoch::Epoch;

/// A field value that cannot be encoded or parsed; nothing is ever masked to fit.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FieldError {
    /// A number outside the field's width or allowed range.
    #[error("{field} {value} is out of range{context}: allowed {min}..={max}")]
    OutOfRange {
        /// The field's name in its layout (Vesta's names for Vesta's layouts), or a config key.
        field: Cow<'static, str>,
        /// The rejected value.
        value: u64,
        /// Smallest allowed value.
        min: u64,
        /// Largest allowed value.
        max: u64,
        /// Extra context such as " for max-peak", or empty.
        context: Cow<'static, str>,
    },
    /// Text that is not a valid value for the field.
    #[error("{field} `{text}` is not valid: expected {expected}")]
    Invalid {
        /// The field's name in its layout, or a config key.
        field: Cow<'static, str>,
        /// The rejected text.
        text: String,
        /// What would have been accepted.
        expected: Cow<'static, str>,
    },
    /// A field an ID cannot be made without.
    #[error("{field} is missing: the {layout} layout needs it to make an ID")]
    Missing {
        /// The field (or the node parts) not given.
        field: Cow<'static, str>,
        /// The layout's name.
        layout: String,
    },
}

impl FieldError {
    /// A value outside `min..=max` of the field or key `field`.
    pub fn out_of_range(
        field: impl Into<Cow<'static, str>>,
        value: u64,
        min: u64,
        max: u64,
    ) -> Self {
        FieldError::OutOfRange {
            field: field.into(),
            value,
            min,
            max,
            context: Cow::Borrowed(""),
        }
    }

    /// Text that is not a valid value of the field or key `field`.
    pub fn invalid(
        field: impl Into<Cow<'static, str>>,
        text: &str,
        expected: impl Into<Cow<'static, str>>,
    ) -> Self {
        // At most 64 characters of the text: a hostile or mistaken input of any length makes
        // a message of bounded length (found by the rest_query fuzz target).
        const SHOWN: usize = 64;
        let text = match text.char_indices().nth(SHOWN) {
            Some((cut, _)) => format!("{}…", &text[..cut]),
            None => text.to_owned(),
        };
        FieldError::Invalid {
            field: field.into(),
            text,
            expected: expected.into(),
        }
    }

    /// The same error with context appended to the range, e.g. `" for leaf"`.
    pub(crate) fn within(mut self, layout: &str) -> Self {
        if let FieldError::OutOfRange { context, .. } = &mut self {
            *context = Cow::Owned(format!(" for {layout}"));
        }
        self
    }

    /// The name of the field at fault.
    pub fn field(&self) -> &str {
        match self {
            FieldError::OutOfRange { field, .. }
            | FieldError::Invalid { field, .. }
            | FieldError::Missing { field, .. } => field,
        }
    }
}

/// Why the generator did not hand out an ID.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum GenError {
    /// The clock went back further than the configured tolerance.
    #[error(
        "the clock is {behind_ms} ms behind the last issued time (tolerance {tolerance_ms} ms); \
         no ID is issued until it catches up"
    )]
    ClockBehind {
        /// How far the clock reads behind the start of the last issued unit.
        behind_ms: u64,
        /// The configured tolerance.
        tolerance_ms: u64,
    },
    /// The current unit's sequence is used up and the caller asked not to wait.
    #[error("the sequence for this {unit} is used up; the next one starts in {wait_ms} ms")]
    WouldBlock {
        /// Time until the next unit starts.
        wait_ms: u64,
        /// The layout's time unit name.
        unit: &'static str,
    },
    /// The time field is full: the layout reached its end of life.
    #[error("the time field is full: this layout's IDs end at {}", UtcMs(*end_of_life_ms))]
    TimeOverflow {
        /// The last representable instant, ms since the Unix epoch.
        end_of_life_ms: u64,
    },
    /// The clock reads a time before the configured epoch.
    #[error("the clock reads {} which is before the epoch {}", UtcMs(*now_ms), UtcMs(*epoch_ms))]
    BeforeEpoch {
        /// The clock's reading, ms since the Unix epoch.
        now_ms: u64,
        /// The configured epoch, ms since the Unix epoch.
        epoch_ms: u64,
    },
    /// Issuing is fenced: the owner of the generator withdrew its permission (e.g. a lease lapsed).
    #[error("issuing is fenced since {}", UtcMs(*deadline_ms))]
    Fenced {
        /// The deadline that passed, ms since the Unix epoch (0 when fenced outright).
        deadline_ms: u64,
    },
}

/// Formats ms since the Unix epoch as RFC 3339 UTC inside error messages.
struct UtcMs(u64);

impl fmt::Display for UtcMs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&Epoch::rfc3339(self.0))
    }
}

#[cfg(test)]
mod echo_tests {
    use super::*;

    #[test]
    fn an_invalid_value_is_echoed_at_most_64_characters() {
        let long = "x".repeat(10_000);
        let err = long.parse::<crate::GenMethod>().unwrap_err().to_string();
        assert!(err.len() < 200, "{} bytes", err.len());
        assert!(err.contains(&format!("{}…", "x".repeat(64))), "{err}");
        let short = FieldError::invalid("type", "seven", "0 or 1").to_string();
        assert_eq!(short, "type `seven` is not valid: expected 0 or 1");
    }
}
