//! The issuer (Vesta's `IdService`): a generator plus the machine ID it may use, with explain,
//! make and trans_time beside it. Generation stays lock-free; lease keeping, when there is a
//! lease, runs on a background thread owned by the issuer and stopped when it is dropped.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use chrono::{DateTime, Utc};
use vesta_core::{Clock, Epoch, Explanation, FieldError, GenError, Generator, IdBatch, IdFields};

use crate::clock::SystemClock;
use crate::config::{ConfigError, IssuerConfig, MachineSource};
use crate::error::{IssueError, ShutdownError, StartError};
use crate::lease::LeaseSettings;
use crate::lease::keeper::KeeperHandle;
use crate::static_state::{self, StateKeeper};
use crate::status::{LeaseInfo, LeaseState, Status};

/// State shared between the issuer and whatever keeps its machine ID.
#[derive(Debug)]
pub struct Shared<C> {
    /// The generator; its machine ID and floor change only through lease events.
    pub generator: Generator<C>,
    lease: Mutex<LeaseInfo>,
}

impl<C: Clock> Shared<C> {
    /// The current lease info.
    pub fn lease(&self) -> MutexGuard<'_, LeaseInfo> {
        self.lease.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Stops issuing at once and records why (lease lost, start guard pending, shut down).
    pub fn fence(&self, state: LeaseState, reason: impl Into<String>) {
        self.generator.fence();
        let mut lease = self.lease();
        if state == LeaseState::Fenced && lease.state != LeaseState::Fenced {
            lease.fence_events += 1;
        }
        lease.state = state;
        lease.reason = Some(reason.into());
    }

    /// Allows issuing until the clock reads `deadline_ms` (`u64::MAX`: no deadline).
    pub fn resume(&self, state: LeaseState, deadline_ms: u64) {
        let mut lease = self.lease();
        lease.state = state;
        lease.reason = None;
        drop(lease);
        self.generator.set_deadline_ms(deadline_ms);
    }
}

/// Issues IDs in this process. Cheap to share: wrap it in an `Arc` or lend `&Issuer`.
#[derive(Debug)]
pub struct Issuer<C: Clock + 'static = SystemClock> {
    shared: Arc<Shared<C>>,
    config: IssuerConfig,
    /// The background thread (lease keeper or state-file writer), if any; taken by `shutdown`.
    keeper: Mutex<Option<Background>>,
}

/// The issuer's background work.
#[derive(Debug)]
enum Background {
    /// Keeps a ZooKeeper lease.
    Lease(KeeperHandle),
    /// Keeps the state file of a static machine ID.
    StateFile(StateKeeper),
}

impl Issuer<SystemClock> {
    /// Starts an issuer on the system clock (coarse for max-peak, precise for milliseconds).
    pub fn start(config: IssuerConfig) -> Result<Self, StartError> {
        let clock = SystemClock::for_layout(config.id.id_type.layout());
        Self::start_with_clock(config, clock)
    }
}

impl<C: Clock + 'static> Issuer<C> {
    /// Starts an issuer reading time from `clock` (tests pass a manual clock).
    pub fn start_with_clock(config: IssuerConfig, clock: C) -> Result<Self, StartError> {
        let issuer = match config.machine.source {
            MachineSource::Static => Self::start_static(config, clock),
            MachineSource::Zookeeper => Self::start_leased(config, clock),
        }?;
        issuer.warn_near_end_of_life();
        Ok(issuer)
    }

    /// Logs a warning if the layout ends within `id.end_of_life_margin_days`; returns it. The
    /// servers call it again once a day.
    pub fn warn_near_end_of_life(&self) -> Option<String> {
        let now = self.shared.generator.clock().now_ms();
        let warning = self.status().end_of_life_warning(now)?;
        tracing::warn!("{warning}");
        Some(warning)
    }

    /// A static machine ID; with `machine.state_file`, the file's mark is the floor, the start
    /// guard waits the clock past it, and a thread keeps the file current.
    fn start_static(config: IssuerConfig, clock: C) -> Result<Self, StartError> {
        let machine = config.static_machine()?;
        let mut gen_config = config.generator_config(machine)?;
        let layout = gen_config.id_type.layout();
        let inherited = match &config.machine.state_file {
            Some(path) => static_state::inherited(path, machine, layout, gen_config.epoch)?,
            None => None,
        };
        if let Some(inherited) = inherited {
            let max_wait = Duration::from_millis(config.zookeeper.start_guard_max_wait_ms);
            static_state::pass_guard(&clock, machine, inherited.target_ms, max_wait)?;
            gen_config.floor = Some(inherited.floor);
        }
        let generator = Generator::new(gen_config, clock).map_err(ConfigError::from)?;
        let shared = Arc::new(Shared {
            generator,
            lease: Mutex::new(LeaseInfo::fixed()),
        });
        let keeper = match &config.machine.state_file {
            Some(path) => {
                let interval = Duration::from_millis(config.zookeeper.report_interval_ms.max(10));
                Some(Background::StateFile(StateKeeper::start(
                    shared.clone(),
                    path.clone(),
                    interval,
                )?))
            }
            None => None,
        };
        Ok(Issuer {
            shared,
            config,
            keeper: Mutex::new(keeper),
        })
    }

    /// Leases the machine ID from ZooKeeper: the generator starts fenced on a placeholder ID
    /// and the keeper thread switches it to the claimed one once the start guard has passed.
    fn start_leased(config: IssuerConfig, clock: C) -> Result<Self, StartError> {
        let settings = LeaseSettings::from_config(&config)?;
        let placeholder = *settings.pool.start();
        let generator = Generator::new(config.generator_config(placeholder)?, clock)
            .map_err(ConfigError::from)?;
        generator.fence();
        let shared = Arc::new(Shared {
            generator,
            lease: Mutex::new(LeaseInfo {
                state: LeaseState::Acquiring,
                reason: Some("claiming a machine ID from ZooKeeper".into()),
                ..LeaseInfo::fixed()
            }),
        });
        let keeper = KeeperHandle::spawn(shared.clone(), settings)?;
        Ok(Issuer {
            shared,
            config,
            keeper: Mutex::new(Some(Background::Lease(keeper))),
        })
    }

    /// Stops issuing and gives the machine ID back: with a lease, writes the final mark and
    /// deletes the claim so the ID is free at once. Idempotent; also done on drop. Afterwards
    /// every call fails with [`IssueError::Unavailable`].
    pub fn shutdown(&self) -> Result<(), ShutdownError> {
        let keeper = self
            .keeper
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        match keeper {
            Some(Background::Lease(mut k)) => k.stop(),
            Some(Background::StateFile(mut k)) => k.stop(),
            None => {
                if self.shared.lease().state == LeaseState::Static {
                    self.shared
                        .fence(LeaseState::Released, "the issuer was shut down");
                }
                Ok(())
            }
        }
    }

    /// The next ID.
    #[inline]
    pub fn next_id(&self) -> Result<u64, IssueError> {
        self.shared
            .generator
            .next_id()
            .map_err(|e| self.issue_error(e))
    }

    /// The next ID, or an error instead of waiting for the next time unit.
    #[inline]
    pub fn try_next_id(&self) -> Result<u64, IssueError> {
        self.shared
            .generator
            .try_next_id()
            .map_err(|e| self.issue_error(e))
    }

    /// `n` IDs as contiguous runs; may wait for later time units when `n` is large.
    pub fn next_ids(&self, n: u64) -> Result<IdBatch, IssueError> {
        self.shared
            .generator
            .next_ids(n)
            .map_err(|e| self.issue_error(e))
    }

    /// Up to `n` IDs that the current time unit still has (at least one), without waiting; for
    /// async servers, which sleep on `WouldBlock` instead of blocking a worker thread.
    pub fn try_next_ids(&self, n: u64) -> Result<IdBatch, IssueError> {
        self.shared
            .generator
            .try_next_ids(n)
            .map_err(|e| self.issue_error(e))
    }

    /// The state shared with the lease keeper (fence, resume, lease info).
    pub fn shared(&self) -> &Arc<Shared<C>> {
        &self.shared
    }

    /// Explains any ID with this issuer's epoch.
    pub fn explain(&self, id: u64) -> Explanation {
        Explanation::new(id, self.config.id.epoch)
    }

    /// Makes an ID from chosen fields (to repair data); rejects out-of-range fields.
    pub fn make(&self, fields: &IdFields) -> Result<u64, FieldError> {
        fields.encode()
    }

    /// Fields as this issuer would issue them at `time` with `seq`: the base for `make`.
    pub fn own_fields(&self, time: u64, seq: u64) -> IdFields {
        let c = self.shared.generator.config();
        IdFields {
            version: c.version,
            id_type: c.id_type,
            gen_method: c.gen_method,
            time,
            seq,
            machine: self.shared.generator.machine(),
        }
    }

    /// The instant at which time value `time` of this issuer's layout starts.
    pub fn trans_time(&self, time: u64) -> Result<DateTime<Utc>, FieldError> {
        let layout = self.shared.generator.layout();
        if time > layout.max_time() {
            return Err(FieldError::OutOfRange {
                field: "time",
                value: time,
                min: 0,
                max: layout.max_time(),
                context: "",
            });
        }
        Ok(self.epoch().datetime_of(layout, time))
    }

    /// A snapshot of the machine ID, lease, high-water mark and counters.
    pub fn status(&self) -> Status {
        let g = &self.shared.generator;
        let c = g.config();
        let mut lease = self.shared.lease().clone();
        // The generator's deadline may pass a moment before the keeper's watchdog records it.
        if lease.state.can_issue() && g.clock().now_ms() >= g.deadline_ms() {
            lease.reason = Some(unconfirmed_reason(lease.state));
            lease.state = LeaseState::Fenced;
        }
        Status {
            machine: g.machine(),
            gen_method: c.gen_method,
            id_type: c.id_type,
            epoch: c.epoch,
            lease,
            last_issued_time: g.last_issued_time(),
            end_of_life_ms: g.layout().end_of_life_ms(c.epoch),
            end_of_life_margin_ms: self.config.id.end_of_life_margin_ms(),
            generator: g.stats(),
        }
    }

    /// The epoch in use.
    pub fn epoch(&self) -> Epoch {
        self.config.id.epoch
    }

    /// The configuration the issuer started from.
    pub fn config(&self) -> &IssuerConfig {
        &self.config
    }

    /// The generator (for benchmarks and tests).
    pub fn generator(&self) -> &Generator<C> {
        &self.shared.generator
    }

    #[cold]
    fn issue_error(&self, e: GenError) -> IssueError {
        match e {
            GenError::Fenced { .. } => {
                let lease = self.shared.lease();
                let reason = lease
                    .reason
                    .clone()
                    .unwrap_or_else(|| unconfirmed_reason(lease.state));
                IssueError::Unavailable(reason)
            }
            other => IssueError::Refused(other),
        }
    }
}

/// Why issuing stopped when the generator's deadline passed before anyone recorded a reason.
fn unconfirmed_reason(state: LeaseState) -> String {
    match state {
        LeaseState::Held => "the machine-ID lease was not confirmed by ZooKeeper before its \
                             deadline; waiting for confirmation"
            .into(),
        LeaseState::Static => {
            "the state file was not renewed before its deadline; waiting for the next write".into()
        }
        state => format!("the machine-ID lease is {state}"),
    }
}

impl<C: Clock + 'static> Drop for Issuer<C> {
    fn drop(&mut self) {
        if let Err(e) = self.shutdown() {
            tracing::warn!(error = %e, "issuer dropped without a clean shutdown");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vesta_core::{GenMethod, ManualClock};

    const T0: u64 = 1_700_000_000_000;

    #[test]
    fn static_issuer_issues_explains_and_makes() {
        let clock = Arc::new(ManualClock::new(T0));
        let issuer = Issuer::start_with_clock(IssuerConfig::default(), clock).unwrap();
        let id = issuer.next_id().unwrap();
        let x = issuer.explain(id);
        assert_eq!(x.fields.machine, 0);
        assert_eq!(x.fields.gen_method, GenMethod::Embed);
        assert_eq!(issuer.make(&x.fields), Ok(id));
        assert_eq!(
            issuer.own_fields(x.fields.time, x.fields.seq).encode(),
            Ok(id)
        );
        assert_eq!(
            issuer.trans_time(x.fields.time).unwrap().timestamp_millis() as u64 / 1000,
            T0 / 1000
        );
        assert!(issuer.status().can_issue());
    }

    #[test]
    fn an_issuer_near_its_layouts_end_warns() {
        let issuer =
            Issuer::start_with_clock(IssuerConfig::default(), ManualClock::new(T0)).unwrap();
        assert_eq!(
            issuer.warn_near_end_of_life(),
            None,
            "2049 is far from 2023"
        );
        let mut config = IssuerConfig::default();
        config.id.epoch = "1994-01-01T00:00:00Z".parse().unwrap();
        let issuer = Issuer::start_with_clock(config.clone(), ManualClock::new(T0)).unwrap();
        let warning = issuer.warn_near_end_of_life().unwrap();
        assert!(
            warning.contains("max-peak layout's time field is full at 2028-01-10"),
            "{warning}"
        );
        assert!(warning.contains("1517 days (4.2 years) left"), "{warning}");
        config.id.end_of_life_margin_days = 1000;
        let issuer = Issuer::start_with_clock(config.clone(), ManualClock::new(T0)).unwrap();
        assert_eq!(issuer.warn_near_end_of_life(), None);
        config.id.end_of_life_margin_days = 40_000;
        let err = Issuer::start_with_clock(config, ManualClock::new(T0))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("id.end_of_life_margin_days 40000 is out of range: allowed 0..=36525"),
            "{err}"
        );
    }

    #[test]
    fn fenced_issuer_says_why_and_resumes() {
        let issuer =
            Issuer::start_with_clock(IssuerConfig::default(), ManualClock::new(T0)).unwrap();
        issuer.shared().fence(LeaseState::Fenced, "lease lost");
        assert_eq!(
            issuer.next_id(),
            Err(IssueError::Unavailable("lease lost".into()))
        );
        assert!(!issuer.status().can_issue());
        assert_eq!(issuer.status().lease.fence_events, 1);
        issuer.shared().resume(LeaseState::Held, u64::MAX);
        assert!(issuer.next_id().is_ok());
    }

    #[test]
    fn machine_outside_the_pool_is_refused() {
        let mut config = IssuerConfig::default();
        config.machine.id = Some(924);
        let err = Issuer::start_with_clock(config, ManualClock::new(T0))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("machine 924 is outside the embed pool 0..=923"),
            "{err}"
        );
    }
    #[test]
    fn static_state_file_floors_a_restart_and_guards_the_clock() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("static.state");
        let mut c = IssuerConfig::default();
        c.machine.state_file = Some(path.clone());
        c.zookeeper.report_interval_ms = 50;
        let a = Issuer::start_with_clock(c.clone(), Arc::new(ManualClock::new(T0))).unwrap();
        let a_last = a.next_ids(1000).unwrap().to_vec()[999];
        a.shutdown().unwrap();
        assert_eq!(a.status().lease.state, LeaseState::Released);
        let rec = crate::state_file::read(&path).unwrap().unwrap();
        assert!(rec.clean);
        assert_eq!((rec.machine, rec.source.as_str()), (0, "static"));
        assert_eq!(rec.mark_ms, T0 + 1000, "the end of the last issued second");

        // The clock 2 s back: the guard waits (within 5 s), then issues above A.
        let clock = Arc::new(ManualClock::new(T0 - 2000));
        let b = Issuer::start_with_clock(c.clone(), clock.clone()).unwrap();
        assert!(clock.waits() >= 1);
        assert!(b.next_id().unwrap() > a_last);
        drop(b);

        // A minute back: refused, naming both times.
        let err = Issuer::start_with_clock(c, ManualClock::new(T0 - 60_000)).unwrap_err();
        assert!(
            matches!(err, StartError::ClockBehindMark { machine: 0, .. }),
            "{err}"
        );
    }

    #[test]
    fn static_state_file_left_by_a_crash_covers_what_was_promised() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("static.state");
        let mut c = IssuerConfig::default();
        c.id.id_type = vesta_core::IdType::MinGranularity;
        c.machine.state_file = Some(path.clone());
        c.zookeeper.report_interval_ms = 50;
        let a = Issuer::start_with_clock(c.clone(), Arc::new(ManualClock::new(T0))).unwrap();
        let a_ids = a.next_ids(5000).unwrap().to_vec();
        // What a kill -9 would leave behind: the running issuer's last (unclean) record.
        std::thread::sleep(std::time::Duration::from_millis(120));
        let crashed = crate::state_file::read(&path).unwrap().unwrap();
        assert!(!crashed.clean);
        assert!(
            crashed.mark_ms >= T0 + 150,
            "the promise reaches three intervals ahead"
        );
        drop(a);
        crate::state_file::write(&path, &crashed).unwrap();

        let clock = Arc::new(ManualClock::new(T0));
        let b = Issuer::start_with_clock(c, clock.clone()).unwrap();
        assert!(clock.waits() >= 1, "waited out the promise");
        let first = b.next_id().unwrap();
        assert!(first > *a_ids.last().unwrap());
        let first_ms = Epoch::VESTA.unix_ms() + b.explain(first).fields.time;
        assert!(
            first_ms >= crashed.mark_ms,
            "issued inside the crashed holder's promise"
        );
    }
}
