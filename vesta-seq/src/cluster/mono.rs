//! Monotonic time for the term every call checks (`gate.rs`): the kernel's coarse monotonic
//! clock where it exists (Linux, Android, FreeBSD: a read in the vDSO, 15 ns on the test VM
//! against 70 ns for the precise clock), else std's `Instant`. Terms end at a precise reading;
//! a call passes on the coarse reading while the end is more than [`slack_ns`] (two ticks)
//! away, and the precise clock decides the last two ticks of a term, so a lapse is never seen
//! late while ticks come on time. A tick delayed further (a loaded host, a virtual CPU
//! descheduled) could let a call through that much later, out of the third of a lease between a
//! term's end and the lease's expiry — as a thread preempted between the check and its number
//! already could with the precise clock alone.

use std::sync::OnceLock;
use std::time::Instant;

#[cfg(any(target_os = "linux", target_os = "android", target_os = "freebsd"))]
mod kernel {
    use rustix::time::{ClockId, Timespec, clock_getres, clock_gettime};

    fn ns(ts: Timespec) -> u64 {
        u64::try_from(ts.tv_sec).unwrap_or(0) * 1_000_000_000 + ts.tv_nsec as u64
    }

    #[inline(always)]
    pub(super) fn coarse() -> u64 {
        ns(clock_gettime(ClockId::MonotonicCoarse))
    }

    pub(super) fn precise() -> u64 {
        ns(clock_gettime(ClockId::Monotonic))
    }

    pub(super) fn coarse_tick() -> u64 {
        ns(clock_getres(ClockId::MonotonicCoarse))
    }
}

/// Now on the coarse clock, ns (at most [`slack_ns`] behind [`precise_ns`]).
#[inline(always)]
pub(crate) fn coarse_ns() -> u64 {
    #[cfg(any(target_os = "linux", target_os = "android", target_os = "freebsd"))]
    return kernel::coarse();
    #[cfg(not(any(target_os = "linux", target_os = "android", target_os = "freebsd")))]
    return precise_ns();
}

/// Now on the precise clock, ns (the same clock's origin as [`coarse_ns`]).
pub(crate) fn precise_ns() -> u64 {
    #[cfg(any(target_os = "linux", target_os = "android", target_os = "freebsd"))]
    return kernel::precise();
    #[cfg(not(any(target_os = "linux", target_os = "android", target_os = "freebsd")))]
    {
        static ORIGIN: OnceLock<Instant> = OnceLock::new();
        u64::try_from(ORIGIN.get_or_init(Instant::now).elapsed().as_nanos()).unwrap_or(u64::MAX)
    }
}

/// How far the coarse clock may be behind the precise one, with a margin: two of its ticks
/// (plus a microsecond), 0 where the precise clock is read.
pub(crate) fn slack_ns() -> u64 {
    static SLACK: OnceLock<u64> = OnceLock::new();
    *SLACK.get_or_init(|| {
        #[cfg(any(target_os = "linux", target_os = "android", target_os = "freebsd"))]
        return 2 * kernel::coarse_tick() + 1_000;
        #[cfg(not(any(target_os = "linux", target_os = "android", target_os = "freebsd")))]
        return 0;
    })
}

/// `at` on the precise clock, ns.
pub(crate) fn ns_of(at: Instant) -> u64 {
    let (now, now_ns) = (Instant::now(), precise_ns());
    match at.checked_duration_since(now) {
        Some(ahead) => now_ns.saturating_add(u64::try_from(ahead.as_nanos()).unwrap_or(u64::MAX)),
        None => now_ns.saturating_sub(
            u64::try_from(now.saturating_duration_since(at).as_nanos()).unwrap_or(u64::MAX),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_coarse_clock_is_never_ahead_of_the_precise_one() {
        let mut lag = 0;
        for _ in 0..10_000 {
            let c = coarse_ns();
            let p = precise_ns();
            assert!(c <= p, "coarse {c} ahead of precise {p}");
            lag = lag.max(p - c);
        }
        eprintln!(
            "coarse clock: tick {} ns, largest lag seen {lag} ns",
            slack_ns()
        );
        // An instant on the same clock: between the precise readings around it.
        let before = precise_ns();
        let now = Instant::now();
        let after = precise_ns();
        let at = ns_of(now + std::time::Duration::from_millis(50));
        let slop = 10_000;
        assert!(at + slop >= before + 50_000_000 && at <= after + 50_000_000 + slop);
    }
}
