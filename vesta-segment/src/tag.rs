//! The tag naming rule: what a `biz_tag` may look like. Leaf's column is `varchar(128)`; the
//! characters are limited so a tag is safe in a URL path, a shell and a metrics label.

use crate::error::{SegmentError, shown_tag};

/// The longest tag, in characters (Leaf's `biz_tag varchar(128)`).
pub const MAX_TAG_LEN: usize = 128;

/// The characters a tag may use besides ASCII letters and digits.
pub const TAG_PUNCTUATION: &str = "._:-";

/// Checks `tag` against the naming rule: 1 to 128 characters from `A-Z a-z 0-9 . _ : -`.
pub fn validate_tag(tag: &str) -> Result<(), SegmentError> {
    let invalid = |reason: String| SegmentError::InvalidTag {
        tag: shown_tag(tag),
        reason,
    };
    if tag.is_empty() {
        return Err(invalid("a tag cannot be empty".into()));
    }
    let len = tag.chars().count();
    if len > MAX_TAG_LEN {
        return Err(invalid(format!(
            "{len} characters is too long: allowed 1..={MAX_TAG_LEN}"
        )));
    }
    if let Some(c) = tag
        .chars()
        .find(|c| !c.is_ascii_alphanumeric() && !TAG_PUNCTUATION.contains(*c))
    {
        return Err(invalid(format!(
            "character {c:?} is not allowed: use A-Z a-z 0-9 and {TAG_PUNCTUATION}"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leaf_style_tags_pass() {
        for tag in [
            "leaf-segment-test",
            "orders",
            "a",
            "x.y:z_1",
            &"t".repeat(128),
        ] {
            validate_tag(tag).unwrap();
        }
    }

    #[test]
    fn bad_tags_are_named_with_the_rule() {
        let err = validate_tag("").unwrap_err().to_string();
        assert!(err.contains("cannot be empty"), "{err}");
        let err = validate_tag(&"t".repeat(129)).unwrap_err().to_string();
        assert!(
            err.contains("129 characters") && err.contains("1..=128"),
            "{err}"
        );
        let err = validate_tag("a b").unwrap_err().to_string();
        assert!(err.contains("\"a b\"") && err.contains("' '"), "{err}");
        let err = validate_tag("a/b").unwrap_err().to_string();
        assert!(err.contains("'/'"), "{err}");
        let err = validate_tag(&"é".repeat(500)).unwrap_err().to_string();
        assert!(err.len() < 400, "the message stays short: {err}");
    }
}
