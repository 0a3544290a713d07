//! The double buffer of one tag: the current segment, which callers take from, and the next
//! one, which the tag's fetcher fills in the background.
//!
//! The warm path is [`TagBuffer::take`]: one `fetch_add` on the segment this thread took from
//! last (kept in a thread-local cache) — no lock, no syscall, no other atomic, nothing the
//! fetcher ever holds. The cache cannot hand out a stale number: a segment stops being current
//! only once it is used up (or frozen), and then every take from it fails, so a miss falls back
//! to the buffer's `ArcSwap` (one load, one more `fetch_add`) and refreshes the cache.
//! Everything else (switching to the next segment, installing a fetched one, errors, status,
//! freezing at shutdown) happens under the small `slots` mutex, which is never held across an
//! `.await` or a database call.

use std::cell::RefCell;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use arc_swap::ArcSwap;
use tokio::sync::Notify;
use vesta_core::Remedy;

use crate::db::{FetchError, Fetched};
use crate::error::SegmentError;
use crate::segment::{Segment, Take};
use crate::status::{SegmentStatus, TagState, TagStatus};

/// Ids of buffers, unique in the process, so a thread's cached segment is never mistaken for
/// another buffer's (not even one allocated where a dropped one was).
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

thread_local! {
    /// The segment this thread last took numbers from, with its buffer's id.
    static LAST: RefCell<(u64, Option<Arc<Segment>>)> = const { RefCell::new((0, None)) };
}

/// One tag's buffers and counters.
#[derive(Debug)]
pub(crate) struct TagBuffer {
    /// Process-unique, for the thread-local segment cache.
    id: u64,
    pub(crate) name: Box<str>,
    /// The database, for error messages (password hidden).
    db: Arc<str>,
    prefetch_percent: u32,
    wait: Duration,
    /// The segment the warm path takes from; always equal to `slots.current`.
    current: ArcSwap<Segment>,
    slots: Mutex<Slots>,
    /// Wakes the fetcher: the prefetch point was crossed, or both segments are empty.
    pub(crate) wake: Notify,
    /// Wakes waiting callers after every fetch attempt and at shutdown.
    changed: Notify,
    closed: AtomicBool,
}

#[derive(Debug)]
struct Slots {
    current: Arc<Segment>,
    next: Option<Arc<Segment>>,
    /// End of the last segment taken: a new one must start at or above it.
    floor: u64,
    fetching: bool,
    /// The last fetch failed (cleared by the next success).
    failure: Option<Arc<FetchError>>,
    table_step: u32,
    fetches: u64,
    fetch_errors: u64,
    /// Fetches refused because the table went back below the floor.
    moved_back: u64,
    last_latency: Option<Duration>,
    last_error: Option<String>,
}

/// What to give back at shutdown: lower `max_id` to `first_unused` if it still equals
/// `reserved_end`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct GiveBackPlan {
    pub first_unused: u64,
    pub reserved_end: u64,
}

impl TagBuffer {
    /// A buffer whose first segment must start at or above `floor` (the restore guard's floor
    /// on file, 0 without one).
    pub(crate) fn new(
        name: &str,
        db: Arc<str>,
        prefetch_percent: u32,
        wait: Duration,
        floor: u64,
    ) -> Self {
        let empty = Arc::new(Segment::empty());
        TagBuffer {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            name: name.into(),
            db,
            prefetch_percent,
            wait,
            current: ArcSwap::new(Arc::clone(&empty)),
            slots: Mutex::new(Slots {
                current: empty,
                next: None,
                floor,
                fetching: false,
                failure: None,
                table_step: 0,
                fetches: 0,
                fetch_errors: 0,
                moved_back: 0,
                last_latency: None,
                last_error: None,
            }),
            wake: Notify::new(),
            changed: Notify::new(),
            closed: AtomicBool::new(false),
        }
    }

    fn slots(&self) -> MutexGuard<'_, Slots> {
        // A panic while holding the lock cannot leave the slots half-updated (each update is
        // a few assignments), so a poisoned lock is still usable.
        self.slots.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Takes up to `n` numbers without waiting; `None` when both segments are empty.
    #[inline]
    pub(crate) fn take(&self, n: u64) -> Option<Range<u64>> {
        let cached = LAST
            .try_with(|last| {
                let last = last.borrow();
                match &last.1 {
                    Some(seg) if last.0 == self.id => seg.take(n),
                    _ => Take::Exhausted,
                }
            })
            .unwrap_or(Take::Exhausted);
        match cached {
            Take::Got { range, prefetch } => {
                if prefetch {
                    self.wake.notify_one();
                }
                Some(range)
            }
            Take::Exhausted => self.take_current(n),
        }
    }

    /// The cache missed (another buffer, or its segment is used up): take from the current
    /// segment, switching to the next one if needed, and cache the segment that answered.
    #[cold]
    fn take_current(&self, n: u64) -> Option<Range<u64>> {
        loop {
            let seg = self.current.load_full();
            match seg.take(n) {
                Take::Got { range, prefetch } => {
                    if prefetch {
                        self.wake.notify_one();
                    }
                    let _ = LAST.try_with(|last| *last.borrow_mut() = (self.id, Some(seg)));
                    return Some(range);
                }
                Take::Exhausted => {
                    if !self.advance(&seg) {
                        return None;
                    }
                }
            }
        }
    }

    /// The current segment is used up: switch to the next one. False when there is none (the
    /// fetcher is woken); true when the current segment changed (retry).
    #[cold]
    fn advance(&self, seen: &Arc<Segment>) -> bool {
        let mut slots = self.slots();
        if !Arc::ptr_eq(&slots.current, seen) {
            return true;
        }
        if self.closed.load(Ordering::SeqCst) {
            return false;
        }
        match slots.next.take() {
            Some(next) => {
                self.current.store(Arc::clone(&next));
                slots.current = next;
                true
            }
            None => {
                drop(slots);
                self.wake.notify_one();
                false
            }
        }
    }

    /// Takes up to `n` numbers, waiting until `deadline` for a segment when both are empty.
    /// Fails fast, without waiting, when the last fetch failed.
    pub(crate) async fn take_until(
        &self,
        n: u64,
        deadline: tokio::time::Instant,
    ) -> Result<Range<u64>, SegmentError> {
        if let Some(range) = self.take(n) {
            return Ok(range);
        }
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if let Some(range) = self.take(n) {
                return Ok(range);
            }
            self.empty_error()?;
            if tokio::time::timeout_at(deadline, changed).await.is_err() {
                return self.take(n).ok_or_else(|| SegmentError::Timeout {
                    tag: self.name.to_string(),
                    waited_ms: self.wait.as_millis() as u64,
                });
            }
        }
    }

    /// How long callers wait for a segment.
    pub(crate) fn wait(&self) -> Duration {
        self.wait
    }

    /// The error for a caller who found both segments empty: shut down, or the last fetch
    /// failed. `Ok` when a fetch is simply under way.
    pub(crate) fn empty_error(&self) -> Result<(), SegmentError> {
        if self.closed.load(Ordering::SeqCst) {
            return Err(SegmentError::Closed);
        }
        let failure = self.slots().failure.clone();
        match failure.as_deref() {
            None => Ok(()),
            Some(f) => Err(self.error_for(f)),
        }
    }

    pub(crate) fn error_for(&self, failure: &FetchError) -> SegmentError {
        let tag = self.name.to_string();
        match failure {
            FetchError::UnknownTag => SegmentError::UnknownTag {
                tag,
                db: self.db.to_string(),
            },
            FetchError::MissingTable => SegmentError::missing_table(&self.db),
            FetchError::Inconsistent(detail) => SegmentError::Inconsistent {
                tag,
                detail: detail.clone(),
            },
            FetchError::MovedBack { start, floor } => SegmentError::MovedBack {
                remedy: Remedy::RaiseTag {
                    tag: tag.clone(),
                    at_least: *floor,
                    db: self.db.to_string(),
                },
                tag,
                start: *start,
                floor: *floor,
            },
            FetchError::Unavailable(cause) => SegmentError::Unavailable {
                tag,
                cause: cause.clone(),
            },
        }
    }

    /// True when the fetcher should fetch: no next segment and the current one is past its
    /// prefetch point (or empty).
    pub(crate) fn needs_fetch(&self) -> bool {
        let slots = self.slots();
        !self.closed.load(Ordering::SeqCst)
            && slots.next.is_none()
            && slots.current.past_prefetch_point()
    }

    /// Marks a fetch as under way and returns the floor a new segment must start at.
    pub(crate) fn begin_fetch(&self) -> u64 {
        let mut slots = self.slots();
        slots.fetching = true;
        slots.floor
    }

    /// Puts a fetched segment in place: as the current one when that is used up, else as the
    /// next. Clears the failure and wakes waiting callers.
    pub(crate) fn install(&self, fetched: Fetched, latency: Duration) {
        let segment = Arc::new(Segment::new(
            fetched.range.clone(),
            fetched.step,
            self.prefetch_percent,
        ));
        let mut slots = self.slots();
        slots.floor = fetched.range.end;
        slots.table_step = fetched.table_step;
        slots.fetching = false;
        slots.fetches += 1;
        slots.last_latency = Some(latency);
        slots.failure = None;
        if slots.current.is_exhausted() {
            self.current.store(Arc::clone(&segment));
            slots.current = segment;
        } else {
            debug_assert!(slots.next.is_none(), "fetched while a next segment waited");
            slots.next = Some(segment);
        }
        drop(slots);
        self.changed.notify_waiters();
    }

    /// Records a failed fetch and wakes waiting callers (who then fail fast).
    pub(crate) fn record_failure(&self, error: FetchError, latency: Duration) {
        let mut slots = self.slots();
        slots.fetching = false;
        slots.fetch_errors += 1;
        if matches!(error, FetchError::MovedBack { .. }) {
            slots.moved_back += 1;
        }
        slots.last_latency = Some(latency);
        slots.last_error = Some(self.error_for(&error).to_string());
        slots.failure = Some(Arc::new(error));
        drop(slots);
        self.changed.notify_waiters();
    }

    /// Stops all issuing from this tag for good and returns what to give back: the unused
    /// tail of the last segment reserved, extended over the current segment's tail when the
    /// two are contiguous (nobody allocated in between). `None` when nothing is unused.
    pub(crate) fn freeze(&self) -> Option<GiveBackPlan> {
        self.closed.store(true, Ordering::SeqCst);
        let slots = self.slots();
        let current_first = slots.current.freeze();
        let current = slots.current.range();
        let plan = match &slots.next {
            Some(next) => {
                let next_first = next.freeze();
                let range = next.range();
                let first_unused = if range.start == current.end {
                    current_first
                } else {
                    next_first
                };
                GiveBackPlan {
                    first_unused,
                    reserved_end: range.end,
                }
            }
            None => GiveBackPlan {
                first_unused: current_first,
                reserved_end: current.end,
            },
        };
        drop(slots);
        self.changed.notify_waiters();
        (plan.first_unused < plan.reserved_end).then_some(plan)
    }

    /// A snapshot for health checks and metrics.
    pub(crate) fn status(&self) -> TagStatus {
        let slots = self.slots();
        let view = |s: &Segment| SegmentStatus {
            start: s.range().start,
            end: s.range().end,
            remaining: s.remaining(),
        };
        let current = (!slots.current.range().is_empty()).then(|| view(&slots.current));
        let next = slots.next.as_deref().map(view);
        let buffered =
            current.as_ref().map_or(0, |s| s.remaining) + next.as_ref().map_or(0, |s| s.remaining);
        let state = if self.closed.load(Ordering::SeqCst) {
            TagState::Closed
        } else if slots.failure.is_some() {
            if buffered > 0 {
                TagState::Degraded
            } else {
                TagState::Down
            }
        } else if slots.fetches == 0 {
            TagState::Starting
        } else {
            TagState::Ok
        };
        let step = slots.next.as_deref().map_or(slots.current.step, |n| n.step);
        TagStatus {
            tag: self.name.to_string(),
            state,
            current,
            next,
            buffered,
            step,
            prefetch_at: u64::from(step) * u64::from(100 - self.prefetch_percent.min(100)) / 100,
            table_step: slots.table_step,
            fetching: slots.fetching,
            fetches: slots.fetches,
            fetch_errors: slots.fetch_errors,
            floor: slots.floor,
            moved_back: slots.moved_back,
            last_fetch_latency_us: slots.last_latency.map(|d| d.as_micros() as u64),
            last_error: slots.last_error.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn buffer() -> TagBuffer {
        TagBuffer::new("t", "sqlite://x".into(), 10, Duration::from_millis(10), 0)
    }

    fn fetched(range: Range<u64>) -> Fetched {
        Fetched {
            step: (range.end - range.start) as u32,
            table_step: 10,
            range,
        }
    }

    #[test]
    fn starts_empty_and_asks_for_a_fetch() {
        let b = buffer();
        assert!(b.needs_fetch());
        assert_eq!(b.take(1), None);
        assert_eq!(b.status().state, TagState::Starting);
        assert!(b.freeze().is_none(), "nothing to give back");
    }

    #[test]
    fn switches_to_the_next_segment_when_the_current_is_used_up() {
        let b = buffer();
        b.install(fetched(1..11), Duration::ZERO);
        assert!(!b.needs_fetch());
        assert_eq!(b.take(1), Some(1..2));
        assert!(!b.needs_fetch(), "below 10 %");
        assert_eq!(b.take(1), Some(2..3));
        assert!(b.needs_fetch(), "10 % issued: prefetch");
        b.install(fetched(21..31), Duration::ZERO);
        assert!(!b.needs_fetch());
        assert_eq!(b.take(9), Some(3..11));
        assert_eq!(b.take(3), Some(21..24), "switched to next");
        let s = b.status();
        assert_eq!((s.buffered, s.fetches, s.state), (7, 2, TagState::Ok));
    }

    #[test]
    fn the_thread_cache_never_mixes_buffers_or_outlives_a_segment() {
        let (a, b) = (buffer(), buffer());
        a.install(fetched(1..4), Duration::ZERO);
        b.install(fetched(100..104), Duration::ZERO);
        let mut got = Vec::new();
        for _ in 0..3 {
            got.push((a.take(1).unwrap().start, b.take(1).unwrap().start));
        }
        assert_eq!(got, [(1, 100), (2, 101), (3, 102)]);
        // a's cached segment is used up; its next one comes from the buffer, not the cache.
        a.install(fetched(10..12), Duration::ZERO);
        assert_eq!(a.take(1), Some(10..11));
        // Taken on another thread: this thread's cache cannot hand out 11 again.
        std::thread::scope(|s| {
            s.spawn(|| assert_eq!(a.take(1), Some(11..12)));
        });
        assert_eq!(a.take(1), None);
        assert!(a.freeze().is_none());
        assert_eq!(b.take(1), Some(103..104));
        assert!(b.freeze().is_none(), "all of b's numbers were taken");
    }

    #[test]
    fn give_back_covers_contiguous_segments_only() {
        // Contiguous: the current tail and the whole next segment go back.
        let b = buffer();
        b.install(fetched(1..11), Duration::ZERO);
        b.take(4);
        b.install(fetched(11..21), Duration::ZERO);
        assert_eq!(
            b.freeze(),
            Some(GiveBackPlan {
                first_unused: 5,
                reserved_end: 21
            })
        );
        assert_eq!(b.take(1), None, "frozen");
        assert!(matches!(b.empty_error(), Err(SegmentError::Closed)));

        // Someone allocated 11..21 in between: only our next segment goes back.
        let b = buffer();
        b.install(fetched(1..11), Duration::ZERO);
        b.take(4);
        b.install(fetched(21..31), Duration::ZERO);
        assert_eq!(
            b.freeze(),
            Some(GiveBackPlan {
                first_unused: 21,
                reserved_end: 31
            })
        );

        // No next segment: the current tail.
        let b = buffer();
        b.install(fetched(1..11), Duration::ZERO);
        b.take(10);
        assert_eq!(b.freeze(), None, "all used");
    }

    #[test]
    fn failures_degrade_then_fail_fast_then_recover() {
        let b = buffer();
        b.install(fetched(1..3), Duration::ZERO);
        b.record_failure(FetchError::Unavailable("down".into()), Duration::ZERO);
        assert_eq!(b.status().state, TagState::Degraded);
        assert_eq!(b.take(2), Some(1..3), "buffered numbers still flow");
        assert_eq!(b.take(1), None);
        assert_eq!(b.status().state, TagState::Down);
        let err = b.empty_error().unwrap_err().to_string();
        assert!(err.contains("\"t\"") && err.contains("down"), "{err}");
        b.install(fetched(5..7), Duration::ZERO);
        assert_eq!(b.take(1), Some(5..6));
        assert_eq!(b.status().state, TagState::Ok);
        assert!(b.empty_error().is_ok());
    }
}
