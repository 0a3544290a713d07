//! [`Numbers`]: the numbers of a numeric section's keys, or of a spread bucket's. A hash table
//! of the keys called (16 bytes a key and the table's slack) that a numeric section trades for
//! a flat array of its 100,000 keys ([`DENSE_BYTES`], 8 bytes a key) once the table would grow
//! past it: a section stays as small as its keys while they are few, and as fast and compact
//! as seqsvr's arrays once they are many. A spread bucket's keys are not consecutive, so it
//! stays a table.
//!
//! The array is set once, under the table's lock, with every number the table held; from then
//! on the table is empty and every call (which looks for the array first, and again under the
//! lock) goes to the array: no number is lost or counted twice in the move.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use super::{Budget, Slots, lock, table_bytes};
use crate::key::SECTION_KEYS;

/// Bytes of a numeric section as a flat array: 8 a key.
pub(crate) const DENSE_BYTES: usize = SECTION_KEYS as usize * 8;
/// Bytes of one entry of the table: the key and its number.
const ENTRY: usize = 16;

type Table = HashMap<u64, u64, foldhash::fast::RandomState>;

/// A numeric section's or a spread bucket's keys and their numbers.
pub(crate) struct Numbers {
    /// The keys called (a numeric section's by slot, a bucket's by key), until `dense` is set.
    table: Mutex<Table>,
    /// The section's flat array, by the key's slot (its place in the section), once it turned dense.
    dense: OnceLock<Box<[AtomicU64]>>,
    /// Whether it may turn dense (a numeric section; not a spread bucket).
    may_densify: bool,
    /// Keys in the table (the array's are not counted).
    count: AtomicUsize,
    /// Bytes charged to `budget`.
    bytes: AtomicUsize,
    budget: Arc<Budget>,
}

impl Numbers {
    /// No keys yet: a numeric section (`may_densify`) or a spread bucket.
    /// `overhead`: the bytes of the section around it, charged with its own.
    pub(crate) fn new(budget: Arc<Budget>, may_densify: bool, overhead: usize) -> Self {
        budget.take_anyway(overhead);
        Numbers {
            table: Mutex::new(Table::default()),
            dense: OnceLock::new(),
            may_densify,
            count: AtomicUsize::new(0),
            bytes: AtomicUsize::new(overhead),
            budget,
        }
    }

    /// Whether the section turned into a flat array.
    pub(crate) fn is_dense(&self) -> bool {
        self.dense.get().is_some()
    }

    /// Turns the table into the flat array, every key at `start` but those the table holds;
    /// false (nothing changed) when the array does not fit under the bound. Under the table's
    /// lock.
    fn densify(&self, table: &mut Table, start: u64) -> bool {
        if !self.budget.take(DENSE_BYTES) {
            return false;
        }
        let dense: Box<[AtomicU64]> = (0..SECTION_KEYS).map(|_| AtomicU64::new(start)).collect();
        for (slot, n) in table.drain() {
            dense[slot as usize].store(n, Ordering::Relaxed);
        }
        let freed = table_bytes(table.capacity(), ENTRY);
        *table = Table::default();
        self.budget.give(freed);
        self.bytes.fetch_sub(freed, Ordering::AcqRel);
        self.bytes.fetch_add(DENSE_BYTES, Ordering::AcqRel);
        self.count.store(0, Ordering::Release);
        // Release: the numbers stored above are seen by whoever finds the array.
        assert!(self.dense.set(dense).is_ok(), "a section turns dense once");
        true
    }
}

#[cfg(test)]
impl Numbers {
    /// Bytes held, as charged to the budget.
    fn bytes(&self) -> usize {
        self.bytes.load(Ordering::Acquire)
    }
}

impl Slots for Numbers {
    type Key = u64;

    #[inline]
    fn add(&self, key: &u64, n: u64, start: u64) -> Option<u64> {
        match self.dense.get() {
            // A dense section's slot is the key's place in it, below SECTION_KEYS.
            Some(dense) => Some(dense[*key as usize].fetch_add(n, Ordering::AcqRel) + n),
            None => self.add_to_table(key, n, start),
        }
    }

    fn get(&self, key: &u64, start: u64) -> u64 {
        if let Some(dense) = self.dense.get() {
            return dense[*key as usize].load(Ordering::Acquire);
        }
        let table = lock(&self.table);
        match self.dense.get() {
            Some(dense) => dense[*key as usize].load(Ordering::Acquire),
            None => table.get(key).copied().unwrap_or(start),
        }
    }

    fn keys(&self) -> usize {
        if self.is_dense() {
            SECTION_KEYS as usize
        } else {
            self.count.load(Ordering::Relaxed)
        }
    }
}

impl Numbers {
    /// [`Slots::add`] while the section is a table (or turning dense under its lock); out of
    /// line, so a dense section's call is its array's one atomic add.
    #[inline(never)]
    fn add_to_table(&self, key: &u64, n: u64, start: u64) -> Option<u64> {
        let mut table = lock(&self.table);
        if let Some(dense) = self.dense.get() {
            return Some(dense[*key as usize].fetch_add(n, Ordering::AcqRel) + n);
        }
        if let Some(cur) = table.get_mut(key) {
            *cur += n;
            return Some(*cur);
        }
        let cap = table.capacity();
        if table.len() == cap {
            let (now, grown) = (table_bytes(cap, ENTRY), table_bytes(cap + 1, ENTRY));
            if self.may_densify && grown >= DENSE_BYTES {
                if !self.densify(&mut table, start) {
                    return None;
                }
                drop(table);
                return self.add(key, n, start);
            }
            if !self.budget.take(grown - now) {
                return None;
            }
            table.reserve(1);
            self.bytes.fetch_add(grown - now, Ordering::AcqRel);
            settle(
                &self.budget,
                &self.bytes,
                grown,
                table_bytes(table.capacity(), ENTRY),
            );
        }
        table.insert(*key, start + n);
        self.count.fetch_add(1, Ordering::Relaxed);
        Some(start + n)
    }
}

/// After a table grew: charges or gives back what its allocation differs from the `charged`
/// prediction (none, for std's tables as they are; kept exact should they change).
pub(super) fn settle(budget: &Budget, bytes: &AtomicUsize, charged: usize, actual: usize) {
    if actual > charged {
        // Allocated already: charged whatever the bound says.
        budget.take_anyway(actual - charged);
        bytes.fetch_add(actual - charged, Ordering::AcqRel);
    } else if charged > actual {
        budget.give(charged - actual);
        bytes.fetch_sub(charged - actual, Ordering::AcqRel);
    }
}

impl Drop for Numbers {
    fn drop(&mut self) {
        self.budget.give(*self.bytes.get_mut());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_section_is_a_table_until_an_array_is_smaller() {
        let budget = Arc::new(Budget::new(usize::MAX));
        let s = Numbers::new(Arc::clone(&budget), true, 0);
        assert_eq!(s.add(&7, 1, 100), Some(101));
        assert_eq!(s.add(&7, 2, 100), Some(103));
        assert_eq!(s.get(&8, 100), 100, "a key not called stands at the start");
        assert_eq!(budget.used(), s.bytes());
        assert_eq!(s.bytes(), table_bytes(3, ENTRY));
        for slot in 0..28_672u64 {
            s.add(&slot, 1, 100).unwrap();
        }
        assert!(!s.is_dense(), "28,672 keys fit the table of 32,768 buckets");
        assert_eq!(s.bytes(), table_bytes(28_672, ENTRY));
        assert!(s.bytes() < DENSE_BYTES);
        s.add(&50_000, 1, 100).unwrap();
        assert!(
            s.is_dense(),
            "the next key would double the table past the array"
        );
        assert_eq!((s.bytes(), budget.used()), (DENSE_BYTES, DENSE_BYTES));
        // Every number moved with its key.
        assert_eq!(s.get(&7, 100), 104);
        assert_eq!(s.get(&28_671, 100), 101);
        assert_eq!(s.get(&50_000, 100), 101);
        assert_eq!(s.get(&99_999, 100), 100);
        assert_eq!(s.add(&7, 1, 100), Some(105));
        drop(s);
        assert_eq!(budget.used(), 0, "a dropped section gives its bytes back");
    }

    #[test]
    fn a_new_key_past_the_bound_is_refused_and_a_bucket_never_turns_dense() {
        let budget = Arc::new(Budget::new(table_bytes(3, ENTRY)));
        let s = Numbers::new(Arc::clone(&budget), false, 0);
        for k in [1u64 << 40, 5, 6] {
            assert!(s.add(&k, 1, 0).is_some());
        }
        assert_eq!(s.add(&9, 1, 0), None, "a fourth key needs a larger table");
        assert_eq!(s.add(&5, 1, 0), Some(2), "known keys go on");
        assert_eq!(s.keys(), 3);
        let b = Numbers::new(Arc::new(Budget::new(usize::MAX)), false, 0);
        for k in 0..40_000u64 {
            b.add(&(k * 7_919), 1, 0).unwrap();
        }
        assert!(!b.is_dense());
        assert_eq!(b.keys(), 40_000);
    }
}
