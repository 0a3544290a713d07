//! Where a per-key sequence's key lives, from its bytes alone: the one placement rule that
//! vesta-seq's sections (docs/seq.md) and a client routing a key to the member of a cluster
//! that serves it (docs/seq-cluster.md) must agree on. Pure, no I/O.
//!
//! A key that is a `u64` in canonical decimal (no sign, no leading zero) is that number, in
//! section `key / SEQ_SECTION_KEYS`; any other key is text, in string bucket
//! `FNV-1a-64(key) % SEQ_STRING_BUCKETS`. A numeric section or a bucket `n` is in set
//! `n % SEQ_SETS`. The constants are pinned in the sequences' table: changing them would move
//! keys to sections with other maxima.

/// Consecutive numeric keys per section (seqsvr's 100,000).
pub const SEQ_SECTION_KEYS: u64 = 100_000;
/// Buckets string keys are spread over.
pub const SEQ_STRING_BUCKETS: u64 = 4096;
/// Sets the sections are dealt in among a cluster's members.
pub const SEQ_SETS: u32 = 256;

/// `text` as a `u64` if it is one in canonical decimal: digits only, no leading zero (but "0").
pub fn canonical_u64(text: &str) -> Option<u64> {
    let b = text.as_bytes();
    if b.is_empty() || !b.iter().all(u8::is_ascii_digit) || (b.len() > 1 && b[0] == b'0') {
        return None;
    }
    text.parse().ok()
}

/// FNV-1a, 64 bits: stable across builds and platforms (a key's bucket is in the table).
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// The set of the key `bytes` name, as sent (a key the servers would refuse gets a set too: the
/// refusal comes from whichever member is asked).
pub fn seq_set_of(bytes: &[u8]) -> u32 {
    let numeric = std::str::from_utf8(bytes).ok().and_then(canonical_u64);
    let n = match numeric {
        Some(k) => k / SEQ_SECTION_KEYS,
        None => fnv1a64(bytes) % SEQ_STRING_BUCKETS,
    };
    (n % u64::from(SEQ_SETS)) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_fall_in_the_pinned_sets() {
        assert_eq!(seq_set_of(b"0"), 0);
        assert_eq!(seq_set_of(b"99999"), 0);
        assert_eq!(seq_set_of(b"100000"), 1);
        assert_eq!(seq_set_of(b"25600000"), 0);
        assert_eq!(
            seq_set_of(b"18446744073709551615"),
            ((u64::MAX / 100_000) % 256) as u32
        );
        // Not canonical: text.
        assert_eq!(seq_set_of(b"042"), ((fnv1a64(b"042") % 4096) % 256) as u32);
        assert_eq!(canonical_u64(""), None);
        assert_eq!(canonical_u64("18446744073709551616"), None);
        assert_eq!(fnv1a64(b"foobar"), 0x8594_4171_f739_67e8);
    }
}
