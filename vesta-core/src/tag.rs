//! The segment-mode tag naming rule (what a `biz_tag` may look like) and batch cap. Leaf's
//! column is `varchar(128)`; the characters are limited so a tag is safe in a URL path, a
//! shell and a metrics label. It lives here, below both the store (vesta-segment) and the wire protocols,
//! so a client checks a tag exactly as a server does without pulling a database driver.

/// The longest tag, in characters (Leaf's `biz_tag varchar(128)`).
pub const MAX_TAG_LEN: usize = 128;

/// The characters a tag may use besides ASCII letters and digits.
pub const TAG_PUNCTUATION: &str = "._:-";

/// The most segment numbers one call hands out: a store's `next_n`, a TCP `SEGMENTS` request,
/// a REST `/segments` call. Here so a client can chunk its calls without the store's crate.
pub const MAX_SEGMENT_BATCH: u64 = 1_000_000;

/// A tag that breaks the naming rule.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid tag {tag:?}: {reason}")]
#[non_exhaustive]
pub struct TagError {
    /// The tag as given (cut by [`shown_tag`]).
    pub tag: String,
    /// Which rule it breaks and what is allowed.
    pub reason: String,
}

/// Checks `tag` against the naming rule: 1 to 128 characters from `A-Z a-z 0-9 . _ : -`.
pub fn check_tag(tag: &str) -> Result<(), TagError> {
    let invalid = |reason: String| TagError {
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

/// Cuts a tag for an error message so a huge input cannot make a huge message.
pub fn shown_tag(tag: &str) -> String {
    const SHOWN: usize = 64;
    match tag.char_indices().nth(SHOWN) {
        Some((i, _)) => format!("{}…", &tag[..i]),
        None => tag.to_owned(),
    }
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
            check_tag(tag).unwrap();
        }
    }

    #[test]
    fn bad_tags_are_named_with_the_rule() {
        let err = check_tag("").unwrap_err().to_string();
        assert!(err.contains("cannot be empty"), "{err}");
        let err = check_tag(&"t".repeat(129)).unwrap_err().to_string();
        assert!(
            err.contains("129 characters") && err.contains("1..=128"),
            "{err}"
        );
        let err = check_tag("a b").unwrap_err().to_string();
        assert!(err.contains("\"a b\"") && err.contains("' '"), "{err}");
        let err = check_tag("a/b").unwrap_err().to_string();
        assert!(err.contains("'/'"), "{err}");
        let err = check_tag(&"é".repeat(500)).unwrap_err().to_string();
        assert!(err.len() < 400, "the message stays short: {err}");
    }
}
