//! The soak's sequence group (docs/soak.md): the keys its workers call, the clock they stamp
//! calls with and the binary record every answered call leaves in a worker's call file; and the
//! check that loads every file and runs the history checker (`crate::history::check_recs`) over
//! all calls at once.
//!
//! A record is [`RECORD_BYTES`] bytes, little-endian: the key's number (u32: an index into
//! [`key`], which every worker computes the same way, so calls on one key from different
//! processes meet in the check), a flags byte, the count of numbers (u8, 1..=100), two bytes
//! zero, the first number (u64), the start and the end of the call (u64 ns of
//! `CLOCK_MONOTONIC`, one clock for every process on the host). A call answered in several
//! ranges (`seq_next_n` asks again above a step) leaves one record per range, each with the
//! call's times; the ranges after the first carry [`MORE`], so calls are counted exactly.

use std::fs::File;
use std::io::{self, BufReader, Read};
use std::path::Path;

use crate::history::Rec;

/// Bytes of one record.
pub const RECORD_BYTES: usize = 28;
/// Flag: another range of the call before it.
pub const MORE: u8 = 1;

/// The fixed keys: numeric edges (the first, the last of a 100,000-key section, the first of the
/// next, u64's largest) and strings, ASCII and not, one of the longest allowed (128 bytes).
pub const FIXED: [&str; 14] = [
    "0",
    "1",
    "99999",
    "100000",
    "4294967296",
    "18446744073709551614",
    "18446744073709551615",
    "user:42",
    "order",
    "chat:\u{4e2d}\u{6587}",
    "\u{043a}\u{043b}\u{044e}\u{0447}",
    "caf\u{e9}-\u{1f511}",
    "a",
    "kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk",
];

/// Key number `i`: the fixed keys first, then random ones, the same in every process and all
/// distinct: a third dense numeric keys (200,000 up, seven apart: a few sections), a third
/// ASCII strings, a third non-ASCII strings; one in a hundred a random `u64` instead (each
/// loads a section of its own, so a few hundred of them make members evict sections).
pub fn key(i: u32) -> String {
    if let Some(k) = FIXED.get(i as usize) {
        return (*k).to_owned();
    }
    let j = u64::from(i) - FIXED.len() as u64;
    let h = crate::soak::rng::Rng::new(j ^ 0x5eed_5eed_5eed_5eed).next_u64();
    if j.is_multiple_of(100) {
        // Past the dense keys' sections, so it stays distinct from them.
        return (h | 1 << 63).to_string();
    }
    match j % 5 {
        0 => (200_000 + j * 7).to_string(),
        // Snowflake-sized (user IDs that are snowflake IDs): spread buckets, a table per bucket.
        1 => (400_000_000_000_000_000 + h % 100_000_000_000_000_000).to_string(),
        // 16-24 bytes, as a user's inbox key.
        2 => format!(
            "user:{:0w$}",
            h % 100_000_000_000,
            w = 11 + (j % 9) as usize
        ),
        3 => format!("r:{j}:{:x}", h >> 40),
        _ => format!("\u{5e8f}\u{5217}-{j}-{}", h % 1_000_003),
    }
}

/// Nanoseconds of `CLOCK_MONOTONIC`: comparable between processes on one host (unlike
/// `Instant`, whose origin is private to a process).
pub fn mono_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// One record's bytes.
pub fn encode(
    key: u32,
    more: bool,
    first: u64,
    count: u8,
    start_ns: u64,
    end_ns: u64,
) -> [u8; RECORD_BYTES] {
    let mut b = [0u8; RECORD_BYTES];
    b[0..4].copy_from_slice(&key.to_le_bytes());
    b[4] = if more { MORE } else { 0 };
    b[5] = count;
    b[8..16].copy_from_slice(&first.to_le_bytes());
    b[16..24].copy_from_slice(&start_ns.to_le_bytes());
    // The end as the time since the start (u32 ns would cap at 4.3 s; a call may wait longer).
    let took = end_ns.saturating_sub(start_ns);
    b[24..28].copy_from_slice(
        &u32::try_from(took / 1_000)
            .unwrap_or(u32::MAX)
            .to_le_bytes(),
    );
    b
}

/// A record: the call as the checker reads it, and whether it continues the call before it.
/// The end is rounded up to the microsecond (the record keeps µs since the start): a later end
/// only makes fewer pairs of calls ordered in time, never a false violation.
pub fn decode(b: &[u8; RECORD_BYTES]) -> Option<(Rec, bool)> {
    let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().unwrap_or_default());
    let key = u32::from_le_bytes(b[0..4].try_into().unwrap_or_default());
    let count = u64::from(b[5]);
    let took_us = u64::from(u32::from_le_bytes(b[24..28].try_into().unwrap_or_default()));
    if count == 0 || b[4] > MORE || b[6] != 0 || b[7] != 0 {
        return None;
    }
    let first = u64_at(8);
    let start_ns = u64_at(16);
    Some((
        Rec {
            key,
            first,
            last: first.checked_add(count - 1)?,
            start_ns,
            end_ns: start_ns + (took_us + 1) * 1_000,
        },
        b[4] == MORE,
    ))
}

/// What the files held.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Loaded {
    /// Calls (records without [`MORE`]).
    pub calls: u64,
    /// Records (ranges).
    pub records: u64,
    /// Records that did not decode.
    pub bad: u64,
    /// Files that ended in a cut record (a process killed mid-write).
    pub cut: u64,
}

/// Appends every record of `path` to `recs`.
pub fn load(path: &Path, recs: &mut Vec<Rec>, loaded: &mut Loaded) -> io::Result<()> {
    let len = std::fs::metadata(path)?.len();
    recs.reserve((len / RECORD_BYTES as u64) as usize);
    let mut r = BufReader::with_capacity(1 << 20, File::open(path)?);
    let mut b = [0u8; RECORD_BYTES];
    let mut read = 0u64;
    while read + RECORD_BYTES as u64 <= len {
        r.read_exact(&mut b)?;
        read += RECORD_BYTES as u64;
        match decode(&b) {
            Some((rec, more)) => {
                recs.push(rec);
                loaded.records += 1;
                if !more {
                    loaded.calls += 1;
                }
            }
            None => loaded.bad += 1,
        }
    }
    if read < len {
        loaded.cut += 1;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_keys_are_stable() {
        let b = encode(7, true, u64::MAX - 99, 100, 1_000, 2_500);
        let (rec, more) = decode(&b).unwrap();
        assert!(more);
        assert_eq!(
            (rec.key, rec.first, rec.last, rec.start_ns, rec.end_ns),
            (7, u64::MAX - 99, u64::MAX, 1_000, 3_000)
        );
        assert!(decode(&encode(1, false, u64::MAX, 2, 0, 0)).is_none());
        let mut zero = encode(1, false, 5, 1, 0, 0);
        zero[5] = 0;
        assert!(decode(&zero).is_none());
        assert_eq!(key(0), "0");
        assert_eq!(key(6), u64::MAX.to_string());
        assert_eq!(key(1000), key(1000));
        let distinct: std::collections::HashSet<String> = (0..2000).map(key).collect();
        assert_eq!(distinct.len(), 2000);
        assert!(mono_ns() > 0);
    }

    #[test]
    fn load_counts_calls_and_cut_tails() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("calls.bin");
        let mut bytes = Vec::new();
        bytes.extend(encode(1, false, 1, 3, 10, 20));
        bytes.extend(encode(1, true, 10, 2, 10, 20));
        bytes.extend(encode(2, false, 1, 1, 30, 40));
        bytes.extend([1, 2, 3]);
        std::fs::write(&p, bytes).unwrap();
        let mut recs = Vec::new();
        let mut loaded = Loaded::default();
        load(&p, &mut recs, &mut loaded).unwrap();
        assert_eq!(
            loaded,
            Loaded {
                calls: 2,
                records: 3,
                bad: 0,
                cut: 1
            }
        );
        let (s, v) = crate::history::check_recs(&mut recs, 4);
        assert!(v.is_empty());
        assert_eq!((s.calls, s.numbers, s.keys), (3, 6, 2));
    }
}
