//! A per-key sequence's key, and the section it belongs to. A key is a `u64` (a user ID, an
//! account) or a UTF-8 string of 1..=[`MAX_KEY_BYTES`] bytes without control characters; a
//! string that is a `u64` in canonical decimal (no sign, no leading zero) *is* that number, so
//! `"42"` over REST and `42` from a library are one key.
//!
//! A numeric key `k` below [`SPREAD_FROM`] belongs to section `k / SECTION_KEYS` at slot
//! `k % SECTION_KEYS` (seqsvr's grouping: consecutive keys share a section and its one stored
//! maximum, at most 50,000 rows). A numeric key from [`SPREAD_FROM`] on (a snowflake ID, a
//! random `u64`) would put one key in each section and one row per key in the table, so its
//! range of 100,000 keys is spread over [`SPREAD_BUCKETS`] buckets instead (keeping its set:
//! bucket `% 256` is the range's `% 256`). A string key belongs to bucket
//! `FNV-1a-64(key) % STRING_BUCKETS`. Every constant is pinned in the table: changing one
//! would move keys to rows with other maxima.

use std::fmt;

/// Longest string key, in bytes of UTF-8.
pub const MAX_KEY_BYTES: usize = 128;
/// Consecutive numeric keys per section (seqsvr's 100,000): 800 KB of memory per section
/// loaded, 8 bytes a key. (The placement rule is vesta-core's, which clients share.)
pub const SECTION_KEYS: u64 = vesta_core::seq_place::SEQ_SECTION_KEYS;
/// Buckets string keys are spread over, each one section in the table.
pub const STRING_BUCKETS: u64 = vesta_core::seq_place::SEQ_STRING_BUCKETS;
/// The first numeric key that is spread over buckets rather than kept in its section of
/// consecutive keys: 5,000,000,000 (every `u32` is below it), so numeric sections number at
/// most 50,000.
pub const SPREAD_FROM: u64 = 50_000 * SECTION_KEYS;
/// Buckets the numeric keys from [`SPREAD_FROM`] on are spread over (16 per set).
pub const SPREAD_BUCKETS: u64 = 4096;
/// Sets, as [`crate::sets::SETS`]: a bucket's set is its number modulo this.
const SETS: u64 = vesta_core::seq_place::SEQ_SETS as u64;

/// A key of a per-key sequence.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum SeqKey {
    /// A number.
    Num(u64),
    /// A string that is not a number in canonical decimal.
    Str(Box<str>),
}

/// A key that cannot be used, and why (for a 400 or an error code naming the key).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid key {shown}: {reason}")]
pub struct KeyError {
    /// The key as given, cut to 64 characters.
    pub shown: String,
    /// Which rule it breaks.
    pub reason: String,
}

/// Where a key lives: its row in the table, and how it is named there.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Place<'a> {
    /// Numeric section `section` (a key below [`SPREAD_FROM`]), slot `slot`.
    Num { section: u64, slot: u32 },
    /// Spread bucket `bucket` (a numeric key from [`SPREAD_FROM`] on), the key itself.
    Spread { bucket: u32, key: u64 },
    /// String bucket `bucket`, the key itself.
    Str { bucket: u32, key: &'a str },
}

/// The `kind` column of each kind of row.
pub(crate) mod kind {
    /// Numeric sections' rows.
    pub(crate) const NUMERIC: i16 = 0;
    /// String buckets' rows.
    pub(crate) const STRINGS: i16 = 1;
    /// Spread buckets' rows (numeric keys from 5,000,000,000 on).
    pub(crate) const SPREAD: i16 = 3;
}

impl Place<'_> {
    /// The key's row in the table: `(kind, section or bucket)`.
    pub(crate) fn row(&self) -> (i16, i64) {
        match *self {
            Place::Num { section, .. } => {
                (kind::NUMERIC, i64::try_from(section).unwrap_or(i64::MAX))
            }
            Place::Spread { bucket, .. } => (kind::SPREAD, i64::from(bucket)),
            Place::Str { bucket, .. } => (kind::STRINGS, i64::from(bucket)),
        }
    }

    /// The set of the key's row (numeric section or bucket `n` is in set `n % 256`).
    pub(crate) fn set(&self) -> u32 {
        match *self {
            Place::Num { section, .. } => (section % SETS) as u32,
            Place::Spread { bucket, .. } | Place::Str { bucket, .. } => {
                (u64::from(bucket) % SETS) as u32
            }
        }
    }
}

/// The spread bucket of numeric key `k` (from [`SPREAD_FROM`] on): its range of
/// [`SECTION_KEYS`] keeps its set (`range % 256`) and is dealt among that set's 16 buckets by
/// FNV-1a-64 of the range's other bits (little-endian), a published function the table pins.
pub(crate) fn spread_bucket(k: u64) -> u32 {
    let range = k / SECTION_KEYS;
    let per_set = SPREAD_BUCKETS / SETS;
    let within = fnv1a64(&(range / SETS).to_le_bytes()) % per_set;
    (range % SETS + SETS * within) as u32
}

impl SeqKey {
    /// The key `bytes` name (a path segment, a wire field): UTF-8, 1..=128 bytes, no control
    /// characters; the canonical decimal form of a `u64` is that number.
    pub fn parse(bytes: &[u8]) -> Result<SeqKey, KeyError> {
        let refuse = |reason: String| KeyError {
            shown: shown(&String::from_utf8_lossy(bytes)),
            reason,
        };
        let text = std::str::from_utf8(bytes)
            .map_err(|_| refuse("not UTF-8: a key is a number or UTF-8 text".into()))?;
        if text.is_empty() {
            return Err(refuse(format!(
                "empty: a key is 1..={MAX_KEY_BYTES} bytes of UTF-8"
            )));
        }
        if text.len() > MAX_KEY_BYTES {
            return Err(refuse(format!(
                "{} bytes long: a key is 1..={MAX_KEY_BYTES} bytes of UTF-8",
                text.len()
            )));
        }
        if let Some(c) = text.chars().find(|c| c.is_control()) {
            return Err(refuse(format!(
                "control character {c:?}: a key is printable text"
            )));
        }
        Ok(match canonical_u64(text) {
            Some(n) => SeqKey::Num(n),
            None => SeqKey::Str(text.into()),
        })
    }

    /// Where the key lives.
    #[inline]
    pub(crate) fn place(&self) -> Place<'_> {
        match self {
            SeqKey::Num(k) if *k < SPREAD_FROM => Place::Num {
                section: k / SECTION_KEYS,
                slot: (k % SECTION_KEYS) as u32,
            },
            SeqKey::Num(k) => Place::Spread {
                bucket: spread_bucket(*k),
                key: *k,
            },
            SeqKey::Str(s) => Place::Str {
                bucket: (fnv1a64(s.as_bytes()) % STRING_BUCKETS) as u32,
                key: s,
            },
        }
    }
}

impl From<u64> for SeqKey {
    fn from(k: u64) -> Self {
        SeqKey::Num(k)
    }
}

impl fmt::Display for SeqKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SeqKey::Num(k) => write!(f, "{k}"),
            SeqKey::Str(s) => write!(f, "{s:?}"),
        }
    }
}

use vesta_core::seq_place::{canonical_u64, fnv1a64};

/// A key for a message: quoted, at most 64 characters.
fn shown(text: &str) -> String {
    match text.char_indices().nth(64) {
        Some((end, _)) => format!("{:?}…", &text[..end]),
        None => format!("{text:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_numbers_are_numeric_keys_and_the_rest_strings() {
        assert_eq!(SeqKey::parse(b"0"), Ok(SeqKey::Num(0)));
        assert_eq!(SeqKey::parse(b"42"), Ok(SeqKey::Num(42)));
        assert_eq!(
            SeqKey::parse(b"18446744073709551615"),
            Ok(SeqKey::Num(u64::MAX))
        );
        for s in [
            "042",
            "18446744073709551616",
            "+1",
            "-1",
            "1.0",
            "chat:42",
            "Zürich 会话",
        ] {
            assert_eq!(
                SeqKey::parse(s.as_bytes()),
                Ok(SeqKey::Str(s.into())),
                "{s}"
            );
        }
    }

    #[test]
    fn bad_keys_are_refused_naming_the_rule() {
        let e = |b: &[u8]| SeqKey::parse(b).unwrap_err().to_string();
        assert_eq!(
            e(b""),
            "invalid key \"\": empty: a key is 1..=128 bytes of UTF-8"
        );
        assert!(e(&[b'x'; 129]).contains("129 bytes long: a key is 1..=128 bytes"));
        assert!(SeqKey::parse(&[b'x'; 128]).is_ok());
        assert!(e(b"\xff\xfe").contains("not UTF-8"));
        assert!(e(b"a\nb").contains("control character '\\n'"));
    }

    #[test]
    fn places_follow_the_pinned_layout() {
        fn place(k: u64) -> Place<'static> {
            match SeqKey::Num(k).place() {
                Place::Num { section, slot } => Place::Num { section, slot },
                Place::Spread { bucket, key } => Place::Spread { bucket, key },
                Place::Str { .. } => unreachable!("a number's place is numeric"),
            }
        }
        assert_eq!(
            place(0),
            Place::Num {
                section: 0,
                slot: 0
            }
        );
        assert_eq!(
            place(99_999),
            Place::Num {
                section: 0,
                slot: 99_999
            }
        );
        assert_eq!(
            place(100_000),
            Place::Num {
                section: 1,
                slot: 0
            }
        );
        assert_eq!(
            place(4_999_999_999),
            Place::Num {
                section: 49_999,
                slot: 99_999
            }
        );
        // From 5,000,000,000 on: spread over buckets, each range of 100,000 keys in one bucket
        // of its set.
        for k in [5_000_000_000, 412_345_678_901_234_567, u64::MAX] {
            let Place::Spread { bucket, key } = place(k) else {
                panic!("{k} is spread");
            };
            assert_eq!(key, k);
            assert!(u64::from(bucket) < SPREAD_BUCKETS);
            assert_eq!(u64::from(bucket) % 256, (k / 100_000) % 256, "{k}: its set");
            assert_eq!(
                place(k - k % 100_000),
                place(k - k % 100_000),
                "one range, one bucket"
            );
            let Place::Spread { bucket: first, .. } = place(k - k % 100_000) else {
                panic!()
            };
            assert_eq!(first, bucket, "{k}: its range's bucket");
        }
        // Pinned: a snowflake-sized key's bucket never changes.
        assert_eq!(
            spread_bucket(412_345_678_901_234_567),
            spread_bucket(412_345_678_901_200_000)
        );
        assert_eq!(
            spread_bucket(u64::MAX),
            ((u64::MAX / 100_000) % 256
                + 256 * (fnv1a64(&(u64::MAX / 100_000 / 256).to_le_bytes()) % 16))
                as u32
        );
        // FNV-1a-64's published test vectors: the bucket of a key never changes.
        assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a64(b"foobar"), 0x8594_4171_f739_67e8);
    }
}
