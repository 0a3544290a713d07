//! The waiting list: ID requests that found their time unit used up, grouped by flow (one per
//! connection, say) and served at each unit boundary by deficit round robin, so one greedy flow
//! cannot take every new unit while a polite one waits behind it.
//!
//! Pure bookkeeping: it takes IDs only through the function it is given, so the fairness rules
//! are tested here without threads or a clock.

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use tokio::sync::oneshot;
use vesta_core::{GenError, IdBatch, IdRun};

use crate::error::IssueError;

/// Where a parked request's answer goes.
pub(crate) type Reply = oneshot::Sender<Result<IdBatch, IssueError>>;

/// One parked request.
#[derive(Debug)]
pub(crate) struct Waiter {
    /// IDs still owed.
    left: u64,
    /// IDs given so far, in order.
    runs: Vec<IdRun>,
    /// When it was parked (for the wait limit).
    since: Instant,
    reply: Reply,
}

impl Waiter {
    /// A request for `left` more IDs after `runs`, parked at `since`.
    pub(crate) fn new(left: u64, runs: Vec<IdRun>, since: Instant, reply: Reply) -> Self {
        Waiter {
            left,
            runs,
            since,
            reply,
        }
    }
}

/// A flow's parked requests, in arrival order, and the IDs they still need in all.
#[derive(Debug, Default)]
struct FlowQueue {
    waiters: VecDeque<Waiter>,
    left: u64,
}

impl FlowQueue {
    /// Drops requests at the front whose caller stopped waiting (nothing is taken for them).
    fn drop_abandoned(&mut self) -> usize {
        let mut dropped = 0;
        while self.waiters.front().is_some_and(|w| w.reply.is_closed()) {
            if let Some(w) = self.waiters.pop_front() {
                self.left -= w.left;
                dropped += 1;
            }
        }
        dropped
    }

    /// Hands `run` out to the waiters in order; returns how many were completed.
    fn give(&mut self, mut run: IdRun) -> usize {
        let mut completed = 0;
        while run.count > 0 {
            let Some(w) = self.waiters.front_mut() else {
                break;
            };
            let k = w.left.min(run.count);
            w.runs.push(IdRun { count: k, ..run });
            w.left -= k;
            self.left -= k;
            run.first += k * run.step;
            run.count -= k;
            if w.left == 0 {
                if let Some(w) = self.waiters.pop_front() {
                    // A caller that gave up meanwhile leaves a gap, never a duplicate.
                    let _ = w.reply.send(Ok(IdBatch::from_runs(w.runs)));
                }
                completed += 1;
            }
        }
        completed
    }
}

/// What serving one unit came to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Served {
    /// Nobody is waiting any more.
    Empty,
    /// The unit's sequence is used up and requests still wait: sleep to the next boundary.
    UnitUsedUp,
    /// Issuing failed; every waiter got the error.
    Failed,
}

/// The parked requests of one issuer.
#[derive(Debug, Default)]
pub(crate) struct WaitQueue {
    flows: HashMap<u64, FlowQueue>,
    /// Flows with parked requests, in serving order.
    turn: VecDeque<u64>,
    len: usize,
}

impl WaitQueue {
    /// Parked requests.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// True if nobody waits.
    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Parks `waiter` behind the earlier requests of `flow`.
    pub(crate) fn push(&mut self, flow: u64, waiter: Waiter) {
        let q = self.flows.entry(flow).or_default();
        if q.waiters.is_empty() {
            self.turn.push_back(flow);
        }
        q.left += waiter.left;
        q.waiters.push_back(waiter);
        self.len += 1;
    }

    /// Serves the current unit: in each pass every waiting flow, in turn, gets up to an equal
    /// share of the unit (at least one ID), handed to its requests in arrival order; passes
    /// repeat until the unit is used up or nobody waits. `take(n)` issues up to `n` IDs from the
    /// current unit (never spanning units), as `Issuer::try_next_ids` does.
    pub(crate) fn serve_unit(
        &mut self,
        capacity_per_unit: u64,
        mut take: impl FnMut(u64) -> Result<IdBatch, IssueError>,
    ) -> Served {
        loop {
            let flows = self.turn.len() as u64;
            if flows == 0 {
                return Served::Empty;
            }
            let share = (capacity_per_unit / flows).max(1);
            for _ in 0..flows {
                let Some(flow) = self.turn.pop_front() else {
                    break;
                };
                let Some(q) = self.flows.get_mut(&flow) else {
                    continue;
                };
                self.len -= q.drop_abandoned();
                if q.waiters.is_empty() {
                    self.flows.remove(&flow);
                    continue;
                }
                let want = q.left.min(share);
                match take(want) {
                    Ok(batch) => {
                        let mut got = 0;
                        for run in batch.runs() {
                            got += run.count;
                            self.len -= q.give(*run);
                        }
                        if q.waiters.is_empty() {
                            self.flows.remove(&flow);
                        } else {
                            self.turn.push_back(flow);
                        }
                        if got < want {
                            return Served::UnitUsedUp;
                        }
                    }
                    Err(IssueError::Refused(GenError::WouldBlock { .. })) => {
                        // Its turn did not happen: it goes first in the next unit.
                        self.turn.push_front(flow);
                        return Served::UnitUsedUp;
                    }
                    Err(e) => {
                        self.turn.push_front(flow);
                        self.fail_all(&e);
                        return Served::Failed;
                    }
                }
            }
        }
    }

    /// Answers every request parked for `max_wait` or longer with [`IssueError::Saturated`];
    /// returns how many. Requests of a flow are parked in order, so only each flow's first one
    /// needs looking at.
    pub(crate) fn expire(&mut self, now: Instant, max_wait: Duration) -> usize {
        let mut expired = 0;
        for q in self.flows.values_mut() {
            while let Some(w) = q.waiters.front() {
                let waited = now.saturating_duration_since(w.since);
                if waited < max_wait {
                    break;
                }
                if let Some(w) = q.waiters.pop_front() {
                    q.left -= w.left;
                    let _ = w.reply.send(Err(IssueError::Saturated {
                        waited_ms: waited.as_millis() as u64,
                    }));
                    expired += 1;
                }
            }
        }
        self.len -= expired;
        self.flows.retain(|_, q| !q.waiters.is_empty());
        let flows = &self.flows;
        self.turn.retain(|f| flows.contains_key(f));
        expired
    }

    /// Answers every parked request with `e` (the issuer stopped issuing: fenced, clock behind).
    pub(crate) fn fail_all(&mut self, e: &IssueError) {
        for (_, q) in self.flows.drain() {
            for w in q.waiters {
                let _ = w.reply.send(Err(e.clone()));
            }
        }
        self.turn.clear();
        self.len = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::sync::oneshot::Receiver;

    type Answer = Receiver<Result<IdBatch, IssueError>>;

    /// A unit of `cap` IDs numbered from `next`; `take` hands out what is left of it.
    struct Unit {
        next: u64,
        left: u64,
    }

    impl Unit {
        fn new(cap: u64) -> Self {
            Unit { next: 0, left: cap }
        }

        /// The next unit: fresh capacity, numbering goes on.
        fn next_unit(&mut self, cap: u64) {
            self.left = cap;
        }

        fn take(&mut self, n: u64) -> Result<IdBatch, IssueError> {
            if self.left == 0 {
                return Err(IssueError::Refused(GenError::WouldBlock {
                    wait_ms: 1,
                    unit: "millisecond",
                }));
            }
            let count = n.min(self.left);
            let first = self.next * 1024;
            self.next += count;
            self.left -= count;
            Ok(IdBatch::from_runs(vec![IdRun {
                first,
                count,
                step: 1024,
            }]))
        }
    }

    fn park(q: &mut WaitQueue, flow: u64, n: u64) -> Answer {
        let (tx, rx) = oneshot::channel();
        q.push(flow, Waiter::new(n, Vec::new(), Instant::now(), tx));
        rx
    }

    fn ids(rx: &mut Answer) -> Option<Vec<u64>> {
        rx.try_recv().ok().map(|r| r.unwrap().to_vec())
    }

    #[test]
    fn a_polite_flow_is_served_in_the_first_unit_next_to_a_greedy_one() {
        let mut q = WaitQueue::default();
        let greedy: Vec<Answer> = (0..64).map(|_| park(&mut q, 1, 65_536)).collect();
        let mut polite = park(&mut q, 2, 1);
        let mut unit = Unit::new(1024);
        assert_eq!(q.serve_unit(1024, |n| unit.take(n)), Served::UnitUsedUp);
        assert_eq!(ids(&mut polite).map(|v| v.len()), Some(1));
        assert_eq!(unit.left, 0, "the greedy flow used the rest of the unit");
        assert_eq!(q.len(), 64);
        drop(greedy);
    }

    #[test]
    fn flows_take_turns_across_units_and_requests_complete_in_order() {
        let mut q = WaitQueue::default();
        let mut a: Vec<Answer> = (0..3).map(|_| park(&mut q, 1, 700)).collect();
        let mut b = park(&mut q, 2, 10);
        let mut all = Vec::new();
        let mut unit = Unit::new(1024);
        for _ in 0..3 {
            q.serve_unit(1024, |n| unit.take(n));
            unit.next_unit(1024);
        }
        let got_b = ids(&mut b).expect("b served");
        assert_eq!(got_b.len(), 10);
        all.extend(got_b);
        let mut last_first = None;
        for rx in &mut a {
            let v = ids(rx).expect("a served within three units");
            assert_eq!(v.len(), 700);
            // Within one flow, later requests get later IDs.
            if let Some(prev) = last_first {
                assert!(v[0] > prev);
            }
            last_first = Some(v[0]);
            all.extend(v);
        }
        let n = all.len();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), n, "no ID given twice");
        assert!(q.is_empty());
    }

    #[test]
    fn every_waiting_flow_gets_at_least_one_id_per_unit() {
        let mut q = WaitQueue::default();
        let mut rxs: Vec<Answer> = (0..2000).map(|f| park(&mut q, f, 1)).collect();
        let mut unit = Unit::new(1024);
        q.serve_unit(1024, |n| unit.take(n));
        let served = rxs.iter_mut().filter_map(ids).count();
        assert_eq!(served, 1024, "the unit's capacity, one each");
        unit.next_unit(1024);
        assert_eq!(q.serve_unit(1024, |n| unit.take(n)), Served::Empty);
        assert!(q.is_empty());
    }

    #[test]
    fn abandoned_requests_take_nothing_and_expired_ones_are_told() {
        let mut q = WaitQueue::default();
        drop(park(&mut q, 1, 5));
        let mut kept = park(&mut q, 1, 5);
        let mut unit = Unit::new(1024);
        assert_eq!(q.serve_unit(1024, |n| unit.take(n)), Served::Empty);
        assert_eq!(
            ids(&mut kept).unwrap()[0],
            0,
            "the first IDs went to the live request"
        );

        let mut old = park(&mut q, 3, 5);
        let expired = q.expire(
            Instant::now() + Duration::from_secs(4),
            Duration::from_secs(3),
        );
        assert_eq!(expired, 1);
        assert!(matches!(
            old.try_recv().unwrap(),
            Err(IssueError::Saturated { waited_ms }) if waited_ms >= 3000
        ));
        assert!(q.is_empty());
    }

    #[test]
    fn an_issuing_error_reaches_every_waiter() {
        let mut q = WaitQueue::default();
        let mut a = park(&mut q, 1, 5);
        let mut b = park(&mut q, 2, 5);
        let fenced = IssueError::Unavailable("lease lost".into());
        let served = q.serve_unit(1024, |_| Err(fenced.clone()));
        assert_eq!(served, Served::Failed);
        assert_eq!(a.try_recv().unwrap(), Err(fenced.clone()));
        assert_eq!(b.try_recv().unwrap(), Err(fenced));
        assert!(q.is_empty());
    }
}
