//! The issuer (Vesta's `IdService`): a generator plus the machine ID it may use, with explain,
//! make and trans_time beside it. Generation stays lock-free; lease keeping, when there is a
//! lease, runs on a background thread owned by the issuer and stopped when it is dropped.

mod start;
#[cfg(test)]
mod tests;

use std::sync::{Arc, Mutex, PoisonError};

use chrono::{DateTime, Utc};
use vesta_core::{
    Clock, Epoch, Explanation, FieldError, FieldValues, GenError, Generator, IdBatch, Layout,
    MachinePools,
};

use crate::clock::SystemClock;
use crate::config::{ConfigError, IssuerConfig, MachinePlan, RequireSync};
use crate::error::{IssueError, ShutdownError, StartError};
use crate::lease::leased_generator::LeasedGenerator;
#[cfg(feature = "tokio")]
use crate::lease::worker::LeaseThread;
use crate::status::{LeaseState, Status};

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
    leased: Arc<LeasedGenerator<C>>,
    config: IssuerConfig,
    /// The machine plan it started on.
    plan: MachinePlan,
    /// The lease thread (ZooKeeper, or a static ID's state file), if any; taken by `shutdown`.
    lease_thread: Mutex<Option<LeaseThread>>,
    /// A static machine ID held on this host without a state file
    /// ([`hold_on_host`](crate::config::IssuerConfigBuilder::hold_on_host)); let go by
    /// `shutdown`.
    #[cfg(feature = "state-file")]
    host_hold: Mutex<Option<start::HeldOnHost>>,
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
    pub fn start_with_clock(config: IssuerConfig, clock: C) -> Result<Self, StartError> {
        start::check_clock_sync(&config, &clock)?;
        let plan = config.plan()?;
        let generator = Generator::new(config.generator_config(plan.first_machine())?, clock)
            .map_err(ConfigError::from)?;
        let issuer = start::with_keeper(config, plan, generator)?;
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

    /// Stops issuing and gives the machine ID back: with a lease, writes the final mark and
    /// deletes the claim so the ID is free at once. Idempotent; also done on drop. Afterwards
    /// every call fails with [`IssueError::Unavailable`].
    pub fn shutdown(&self) -> Result<(), ShutdownError> {
        let thread = self
            .lease_thread
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        match thread {
            Some(mut thread) => thread.stop(),
            None => {
                if self.leased.with_info(|info| info.state) == LeaseState::Static {
                    self.leased
                        .fence(LeaseState::Released, "the issuer was shut down");
                }
                #[cfg(feature = "state-file")]
                if let Some(held) = self
                    .host_hold
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .take()
                {
                    held.release(&self.leased.generator)
                        .map_err(|e| ShutdownError(e.to_string()))?;
                }
                Ok(())
            }
        }
    }

    /// The next ID.
    #[inline]
    pub fn next_id(&self) -> Result<u64, IssueError> {
        self.leased
            .generator
            .next_id()
            .map_err(|e| self.issue_error(e))
    }

    /// The next ID, or an error instead of waiting for the next time unit.
    #[inline]
    pub fn try_next_id(&self) -> Result<u64, IssueError> {
        self.leased
            .generator
            .try_next_id()
            .map_err(|e| self.issue_error(e))
    }

    /// `n` IDs as contiguous runs; may wait for later time units when `n` is large.
    pub fn next_ids(&self, n: u64) -> Result<IdBatch, IssueError> {
        self.leased
            .generator
            .next_ids(n)
            .map_err(|e| self.issue_error(e))
    }

    /// Up to `n` IDs that the current time unit still has (at least one), without waiting: the
    /// fast path of [`AsyncIssuer`](crate::AsyncIssuer), which parks a caller that gets
    /// `WouldBlock` in its waiting list instead of blocking a worker thread.
    pub fn try_next_ids(&self, n: u64) -> Result<IdBatch, IssueError> {
        self.leased
            .generator
            .try_next_ids(n)
            .map_err(|e| self.issue_error(e))
    }

    /// Test hook (feature `test-util`): stops issuing with `reason`, as a lease event would
    /// (lease lost, start guard pending), to test how a server answers a fenced issuer. A lease
    /// thread, if any, lifts it at its next renewal.
    #[cfg(any(test, feature = "test-util"))]
    pub fn fence_for_test(&self, state: LeaseState, reason: &str) {
        self.leased.fence(state, reason);
    }

    /// Test hook (feature `test-util`): lets a fenced issuer issue again, without a deadline,
    /// in `state` (e.g. `Held` after a test fenced it). Never for a leased issuer in use: the
    /// lease alone decides when it may issue.
    #[cfg(any(test, feature = "test-util"))]
    pub fn resume_for_test(&self, state: LeaseState) {
        self.leased.resume(state, u64::MAX, String::new());
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

    /// The values this issuer puts in every ID besides time and seq: its machine ID and, where
    /// the layout records it, its genMethod (and for Vesta the version and type). The base a
    /// `make` starts from.
    pub fn own_values(&self) -> FieldValues {
        let g = &self.leased.generator;
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
        let layout = self.leased.generator.layout();
        if time > layout.max_time() {
            return Err(FieldError::out_of_range("time", time, 0, layout.max_time()));
        }
        Ok(layout.datetime_of(time))
    }

    /// A snapshot of the machine ID, lease, high-water mark and counters.
    pub fn status(&self) -> Status {
        let g = &self.leased.generator;
        let c = g.config();
        // The generator's deadline may pass a moment before the lease thread records it.
        let lease = self.leased.info_at(g.clock().now_ms());
        Status {
            machine: g.machine(),
            gen_method: c.gen_method,
            layout: g.layout().clone(),
            lease,
            last_issued_time: g.last_issued_time(),
            end_of_life_ms: g.layout().end_of_life_ms(),
            end_of_life_margin_ms: self.config.id.end_of_life_margin_ms(),
            generator: g.stats(),
            clock_sync: match self.config.clock.require_sync {
                RequireSync::Off => None,
                _ => g.clock().sync(),
            },
        }
    }

    /// The epoch in use.
    pub fn epoch(&self) -> Epoch {
        self.layout().epoch()
    }

    /// The machine-ID pools in force: the embed/server split of the layout's node field.
    pub fn pools(&self) -> MachinePools {
        self.leased.generator.config().pools()
    }

    /// The configuration the issuer started from.
    pub fn config(&self) -> &IssuerConfig {
        &self.config
    }

    /// The machine plan it started on ([`IssuerConfig::plan`]): how the machine ID is chosen,
    /// what keeps its mark, whether it is held on this host. The ID in use is the status's.
    pub fn plan(&self) -> &MachinePlan {
        &self.plan
    }

    /// The layout of the issued IDs (fields, capacity per unit, time span, epoch).
    pub fn layout(&self) -> &Layout {
        self.leased.generator.layout()
    }

    /// The clock this issuer reads.
    pub fn clock(&self) -> &C {
        self.leased.generator.clock()
    }

    /// When the unit after the last issued one starts (ms since the Unix epoch): where the
    /// async waiting list sleeps until.
    #[cfg(feature = "tokio")]
    pub(crate) fn next_unit_start_ms(&self) -> u64 {
        self.leased.generator.next_unit_start_ms()
    }

    #[cold]
    fn issue_error(&self, e: GenError) -> IssueError {
        match e {
            GenError::Fenced { .. } => IssueError::Unavailable(self.leased.refusal_reason()),
            other => IssueError::Refused(other),
        }
    }
}

impl<C: Clock + 'static> Drop for Issuer<C> {
    fn drop(&mut self) {
        if let Err(e) = self.shutdown() {
            tracing::warn!(error = %e, "issuer dropped without a clean shutdown");
        }
    }
}
