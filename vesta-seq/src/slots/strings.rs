//! [`Strings`]: the numbers of a string bucket's keys, in a hash table by the key's text. A key
//! costs its entry (24 bytes: the text's pointer and length, its number) and the table's slack,
//! plus its text on the heap ([`heap_bytes`]: glibc's chunk for it, 32 bytes up to 24 bytes
//! of text).

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use super::numbers::settle;
use super::{Budget, Slots, lock, table_bytes};

/// Bytes of one entry of the table: the key's pointer and length, its number.
const ENTRY: usize = 24;

type Table = HashMap<Box<str>, u64, foldhash::fast::RandomState>;

/// A string bucket's keys and their numbers.
pub(crate) struct Strings {
    table: Mutex<Table>,
    /// Keys held.
    count: AtomicUsize,
    /// Bytes charged to `budget`.
    bytes: AtomicUsize,
    budget: Arc<Budget>,
}

impl Strings {
    /// An empty bucket.
    /// `overhead`: the bytes of the section around it, charged with its own.
    pub(crate) fn new(budget: Arc<Budget>, overhead: usize) -> Self {
        budget.take_anyway(overhead);
        Strings {
            table: Mutex::new(Table::default()),
            count: AtomicUsize::new(0),
            bytes: AtomicUsize::new(overhead),
            budget,
        }
    }
}

/// What the allocator takes for a key of `len` bytes: glibc's chunk (the request and its
/// 8-byte header, rounded up to 16, at least 32).
pub(crate) fn heap_bytes(len: usize) -> usize {
    ((len + 8 + 15) & !15).max(32)
}

#[cfg(test)]
impl Strings {
    /// Bytes held, as charged to the budget.
    fn bytes(&self) -> usize {
        self.bytes.load(Ordering::Acquire)
    }
}

impl Slots for Strings {
    type Key = str;

    fn add(&self, key: &str, n: u64, start: u64) -> Option<u64> {
        let mut table = lock(&self.table);
        if let Some(cur) = table.get_mut(key) {
            *cur += n;
            return Some(*cur);
        }
        let cap = table.capacity();
        let (now, grown) = if table.len() == cap {
            (table_bytes(cap, ENTRY), table_bytes(cap + 1, ENTRY))
        } else {
            (0, 0)
        };
        let charge = heap_bytes(key.len()) + (grown - now);
        if !self.budget.take(charge) {
            return None;
        }
        self.bytes.fetch_add(charge, Ordering::AcqRel);
        if grown > 0 {
            table.reserve(1);
            settle(
                &self.budget,
                &self.bytes,
                grown,
                table_bytes(table.capacity(), ENTRY),
            );
        }
        table.insert(key.into(), start + n);
        self.count.fetch_add(1, Ordering::Relaxed);
        Some(start + n)
    }

    fn get(&self, key: &str, start: u64) -> u64 {
        lock(&self.table).get(key).copied().unwrap_or(start)
    }

    fn keys(&self) -> usize {
        self.count.load(Ordering::Relaxed)
    }
}

impl Drop for Strings {
    fn drop(&mut self) {
        self.budget.give(*self.bytes.get_mut());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_cost_their_entry_and_text_and_are_refused_past_the_bound() {
        assert_eq!(heap_bytes(1), 32);
        assert_eq!(heap_bytes(24), 32);
        assert_eq!(heap_bytes(25), 48);
        let first = table_bytes(3, ENTRY) + heap_bytes(7);
        let budget = Arc::new(Budget::new(first + heap_bytes(7)));
        let s = Strings::new(Arc::clone(&budget), 0);
        assert_eq!(s.add("chat:42", 1, 100), Some(101));
        assert_eq!(s.bytes(), first);
        assert_eq!(s.add("chat:43", 2, 100), Some(102));
        assert_eq!(s.add("chat:44", 1, 100), None, "past the bound");
        assert_eq!(s.add("chat:42", 1, 100), Some(102), "known keys go on");
        assert_eq!(s.get("chat:44", 100), 100);
        assert_eq!((s.keys(), budget.used()), (2, s.bytes()));
        drop(s);
        assert_eq!(budget.used(), 0);
    }
}
