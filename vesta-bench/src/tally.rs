//! What one connection measured: latency histograms, IDs per server time unit, errors by kind.
//! Each connection fills its own [`Tally`] without sharing; the engine merges them at the end.

use std::collections::BTreeMap;
use std::time::Instant;

use hdrhistogram::Histogram;
use vesta_core::Layout;

use crate::report::Unit;

/// A histogram of nanoseconds, 1 µs .. 60 s at 3 significant digits; values outside are
/// clamped, never dropped.
pub(crate) fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1_000, 60_000_000_000, 3).expect("constant, valid bounds")
}

fn nanos(from: Instant, to: Instant) -> u64 {
    u64::try_from(to.saturating_duration_since(from).as_nanos()).unwrap_or(u64::MAX)
}

/// One connection's measurements.
#[derive(Debug)]
pub(crate) struct Tally {
    /// Latency of every answer, from the intended send (open loop) or the send (closed loop).
    pub latency: Histogram<u64>,
    /// Open loop only: the same answers timed from the actual send.
    pub service: Option<Histogram<u64>>,
    /// IDs received per server time unit.
    pub per_unit: BTreeMap<Unit, u64>,
    /// Error answers by kind (an error code name, an HTTP status).
    pub errors: BTreeMap<String, u64>,
    /// The first error answer, as the server worded it.
    pub first_error: Option<String>,
    /// When the last answer arrived.
    pub last_answer: Option<Instant>,
    /// Cluster runs: `SEQ_MOVED` answers followed to the member they named (not errors).
    pub moves: u64,
    /// Cluster runs: `SEQ_MOVING` answers, each request sent again after a pause (not errors).
    pub moving: u64,
    /// Cluster runs: final answers per server address.
    pub served: BTreeMap<String, u64>,
    /// The unit of the IDs counted last and how many are not yet in `per_unit`: answers come in
    /// runs of the same unit, so most IDs cost an add, not a map update.
    pending: Option<(Unit, u64)>,
}

impl Tally {
    /// An empty tally; `open_loop` adds the service-time histogram.
    pub(crate) fn new(open_loop: bool) -> Self {
        Tally {
            latency: histogram(),
            service: open_loop.then(histogram),
            per_unit: BTreeMap::new(),
            errors: BTreeMap::new(),
            first_error: None,
            last_answer: None,
            moves: 0,
            moving: 0,
            served: BTreeMap::new(),
            pending: None,
        }
    }

    /// Records one answer arriving at `now` for a request due at `intended` and written at
    /// `written` (the same instant in the closed loop).
    pub(crate) fn answer(&mut self, intended: Instant, written: Instant, now: Instant) {
        self.latency.saturating_record(nanos(intended, now));
        if let Some(service) = &mut self.service {
            service.saturating_record(nanos(written, now));
        }
        self.last_answer = Some(now);
    }

    /// Counts `count` IDs of the unit of `first` (one ID, or one run of a batch), read in
    /// the server's `layout` (with none, e.g. a custom layout over REST, units are not kept).
    pub(crate) fn ids(&mut self, first: u64, count: u64, layout: Option<&Layout>) {
        let Some(layout) = layout else {
            return;
        };
        let layout = layout.for_id(first);
        let unit = Unit {
            machine: layout.node_span().get(first),
            id_type: layout.id_type(),
            time: layout.time_span().get(first),
        };
        match &mut self.pending {
            Some((u, n)) if *u == unit => *n += count,
            _ => {
                self.flush();
                self.pending = Some((unit, count));
            }
        }
    }

    /// Counts an error answer of `kind`; the first one's `message` is kept.
    pub(crate) fn error(&mut self, kind: &str, message: impl FnOnce() -> String) {
        match self.errors.get_mut(kind) {
            Some(n) => *n += 1,
            None => {
                self.errors.insert(kind.to_owned(), 1);
            }
        }
        if self.first_error.is_none() {
            self.first_error = Some(message());
        }
    }

    /// Counts `answers` final answers from the server at `address`.
    pub(crate) fn served(&mut self, address: &str, answers: u64) {
        *self.served.entry(address.to_owned()).or_insert(0) += answers;
    }

    fn flush(&mut self) {
        if let Some((unit, n)) = self.pending.take() {
            *self.per_unit.entry(unit).or_insert(0) += n;
        }
    }

    /// Adds `other` into this tally.
    pub(crate) fn merge(&mut self, mut other: Tally) {
        self.flush();
        other.flush();
        // Same bounds on both sides, so adding cannot fail.
        let _ = self.latency.add(&other.latency);
        if let (Some(all), Some(one)) = (&mut self.service, &other.service) {
            let _ = all.add(one);
        }
        for (unit, n) in other.per_unit {
            *self.per_unit.entry(unit).or_insert(0) += n;
        }
        for (kind, n) in other.errors {
            *self.errors.entry(kind).or_insert(0) += n;
        }
        self.first_error = self.first_error.take().or(other.first_error);
        self.moves += other.moves;
        self.moving += other.moving;
        for (address, n) in other.served {
            self.served(&address, n);
        }
        self.last_answer = self.last_answer.max(other.last_answer);
    }

    /// Ends the tally: pending counts go into the map.
    pub(crate) fn finish(mut self) -> Self {
        self.flush();
        self
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use vesta_core::{GenMethod, IdFields, IdType};

    use super::*;

    fn id(machine: u64, time: u64, seq: u64) -> u64 {
        IdFields {
            version: 0,
            id_type: IdType::MinGranularity,
            gen_method: GenMethod::Server,
            time,
            seq,
            machine,
        }
        .encode()
        .unwrap()
    }

    #[test]
    fn ids_are_counted_per_unit_and_merged() {
        let t0 = Instant::now();
        let mut a = Tally::new(true);
        a.answer(
            t0,
            t0 + Duration::from_micros(50),
            t0 + Duration::from_micros(80),
        );
        let l = Some(IdType::MaxPeak.layout());
        a.ids(id(924, 7, 0), 3, l);
        a.ids(id(924, 7, 3), 1, l);
        a.ids(id(924, 8, 0), 2, l);
        a.ids(id(925, 7, 0), 1, l);
        a.ids(id(925, 7, 0), 1, None);
        a.error("UNAVAILABLE", || "not issuing".into());
        let mut b = Tally::new(true);
        b.ids(id(924, 7, 9), 5, l);
        b.error("UNAVAILABLE", || "second".into());
        b.error("TIMEOUT", || "third".into());
        a.merge(b);
        let a = a.finish();
        let unit = |machine, time| Unit {
            machine,
            id_type: Some(IdType::MinGranularity),
            time,
        };
        assert_eq!(
            a.per_unit,
            BTreeMap::from([(unit(924, 7), 9), (unit(924, 8), 2), (unit(925, 7), 1)])
        );
        assert_eq!(
            a.errors,
            BTreeMap::from([("TIMEOUT".into(), 1), ("UNAVAILABLE".into(), 2)])
        );
        assert_eq!(a.first_error.as_deref(), Some("not issuing"));
        assert_eq!(a.latency.len(), 1);
        // 80 µs from the intended send, 30 µs from the actual write (3 significant digits).
        assert_eq!(a.latency.max() / 1000, 80);
        assert_eq!(a.service.as_ref().unwrap().max() / 1000, 30);
    }
}
