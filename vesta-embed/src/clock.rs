//! The system clock for production generators: the one place that reads wall-clock time.
//!
//! Max-peak IDs count seconds, so the coarse realtime clock (a memory read, ~4 ns, a few ms
//! resolution) is exact enough. Millisecond IDs need the precise one (~25 ns), but not on every
//! call: a **lazy** reading returns the last precise reading this process made while the coarse
//! clock says real time can still be no earlier than it — the coarse reading `c` is at most it
//! and it is less than `c` + one coarse tick — and reads the precise clock only when the coarse
//! one has moved past it, or says it is impossible (the clock stepped back more than a tick). So
//! a reading is never ahead of the clock unless the clock stepped back by less than a tick (the
//! issuer's rollback tolerance then covers it: lazy readings are used only where a tick is at
//! most that tolerance), behind it by less than a tick, and exact at every unit boundary a
//! saturated issuer waits for (a wait ends on a precise reading, which the next reads return).
//! `[clock] read = "precise"` reads the precise clock on every call instead. Waiting sleeps
//! until the target and yields only for the last few microseconds, so a saturated issuer does
//! not burn a core.
//!
//! Where the coarse clock exists (Linux, Android, FreeBSD) time comes from the kernel's realtime
//! clocks through rustix; elsewhere (macOS, Windows), or with the feature `portable-clock`, from
//! std's `SystemTime`, always precise. The portable source is built everywhere
//! ([`SystemClock::portable`]), so the tests run that path on Linux too, in the same build.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use vesta_core::{Clock, ClockSync, Layout};

/// How close to a wait's target sleeping stops and yielding starts.
const SPIN_MARGIN: Duration = Duration::from_micros(20);

/// How much longer than the distance seen at its start a wait may last: room for a coarse
/// clock's tick, so a wait on an unstepped clock ends at the boundary, not a tick before it.
const WAIT_SLACK: Duration = Duration::from_millis(5);

/// Which clock a [`SystemClock`] reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// The kernel's precise realtime clock (`CLOCK_REALTIME`).
    Precise,
    /// The kernel's coarse realtime clock (`CLOCK_REALTIME_COARSE`).
    Coarse,
    /// std's `SystemTime` (macOS, Windows, or `portable-clock`).
    Portable,
    /// The precise clock read only when the coarse one (of this tick, in ms) has moved past
    /// the last precise reading (the module doc).
    Lazy(u64),
}

/// The latest precise reading (ms since 1970) a lazy clock made in this process: what lazy
/// readings return while the coarse clock says real time has not left it behind.
static LAST_PRECISE_MS: AtomicU64 = AtomicU64::new(0);

/// True where the kernel's realtime clocks are read through rustix.
const KERNEL_CLOCKS: bool = cfg!(all(
    any(
        target_os = "linux",
        target_os = "android",
        target_os = "freebsd"
    ),
    not(feature = "portable-clock")
));

/// Nanoseconds since 1970 from `kind` (before 1970 reads as 0, which every generator rejects).
fn now_ns(kind: Kind) -> u128 {
    match kind {
        #[cfg(any(target_os = "linux", target_os = "android", target_os = "freebsd"))]
        Kind::Precise | Kind::Coarse | Kind::Lazy(_) => kernel::now_ns(kind == Kind::Coarse),
        _ => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    }
}

/// Milliseconds since the Unix epoch from `kind`'s clock: the hot path's reading, in 64-bit
/// arithmetic (a 128-bit division per ID cost more than the kernel's read).
#[inline]
fn now_ms(kind: Kind) -> u64 {
    match kind {
        #[cfg(any(target_os = "linux", target_os = "android", target_os = "freebsd"))]
        Kind::Precise | Kind::Coarse => kernel::now_ms(kind == Kind::Coarse),
        #[cfg(any(target_os = "linux", target_os = "android", target_os = "freebsd"))]
        Kind::Lazy(tick_ms) => lazy_ms(kernel::now_ms(true), tick_ms, &LAST_PRECISE_MS, || {
            kernel::now_ms(false)
        }),
        _ => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
    }
}

/// A lazy reading, given the coarse reading `coarse` of a clock ticking every `tick_ms`: `last`
/// (the latest precise reading) while `coarse <= last < coarse + tick_ms` — real time is at
/// least `coarse`, and without a step back at least `last` too, and less than `coarse +
/// tick_ms` — else a fresh precise reading, remembered.
#[cfg_attr(
    not(any(target_os = "linux", target_os = "android", target_os = "freebsd")),
    allow(dead_code, reason = "lazy readings need the kernel's coarse clock")
)]
#[inline]
fn lazy_ms(coarse: u64, tick_ms: u64, last: &AtomicU64, precise: impl FnOnce() -> u64) -> u64 {
    let seen = last.load(Ordering::Relaxed);
    if coarse <= seen && seen < coarse.saturating_add(tick_ms) {
        return seen;
    }
    remember(coarse, tick_ms, last, seen, precise())
}

/// Keeps `fresh`, a precise reading, for the lazy readings after it: the latest of the readings
/// as a rule, `fresh` itself when `seen` was impossible (the clock stepped back more than a
/// tick: `seen` is at least a tick past the coarse reading).
#[cfg_attr(
    not(any(target_os = "linux", target_os = "android", target_os = "freebsd")),
    allow(dead_code, reason = "lazy readings need the kernel's coarse clock")
)]
fn remember(coarse: u64, tick_ms: u64, last: &AtomicU64, seen: u64, fresh: u64) -> u64 {
    if fresh >= seen {
        last.fetch_max(fresh, Ordering::Relaxed);
    } else if seen >= coarse.saturating_add(tick_ms) {
        last.store(fresh, Ordering::Relaxed);
    }
    fresh
}

/// The kernel's realtime clocks, precise and coarse.
#[cfg(any(target_os = "linux", target_os = "android", target_os = "freebsd"))]
mod kernel {
    use rustix::time::{ClockId, Timespec, clock_getres, clock_gettime};

    /// Nanoseconds since 1970 from the coarse or the precise clock.
    #[inline]
    pub(super) fn now_ms(coarse: bool) -> u64 {
        let id = if coarse {
            ClockId::RealtimeCoarse
        } else {
            ClockId::Realtime
        };
        let ts = clock_gettime(id);
        // Before 1970 reads as 0, as `now_ns` does.
        u64::try_from(ts.tv_sec).map_or(0, |s| s * 1000 + ts.tv_nsec as u64 / 1_000_000)
    }

    pub(super) fn now_ns(coarse: bool) -> u128 {
        let id = if coarse {
            ClockId::RealtimeCoarse
        } else {
            ClockId::Realtime
        };
        ns(clock_gettime(id))
    }

    /// The coarse clock's resolution in ms, rounded up.
    pub(super) fn coarse_resolution_ms() -> Option<u64> {
        let res = clock_getres(ClockId::RealtimeCoarse);
        Some(res.tv_sec as u64 * 1000 + (res.tv_nsec as u64).div_ceil(1_000_000))
    }

    fn ns(ts: Timespec) -> u128 {
        u128::try_from(ts.tv_sec).unwrap_or(0) * 1_000_000_000 + ts.tv_nsec as u128
    }
}

/// The coarse clock's resolution in ms, where it is read.
fn coarse_resolution_ms() -> Option<u64> {
    #[cfg(any(target_os = "linux", target_os = "android", target_os = "freebsd"))]
    if KERNEL_CLOCKS {
        return kernel::coarse_resolution_ms();
    }
    None
}

/// Wall-clock time from the operating system (precise, or coarse where it exists).
#[derive(Clone, Copy, Debug)]
pub struct SystemClock {
    kind: Kind,
}

impl SystemClock {
    /// The precise realtime clock (std's `SystemTime` where the kernel's is not read).
    pub fn precise() -> Self {
        SystemClock {
            kind: if KERNEL_CLOCKS {
                Kind::Precise
            } else {
                Kind::Portable
            },
        }
    }

    /// std's `SystemTime`, whatever the platform: the clock macOS and Windows read (for tests
    /// of that path on Linux, and for a program that wants it).
    pub fn portable() -> Self {
        SystemClock {
            kind: Kind::Portable,
        }
    }

    /// The cheapest clock for `layout` with its default rollback tolerance
    /// ([`for_layout_within`](Self::for_layout_within)).
    pub fn for_layout(layout: &Layout) -> Self {
        Self::for_layout_within(layout, layout.default_rollback_tolerance_ms())
    }

    /// The cheapest clock exact enough for `layout` under a rollback tolerance of
    /// `rollback_tolerance_ms`: the coarse clock where its tick is at most a tenth of the time
    /// unit (seconds); else lazy readings (the module doc) where a tick is at most the
    /// tolerance (milliseconds, with the default 5 ms and a kernel ticking every 1 to 4 ms);
    /// else the precise clock.
    pub fn for_layout_within(layout: &Layout, rollback_tolerance_ms: u64) -> Self {
        match coarse_resolution_ms() {
            Some(tick_ms) if tick_ms * 10 <= layout.unit_ms() => SystemClock { kind: Kind::Coarse },
            Some(tick_ms) if tick_ms > 0 && tick_ms <= rollback_tolerance_ms => SystemClock {
                kind: Kind::Lazy(tick_ms),
            },
            _ => Self::precise(),
        }
    }

    /// True if this reads the coarse clock.
    pub fn is_coarse(&self) -> bool {
        self.kind == Kind::Coarse
    }

    /// True if this reads the precise clock only when the coarse clock has moved on.
    pub fn is_lazy(&self) -> bool {
        matches!(self.kind, Kind::Lazy(_))
    }
}

impl Default for SystemClock {
    fn default() -> Self {
        Self::precise()
    }
}

impl Clock for SystemClock {
    #[inline]
    fn now_ms(&self) -> u64 {
        now_ms(self.kind)
    }

    fn wait_until_ms(&self, target_ms: u64) {
        match self.kind {
            // On the precise clock, and ended on a reading the next lazy ones return.
            Kind::Lazy(_) => {
                wait_bounded(target_ms, || now_ns(Kind::Precise));
                LAST_PRECISE_MS.fetch_max(now_ms(Kind::Precise), Ordering::Relaxed);
            }
            kind => wait_bounded(target_ms, || now_ns(kind)),
        }
    }

    fn sync(&self) -> Option<ClockSync> {
        kernel_sync()
    }

    /// A copy: the system clock is the same clock whoever reads it.
    fn share(&self) -> Option<Self> {
        Some(*self)
    }
}

/// The kernel's view of the realtime clock's synchronisation: `adjtimex` in read-only mode
/// (`modes = 0`, allowed without privileges and under systemd's `ProtectClock=`).
#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
pub fn kernel_sync() -> Option<ClockSync> {
    // SAFETY: `timex` is a plain C struct for which all-zero bytes are a valid value (modes 0:
    // read only), and adjtimex writes only into the struct we own and pass by pointer.
    let mut tx: libc::timex = unsafe { std::mem::zeroed() };
    let state = unsafe { libc::adjtimex(&mut tx) };
    if state < 0 {
        return None;
    }
    Some(ClockSync {
        synchronised: tx.status & libc::STA_UNSYNC == 0 && state != libc::TIME_ERROR,
        max_error_us: u64::try_from(tx.maxerror).unwrap_or(0),
    })
}

/// Elsewhere the status is unknown.
#[cfg(not(target_os = "linux"))]
pub fn kernel_sync() -> Option<ClockSync> {
    None
}

/// The system clock moved by an offset that can be stepped while issuers run: an NTP step or a
/// VM restore on demand, for fault-injection tests and the soak. Its waits keep the [`Clock`]
/// contract exactly as [`SystemClock`]'s do.
#[derive(Debug)]
pub struct ShiftedClock {
    base: SystemClock,
    offset_ms: AtomicI64,
}

impl ShiftedClock {
    /// `base` with no offset yet.
    pub fn new(base: SystemClock) -> Self {
        ShiftedClock {
            base,
            offset_ms: AtomicI64::new(0),
        }
    }

    /// Steps the clock by `delta_ms`: negative is back in time, like `date -s` to the past.
    pub fn step_ms(&self, delta_ms: i64) {
        self.offset_ms.fetch_add(delta_ms, Ordering::SeqCst);
    }

    /// The offset in force, ms.
    pub fn offset_ms(&self) -> i64 {
        self.offset_ms.load(Ordering::SeqCst)
    }

    fn shifted_ns(&self) -> u128 {
        let base = now_ns(self.base.kind) as i128;
        let shifted = base + i128::from(self.offset_ms()) * 1_000_000;
        u128::try_from(shifted).unwrap_or(0)
    }
}

impl Clock for ShiftedClock {
    fn now_ms(&self) -> u64 {
        u64::try_from(self.shifted_ns() / 1_000_000).unwrap_or(u64::MAX)
    }

    fn wait_until_ms(&self, target_ms: u64) {
        wait_bounded(target_ms, || self.shifted_ns());
    }
}

/// Sleeps until the wall clock (`read_wall_ns`) reaches `target_ms`, but no longer in monotonic
/// time than the distance seen at the start (plus [`WAIT_SLACK`]): a wall clock stepped back
/// during the wait ends it at about the time it would have ended, as the [`Clock`] contract
/// requires. Sleeps until near the target and yields only for the last microseconds.
fn wait_bounded(target_ms: u64, read_wall_ns: impl Fn() -> u128) {
    let target_ns = u128::from(target_ms) * 1_000_000;
    let start = read_wall_ns();
    let Some(distance) = target_ns.checked_sub(start).filter(|d| *d > 0) else {
        return;
    };
    let distance = Duration::from_nanos(u64::try_from(distance).unwrap_or(u64::MAX));
    let give_up = Instant::now() + distance + WAIT_SLACK;
    loop {
        let now_ns = read_wall_ns();
        let now = Instant::now();
        if now_ns >= target_ns || now >= give_up {
            return;
        }
        let wall_left = Duration::from_nanos(u64::try_from(target_ns - now_ns).unwrap_or(u64::MAX));
        let left = wall_left.min(give_up - now);
        if left > SPIN_MARGIN {
            // A coarse clock may lag the real boundary by a tick: the loop sleeps again.
            thread::sleep(left);
        } else {
            thread::yield_now();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TICK: u64 = 4;

    /// A lazy reading against a coarse clock ticking every 4 ms: the last precise reading while
    /// real time may still be it, a fresh one once the coarse clock has passed it, and a step
    /// back of more than a tick followed at once.
    #[test]
    fn a_lazy_reading_is_the_last_precise_one_only_while_real_time_may_be_it() {
        const T: u64 = 1_700_000_000_000;
        let last = AtomicU64::new(0);
        let fresh = |ms: u64| move || ms;
        let never = || -> u64 { panic!("read the precise clock") };
        // First reading: precise, remembered.
        assert_eq!(lazy_ms(T, TICK, &last, fresh(T + 2)), T + 2);
        // The coarse clock still at T (real time in T..T+4): T+2 is no later than it.
        assert_eq!(lazy_ms(T, TICK, &last, never), T + 2);
        // A wait ended on a precise reading of T+3: returned next, though the tick lags.
        last.fetch_max(T + 3, Ordering::Relaxed);
        assert_eq!(lazy_ms(T, TICK, &last, never), T + 3);
        // The coarse clock moved past it: a fresh reading, exact.
        assert_eq!(lazy_ms(T + 4, TICK, &last, fresh(T + 5)), T + 5);
        // Stale by less than a tick at most: the coarse tick bounds real time from above.
        assert_eq!(lazy_ms(T + 4, TICK, &last, never), T + 5);
        // The clock stepped back an hour: the coarse reading makes the last one impossible, so
        // the fresh (earlier) reading is returned and kept — the step is seen.
        let b = T - 3_600_000;
        assert_eq!(lazy_ms(b + 4, TICK, &last, fresh(b + 5)), b + 5);
        assert_eq!(last.load(Ordering::Relaxed), b + 5);
        assert_eq!(lazy_ms(b + 4, TICK, &last, never), b + 5);
        // Two readers racing: the later precise reading wins, an older one never lowers it.
        assert_eq!(lazy_ms(b + 1000, TICK, &last, fresh(b + 1003)), b + 1003);
        assert_eq!(remember(b + 1000, TICK, &last, b + 5, b + 1001), b + 1001);
        assert_eq!(last.load(Ordering::Relaxed), b + 1003);
    }

    /// Lazy readings only where a tick is at most the rollback tolerance (a step back inside a
    /// tick is then ridden out like any step inside the tolerance); never ahead of the precise
    /// clock read after them.
    #[test]
    fn lazy_readings_only_within_the_tolerance_and_never_ahead() {
        let ms = vesta_core::IdType::MinGranularity.layout();
        let Some(tick) = coarse_resolution_ms() else {
            return;
        };
        assert_eq!(
            SystemClock::for_layout_within(ms, tick).is_lazy(),
            KERNEL_CLOCKS
        );
        assert!(!SystemClock::for_layout_within(ms, tick - 1).is_lazy());
        let lazy = SystemClock::for_layout_within(ms, tick);
        for _ in 0..10_000 {
            let read = lazy.now_ms();
            let after = now_ms(Kind::Precise);
            assert!(read <= after, "lazy {read} ahead of precise {after}");
            assert!(after - read < tick + 1000, "lazy {read} far behind {after}");
        }
    }

    #[test]
    fn coarse_only_where_the_unit_allows() {
        let ms = vesta_core::IdType::MinGranularity.layout();
        assert!(!SystemClock::for_layout(ms).is_coarse());
        let a = SystemClock::for_layout(vesta_core::IdType::MaxPeak.layout()).now_ms();
        let b = SystemClock::precise().now_ms();
        assert!(a.abs_diff(b) < 1000, "coarse {a} vs precise {b}");
        // The hot path's 64-bit milliseconds are the nanoseconds' (read just before).
        for kind in [Kind::Precise, Kind::Coarse, Kind::Portable] {
            let ns_ms = (now_ns(kind) / 1_000_000) as u64;
            let ms = now_ms(kind);
            assert!(
                ms >= ns_ms && ms - ns_ms < 1000,
                "{kind:?}: {ms} vs {ns_ms}"
            );
        }
    }

    #[test]
    fn waits_until_the_target_on_every_source() {
        for c in [SystemClock::precise(), SystemClock::portable()] {
            let target = c.now_ms() + 30;
            c.wait_until_ms(target);
            assert!(c.now_ms() >= target, "{c:?}");
        }
        let (a, b) = (
            SystemClock::portable().now_ms(),
            SystemClock::precise().now_ms(),
        );
        assert!(a.abs_diff(b) < 1000, "portable {a} vs precise {b}");
    }

    /// The wall clock steps back an hour just after the wait starts: the wait still ends after
    /// about the distance it saw (here 200 ms), not an hour later.
    #[test]
    fn a_clock_stepped_back_during_a_wait_does_not_stretch_it() {
        let real = SystemClock::precise();
        let start_ns = now_ns(Kind::Precise);
        let target_ms = (start_ns / 1_000_000) as u64 + 200;
        let reads = std::sync::atomic::AtomicU32::new(0);
        let hour_ns = 3_600_000_000_000u128;
        let began = Instant::now();
        wait_bounded(target_ms, || {
            let now = now_ns(Kind::Precise);
            // The first reading is before the step, every later one after it.
            if reads.fetch_add(1, std::sync::atomic::Ordering::Relaxed) == 0 {
                now
            } else {
                now - hour_ns
            }
        });
        let took = began.elapsed();
        assert!(took >= Duration::from_millis(190), "ended early: {took:?}");
        // Not stretched by the hour of the step (30 s: any machine, however busy).
        assert!(
            took < Duration::from_secs(30),
            "stretched by the step: {took:?}"
        );
        assert!(real.now_ms() >= target_ms - 10);
    }
}
