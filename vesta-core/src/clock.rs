//! The clock seam: the generator reads time and waits only through [`Clock`], so production
//! passes the system clock and tests pass a [`ManualClock`] they can move, forwards or back.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Wall-clock time for a generator.
///
/// The wait is bounded by contract: a wall clock can be stepped back by an hour in the middle of
/// a wait (NTP, a VM restore, `date -s`), and a wait that only ended once the clock caught up
/// would hang its caller for that hour. So a wait ends when the clock reaches the target *or*
/// when as much real time has passed as the distance seen at its start, whichever comes first;
/// the generator then reads the clock again and decides: an ID, another bounded wait, or
/// `ClockBehind`.
pub trait Clock: Send + Sync {
    /// Milliseconds since the Unix epoch. May go backwards; the generator copes.
    fn now_ms(&self) -> u64;

    /// Waits until `now_ms() >= target_ms`, but never much longer in real (monotonic) time than
    /// `target_ms - now_ms()` as read when the wait began: a clock stepped back during the wait
    /// returns early with `now_ms() < target_ms`. Called only when a time unit's sequence is
    /// used up or a start guard waits, never per ID.
    fn wait_until_ms(&self, target_ms: u64);

    /// Whether the operating system considers this clock synchronised (NTP, chrony, PTP), when
    /// it can tell; `None` when it cannot (test clocks, platforms without the query). Read at
    /// start and by health checks, never per ID.
    fn sync(&self) -> Option<ClockSync> {
        None
    }

    /// Another handle on this very clock (one reading, one offset, stepped as one), for an
    /// issuer that runs a generator per machine ID; `None` (the default) where the clock has
    /// none, which then serves an issuer of one machine ID alone. `Arc<C>` and `&C` give one;
    /// so do clocks that are plain values of the system's.
    fn share(&self) -> Option<Self>
    where
        Self: Sized,
    {
        None
    }
}

/// What the kernel says about the system clock's synchronisation (Linux: `adjtimex`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct ClockSync {
    /// False while the kernel marks the clock unsynchronised (`STA_UNSYNC`): no time service
    /// has disciplined it, e.g. right after boot with a hardware clock that may be ahead.
    pub synchronised: bool,
    /// The kernel's bound on the clock's error, in microseconds (`maxerror`).
    pub max_error_us: u64,
}

impl<C: Clock + ?Sized> Clock for Arc<C> {
    fn now_ms(&self) -> u64 {
        (**self).now_ms()
    }

    fn wait_until_ms(&self, target_ms: u64) {
        (**self).wait_until_ms(target_ms)
    }

    fn sync(&self) -> Option<ClockSync> {
        (**self).sync()
    }

    fn share(&self) -> Option<Self> {
        Some(Arc::clone(self))
    }
}

impl<C: Clock + ?Sized> Clock for &C {
    fn sync(&self) -> Option<ClockSync> {
        (**self).sync()
    }

    fn now_ms(&self) -> u64 {
        (**self).now_ms()
    }

    fn wait_until_ms(&self, target_ms: u64) {
        (**self).wait_until_ms(target_ms)
    }

    fn share(&self) -> Option<Self> {
        Some(*self)
    }
}

/// A clock that moves only when told to, for deterministic tests.
///
/// Waiting on it moves it forward to the target at once, as if the wait had happened, so a
/// test of sequence overflow runs in microseconds. Share it with `Arc` or `&`. With
/// [`hold_waits`](Self::hold_waits) a wait instead ends when the test moves the clock to the
/// target, or after 20 real milliseconds with the clock unmoved (the caller then reads the clock
/// and waits again, as after a clock step), for tests that watch callers while they wait.
#[derive(Debug, Default)]
pub struct ManualClock {
    now: AtomicU64,
    waits: AtomicU64,
    hold: std::sync::atomic::AtomicBool,
    sync: std::sync::Mutex<Option<ClockSync>>,
}

impl ManualClock {
    /// A clock reading `now_ms` milliseconds since the Unix epoch.
    pub fn new(now_ms: u64) -> Self {
        ManualClock {
            now: AtomicU64::new(now_ms),
            waits: AtomicU64::new(0),
            hold: std::sync::atomic::AtomicBool::new(false),
            sync: std::sync::Mutex::new(None),
        }
    }

    /// `true`: a wait lasts until the clock is moved to its target (at most 20 real ms per
    /// call) instead of moving the clock itself. The test thread moves it with `advance` or
    /// `set`.
    pub fn hold_waits(&self, hold: bool) {
        self.hold.store(hold, Ordering::SeqCst);
    }

    /// Sets the reading, forwards or backwards.
    pub fn set(&self, now_ms: u64) {
        self.now.store(now_ms, Ordering::SeqCst);
    }

    /// Moves the reading forward by `ms`.
    pub fn advance(&self, ms: u64) {
        self.now.fetch_add(ms, Ordering::SeqCst);
    }

    /// Moves the reading back by `ms`, like an NTP step backwards.
    pub fn rewind(&self, ms: u64) {
        self.now.fetch_sub(ms, Ordering::SeqCst);
    }

    /// How many times a caller waited on this clock.
    pub fn waits(&self) -> u64 {
        self.waits.load(Ordering::SeqCst)
    }
}

impl ManualClock {
    /// Sets what [`Clock::sync`] reports (default `None`: unknown), to test the start and
    /// health checks of clock synchronisation.
    pub fn set_sync(&self, sync: Option<ClockSync>) {
        *self.sync.lock().unwrap_or_else(|e| e.into_inner()) = sync;
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> u64 {
        self.now.load(Ordering::SeqCst)
    }

    fn sync(&self) -> Option<ClockSync> {
        *self.sync.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn wait_until_ms(&self, target_ms: u64) {
        self.waits.fetch_add(1, Ordering::SeqCst);
        if !self.hold.load(Ordering::SeqCst) {
            self.now.fetch_max(target_ms, Ordering::SeqCst);
            return;
        }
        // A test clock may sleep: vesta-core's own code never calls this.
        for _ in 0..20 {
            if self.now_ms() >= target_ms || !self.hold.load(Ordering::SeqCst) {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waiting_moves_a_manual_clock_forward_never_back() {
        let c = ManualClock::new(100);
        c.wait_until_ms(150);
        assert_eq!(c.now_ms(), 150);
        c.wait_until_ms(120);
        assert_eq!(c.now_ms(), 150);
        c.rewind(50);
        assert_eq!(c.now_ms(), 100);
        assert_eq!(c.waits(), 2);
    }
}
