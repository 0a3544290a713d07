//! The open-loop schedule: request `i` of the whole run is due at `start + i / rate`, whatever
//! happened before it, and connection `c` of `C` sends the requests `i ≡ c (mod C)`. Latency is
//! timed from these due times, so the schedule is what makes the measurement free of
//! coordinated omission.

use std::thread;
use std::time::{Duration, Instant};

/// The due times of one connection's requests.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Schedule {
    start: Instant,
    rate: u64,
    step: u64,
    /// Index in the whole run of this connection's next request.
    next: u64,
}

impl Schedule {
    /// Connection `conn` of `connections` sharing `rate` requests/s (rate ≥ 1) from `start`.
    pub(crate) fn new(start: Instant, rate: u64, connections: usize, conn: usize) -> Self {
        Schedule {
            start,
            rate: rate.max(1),
            step: connections.max(1) as u64,
            next: conn as u64,
        }
    }

    /// When the next request is due.
    pub(crate) fn due(&self) -> Instant {
        let nanos = u128::from(self.next) * 1_000_000_000 / u128::from(self.rate);
        self.start + Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
    }

    /// Moves on to this connection's following request.
    pub(crate) fn advance(&mut self) {
        self.next += self.step;
    }
}

/// Sleeps until `t` (at once if it has passed). `thread::sleep` wakes within tens of
/// microseconds on Linux, where an async timer wheel rounds to whole milliseconds; how late it
/// wakes is part of what the open loop measures, and the "service" histogram tells it apart.
pub(crate) fn sleep_until(t: Instant) {
    let now = Instant::now();
    if t > now {
        thread::sleep(t - now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connections_interleave_on_one_global_schedule() {
        let start = Instant::now();
        let mut s = Schedule::new(start, 1000, 4, 1);
        let mut dues = Vec::new();
        for _ in 0..3 {
            dues.push(s.due() - start);
            s.advance();
        }
        assert_eq!(
            dues,
            [1, 5, 9].map(Duration::from_millis),
            "requests 1, 5, 9 of a 1000/s run"
        );
        // An odd rate does not drift: request 3 of 3/s is due at exactly 1 s.
        let mut s = Schedule::new(start, 3, 1, 0);
        for _ in 0..3 {
            s.advance();
        }
        assert_eq!(s.due() - start, Duration::from_secs(1));
    }
}
