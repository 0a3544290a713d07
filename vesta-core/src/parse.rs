//! Parsing IDs as people and other systems write them: unsigned decimal, negative decimal (the
//! Java/SQL `BIGINT` view of a version-1 ID), `0x` hex, and the fixed-width string forms
//! (13-character Crockford base32, 11-character base62; see [`crate::forms`]).

use crate::forms::Form;

/// Text that is not an ID.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "id `{text}` is not valid: {}",
    if *.ambiguous {
        "it reads both as 0x hex and as a base32/base62 string; write hex with all 16 digits"
    } else {
        "expected an unsigned decimal up to 18446744073709551615, a negative decimal down to \
         -9223372036854775808 (Java long), 0x hex up to 16 digits, 13 characters of base32 or \
         11 of base62"
    }
)]
#[non_exhaustive]
pub struct ParseIdError {
    /// The rejected text (trimmed).
    pub text: String,
    /// The text is an ID in two forms with different values, so it is refused, not guessed.
    pub ambiguous: bool,
}

/// Parses an ID in any of the accepted forms; surrounding whitespace is ignored. Digits alone
/// are decimal (a base32 or base62 text made only of digits is read in its form only when the
/// form is named: [`Form::decode`], `Id::parse_as`); text that two other forms read differently (`0x` and 9 or 11 hex digits, which are
/// also base62 or base32) is refused as ambiguous.
pub fn parse_id(text: &str) -> Result<u64, ParseIdError> {
    let t = text.trim();
    let err = |ambiguous| ParseIdError {
        text: t.to_owned(),
        ambiguous,
    };
    if t.starts_with('-') {
        return t.parse::<i64>().map(|v| v as u64).map_err(|_| err(false));
    }
    if let Some(v) = Form::Decimal.decode(t) {
        return Ok(v);
    }
    let mut found = [Form::Hex, Form::Base32, Form::Base62]
        .into_iter()
        .filter_map(|f| f.decode(t));
    match (found.next(), found.next()) {
        (Some(v), None) => Ok(v),
        (Some(_), Some(_)) => Err(err(true)),
        _ => Err(err(false)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_the_three_forms() {
        assert_eq!(parse_id("1234"), Ok(1234));
        assert_eq!(parse_id(" 18446744073709551615\n"), Ok(u64::MAX));
        assert_eq!(parse_id("-1"), Ok(u64::MAX));
        assert_eq!(parse_id("-9223372036854775808"), Ok(1 << 63));
        assert_eq!(parse_id("0x10"), Ok(16));
        assert_eq!(parse_id("0XfFfFfFfFfFfFfFfF"), Ok(u64::MAX));
    }

    #[test]
    fn accepts_the_string_forms_and_refuses_ambiguity() {
        for id in [0, 1, (1 << 62) + 12345, u64::MAX] {
            for form in Form::ALL {
                assert_eq!(parse_id(form.encode(id).as_str()), Ok(id), "{form}");
            }
        }
        // Digits alone are decimal, even where a base32 or base62 text happens to be all
        // digits: such a text is read in its form only when the form is named.
        let all_digits = Form::Base32.encode(1 << 62);
        assert_eq!(all_digits.as_str(), "4000000000000");
        assert_eq!(parse_id(all_digits.as_str()), Ok(4_000_000_000_000));
        assert_eq!(Form::Base32.decode(all_digits.as_str()), Some(1 << 62));
        // 11 digits are decimal, not base62.
        assert_eq!(parse_id("00000000012"), Ok(12));
        // `0x` and 9 hex digits is also base62; and 11 hex digits also base32.
        for text in ["0x123456789", "0X00000000000"] {
            let err = parse_id(text).unwrap_err();
            assert!(err.ambiguous, "{text}");
            assert!(err.to_string().contains("all 16 digits"), "{err}");
        }
    }

    #[test]
    fn rejects_everything_else() {
        for bad in [
            "",
            "abc",
            "18446744073709551616",
            "-9223372036854775809",
            "0x",
            "0x-1",
            "0x1g",
            "0x10000000000000000",
            "0x00000000000000001",
            "1.5",
            "+1",
            "--1",
            "1e3",
        ] {
            let err = parse_id(bad).unwrap_err();
            assert!(err.to_string().starts_with("id `"), "{bad}: {err}");
        }
    }
}
