//! [`Budget`]: the bytes every section in memory holds together, under `seq.max_memory_mb`.
//! A shape charges its bytes before it allocates them and gives them back when dropped, so
//! what the sequences hold never passes the bound by more than the allocations under way.

use std::sync::atomic::{AtomicUsize, Ordering};

/// Bytes held by the sections in memory, and their bound.
#[derive(Debug)]
pub(crate) struct Budget {
    used: AtomicUsize,
    bound: usize,
}

impl Budget {
    /// An empty budget of `bound` bytes.
    pub(crate) fn new(bound: usize) -> Self {
        Budget {
            used: AtomicUsize::new(0),
            bound,
        }
    }

    /// Charges `bytes` if they fit under the bound; false (nothing charged) if not.
    pub(crate) fn take(&self, bytes: usize) -> bool {
        let before = self.used.fetch_add(bytes, Ordering::AcqRel);
        if before.saturating_add(bytes) <= self.bound {
            true
        } else {
            self.used.fetch_sub(bytes, Ordering::AcqRel);
            false
        }
    }

    /// Charges `bytes` already allocated, past the bound if need be.
    pub(crate) fn take_anyway(&self, bytes: usize) {
        self.used.fetch_add(bytes, Ordering::AcqRel);
    }

    /// Whether `bytes` more would fit now.
    pub(crate) fn fits(&self, bytes: usize) -> bool {
        self.used().saturating_add(bytes) <= self.bound
    }

    /// Gives `bytes` back.
    pub(crate) fn give(&self, bytes: usize) {
        self.used.fetch_sub(bytes, Ordering::AcqRel);
    }

    /// Bytes held now.
    pub(crate) fn used(&self) -> usize {
        self.used.load(Ordering::Acquire)
    }

    /// The bound.
    pub(crate) fn bound(&self) -> usize {
        self.bound
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charges_fit_under_the_bound_or_are_refused_whole() {
        let b = Budget::new(100);
        assert!(b.take(60));
        assert!(!b.take(41), "would pass the bound");
        assert_eq!(b.used(), 60, "a refused charge leaves nothing behind");
        assert!(b.fits(40) && !b.fits(41));
        assert!(b.take(40));
        b.give(100);
        assert_eq!((b.used(), b.bound()), (0, 100));
    }
}
