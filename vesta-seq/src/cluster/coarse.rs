//! A cheap upper bound of the time since an `Instant`, for the check every clustered call
//! passes (is this member's term still running?). `Instant::now()` costs a `clock_gettime` of
//! `CLOCK_MONOTONIC` (about 20-40 ns on a VM, the whole of a call from memory); the kernel's
//! coarse copy of the same clock (`CLOCK_MONOTONIC_COARSE`, updated every tick) costs a few.
//! The coarse clock is at most a tick behind the precise one, so its reading plus two ticks is
//! never below the precise time: a term the bound says is running is running. Near the term's
//! end the gate asks the precise clock (the bound only saves the read, never decides a lapse).

use std::time::Instant;

/// The coarse clock against an origin no later than an `Instant`.
#[derive(Debug)]
pub(crate) struct Coarse {
    /// `CLOCK_MONOTONIC` read just before the `Instant` it stands for, ns.
    #[cfg(any(target_os = "linux", target_os = "android"))]
    origin_ns: u64,
    /// Two ticks of the coarse clock, ns.
    #[cfg(any(target_os = "linux", target_os = "android"))]
    slack_ns: u64,
}

impl Coarse {
    /// The origin, and the `Instant` it stands for (taken after it).
    pub(crate) fn start() -> (Coarse, Instant) {
        #[cfg(any(target_os = "linux", target_os = "android"))]
        {
            use rustix::time::{ClockId, clock_getres, clock_gettime};
            let origin_ns = ns(clock_gettime(ClockId::Monotonic));
            let base = Instant::now();
            let slack_ns = 2 * ns(clock_getres(ClockId::MonotonicCoarse)).max(1_000_000);
            (
                Coarse {
                    origin_ns,
                    slack_ns,
                },
                base,
            )
        }
        #[cfg(not(any(target_os = "linux", target_os = "android")))]
        {
            (Coarse {}, Instant::now())
        }
    }

    /// Nanoseconds since the `Instant` of [`Coarse::start`], never less than the precise
    /// count; `None` where there is no coarse clock (read `Instant::now()` instead).
    #[inline]
    pub(crate) fn elapsed_at_most(&self) -> Option<u64> {
        #[cfg(any(target_os = "linux", target_os = "android"))]
        {
            use rustix::time::{ClockId, clock_gettime};
            let now = ns(clock_gettime(ClockId::MonotonicCoarse));
            Some((now + self.slack_ns).saturating_sub(self.origin_ns))
        }
        #[cfg(not(any(target_os = "linux", target_os = "android")))]
        {
            None
        }
    }
}

#[cfg(any(target_os = "linux", target_os = "android"))]
fn ns(t: rustix::time::Timespec) -> u64 {
    (t.tv_sec as u64).saturating_mul(1_000_000_000) + t.tv_nsec as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bound_is_never_below_the_precise_time() {
        let (coarse, base) = Coarse::start();
        for _ in 0..200_000 {
            // The precise time read first: the bound read after must not be below it.
            let precise = base.elapsed().as_nanos() as u64;
            let Some(bound) = coarse.elapsed_at_most() else {
                return;
            };
            assert!(bound >= precise, "{bound} < {precise}");
        }
    }
}
