//! The check every call of a clustered [`Sequences`](crate::Sequences) passes first: is the
//! key's set served here, and is this member's lease confirmed within its term? One atomic load
//! and one clock read on the fast path; the rest (who serves it instead) only when refused.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use super::coarse::Coarse;
use super::plan::Route;
use crate::sets::SETS;
use crate::{SeqError, SeqKey};

/// What the calls and the beat task share.
pub(crate) struct Gate {
    /// The member: this server's machine ID.
    pub member: u64,
    /// Per set, the generation it is served at here; 0: not served here.
    owned: Box<[AtomicI64]>,
    /// Monotonic origin of `serve_until_ns`.
    base: Instant,
    /// A cheap upper bound of the time since `base`, for the call path.
    coarse: Coarse,
    /// The end of the term (ns since `base`): no number after it until a renewal is confirmed.
    serve_until_ns: AtomicU64,
    /// Who serves each set, as of the last beat.
    routes: RwLock<Arc<Vec<Route>>>,
    /// Calls refused because their set was between owners.
    pub refused_moving: AtomicU64,
    /// Calls refused with the owner's address.
    pub refused_moved: AtomicU64,
    /// Calls refused because the term had lapsed.
    pub refused_lapsed: AtomicU64,
    /// Live members as of the last beat.
    pub members: AtomicU64,
    /// Sets taken here.
    pub sets_taken: AtomicU64,
    /// Sets released from here.
    pub sets_released: AtomicU64,
    /// Leases lost (expired before a renewal was confirmed).
    pub leases_lost: AtomicU64,
    /// Renewals or reads that failed.
    pub beat_failures: AtomicU64,
}

impl Gate {
    pub(crate) fn new(member: u64) -> Gate {
        let (coarse, base) = Coarse::start();
        Gate {
            member,
            owned: (0..SETS).map(|_| AtomicI64::new(0)).collect(),
            base,
            coarse,
            serve_until_ns: AtomicU64::new(0),
            routes: RwLock::new(Arc::new(vec![Route::Moving { to: None }; SETS as usize])),
            refused_moving: AtomicU64::new(0),
            refused_moved: AtomicU64::new(0),
            refused_lapsed: AtomicU64::new(0),
            members: AtomicU64::new(0),
            sets_taken: AtomicU64::new(0),
            sets_released: AtomicU64::new(0),
            leases_lost: AtomicU64::new(0),
            beat_failures: AtomicU64::new(0),
        }
    }

    fn since_base(&self, at: Instant) -> u64 {
        u64::try_from(at.saturating_duration_since(self.base).as_nanos()).unwrap_or(u64::MAX)
    }

    /// Extends the term to `until` (never shortens it).
    pub(crate) fn extend(&self, until: Instant) {
        self.serve_until_ns
            .fetch_max(self.since_base(until), Ordering::AcqRel);
    }

    /// Ends the term now: nothing is served until the next confirmed renewal.
    pub(crate) fn lapse(&self) {
        self.serve_until_ns.store(0, Ordering::Release);
    }

    /// Whether the term runs now: the coarse clock's bound when it says so (a few ns), else
    /// the precise clock.
    #[inline]
    fn in_term_now(&self) -> bool {
        let until = self.serve_until_ns.load(Ordering::Acquire);
        match self.coarse.elapsed_at_most() {
            Some(at_most) if at_most < until => true,
            _ => self.since_base(Instant::now()) < until,
        }
    }

    /// How long the term still runs (zero once lapsed).
    pub(crate) fn term_left(&self) -> Duration {
        let until = self.serve_until_ns.load(Ordering::Acquire);
        Duration::from_nanos(until.saturating_sub(self.since_base(Instant::now())))
    }

    /// The generation set `set` is served at here (0: not served).
    pub(crate) fn served(&self, set: u32) -> i64 {
        self.owned[set as usize].load(Ordering::Acquire)
    }

    /// Serves `set` at `generation` from now on.
    pub(crate) fn serve(&self, set: u32, generation: i64) {
        self.owned[set as usize].store(generation.max(1), Ordering::Release);
    }

    /// Stops serving `set` (calls already past the check finish; the caller drains them).
    pub(crate) fn stop(&self, set: u32) {
        self.owned[set as usize].store(0, Ordering::Release);
    }

    /// Sets served here.
    pub(crate) fn sets_served(&self) -> usize {
        self.owned
            .iter()
            .filter(|g| g.load(Ordering::Relaxed) != 0)
            .count()
    }

    /// What the membership is doing.
    pub(crate) fn status(&self) -> super::ClusterStatus {
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        super::ClusterStatus {
            member: self.member,
            members: get(&self.members) as usize,
            sets_owned: self.sets_served(),
            sets_taken: get(&self.sets_taken),
            sets_released: get(&self.sets_released),
            leases_lost: get(&self.leases_lost),
            refused_moved: get(&self.refused_moved),
            refused_moving: get(&self.refused_moving),
            refused_lapsed: get(&self.refused_lapsed),
            beat_failures: get(&self.beat_failures),
            term_left_ms: u64::try_from(self.term_left().as_millis()).unwrap_or(u64::MAX),
        }
    }

    pub(crate) fn set_routes(&self, routes: Vec<Route>) {
        *self.routes.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(routes);
    }

    pub(crate) fn routes(&self) -> Arc<Vec<Route>> {
        Arc::clone(&self.routes.read().unwrap_or_else(|e| e.into_inner()))
    }

    /// Passes when `set` (of `key`, named in the errors) is served here within the term; else
    /// says who serves it.
    pub(crate) fn check(&self, set: u32, key: &SeqKey) -> Result<(), SeqError> {
        if self.served(set) != 0 {
            if self.in_term_now() {
                return Ok(());
            }
            self.refused_lapsed.fetch_add(1, Ordering::Relaxed);
            return Err(SeqError::Lapsed {
                key: key.to_string(),
                member: self.member,
            });
        }
        let routes = self.routes();
        match routes.get(set as usize) {
            Some(Route::Owner { member, tcp, rest }) => {
                self.refused_moved.fetch_add(1, Ordering::Relaxed);
                Err(SeqError::Moved {
                    key: key.to_string(),
                    set,
                    member: *member,
                    tcp: tcp.clone(),
                    rest: rest.clone(),
                })
            }
            Some(Route::Moving { to }) => {
                self.refused_moving.fetch_add(1, Ordering::Relaxed);
                Err(SeqError::Moving {
                    key: key.to_string(),
                    set,
                    to: *to,
                })
            }
            // Served here by the last beat's routes, but not yet (or no more) by the flags: the
            // set is being taken or released this very beat.
            Some(Route::Here) | None => {
                self.refused_moving.fetch_add(1, Ordering::Relaxed);
                Err(SeqError::Moving {
                    key: key.to_string(),
                    set,
                    to: Some(self.member),
                })
            }
        }
    }
}
