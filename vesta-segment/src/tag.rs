//! The tag naming rule: what a `biz_tag` may look like. It lives in vesta-core
//! ([`vesta_core::tag`]) so the wire protocols and their clients check a tag exactly as the
//! store does; here it answers with the store's error.

pub use vesta_core::tag::{MAX_TAG_LEN, TAG_PUNCTUATION};

use crate::error::SegmentError;

/// Checks `tag` against the naming rule: 1 to 128 characters from `A-Z a-z 0-9 . _ : -`.
pub fn validate_tag(tag: &str) -> Result<(), SegmentError> {
    vesta_core::tag::check_tag(tag).map_err(|e| SegmentError::InvalidTag {
        tag: e.tag,
        reason: e.reason,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The rule itself is tested in vesta-core; here, that a breach comes back as the store's
    /// error with the rule's words.
    #[test]
    fn a_bad_tag_is_the_stores_invalid_tag() {
        validate_tag("orders").unwrap();
        match validate_tag("a b") {
            Err(SegmentError::InvalidTag { tag, reason }) => {
                assert_eq!(tag, "a b");
                assert!(reason.contains("' '"), "{reason}");
            }
            other => panic!("{other:?}"),
        }
    }
}
