//! Where a section's keys keep their current numbers, and what that costs in memory.
//!
//! Three shapes, one per kind of row (`key.rs`):
//!
//! - [`Numbers`] for a numeric section (100,000 consecutive keys) and for a spread bucket
//!   (numeric keys from 5,000,000,000 on): a hash table of the keys called, 16 bytes a key
//!   plus the table's slack; a numeric section whose table would outgrow a flat array turns
//!   into one ([`Numbers::densify`]: 8 bytes a key, one atomic add a call, no lock), so dense
//!   keys cost what seqsvr's arrays cost and sparse ones cost per key.
//! - [`Strings`] for a string bucket: a hash table of the keys, each key's text on the heap.
//!
//! Every byte a shape holds is charged to the one [`Budget`] (`seq.max_memory_mb`) before it
//! is allocated, and given back when the section is dropped: a new key that would pass the
//! bound is refused by the shape (`None`), and the call makes room by evicting a section
//! (`sequences/memory.rs`) or is refused naming the setting.
//!
//! The tables hash with foldhash, seeded per table: keys in one bucket share their bucket's
//! hash bits (FNV-1a modulo 4,096 for strings), so a table hashed with the bucket's own hash
//! would put them all in one probe sequence; and a client choosing keys cannot aim at a
//! seeded hash.

mod budget;
mod numbers;
mod strings;

pub(crate) use budget::Budget;
pub(crate) use numbers::Numbers;
pub(crate) use strings::Strings;

/// Where a section's keys keep their current numbers.
pub(crate) trait Slots: Send + Sync + 'static {
    /// How a key is named within its section.
    type Key: ?Sized;
    /// Adds `n` to the key's number (a key new here starts at `start`) and returns the new
    /// number; `None` when a new key does not fit under the memory bound.
    fn add(&self, key: &Self::Key, n: u64, start: u64) -> Option<u64>;
    /// The key's number without moving it (`start` for a key not seen here).
    fn get(&self, key: &Self::Key, start: u64) -> u64;
    /// Keys held (a dense section: those called since it turned dense are not counted apart;
    /// it holds [`crate::key::SECTION_KEYS`]).
    fn keys(&self) -> usize;
}

/// Bytes of a hash table (hashbrown's layout, as std's `HashMap` has it) able to hold
/// `capacity` entries of `entry` bytes: a power of two of buckets, 7/8 of them usable (all
/// but one below 8), each its entry and one control byte, plus a group of control bytes.
pub(crate) fn table_bytes(capacity: usize, entry: usize) -> usize {
    if capacity == 0 {
        return 0;
    }
    let buckets = match capacity {
        1..4 => 4,
        4..8 => 8,
        _ => (capacity * 8 / 7).next_power_of_two(),
    };
    buckets * (entry + 1) + 16
}

/// Locks `m`, through a poisoned lock (a table is never left half-changed: an insert either
/// happened or did not).
fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_bytes_follow_the_power_of_two_buckets() {
        assert_eq!(table_bytes(0, 16), 0);
        assert_eq!(table_bytes(3, 16), 4 * 17 + 16);
        assert_eq!(table_bytes(7, 16), 8 * 17 + 16);
        assert_eq!(table_bytes(14, 16), 16 * 17 + 16);
        assert_eq!(table_bytes(28_672, 16), 32_768 * 17 + 16);
        // What std's HashMap reports as its capacity maps back onto its buckets.
        let mut m: std::collections::HashMap<u64, u64> = std::collections::HashMap::new();
        for i in 0..1000 {
            m.insert(i, i);
            let buckets = (table_bytes(m.capacity(), 16) - 16) / 17;
            assert!(buckets.is_power_of_two());
            assert!(
                m.capacity() < buckets && buckets <= 2 * m.capacity() + 2,
                "{}",
                m.capacity()
            );
        }
    }
}
