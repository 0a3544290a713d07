//! The system clock for production generators: the one place that reads wall-clock time.
//!
//! Max-peak IDs count seconds, so the coarse realtime clock (a memory read, ~3 ns, a few ms
//! resolution) is exact enough; millisecond IDs need the precise one (~25 ns). Waiting sleeps
//! until the target and yields only for the last few microseconds, so a saturated issuer does
//! not burn a core.

use std::thread;
use std::time::Duration;

use rustix::time::{ClockId, Timespec, clock_getres, clock_gettime};
use vesta_core::{Clock, Layout};

/// How close to a wait's target sleeping stops and yielding starts.
const SPIN_MARGIN: Duration = Duration::from_micros(20);

/// Wall-clock time from the kernel (`CLOCK_REALTIME` or `CLOCK_REALTIME_COARSE`).
#[derive(Clone, Copy, Debug)]
pub struct SystemClock {
    id: ClockId,
}

impl SystemClock {
    /// The precise realtime clock.
    pub fn precise() -> Self {
        SystemClock {
            id: ClockId::Realtime,
        }
    }

    /// The cheapest clock whose resolution is at most a tenth of the layout's time unit.
    pub fn for_layout(layout: &Layout) -> Self {
        let res = clock_getres(ClockId::RealtimeCoarse);
        let res_ms = res.tv_sec as u64 * 1000 + (res.tv_nsec as u64).div_ceil(1_000_000);
        if res_ms * 10 <= layout.unit_ms {
            SystemClock {
                id: ClockId::RealtimeCoarse,
            }
        } else {
            Self::precise()
        }
    }

    /// True if this reads the coarse clock.
    pub fn is_coarse(&self) -> bool {
        self.id == ClockId::RealtimeCoarse
    }
}

impl Default for SystemClock {
    fn default() -> Self {
        Self::precise()
    }
}

fn millis(ts: Timespec) -> u64 {
    // Before 1970 reads as 0, which every generator rejects as before its epoch.
    u64::try_from(ts.tv_sec).unwrap_or(0) * 1000 + ts.tv_nsec as u64 / 1_000_000
}

impl Clock for SystemClock {
    #[inline]
    fn now_ms(&self) -> u64 {
        millis(clock_gettime(self.id))
    }

    fn wait_until_ms(&self, target_ms: u64) {
        let target_ns = u128::from(target_ms) * 1_000_000;
        loop {
            let ts = clock_gettime(self.id);
            let now_ns =
                u128::try_from(ts.tv_sec).unwrap_or(0) * 1_000_000_000 + ts.tv_nsec as u128;
            if now_ns >= target_ns {
                return;
            }
            let left = Duration::from_nanos(u64::try_from(target_ns - now_ns).unwrap_or(u64::MAX));
            if left > SPIN_MARGIN {
                // A coarse clock may lag the real boundary by a tick: the loop sleeps again.
                thread::sleep(left);
            } else {
                thread::yield_now();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coarse_only_where_the_unit_allows() {
        assert!(!SystemClock::for_layout(&Layout::MIN_GRANULARITY).is_coarse());
        let a = SystemClock::for_layout(&Layout::MAX_PEAK).now_ms();
        let b = SystemClock::precise().now_ms();
        assert!(a.abs_diff(b) < 1000, "coarse {a} vs precise {b}");
    }

    #[test]
    fn waits_until_the_target() {
        let c = SystemClock::precise();
        let target = c.now_ms() + 30;
        c.wait_until_ms(target);
        assert!(c.now_ms() >= target);
    }
}
