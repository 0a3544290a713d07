//! Issuing and refusal rates over the last minutes, for the status page: a sample of the
//! server's counters every [`SAMPLE_EVERY`], the last [`SAMPLES`] kept (a fixed ring, so memory
//! does not grow however long the server runs). Rates are differences of counters divided by
//! the time between samples, as Prometheus's `rate()` computes them.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Time between samples.
pub const SAMPLE_EVERY: Duration = Duration::from_secs(10);
/// Samples kept: five minutes and one (a rate needs two ends).
pub const SAMPLES: usize = 31;

/// One reading of the counters.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Sample {
    at: Instant,
    issued: u64,
    refused: u64,
}

/// The rate over one interval, for the chart and the table.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Interval {
    /// Seconds from the interval's end back to now (0 for the newest).
    pub ago_s: u64,
    /// IDs (and segment numbers) issued per second.
    pub issued_per_s: f64,
    /// Requests refused per second.
    pub refused_per_s: f64,
}

/// The ring of samples.
#[derive(Debug, Default)]
pub struct Rates {
    samples: Mutex<VecDeque<Sample>>,
}

impl Rates {
    /// Records the counters as read now, dropping the oldest sample past [`SAMPLES`].
    pub fn record(&self, at: Instant, issued: u64, refused: u64) {
        let mut s = self.samples.lock().unwrap_or_else(|p| p.into_inner());
        if s.len() == SAMPLES {
            s.pop_front();
        }
        s.push_back(Sample {
            at,
            issued,
            refused,
        });
    }

    /// The rate between each pair of neighbouring samples, oldest first, measured from `now`.
    pub fn intervals(&self, now: Instant) -> Vec<Interval> {
        let s = self.samples.lock().unwrap_or_else(|p| p.into_inner());
        s.iter()
            .zip(s.iter().skip(1))
            .map(|(a, b)| Interval {
                ago_s: now.saturating_duration_since(b.at).as_secs(),
                issued_per_s: per_second(b.issued.saturating_sub(a.issued), b.at - a.at),
                refused_per_s: per_second(b.refused.saturating_sub(a.refused), b.at - a.at),
            })
            .collect()
    }

    /// The average rates over the last `window` (up to what the samples span), with the
    /// counters as read `now` as the newest end: `(issued/s, refused/s)`, or `None` before the
    /// first sample.
    pub fn over(
        &self,
        window: Duration,
        now: Instant,
        issued: u64,
        refused: u64,
    ) -> Option<(f64, f64)> {
        let s = self.samples.lock().unwrap_or_else(|p| p.into_inner());
        let from = s
            .iter()
            .find(|x| now.saturating_duration_since(x.at) <= window)
            .or_else(|| s.back())?;
        let span = now.saturating_duration_since(from.at);
        Some((
            per_second(issued.saturating_sub(from.issued), span),
            per_second(refused.saturating_sub(from.refused), span),
        ))
    }
}

fn per_second(n: u64, span: Duration) -> f64 {
    if span.is_zero() {
        0.0
    } else {
        n as f64 / span.as_secs_f64()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ring_keeps_five_minutes_and_rates_are_differences() {
        let rates = Rates::default();
        let t0 = Instant::now();
        for i in 0..40u64 {
            rates.record(t0 + SAMPLE_EVERY * i as u32, i * 1000, i);
        }
        let now = t0 + SAMPLE_EVERY * 39;
        let iv = rates.intervals(now);
        assert_eq!(iv.len(), SAMPLES - 1);
        assert!(
            iv.iter()
                .all(|i| i.issued_per_s == 100.0 && i.refused_per_s == 0.1)
        );
        assert_eq!(iv.last().map(|i| i.ago_s), Some(0));
        assert_eq!(iv.first().map(|i| i.ago_s), Some(290));
        let (issued, refused) = rates
            .over(
                Duration::from_secs(60),
                now + Duration::from_secs(5),
                39_500,
                39,
            )
            .unwrap();
        // From the oldest sample within the minute (t0 + 340 s: 34 000 issued, 34 refused) to
        // the counters read at t0 + 395 s: 5 500 IDs and 5 refusals in 55 s.
        assert_eq!(issued, 100.0);
        assert!((refused - 5.0 / 55.0).abs() < 1e-9);
    }

    #[test]
    fn no_rate_before_the_first_sample() {
        let rates = Rates::default();
        let now = Instant::now();
        assert_eq!(rates.over(Duration::from_secs(60), now, 5, 0), None);
        assert!(rates.intervals(now).is_empty());
    }
}
