//! One segment: the range `[start, start + len)` reserved by one fetch, and an atomic cursor
//! that hands it out. Taking numbers is one `fetch_add` — no lock, no syscall — so callers on
//! any number of threads each get disjoint numbers, increasing in the order of the cursor.

use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
/// Cursor value after [`Segment::freeze`]: far past any `len`, and far from wrapping however
/// many takes still race in.
const FROZEN: u64 = 1 << 62;

/// The result of a take.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Take {
    /// Numbers (possibly fewer than asked when the segment ran out); `prefetch` is true for
    /// exactly one take per segment, the one that crosses the prefetch point.
    Got { range: Range<u64>, prefetch: bool },
    /// Nothing left.
    Exhausted,
}

/// A reserved range and its cursor.
#[derive(Debug)]
pub(crate) struct Segment {
    start: u64,
    len: u64,
    /// Offset whose take asks for the next segment.
    trigger: u64,
    /// Step asked of the database for this segment (the segment's length).
    pub(crate) step: u32,
    /// Offset of the next number to hand out; may run past `len` (then the segment is empty).
    /// On a cache line of its own: threads taking at once bounce only this line, and the
    /// fields above stay shared in every core's cache.
    taken: Padded,
}

/// An atomic alone on its cache line (two lines: adjacent-line prefetchers pair them).
#[derive(Debug)]
#[repr(align(128))]
struct Padded(AtomicU64);

impl std::ops::Deref for Padded {
    type Target = AtomicU64;

    fn deref(&self) -> &AtomicU64 {
        &self.0
    }
}

impl Segment {
    /// A segment over `range` that asks for the next one once `prefetch_percent` of it is
    /// issued.
    pub(crate) fn new(range: Range<u64>, step: u32, prefetch_percent: u32) -> Segment {
        let len = range.end - range.start;
        let trigger = (u128::from(len) * u128::from(prefetch_percent) / 100) as u64;
        Segment {
            start: range.start,
            len,
            trigger: trigger.min(len.saturating_sub(1)),
            taken: Padded(AtomicU64::new(0)),
            step,
        }
    }

    /// The placeholder before the first fetch: empty, so the first take goes to the slow path.
    pub(crate) fn empty() -> Segment {
        Segment {
            start: 0,
            len: 0,
            trigger: 0,
            taken: Padded(AtomicU64::new(0)),
            step: 0,
        }
    }

    /// Takes up to `n` (≥ 1) numbers.
    #[inline]
    pub(crate) fn take(&self, n: u64) -> Take {
        // The fixed fields first: once the cursor's line is ours, another thread's take may
        // steal it back, and they are not on it.
        let (start, len, trigger) = (self.start, self.len, self.trigger);
        let offset = self.taken.fetch_add(n, Ordering::Relaxed);
        if offset >= len {
            return Take::Exhausted;
        }
        let got = n.min(len - offset);
        Take::Got {
            range: start + offset..start + offset + got,
            prefetch: offset <= trigger && trigger < offset.saturating_add(n),
        }
    }

    /// The whole reserved range.
    pub(crate) fn range(&self) -> Range<u64> {
        self.start..self.start + self.len
    }

    /// The first number not yet handed out (`end` when none is left).
    pub(crate) fn first_unused(&self) -> u64 {
        self.start + self.taken.load(Ordering::Acquire).min(self.len)
    }

    /// Numbers left.
    pub(crate) fn remaining(&self) -> u64 {
        self.range().end - self.first_unused()
    }

    /// True once nothing is left.
    pub(crate) fn is_exhausted(&self) -> bool {
        self.taken.load(Ordering::Acquire) >= self.len
    }

    /// True once the prefetch point is passed (or nothing is left).
    pub(crate) fn past_prefetch_point(&self) -> bool {
        self.taken.load(Ordering::Acquire) > self.trigger || self.len == 0
    }

    /// Stops all further takes and returns the first number never handed out. A take racing
    /// with this either got its numbers before (and they are below the answer) or gets
    /// [`Take::Exhausted`].
    pub(crate) fn freeze(&self) -> u64 {
        self.start + self.taken.swap(FROZEN, Ordering::AcqRel).min(self.len)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;
    use std::sync::Arc;
    use std::thread;

    use super::*;

    fn seg(range: Range<u64>, pct: u32) -> Segment {
        Segment::new(range, 0, pct)
    }

    #[test]
    fn takes_run_in_order_then_exhaust() {
        let s = seg(1..4, 10);
        let got: Vec<Take> = (0..4).map(|_| s.take(1)).collect();
        assert_eq!(
            got,
            vec![
                Take::Got {
                    range: 1..2,
                    prefetch: true
                },
                Take::Got {
                    range: 2..3,
                    prefetch: false
                },
                Take::Got {
                    range: 3..4,
                    prefetch: false
                },
                Take::Exhausted
            ]
        );
        assert!(s.is_exhausted());
        assert_eq!(s.first_unused(), 4);
    }

    #[test]
    fn the_prefetch_point_fires_once_at_the_percentage() {
        let s = seg(100..200, 10);
        let fired: Vec<u64> = (0..100)
            .filter_map(|_| match s.take(1) {
                Take::Got { range, prefetch } => prefetch.then_some(range.start),
                Take::Exhausted => None,
            })
            .collect();
        assert_eq!(fired, vec![110], "after 10 of 100 were issued");
        let s = seg(0..1000, 50);
        assert!(!s.past_prefetch_point());
        assert_eq!(
            s.take(499),
            Take::Got {
                range: 0..499,
                prefetch: false
            }
        );
        assert_eq!(
            s.take(10),
            Take::Got {
                range: 499..509,
                prefetch: true
            },
            "a batch spanning the point fires it"
        );
        assert!(s.past_prefetch_point());
    }

    #[test]
    fn a_batch_gets_what_is_left() {
        let s = seg(0..10, 10);
        assert!(matches!(s.take(7), Take::Got { range, .. } if range == (0..7)));
        assert!(matches!(s.take(7), Take::Got { range, .. } if range == (7..10)));
        assert_eq!(s.take(1), Take::Exhausted);
        assert_eq!(s.remaining(), 0);
    }

    #[test]
    fn freeze_stops_takes_and_reports_the_first_unused() {
        let s = seg(50..60, 10);
        s.take(3);
        assert_eq!(s.freeze(), 53);
        assert_eq!(s.take(1), Take::Exhausted);
        assert_eq!(s.first_unused(), 60);
        let fresh = seg(50..60, 10);
        assert_eq!(fresh.freeze(), 50);
    }

    #[test]
    fn threads_never_share_a_number() {
        let s = Arc::new(seg(0..400_000, 10));
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let s = Arc::clone(&s);
                thread::spawn(move || {
                    let mut mine = Vec::new();
                    while let Take::Got { range, .. } = s.take(1) {
                        mine.push(range.start);
                    }
                    mine
                })
            })
            .collect();
        let mut all = HashSet::new();
        for h in handles {
            let mine = h.join().unwrap();
            assert!(
                mine.windows(2).all(|w| w[0] < w[1]),
                "increasing per thread"
            );
            for n in mine {
                assert!(all.insert(n), "{n} issued twice");
            }
        }
        assert_eq!(all.len(), 400_000);
    }
}
