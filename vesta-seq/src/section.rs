//! One section in memory: the keys' current numbers and the section's one `max`, the highest
//! number the table allows. A call adds to its key's number first and hands it out only once
//! `max` covers it; a number past `max` waits for a raise (or is lost, never handed out, when
//! the raise fails: gaps are allowed, going back is not).
//!
//! A section's keys keep their numbers in one of the shapes of `slots/` (a numeric section's
//! table or flat array, a spread bucket's or a string bucket's table). Every key's number
//! starts at the `max` its section had when it was loaded: every number handed out before (by
//! an earlier process, or before an eviction) is at most that, and a key new to the section
//! was handed nothing since.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use crate::slots::Slots;

/// A section raised again sooner than this doubles its step.
pub(crate) const GROW_BELOW: Duration = Duration::from_secs(1);
/// A section raised this long or longer after the last raise halves its step.
pub(crate) const SHRINK_ABOVE: Duration = Duration::from_secs(60);

/// What a call on a key got.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Take {
    /// Its last number, covered by `max`: hand it out.
    Ready(u64),
    /// Its last number, past `max`: hand it out once a raise covers it.
    Wait(u64),
    /// A new key that does not fit under the memory bound.
    Full,
}

/// One section of one kind.
pub(crate) struct Section<S> {
    /// Its row: `(kind, section)`.
    pub(crate) kind: i16,
    pub(crate) id: i64,
    /// Where its keys start: `max` when the section was loaded (every number handed out for
    /// any of its keys before is at most that), or 0 for a row the load created.
    base: u64,
    /// The highest number the table allows; only goes up, and only after the table does.
    max: AtomicU64,
    slots: S,
    /// One raise at a time.
    pub(crate) raising: tokio::sync::Mutex<()>,
    /// A raise ahead of need is under way.
    prefetching: AtomicBool,
    /// Why this section serves no more (another process raised it).
    fenced: OnceLock<String>,
    /// Called since the last sweep.
    touched: AtomicBool,
    /// Sweeps in a row that found it untouched.
    pub(crate) idle_sweeps: AtomicU32,
    /// The step of its next raise (adaptive: see [`Section::adapt`]).
    step: AtomicU64,
    /// When it was last raised.
    last_raise: Mutex<Option<Instant>>,
}

impl<S: Slots> Section<S> {
    /// The section `(kind, id)` as loaded with `max`, its keys starting at `base` (`max`, or 0
    /// for a row the load created), raised by `step` at first.
    pub(crate) fn new(kind: i16, id: i64, base: u64, max: u64, step: u64, slots: S) -> Self {
        Section {
            kind,
            id,
            base,
            max: AtomicU64::new(max),
            slots,
            raising: tokio::sync::Mutex::new(()),
            prefetching: AtomicBool::new(false),
            fenced: OnceLock::new(),
            touched: AtomicBool::new(true),
            idle_sweeps: AtomicU32::new(0),
            step: AtomicU64::new(step),
            last_raise: Mutex::new(None),
        }
    }

    /// The step of the next raise.
    pub(crate) fn step(&self) -> u64 {
        self.step.load(Ordering::Relaxed)
    }

    /// After a raise at `now`: Leaf's adaptive step, per section. Raised again within
    /// [`GROW_BELOW`] of the last raise, the step doubles (up to `max`); [`SHRINK_ABOVE`] or
    /// more after, it halves (down to `min`). A hot key's section then writes about once per
    /// [`GROW_BELOW`] however fast it is called; a restart loses at most one step of it.
    pub(crate) fn adapt(&self, now: Instant, min: u64, max: u64) {
        let mut last = self.last_raise.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(before) = *last {
            let gap = now.saturating_duration_since(before);
            let step = self.step();
            let next = if gap < GROW_BELOW {
                step.saturating_mul(2).min(max)
            } else if gap >= SHRINK_ABOVE {
                (step / 2).max(min)
            } else {
                step
            };
            self.step.store(next.max(min), Ordering::Relaxed);
        }
        *last = Some(now);
    }

    /// Where its keys' numbers are.
    pub(crate) fn slots(&self) -> &S {
        &self.slots
    }

    /// Whether it was called since the last sweep (without clearing the mark).
    pub(crate) fn touched(&self) -> bool {
        self.touched.load(Ordering::Relaxed)
    }

    /// Takes `n` numbers for `key`.
    #[inline]
    pub(crate) fn take(&self, key: &S::Key, n: u64) -> Take {
        if !self.touched.load(Ordering::Relaxed) {
            self.touched.store(true, Ordering::Relaxed);
        }
        let Some(last) = self.slots.add(key, n, self.base) else {
            return Take::Full;
        };
        if last <= self.max() {
            Take::Ready(last)
        } else {
            Take::Wait(last)
        }
    }

    /// The key's current number, without moving it.
    pub(crate) fn current(&self, key: &S::Key) -> u64 {
        self.slots.get(key, self.base)
    }

    /// The highest number the table allows.
    pub(crate) fn max(&self) -> u64 {
        self.max.load(Ordering::Acquire)
    }

    /// Records that the table now allows up to `to` (never lowers it).
    pub(crate) fn raised(&self, to: u64) {
        self.max.fetch_max(to, Ordering::AcqRel);
    }

    /// True (once, until [`Section::prefetched`]) when `last` is within `margin` of `max`:
    /// time to raise ahead of need.
    pub(crate) fn wants_prefetch(&self, last: u64, margin: u64) -> bool {
        last.saturating_add(margin) > self.max()
            && !self.prefetching.load(Ordering::Relaxed)
            && !self.prefetching.swap(true, Ordering::AcqRel)
    }

    /// The raise ahead of need is over.
    pub(crate) fn prefetched(&self) {
        self.prefetching.store(false, Ordering::Release);
    }

    /// Stops the section for good, saying why.
    /// True the first time (a raise ahead of need and a call's raise may both find the row
    /// moved: the section is fenced, and counted, once).
    pub(crate) fn fence(&self, why: String) -> bool {
        self.fenced.set(why).is_ok()
    }

    /// Why the section serves no more, if it does not.
    pub(crate) fn fenced(&self) -> Option<&str> {
        self.fenced.get().map(String::as_str)
    }

    /// Clears the mark of use; returns whether it was used since the last call.
    pub(crate) fn sweep(&self) -> bool {
        self.touched.swap(false, Ordering::AcqRel)
    }
}

/// The new `max` for a raise from `from` that must cover `need`: `from` plus whole steps.
/// `None` past `limit` (the table's numbers are signed 64-bit).
pub(crate) fn raise_target(from: u64, need: u64, step: u64, limit: u64) -> Option<u64> {
    let short = need.saturating_sub(from).max(1);
    let steps = short.div_ceil(step);
    let to = from.checked_add(steps.checked_mul(step)?)?;
    (to <= limit).then_some(to)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::slots::{Budget, Numbers, Strings};

    fn numbers() -> Numbers {
        Numbers::new(Arc::new(Budget::new(usize::MAX)), true, 0)
    }

    #[test]
    fn the_step_doubles_when_raised_often_and_halves_when_seldom() {
        let s = Section::new(0, 0, 0, 0, 10, numbers());
        let t0 = Instant::now();
        s.adapt(t0, 10, 80);
        assert_eq!(s.step(), 10, "the first raise sets the clock only");
        for (i, want) in [20, 40, 80, 80].into_iter().enumerate() {
            s.adapt(t0 + Duration::from_millis(100 * (i as u64 + 1)), 10, 80);
            assert_eq!(s.step(), want);
        }
        s.adapt(t0 + Duration::from_secs(30), 10, 80);
        assert_eq!(s.step(), 80, "between the bounds: kept");
        s.adapt(t0 + Duration::from_secs(120), 10, 80);
        assert_eq!(s.step(), 40);
        s.adapt(t0 + Duration::from_secs(1000), 10, 80);
        s.adapt(t0 + Duration::from_secs(2000), 10, 80);
        s.adapt(t0 + Duration::from_secs(3000), 10, 80);
        assert_eq!(s.step(), 10, "never below the configured step");
    }

    #[test]
    fn raises_are_whole_steps_covering_the_need() {
        assert_eq!(raise_target(0, 1, 10, 100), Some(10));
        assert_eq!(raise_target(10, 11, 10, 100), Some(20));
        assert_eq!(raise_target(10, 35, 10, 100), Some(40));
        // A raise ahead of need (need = max + 1) is one step.
        assert_eq!(raise_target(40, 41, 10, 100), Some(50));
        assert_eq!(raise_target(95, 96, 10, 100), None);
        assert_eq!(raise_target(u64::MAX - 1, u64::MAX, 10, u64::MAX), None);
    }

    #[test]
    fn a_number_is_ready_only_under_max() {
        let s = Section::new(0, 0, 100, 100, 10, numbers());
        assert_eq!(s.take(&7, 1), Take::Wait(101));
        s.raised(110);
        assert_eq!(s.take(&7, 1), Take::Ready(102));
        assert_eq!(s.take(&7, 8), Take::Ready(110));
        assert_eq!(s.take(&7, 1), Take::Wait(111));
        assert_eq!(s.current(&7), 111);
        assert_eq!(s.current(&8), 100);
        s.raised(50);
        assert_eq!(s.max(), 110, "never lowered");
    }

    #[test]
    fn string_keys_start_at_the_max_of_the_load_and_are_bounded() {
        let budget = Arc::new(Budget::new(300));
        let s = Section::new(1, 3, 100, 100, 10, Strings::new(Arc::clone(&budget), 0));
        s.raised(200);
        assert_eq!(s.take("a", 1), Take::Ready(101));
        // A key first seen after a raise still starts at the load's max: no raise per new key.
        assert_eq!(s.take("b", 2), Take::Ready(102));
        assert_eq!(s.take("c", 1), Take::Ready(101));
        assert_eq!(s.take("d", 1), Take::Full, "past the bound of 300 bytes");
        assert_eq!(s.take("a", 1), Take::Ready(102));
        assert_eq!(s.current("zz"), 100);
        assert!(budget.used() > 0);
        drop(s);
        assert_eq!(budget.used(), 0, "an evicted bucket gives its bytes back");
    }
}
