//! The generator together with what the lease says about it: the state the issuer reports and
//! the lease thread changes. Issuing never takes its lock: the generator checks one atomic
//! deadline per call, and the lock is read only to explain why an ID was refused.

use std::sync::{Mutex, MutexGuard, PoisonError};

use vesta_core::{Clock, Generator};

use crate::status::{LeaseInfo, LeaseState};

/// A generator whose permission to issue comes from a lease (ZooKeeper, a state file, or a
/// static machine ID that needs none), with the lease's state beside it.
#[derive(Debug)]
pub(crate) struct LeasedGenerator<C> {
    /// The generator; its machine ID, floor and deadline change only through lease events.
    pub generator: Generator<C>,
    lease: Mutex<LeaseRecord>,
}

/// The lease info and the reason to give once the current term runs out.
#[derive(Debug)]
struct LeaseRecord {
    info: LeaseInfo,
    /// Why issuing stops when the generator's deadline passes before the lease thread notices:
    /// the same words the lease thread fences with, so a caller sees one message either way.
    on_expiry: String,
    /// The reason of the fence the last renewal lifted: what a call refused just before the
    /// lift reads, once the reason itself is gone.
    lifted: Option<String>,
}

impl<C: Clock> LeasedGenerator<C> {
    /// Wraps `generator`, whose lease starts as `info`.
    pub(crate) fn new(generator: Generator<C>, info: LeaseInfo) -> Self {
        LeasedGenerator {
            generator,
            lease: Mutex::new(LeaseRecord {
                info,
                on_expiry: String::new(),
                lifted: None,
            }),
        }
    }

    fn record(&self) -> MutexGuard<'_, LeaseRecord> {
        self.lease.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Reads or updates the lease info in place (counters, notes, times).
    pub(crate) fn with_info<T>(&self, f: impl FnOnce(&mut LeaseInfo) -> T) -> T {
        f(&mut self.record().info)
    }

    /// Stops issuing at once and records why (lease lost, start guard pending, shut down): the
    /// reason first, then the fence, both under the lock a refused call reads the reason with,
    /// so no call is refused before its reason is there to read.
    pub(crate) fn fence(&self, state: LeaseState, reason: impl Into<String>) {
        let mut lease = self.record();
        if state == LeaseState::Fenced && lease.info.state != LeaseState::Fenced {
            lease.info.fence_events += 1;
        }
        lease.info.state = state;
        lease.info.reason = Some(reason.into());
        self.generator.fence();
    }

    /// A renewal was written: issuing may go on until the clock reads `deadline_ms`
    /// (`u64::MAX`: no deadline); after that, a refused call is told `on_expiry`.
    #[cfg(feature = "tokio")]
    pub(crate) fn resume(&self, state: LeaseState, deadline_ms: u64, on_expiry: String) {
        let mut lease = self.record();
        self.generator.set_deadline_ms(deadline_ms);
        lease.info.state = state;
        lease.lifted = lease.info.reason.take();
        lease.on_expiry = on_expiry;
    }

    /// The watchdog found the term over: fence with the reason promised for it.
    #[cfg(feature = "tokio")]
    pub(crate) fn lapse(&self) {
        let reason = self.record().on_expiry.clone();
        self.fence(LeaseState::Fenced, reason);
    }

    /// Why the generator refused: the recorded reason, or — when its deadline passed before the
    /// lease thread noticed — the reason the lease thread will record.
    pub(crate) fn refusal_reason(&self) -> String {
        let lease = self.record();
        match (&lease.info.reason, &lease.lifted) {
            (Some(reason), _) => reason.clone(),
            // The term has not run out: the call was refused by the fence a renewal has lifted
            // since.
            (None, Some(lifted))
                if self.generator.clock().now_ms() < self.generator.deadline_ms() =>
            {
                lifted.clone()
            }
            (None, _) => Self::expiry_reason(&lease),
        }
    }

    /// The lease info as of the clock reading `now_ms`: an issuing state whose deadline has
    /// passed reads as fenced, with the reason the lease thread will record.
    pub(crate) fn info_at(&self, now_ms: u64) -> LeaseInfo {
        let lease = self.record();
        let mut info = lease.info.clone();
        if info.state.can_issue() && now_ms >= self.generator.deadline_ms() {
            info.reason = Some(Self::expiry_reason(&lease));
            info.state = LeaseState::Fenced;
        }
        info
    }

    fn expiry_reason(lease: &LeaseRecord) -> String {
        if lease.on_expiry.is_empty() {
            format!("the machine-ID lease is {}", lease.info.state)
        } else {
            lease.on_expiry.clone()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use vesta_core::{GenError, ManualClock};

    use crate::config::IssuerConfig;

    const T0: u64 = 1_700_000_000_000;

    fn leased(clock: Arc<ManualClock>) -> LeasedGenerator<Arc<ManualClock>> {
        let config = IssuerConfig::default().generator_config(0).unwrap();
        LeasedGenerator::new(Generator::new(config, clock).unwrap(), LeaseInfo::fixed())
    }

    /// The generator's deadline may run out a moment before the lease thread's watchdog fires:
    /// a caller in that moment and one after it read the same words.
    #[test]
    fn a_term_running_out_reads_the_same_before_and_after_the_watchdog() {
        let clock = Arc::new(ManualClock::new(T0));
        let g = leased(clock.clone());
        let reason = "the lease of machine 0 is not confirmed by ZooKeeper (last confirmed at \
                      2023-11-14T22:13:20.000Z, allowed 1000 ms); not issuing until it is";
        g.resume(LeaseState::Held, T0 + 1_000, reason.into());
        assert!(g.generator.next_id().is_ok());
        assert!(g.info_at(T0).state.can_issue());

        clock.advance(1_000);
        assert!(matches!(
            g.generator.next_id(),
            Err(GenError::Fenced { .. })
        ));
        assert_eq!(g.refusal_reason(), reason, "before the watchdog");
        let info = g.info_at(clock.now_ms());
        assert_eq!(
            (info.state, info.reason.as_deref()),
            (LeaseState::Fenced, Some(reason))
        );
        assert_eq!(info.fence_events, 0, "counted when the watchdog fences");

        g.lapse();
        assert_eq!(g.refusal_reason(), reason, "after the watchdog");
        let info = g.info_at(clock.now_ms());
        assert_eq!(
            (info.state, info.reason.as_deref(), info.fence_events),
            (LeaseState::Fenced, Some(reason), 1)
        );
        assert!(!reason.contains("waiting"));
    }

    /// Calls racing fences and renewals are refused only with a reason the lease gave, never
    /// with a made-up one (the static lease's "the machine-ID lease is static").
    #[test]
    fn a_call_racing_a_fence_or_a_renewal_reads_a_reason_the_lease_gave() {
        use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
        let g = Arc::new(leased(Arc::new(ManualClock::new(T0))));
        let stop = Arc::new(AtomicBool::new(false));
        let refused = Arc::new(AtomicU64::new(0));
        let callers: Vec<_> = (0..2)
            .map(|_| {
                let (g, stop, refused) = (g.clone(), stop.clone(), refused.clone());
                std::thread::spawn(move || {
                    while !stop.load(Relaxed) {
                        if g.generator.try_next_id().is_err() {
                            let reason = g.refusal_reason();
                            // Never the term's words: no term runs out here.
                            assert!(reason.starts_with("lease lost "), "refused with {reason:?}");
                            refused.fetch_add(1, Relaxed);
                        }
                    }
                })
            })
            .collect();
        // Until the calls have met a few hundred fences (a bound on the rounds, far above what
        // that takes, keeps it finite).
        let mut round = 0u64;
        while refused.load(Relaxed) < 300 && round < 50_000_000 {
            g.fence(LeaseState::Fenced, format!("lease lost {round}"));
            g.resume(LeaseState::Static, u64::MAX, "term over".into());
            round += 1;
        }
        stop.store(true, Relaxed);
        for caller in callers {
            caller.join().unwrap();
        }
        assert!(refused.load(Relaxed) >= 300, "{round} rounds");
    }

    #[test]
    fn a_fence_says_why_counts_once_and_a_renewal_lifts_it() {
        let clock = Arc::new(ManualClock::new(T0));
        let g = leased(clock.clone());
        g.fence(LeaseState::Fenced, "lease lost");
        g.fence(LeaseState::Fenced, "lease still lost");
        assert!(g.generator.next_id().is_err());
        assert_eq!(g.refusal_reason(), "lease still lost");
        assert_eq!(g.info_at(T0).fence_events, 1);
        g.fence(LeaseState::Acquiring, "waiting out the start guard");
        assert_eq!(g.info_at(T0).state, LeaseState::Acquiring);
        g.resume(LeaseState::Held, T0 + 10, "term over".into());
        assert!(g.generator.next_id().is_ok());
        assert_eq!(g.info_at(T0).reason, None);
    }
}
