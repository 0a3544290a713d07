//! The check every call of a [`Sequences`](crate::Sequences) passes first: is the key's set
//! served here, and is the lease it is served under confirmed within its term? Two atomic loads
//! and one read of the coarse monotonic clock (`mono.rs`) on the fast path; the rest (who
//! serves it instead) only when refused.
//!
//! A cluster member's gate serves the sets it took under its member lease; a standalone
//! server's (or a `vesta seq` run's) serves every set under the table's lease
//! (`crate::owner`), so both stop at the end of their term by the same check.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use super::mono;
use super::plan::Route;
use crate::sets::SETS;
use crate::{SeqError, SeqKey};

/// Whose lease a gate's term is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum GateOf {
    /// A cluster member's (its machine ID).
    Member(u64),
    /// The table's: a standalone server or a `vesta seq` run serves every set.
    Table,
}

/// What the calls and the beat task share.
pub(crate) struct Gate {
    /// The member: this server's machine ID (0 for the table's gate).
    pub member: u64,
    /// Whose lease.
    pub of: GateOf,
    /// Per set, the generation it is served at here; 0: not served here.
    owned: Box<[AtomicI64]>,
    /// The end of the term on the monotonic clock (`mono`, precise ns): no number after it
    /// until a renewal is confirmed.
    serve_until_ns: AtomicU64,
    /// [`mono::slack_ns`], read once: the check on every call is then a load and a clock read.
    slack_ns: u64,
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
        Gate::with(GateOf::Member(member))
    }

    /// The table's gate: every set, once [`Gate::serve_all`] and a term.
    pub(crate) fn table() -> Gate {
        Gate::with(GateOf::Table)
    }

    fn with(of: GateOf) -> Gate {
        Gate {
            member: match of {
                GateOf::Member(m) => m,
                GateOf::Table => 0,
            },
            of,
            owned: (0..SETS).map(|_| AtomicI64::new(0)).collect(),
            serve_until_ns: AtomicU64::new(0),
            slack_ns: mono::slack_ns(),
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

    /// Extends the term to `until` (never shortens it).
    pub(crate) fn extend(&self, until: Instant) {
        let until = mono::ns_of(until);
        self.serve_until_ns.fetch_max(until, Ordering::AcqRel);
    }

    /// Ends the term now: nothing is served until the next confirmed renewal.
    pub(crate) fn lapse(&self) {
        self.serve_until_ns.store(0, Ordering::Release);
    }

    /// Whether the term runs now: the coarse clock says so when the term's end is more than its
    /// slack away (a read of a few ns), else the precise clock decides (`mono`).
    #[inline(always)]
    pub(crate) fn in_term(&self) -> bool {
        let until = self.serve_until_ns.load(Ordering::Acquire);
        mono::coarse_ns().saturating_add(self.slack_ns) < until || self.in_term_precisely(until)
    }

    /// The last two ticks of a term: the precise clock decides (out of line, as rare).
    #[cold]
    #[inline(never)]
    fn in_term_precisely(&self, until: u64) -> bool {
        mono::precise_ns() < until
    }

    /// How long the term still runs (zero once lapsed).
    pub(crate) fn term_left(&self) -> Duration {
        let until = self.serve_until_ns.load(Ordering::Acquire);
        Duration::from_nanos(until.saturating_sub(mono::precise_ns()))
    }

    /// The generation set `set` is served at here (0: not served).
    pub(crate) fn served(&self, set: u32) -> i64 {
        self.owned[set as usize].load(Ordering::Acquire)
    }

    /// Serves `set` at `generation` from now on.
    pub(crate) fn serve(&self, set: u32, generation: i64) {
        self.owned[set as usize].store(generation.max(1), Ordering::Release);
    }

    /// Serves every set (the table's gate, its lease taken).
    pub(crate) fn serve_all(&self) {
        for set in 0..SETS {
            self.serve(set, 1);
        }
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

    #[cold]
    fn lapsed(&self, key: &SeqKey) -> SeqError {
        self.refused_lapsed.fetch_add(1, Ordering::Relaxed);
        match self.of {
            GateOf::Member(member) => SeqError::Lapsed {
                key: key.to_string(),
                member,
            },
            GateOf::Table => SeqError::TableLapsed {
                key: key.to_string(),
            },
        }
    }

    /// Passes when `set` (of `key`, named in the errors) is served here within the term; else
    /// says who serves it.
    #[inline]
    pub(crate) fn check(&self, set: u32, key: &SeqKey) -> Result<(), SeqError> {
        if self.served(set) != 0 && self.in_term() {
            return Ok(());
        }
        Err(self.refusal(set, key))
    }

    /// Why a call on `set` is refused: out of its term, or who serves the set instead. Kept
    /// out of line: the calls that pass never carry its code.
    #[cold]
    #[inline(never)]
    fn refusal(&self, set: u32, key: &SeqKey) -> SeqError {
        match self.check_slow(set, key) {
            Err(e) => e,
            // Renewed (or taken) since the check: refused as out of its term all the same,
            // which the caller retries.
            Ok(()) => self.lapsed(key),
        }
    }

    fn check_slow(&self, set: u32, key: &SeqKey) -> Result<(), SeqError> {
        if self.served(set) != 0 {
            if self.in_term() {
                return Ok(());
            }
            return Err(self.lapsed(key));
        }
        if self.of == GateOf::Table {
            // Stopped after the table's lease was lost: served again once it is taken back.
            return Err(self.lapsed(key));
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
