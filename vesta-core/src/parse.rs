//! Parsing IDs as people and other systems write them: unsigned decimal, negative decimal (the
//! Java/SQL `BIGINT` view of a version-1 ID) and `0x` hex.

/// Text that is not an ID.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "id `{text}` is not valid: expected an unsigned decimal up to 18446744073709551615, \
     a negative decimal down to -9223372036854775808 (Java long) or 0x hex up to 16 digits"
)]
pub struct ParseIdError {
    /// The rejected text (trimmed).
    pub text: String,
}

/// Parses an ID in any of the accepted forms; surrounding whitespace is ignored.
pub fn parse_id(text: &str) -> Result<u64, ParseIdError> {
    let t = text.trim();
    let parsed = if let Some(hex) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        if hex.is_empty() || hex.len() > 16 || hex.starts_with(['+', '-']) {
            None
        } else {
            u64::from_str_radix(hex, 16).ok()
        }
    } else if t.starts_with('-') {
        t.parse::<i64>().ok().map(|v| v as u64)
    } else if t.starts_with('+') {
        None
    } else {
        t.parse::<u64>().ok()
    };
    parsed.ok_or_else(|| ParseIdError { text: t.to_owned() })
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
