//! Parsing IDs as people and other systems write them: unsigned decimal, negative decimal (the
//! Java/SQL `BIGINT` view of a version-1 ID), `0x` hex, and the fixed-width string forms
//! (13-character Crockford base32, 11-character base62; see [`crate::forms`]). A leading `0x`
//! (as vesta writes hex) is always hex, so a hex ID is never silently read as another form; a
//! leading `0X` is hex only where no string form fits (base62 and base32 texts of today's IDs
//! begin with `0X`: they must read back as written).

use crate::forms::Form;

/// Text that is not an ID.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("id `{text}` {}", self.why())]
#[non_exhaustive]
pub struct ParseIdError {
    /// The rejected text (trimmed).
    pub text: String,
    /// The text starts with `0x` (or with `0X` and fits no string form), so it was read as
    /// hex and is not valid hex.
    pub hex: bool,
    /// The text is written in this fixed-width form (base32 or base62) but is above
    /// 18446744073709551615, the largest 64-bit ID.
    pub over: Option<Form>,
}

impl ParseIdError {
    /// What is wrong with the text, after "id `TEXT` " (a transport words the start its way).
    pub fn why(&self) -> String {
        if self.hex {
            return "is not valid: a leading 0x means hex, and it must be followed by 1 to 16 \
                    hex digits (0-9, a-f, either case)"
                .into();
        }
        match self.over {
            Some(form) => format!(
                "is out of range: {form} goes up to {} ({})",
                form.encode(u64::MAX).as_str(),
                u64::MAX
            ),
            None => format!(
                "is not valid: expected an unsigned decimal up to {}, a negative decimal down \
                 to {} (Java long), 0x hex up to 16 digits, 13 characters of base32 or 11 of \
                 base62",
                u64::MAX,
                i64::MIN
            ),
        }
    }
}

/// Parses an ID in any of the accepted forms; surrounding whitespace is ignored. The forms
/// overlap, so the order is fixed: a leading `0x` always means hex (1 to 16 digits, anything
/// else is an error saying so); digits alone are decimal; then 13 characters of base32 and 11
/// of base62; then a leading `0X` as hex. A base32 or base62 text that starts with `0x` or is
/// made only of digits is read in its form only when the form is named ([`Form::decode`],
/// `Id::parse_as`).
pub fn parse_id(text: &str) -> Result<u64, ParseIdError> {
    let t = text.trim();
    let err = |hex| ParseIdError {
        text: t.to_owned(),
        hex,
        over: None,
    };
    if t.starts_with('-') {
        return t.parse::<i64>().map(|v| v as u64).map_err(|_| err(false));
    }
    if t.starts_with("0x") {
        return Form::Hex.decode(t).ok_or_else(|| err(true));
    }
    let form = [Form::Decimal, Form::Base32, Form::Base62]
        .into_iter()
        .find_map(|f| f.decode(t));
    match form {
        Some(id) => Ok(id),
        None if t.starts_with("0X") => Form::Hex.decode(t).ok_or_else(|| err(true)),
        // Written in a fixed-width form, above the largest ID: said as such.
        None => Err(ParseIdError {
            over: [Form::Base32, Form::Base62]
                .into_iter()
                .find(|f| f.fixed_value(t).is_some()),
            ..err(false)
        }),
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
        assert_eq!(parse_id("0x0000000123456789"), Ok(0x1_2345_6789));
    }

    /// A leading `0x` always means hex, whatever the count of digits: with 9 or 11 it is not
    /// read as base62 or base32 (their widths), and a text that is not hex is refused as hex.
    #[test]
    fn a_leading_0x_always_means_hex() {
        for digits in 1..=16 {
            let text = format!("0x{}", "f".repeat(digits));
            assert_eq!(parse_id(&text), Ok(u64::MAX >> (64 - 4 * digits)), "{text}");
        }
        assert_eq!(parse_id("0x123456789"), Ok(0x1_2345_6789));
        assert_eq!(parse_id(" 0x00000000001\n"), Ok(1));
        // `0X` is what base32 and base62 texts of real IDs begin with (a Vesta max-peak ID in
        // base62 from 2028): they read back as written; `0X` is hex where no form fits.
        let b32 = Form::Base32.encode(1_048_529_472_619_282_468);
        assert_eq!(b32.as_str(), "0X39000000014");
        assert_eq!(parse_id(b32.as_str()), Ok(1_048_529_472_619_282_468));
        let b62 = Form::Base62.encode(446_723_856_026_697_216);
        assert_eq!(b62.as_str(), "0X000000000");
        assert_eq!(parse_id(b62.as_str()), Ok(446_723_856_026_697_216));
        assert_eq!(parse_id("0XfF"), Ok(0xff));
        assert_ne!(Form::Base62.decode("0x123456789"), Some(0x1_2345_6789));
        for bad in [
            "0x",
            "0X",
            "0xZZZZZZZZZ",
            "0x12345678g",
            "0x10000000000000000",
            "0x 1",
        ] {
            let err = parse_id(bad).unwrap_err();
            assert!(err.hex, "{bad}");
            assert_eq!(
                err.to_string(),
                format!(
                    "id `{bad}` is not valid: a leading 0x means hex, and it must be followed \
                     by 1 to 16 hex digits (0-9, a-f, either case)"
                )
            );
        }
        assert!(!parse_id("abc").unwrap_err().hex);
    }

    /// A text of base32's or base62's width and digits, above the largest ID, is refused as
    /// out of range naming the form's largest text (not as "not an ID").
    #[test]
    fn a_fixed_width_text_above_the_largest_id_is_out_of_range() {
        assert_eq!(Form::Base62.encode(u64::MAX).as_str(), "LygHa16AHYF");
        assert_eq!(Form::Base32.encode(u64::MAX).as_str(), "FZZZZZZZZZZZZ");
        assert_eq!(parse_id("LygHa16AHYF"), Ok(u64::MAX));
        assert_eq!(parse_id("fzzzzzzzzzzzz"), Ok(u64::MAX));
        for (bad, form) in [
            ("LygHa16AHYG", Form::Base62),
            ("zzzzzzzzzzz", Form::Base62),
            ("w000wo4jKxS", Form::Base62),
            ("G000000000000", Form::Base32),
            ("zzzzzzzzzzzzz", Form::Base32),
        ] {
            let err = parse_id(bad).unwrap_err();
            assert_eq!(err.over, Some(form), "{bad}");
            assert_eq!(
                err.to_string(),
                format!(
                    "id `{bad}` is out of range: {form} goes up to {} (18446744073709551615)",
                    form.encode(u64::MAX).as_str()
                )
            );
        }
        assert_eq!(parse_id("zzzzzzzzzz!").unwrap_err().over, None);
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
