//! The system clock for production generators: the one place that reads wall-clock time.
//!
//! Max-peak IDs count seconds, so the coarse realtime clock (a memory read, ~3 ns, a few ms
//! resolution) is exact enough; millisecond IDs need the precise one (~25 ns). Waiting sleeps
//! until the target and yields only for the last few microseconds, so a saturated issuer does
//! not burn a core.
//!
//! Where the coarse clock exists (Linux, Android, FreeBSD) time comes from the kernel's realtime
//! clocks through rustix; elsewhere (macOS, Windows), or with the feature `portable-clock`, from
//! std's `SystemTime`, always precise. The portable source is built everywhere
//! ([`SystemClock::portable`]), so the tests run that path on Linux too, in the same build.

use std::sync::atomic::{AtomicI64, Ordering};
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
}

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
        Kind::Precise | Kind::Coarse => kernel::now_ns(kind == Kind::Coarse),
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
        _ => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
    }
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

    /// The cheapest clock whose resolution is at most a tenth of the layout's time unit.
    pub fn for_layout(layout: &Layout) -> Self {
        match coarse_resolution_ms() {
            Some(res_ms) if res_ms * 10 <= layout.unit_ms() => SystemClock { kind: Kind::Coarse },
            _ => Self::precise(),
        }
    }

    /// True if this reads the coarse clock.
    pub fn is_coarse(&self) -> bool {
        self.kind == Kind::Coarse
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
        wait_bounded(target_ms, || now_ns(self.kind));
    }

    fn sync(&self) -> Option<ClockSync> {
        kernel_sync()
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
