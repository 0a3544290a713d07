//! The issuer (Vesta's `IdService`): a generator per machine ID it may use (one, or
//! `machine.ids` of them), with explain, make and trans_time beside it. Generation stays
//! lock-free; lease keeping, when there is a lease, runs on a background thread per machine ID
//! owned by the issuer and stopped when it is dropped. With several machine IDs, calls are
//! spread over them (`spread`); each is started, kept and fenced alone (`member`).

mod member;
mod spread;
#[cfg(test)]
mod spread_tests;
mod start;
mod status;
#[cfg(test)]
mod tests;

use chrono::{DateTime, Utc};
use vesta_core::{
    Clock, Epoch, Explanation, FieldError, FieldValues, Generator, IdBatch, Layout, MachinePools,
};

use crate::clock::SystemClock;
use crate::config::{IssuerConfig, MachinePlan, RequireSync};
use crate::error::{IssueError, ShutdownError, StartError};
#[cfg(feature = "tokio")]
use crate::lease::worker::LeaseThread;
#[cfg(any(test, feature = "test-util"))]
use crate::status::LeaseState;
use crate::status::{MachineStatus, Status};
use member::Member;

/// Without tokio there is no lease thread: an issuer never holds one.
#[cfg(not(feature = "tokio"))]
#[derive(Debug)]
pub(crate) enum LeaseThread {}

#[cfg(not(feature = "tokio"))]
impl LeaseThread {
    fn stop(&mut self) -> Result<(), ShutdownError> {
        match *self {}
    }
}

/// Issues IDs in this process. Cheap to share: wrap it in an `Arc` or lend `&Issuer`.
#[derive(Debug)]
pub struct Issuer<C: Clock + 'static = SystemClock> {
    /// One per machine ID, in slot order (at least one): its generator, lease and hold.
    members: Box<[Member<C>]>,
    config: IssuerConfig,
    /// The machine plan it started on.
    plan: MachinePlan,
}

impl Issuer<SystemClock> {
    /// Starts an issuer on the system clock (coarse for units of a second or more, precise
    /// for milliseconds).
    pub fn start(config: IssuerConfig) -> Result<Self, StartError> {
        let layout = config.layout()?;
        let clock = match config.clock.read {
            crate::config::ClockRead::Precise => SystemClock::precise(),
            _ => SystemClock::for_layout_within(
                &layout,
                config
                    .clock
                    .rollback_tolerance_ms
                    .unwrap_or(layout.default_rollback_tolerance_ms()),
            ),
        };
        Self::start_with_clock(config, clock)
    }
}

impl<C: Clock + 'static> Issuer<C> {
    /// Starts an issuer reading time from `clock` (tests pass a manual clock): the machine
    /// plan decided once ([`IssuerConfig::plan`]), then its keeper started.
    ///
    /// With several machine IDs (`machine.ids`) each gets a generator on a handle of `clock`
    /// ([`Clock::share`]: the system clock and an `Arc` of any clock have one; a clock without
    /// one is refused) and is started alone, all side by side; if one fails, those started are
    /// given back and the start fails with its error.
    pub fn start_with_clock(config: IssuerConfig, clock: C) -> Result<Self, StartError> {
        start::check_clock_sync(&config, &clock)?;
        let plan = config.plan()?;
        let members = start::members(&config, &plan, clock)?;
        let issuer = Issuer {
            members,
            config,
            plan,
        };
        issuer.warn_near_end_of_life();
        Ok(issuer)
    }

    /// Logs a warning if the layout ends within `id.end_of_life_margin_days`; returns it. The
    /// servers call it again once a day.
    pub fn warn_near_end_of_life(&self) -> Option<String> {
        let now = self.clock().now_ms();
        let warning = self.status().end_of_life_warning(now)?;
        tracing::warn!("{warning}");
        Some(warning)
    }

    /// Stops issuing and gives the machine IDs back: with a lease, writes the final mark and
    /// deletes the claim so the ID is free at once. Idempotent; also done on drop. Afterwards
    /// every call fails with [`IssueError::Unavailable`]. Several machine IDs are given back
    /// side by side; the first failure is returned.
    pub fn shutdown(&self) -> Result<(), ShutdownError> {
        match &*self.members {
            [only] => only.shutdown(),
            many => std::thread::scope(|s| {
                let stops: Vec<_> = many.iter().map(|m| s.spawn(|| m.shutdown())).collect();
                // Every stop is joined before the first failure is returned.
                let stopped: Vec<_> = stops
                    .into_iter()
                    .map(|stop| {
                        stop.join().unwrap_or_else(|_| {
                            Err(ShutdownError("giving back a machine ID panicked".into()))
                        })
                    })
                    .collect();
                stopped
                    .into_iter()
                    .collect::<Result<Vec<()>, _>>()
                    .map(drop)
            }),
        }
    }

    /// The next ID.
    #[inline]
    pub fn next_id(&self) -> Result<u64, IssueError> {
        match &*self.members {
            [only] => only.generator().next_id().map_err(|e| only.issue_error(e)),
            many => spread::one(many, true),
        }
    }

    /// The next ID, or an error instead of waiting for the next time unit.
    #[inline]
    pub fn try_next_id(&self) -> Result<u64, IssueError> {
        match &*self.members {
            [only] => only
                .generator()
                .try_next_id()
                .map_err(|e| only.issue_error(e)),
            many => spread::one(many, false),
        }
    }

    /// `n` IDs as contiguous runs; may wait for later time units when `n` is large. With
    /// several machine IDs, runs of each (each run increasing, IDs of one machine ID
    /// increasing across its runs).
    pub fn next_ids(&self, n: u64) -> Result<IdBatch, IssueError> {
        match &*self.members {
            [only] => only
                .generator()
                .next_ids(n)
                .map_err(|e| only.issue_error(e)),
            many => spread::exactly(many, n),
        }
    }

    /// Up to `n` IDs that the current time unit still has (at least one), without waiting: the
    /// fast path of [`AsyncIssuer`](crate::AsyncIssuer), which parks a caller that gets
    /// `WouldBlock` in its waiting list instead of blocking a worker thread. With several
    /// machine IDs, from every one whose unit has room (`WouldBlock` once none has).
    pub fn try_next_ids(&self, n: u64) -> Result<IdBatch, IssueError> {
        match &*self.members {
            [only] => only
                .generator()
                .try_next_ids(n)
                .map_err(|e| only.issue_error(e)),
            many => spread::some(many, n),
        }
    }

    /// Test hook (feature `test-util`): stops issuing with `reason`, as a lease event would
    /// (lease lost, start guard pending), to test how a server answers a fenced issuer. A lease
    /// thread, if any, lifts it at its next renewal.
    #[cfg(any(test, feature = "test-util"))]
    pub fn fence_for_test(&self, state: LeaseState, reason: &str) {
        for m in &self.members {
            m.leased.fence(state, reason);
        }
    }

    /// Test hook (feature `test-util`): [`fence_for_test`](Self::fence_for_test) for the
    /// machine ID in `slot` alone (0-based, in [`statuses`](Self::statuses)' order), as one
    /// lost lease of several would.
    #[cfg(any(test, feature = "test-util"))]
    pub fn fence_machine_for_test(&self, slot: usize, state: LeaseState, reason: &str) {
        self.members[slot].leased.fence(state, reason);
    }

    /// Test hook (feature `test-util`): lets a fenced issuer issue again, without a deadline,
    /// in `state` (e.g. `Held` after a test fenced it). Never for a leased issuer in use: the
    /// lease alone decides when it may issue.
    #[cfg(any(test, feature = "test-util"))]
    pub fn resume_for_test(&self, state: LeaseState) {
        for m in &self.members {
            m.leased.resume(state, u64::MAX, String::new());
        }
    }

    /// Explains any ID in this issuer's layout and epoch (for Vesta, either type).
    pub fn explain(&self, id: u64) -> Explanation {
        Explanation::new(id, self.layout())
    }

    /// Makes an ID of this issuer's layout from chosen fields (to repair data); rejects
    /// out-of-range fields and names the missing ones ([`Layout::make`]).
    pub fn make(&self, values: &FieldValues) -> Result<u64, FieldError> {
        self.layout().make(values)
    }

    /// The values this issuer puts in every ID besides time and seq: its (first) machine ID and, where
    /// the layout records it, its genMethod (and for Vesta the version and type). The base a
    /// `make` starts from.
    pub fn own_values(&self) -> FieldValues {
        let g = self.generator();
        let layout = g.layout();
        let mut values = FieldValues::new().with("node", g.machine());
        if layout.method_span().is_some() {
            values.set("genMethod", g.config().gen_method.code());
        }
        for f in layout.fields() {
            if let vesta_core::FieldKind::Fixed(v) = f.kind {
                values.set(f.name.clone(), v);
            }
        }
        values
    }

    /// The instant at which time value `time` of this issuer's layout starts.
    pub fn trans_time(&self, time: u64) -> Result<DateTime<Utc>, FieldError> {
        let layout = self.layout();
        if time > layout.max_time() {
            return Err(FieldError::out_of_range("time", time, 0, layout.max_time()));
        }
        Ok(layout.datetime_of(time))
    }

    /// A snapshot of the machine ID, lease, high-water mark and counters. With several
    /// machine IDs: the first one's ID, the lease of the first that may issue (else the
    /// first's), the highest mark, the counters summed, and each machine ID alone in
    /// [`Status::machines`].
    pub fn status(&self) -> Status {
        let g = self.generator();
        let now_ms = g.clock().now_ms();
        let machines: Vec<MachineStatus> = self
            .members
            .iter()
            .enumerate()
            .map(|(slot, m)| m.status(slot, now_ms))
            .collect();
        let c = g.config();
        Status {
            machine: machines[0].machine,
            gen_method: c.gen_method,
            layout: g.layout().clone(),
            lease: status::whole_lease(&machines),
            last_issued_time: machines
                .iter()
                .map(|m| m.last_issued_time)
                .max()
                .unwrap_or(0),
            end_of_life_ms: g.layout().end_of_life_ms(),
            end_of_life_margin_ms: self.config.id.end_of_life_margin_ms(),
            generator: status::summed_stats(&machines),
            clock_sync: match self.config.clock.require_sync {
                RequireSync::Off => None,
                _ => g.clock().sync(),
            },
            machines,
        }
    }

    /// How many machine IDs this issuer holds (`machine.ids`).
    pub fn machine_count(&self) -> usize {
        self.members.len()
    }

    /// The epoch in use.
    pub fn epoch(&self) -> Epoch {
        self.layout().epoch()
    }

    /// The machine-ID pools in force: the embed/server split of the layout's node field.
    pub fn pools(&self) -> MachinePools {
        self.generator().config().pools()
    }

    /// The configuration the issuer started from.
    pub fn config(&self) -> &IssuerConfig {
        &self.config
    }

    /// The machine plan it started on ([`IssuerConfig::plan`]): how the machine IDs are chosen,
    /// what keeps their marks, whether they are held on this host. The IDs in use are the
    /// status's.
    pub fn plan(&self) -> &MachinePlan {
        &self.plan
    }

    /// The layout of the issued IDs (fields, capacity per unit, time span, epoch).
    pub fn layout(&self) -> &Layout {
        self.generator().layout()
    }

    /// The clock this issuer reads.
    pub fn clock(&self) -> &C {
        self.generator().clock()
    }

    /// The first machine ID's generator: the layout, clock and config every member shares.
    fn generator(&self) -> &Generator<C> {
        self.members[0].generator()
    }

    /// When the unit after the last issued one starts (ms since the Unix epoch): where the
    /// async waiting list sleeps until. With several machine IDs, the earliest of those that
    /// may issue (all of them when none may).
    #[cfg(feature = "tokio")]
    pub(crate) fn next_unit_start_ms(&self) -> u64 {
        let now_ms = self.clock().now_ms();
        let issuing = self
            .members
            .iter()
            .map(Member::generator)
            .filter(|g| g.deadline_ms() > now_ms)
            .map(Generator::next_unit_start_ms)
            .min();
        issuing.unwrap_or_else(|| self.generator().next_unit_start_ms())
    }

    /// IDs all machine IDs issue per time unit together: what the waiting list hands out at a
    /// boundary.
    #[cfg(feature = "tokio")]
    pub(crate) fn capacity_per_unit(&self) -> u64 {
        self.layout()
            .capacity_per_unit()
            .saturating_mul(self.members.len() as u64)
    }
}

impl<C: Clock + 'static> Drop for Issuer<C> {
    fn drop(&mut self) {
        if let Err(e) = self.shutdown() {
            tracing::warn!(error = %e, "issuer dropped without a clean shutdown");
        }
    }
}
