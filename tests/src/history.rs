//! The history checker of per-key sequences: every call a test makes records its key, the
//! numbers it was answered (`first..=last`) and when it started and ended (one monotonic clock
//! for every caller of the test process). The checker runs over every answer, not a sample:
//!
//! - **real-time order**: for two calls on one key where one ended before the other began,
//!   every number of the later one is above every number of the earlier one;
//! - **no number twice**: the answers of any two calls on one key (concurrent ones included)
//!   share no number.
//!
//! Calls that failed, or whose answer was lost, are not recorded: they may have moved the key
//! (a gap), which neither rule forbids. O(n log n) per key.

use std::collections::HashMap;
use std::fmt;
use std::sync::Mutex;
use std::time::Instant;

/// One answered call.
#[derive(Clone, Debug)]
pub struct Call {
    /// The key, as sent.
    pub key: String,
    /// The first number answered.
    pub first: u64,
    /// The last number answered (`first` for a single number).
    pub last: u64,
    /// When the call was sent.
    pub start: Instant,
    /// When its answer arrived.
    pub end: Instant,
}

/// The calls of one answer: `ranges` of `key` (one call answered in several ranges is several
/// calls with the same times), sent at `start`, answered at `end`.
pub fn calls(
    key: &str,
    ranges: Vec<std::ops::Range<u64>>,
    start: Instant,
    end: Instant,
) -> impl Iterator<Item = Call> + '_ {
    ranges.into_iter().map(move |r| Call {
        key: key.to_owned(),
        first: r.start,
        last: r.end - 1,
        start,
        end,
    })
}

/// Calls recorded from many threads or tasks.
#[derive(Debug, Default)]
pub struct History {
    calls: Mutex<Vec<Call>>,
}

impl History {
    /// Records one answered call.
    pub fn record(&self, call: Call) {
        self.calls.lock().unwrap().push(call);
    }

    /// Records many (one lock for a whole batch of a caller's calls).
    pub fn extend(&self, calls: impl IntoIterator<Item = Call>) {
        self.calls.lock().unwrap().extend(calls);
    }

    /// Calls recorded so far.
    pub fn len(&self) -> usize {
        self.calls.lock().unwrap().len()
    }

    /// True before the first call.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Checks every call recorded; the summary, or the first violation found.
    pub fn check(&self) -> Result<Summary, Box<Violation>> {
        check(&self.calls.lock().unwrap())
    }
}

/// What a clean history held.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Summary {
    /// Calls checked.
    pub calls: usize,
    /// Numbers answered.
    pub numbers: u64,
    /// Distinct keys.
    pub keys: usize,
}

/// Two calls on one key that break a rule.
#[derive(Clone, Debug)]
pub struct Violation {
    /// Which rule.
    pub rule: &'static str,
    /// The earlier (or overlapping) call.
    pub a: Call,
    /// The call that breaks the rule against it.
    pub b: Call,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (a, b) = (&self.a, &self.b);
        let t0 = a.start.min(b.start);
        write!(
            f,
            "key {:?}: {}: {}..={} (sent at +{:?}, answered at +{:?}) and {}..={} (sent at \
             +{:?}, answered at +{:?})",
            a.key,
            self.rule,
            a.first,
            a.last,
            a.start - t0,
            a.end - t0,
            b.first,
            b.last,
            b.start - t0,
            b.end - t0,
        )
    }
}

impl std::error::Error for Violation {}

/// Checks `calls` (any order, any keys).
pub fn check(calls: &[Call]) -> Result<Summary, Box<Violation>> {
    let mut by_key: HashMap<&str, Vec<&Call>> = HashMap::new();
    for c in calls {
        assert!(
            c.first <= c.last,
            "a call answered {}..={}",
            c.first,
            c.last
        );
        by_key.entry(&c.key).or_default().push(c);
    }
    let keys = by_key.len();
    for calls in by_key.into_values() {
        check_key(calls)?;
    }
    Ok(Summary {
        calls: calls.len(),
        numbers: calls.iter().map(|c| c.last - c.first + 1).sum(),
        keys,
    })
}

fn check_key(calls: Vec<&Call>) -> Result<(), Box<Violation>> {
    check_spans(calls).map_err(|(rule, a, b)| {
        Box::new(Violation {
            rule,
            a: a.clone(),
            b: b.clone(),
        })
    })
}

/// The rule that two calls broke.
const TWICE: &str = "a number answered twice";
/// The real-time rule.
const BACKWARDS: &str = "a call that began after another ended got a number not above it";

/// What the rules read of a call: its numbers and its times (any clock shared by the callers).
trait Span: Copy {
    type Time: Ord + Copy;
    fn first(&self) -> u64;
    fn last(&self) -> u64;
    fn start(&self) -> Self::Time;
    fn end(&self) -> Self::Time;
}

impl Span for &Call {
    type Time = Instant;
    fn first(&self) -> u64 {
        self.first
    }
    fn last(&self) -> u64 {
        self.last
    }
    fn start(&self) -> Instant {
        self.start
    }
    fn end(&self) -> Instant {
        self.end
    }
}

impl Span for Rec {
    type Time = u64;
    fn first(&self) -> u64 {
        self.first
    }
    fn last(&self) -> u64 {
        self.last
    }
    fn start(&self) -> u64 {
        self.start_ns
    }
    fn end(&self) -> u64 {
        self.end_ns
    }
}

/// Both rules over the calls of one key: the rule broken and the two calls, or `Ok`.
fn check_spans<S: Span>(mut calls: Vec<S>) -> Result<(), (&'static str, S, S)> {
    // No number twice: ranges in order of their first number must not overlap.
    calls.sort_unstable_by_key(|c| (c.first(), c.last()));
    for w in calls.windows(2) {
        if w[1].first() <= w[0].last() {
            return Err((TWICE, w[0], w[1]));
        }
    }
    // Real-time order: sweep the calls by start; every call that ended before this one began
    // must be entirely below it. `done` walks the calls by end.
    let mut by_end = calls.clone();
    by_end.sort_unstable_by_key(|c| c.end());
    calls.sort_unstable_by_key(|c| c.start());
    let mut done = 0;
    let mut highest: Option<S> = None;
    for c in &calls {
        while done < by_end.len() && by_end[done].end() < c.start() {
            let e = by_end[done];
            if highest.is_none_or(|h| e.last() > h.last()) {
                highest = Some(e);
            }
            done += 1;
        }
        if let Some(h) = highest
            && c.first() <= h.last()
        {
            return Err((BACKWARDS, h, *c));
        }
    }
    Ok(())
}

/// One answered call in a compact form, for histories too large for [`Call`]s (the soak's
/// sequence group: 100 million calls from several processes): the key as a number the callers
/// agree on, and times as nanoseconds of one clock every caller reads (CLOCK_MONOTONIC on one
/// host).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rec {
    /// The key's number.
    pub key: u32,
    /// The first number answered.
    pub first: u64,
    /// The last number answered.
    pub last: u64,
    /// When the call was sent, ns.
    pub start_ns: u64,
    /// When its answer arrived, ns.
    pub end_ns: u64,
}

/// Two records of one key that break a rule.
#[derive(Clone, Debug)]
pub struct RecViolation {
    /// Which rule.
    pub rule: &'static str,
    /// The earlier (or overlapping) call.
    pub a: Rec,
    /// The call that breaks the rule against it.
    pub b: Rec,
}

impl fmt::Display for RecViolation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (a, b) = (&self.a, &self.b);
        let t0 = a.start_ns.min(b.start_ns);
        write!(
            f,
            "key #{}: {}: {}..={} (sent at +{} ns, answered at +{} ns) and {}..={} (sent at +{} \
             ns, answered at +{} ns)",
            a.key,
            self.rule,
            a.first,
            a.last,
            a.start_ns - t0,
            a.end_ns - t0,
            b.first,
            b.last,
            b.start_ns - t0,
            b.end_ns - t0,
        )
    }
}

impl std::error::Error for RecViolation {}

/// Checks `recs` (any order, any keys) by the same rules as [`check`], sorting them by key in
/// place: the summary, or every violation found (at most `max_violations`, at most one per key).
pub fn check_recs(recs: &mut [Rec], max_violations: usize) -> (Summary, Vec<RecViolation>) {
    recs.sort_unstable_by_key(|r| r.key);
    let mut violations = Vec::new();
    let mut keys = 0;
    let mut numbers = 0u64;
    for chunk in recs.chunk_by(|a, b| a.key == b.key) {
        keys += 1;
        for r in chunk {
            assert!(
                r.first <= r.last,
                "a call answered {}..={}",
                r.first,
                r.last
            );
            numbers += r.last - r.first + 1;
        }
        if let Err((rule, a, b)) = check_spans(chunk.to_vec())
            && violations.len() < max_violations
        {
            violations.push(RecViolation { rule, a, b });
        }
    }
    (
        Summary {
            calls: recs.len(),
            numbers,
            keys,
        },
        violations,
    )
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn call(key: &str, first: u64, last: u64, start_ms: u64, end_ms: u64, t0: Instant) -> Call {
        Call {
            key: key.into(),
            first,
            last,
            start: t0 + Duration::from_millis(start_ms),
            end: t0 + Duration::from_millis(end_ms),
        }
    }

    #[test]
    fn concurrent_calls_may_answer_in_any_order_but_sequential_ones_must_go_up() {
        let t0 = Instant::now();
        // Overlapping in time: either order is fine.
        let ok = [
            call("a", 5, 5, 0, 10, t0),
            call("a", 3, 4, 1, 9, t0),
            call("a", 6, 8, 11, 12, t0),
            call("b", 1, 1, 0, 1, t0),
        ];
        let s = check(&ok).unwrap();
        assert_eq!((s.calls, s.numbers, s.keys), (4, 7, 2));
        // The third call began after the first ended but got 5 again.
        let twice = [call("a", 5, 5, 0, 10, t0), call("a", 5, 6, 11, 12, t0)];
        let e = check(&twice).unwrap_err();
        assert_eq!(e.rule, "a number answered twice");
        // Began after 9..=9 ended, answered below it.
        let back = [call("k", 9, 9, 0, 10, t0), call("k", 7, 8, 20, 21, t0)];
        let e = check(&back).unwrap_err();
        assert!(e.rule.starts_with("a call that began after"), "{e}");
        assert!(e.to_string().contains("key \"k\""), "{e}");
        // Another key's numbers do not count.
        check(&[call("x", 9, 9, 0, 1, t0), call("y", 1, 1, 5, 6, t0)]).unwrap();
    }

    #[test]
    fn compact_records_follow_the_same_rules() {
        let r = |key, first, last, start_ns, end_ns| Rec {
            key,
            first,
            last,
            start_ns,
            end_ns,
        };
        let mut ok = vec![
            r(1, 5, 5, 0, 10),
            r(1, 3, 4, 1, 9),
            r(1, 6, 8, 11, 12),
            r(2, 1, 1, 0, 1),
        ];
        let (s, v) = check_recs(&mut ok, 10);
        assert!(v.is_empty(), "{v:?}");
        assert_eq!((s.calls, s.numbers, s.keys), (4, 7, 2));
        let mut bad = vec![
            r(7, 5, 5, 0, 10),
            r(7, 5, 6, 11, 12),
            r(8, 9, 9, 0, 10),
            r(8, 7, 8, 20, 21),
            r(9, 9, 9, 0, 1),
            r(10, 1, 1, 5, 6),
        ];
        let (s, v) = check_recs(&mut bad, 10);
        assert_eq!(s.keys, 4);
        assert_eq!(v.len(), 2, "{v:?}");
        assert_eq!(v[0].rule, TWICE);
        assert_eq!(v[1].rule, BACKWARDS);
        assert!(v[1].to_string().starts_with("key #8"), "{}", v[1]);
    }
}
