//! The issuer (Vesta's `IdService`): a generator plus the machine ID it may use, with explain,
//! make and trans_time beside it. Generation stays lock-free; lease keeping, when there is a
//! lease, runs on a background thread owned by the issuer and stopped when it is dropped.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use chrono::{DateTime, Utc};
use vesta_core::{
    Clock, Epoch, Explanation, FieldError, FieldValues, GenError, Generator, IdBatch, Layout,
    MachinePools,
};

use crate::clock::SystemClock;
use crate::config::{ConfigError, IssuerConfig, MachineSource, RequireSync};
use crate::error::{IssueError, ShutdownError, StartError};
#[cfg(feature = "zookeeper")]
use crate::lease::LeaseSettings;
use crate::lease::leased_generator::LeasedGenerator;
use crate::lease::rules::guarded_floor;
#[cfg(feature = "state-file")]
use crate::lease::static_source::{StaticSource, StaticStart};
#[cfg(feature = "tokio")]
use crate::lease::worker::{Lease, LeaseSource, LeaseThread};
#[cfg(feature = "zookeeper")]
use crate::lease::zk_source::{self, ZkSource};
use crate::status::{LeaseInfo, LeaseState, Status};

/// Without tokio there is no lease thread: an issuer never holds one.
#[cfg(not(feature = "tokio"))]
#[derive(Debug)]
enum LeaseThread {}

#[cfg(not(feature = "tokio"))]
impl LeaseThread {
    fn stop(&mut self) -> Result<(), ShutdownError> {
        match *self {}
    }
}

#[cfg(not(feature = "state-file"))]
use crate::config::STATE_FILE_FEATURE;

/// Issues IDs in this process. Cheap to share: wrap it in an `Arc` or lend `&Issuer`.
#[derive(Debug)]
pub struct Issuer<C: Clock + 'static = SystemClock> {
    leased: Arc<LeasedGenerator<C>>,
    config: IssuerConfig,
    /// The lease thread (ZooKeeper, or a static ID's state file), if any; taken by `shutdown`.
    lease_thread: Mutex<Option<LeaseThread>>,
}

impl Issuer<SystemClock> {
    /// Starts an issuer on the system clock (coarse for units of a second or more, precise
    /// for milliseconds).
    pub fn start(config: IssuerConfig) -> Result<Self, StartError> {
        let clock = SystemClock::for_layout(&config.layout()?);
        Self::start_with_clock(config, clock)
    }
}

impl<C: Clock + 'static> Issuer<C> {
    /// Starts an issuer reading time from `clock` (tests pass a manual clock).
    pub fn start_with_clock(config: IssuerConfig, clock: C) -> Result<Self, StartError> {
        check_clock_sync(&config, &clock)?;
        let issuer = match config.machine.source {
            MachineSource::Static | MachineSource::Ordinal => Self::start_static(config, clock),
            MachineSource::Zookeeper => Self::start_leased(config, clock),
            MachineSource::Sql => Self::start_sql(config, clock),
            MachineSource::Etcd => Self::start_etcd(config, clock),
        }?;
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

    /// A static machine ID; with `machine.state_file`, a lease thread takes the file's mark as
    /// the floor (after the start guard) and keeps the file's promise ahead of issuing.
    fn start_static(config: IssuerConfig, clock: C) -> Result<Self, StartError> {
        if config.machine.db.is_some() {
            // Registered in the SQL lease table, so a second holder of the ID is refused.
            return Self::start_sql(config, clock);
        }
        if !config.etcd.endpoints.is_empty() {
            // Registered in etcd, likewise.
            return Self::start_etcd(config, clock);
        }
        if !config.zookeeper.connect.trim().is_empty() {
            // Registered in ZooKeeper, likewise.
            return Self::start_leased(config, clock);
        }
        let machine = config.static_machine()?;
        let mut generator_config = config.generator_config(machine)?;
        let Some(path) = config.machine.state_file.clone() else {
            // No mark anywhere: start after whatever an earlier run could have issued.
            generator_config.validate().map_err(ConfigError::from)?;
            let floor = guarded_floor(&clock, &generator_config, machine, 0, Duration::ZERO)?;
            generator_config.floor = Some(floor.time);
            let generator = Generator::new(generator_config, clock).map_err(ConfigError::from)?;
            return Ok(Issuer {
                leased: Arc::new(LeasedGenerator::new(generator, LeaseInfo::fixed())),
                config,
                lease_thread: Mutex::new(None),
            });
        };
        let generator = Generator::new(generator_config, clock).map_err(ConfigError::from)?;
        Self::start_with_state_file(config, generator, machine, path)
    }

    /// A static machine ID whose high-water mark lives in `path`.
    #[cfg(feature = "state-file")]
    fn start_with_state_file(
        config: IssuerConfig,
        generator: Generator<C>,
        machine: u64,
        path: std::path::PathBuf,
    ) -> Result<Self, StartError> {
        let interval = config.state_file_interval()?;
        let reason = format!("reading the state file {}", path.display());
        let source = StaticSource::new(StaticStart {
            path,
            machine,
            layout: generator.layout(),
            gen_method: config.gen_method,
            max_wait: config.start_guard_max_wait(),
            hold_wait: config.hold_wait,
        })?;
        let window = StaticSource::window(interval);
        Self::start_lease(config, generator, reason, (window, interval), source)
    }

    #[cfg(not(feature = "state-file"))]
    fn start_with_state_file(
        config: IssuerConfig,
        _: Generator<C>,
        _: u64,
        _: std::path::PathBuf,
    ) -> Result<Self, StartError> {
        config.validate()?;
        Err(ConfigError::Inconsistent(STATE_FILE_FEATURE.into()).into())
    }

    /// Leases the machine ID from ZooKeeper: the generator starts on a placeholder ID and the
    /// lease thread switches it to the claimed one once the start guard has passed.
    #[cfg(feature = "zookeeper")]
    fn start_leased(config: IssuerConfig, clock: C) -> Result<Self, StartError> {
        let settings = LeaseSettings::from_config(&config)?;
        let placeholder = settings.fixed.unwrap_or(*settings.pool.start());
        let generator = Generator::new(config.generator_config(placeholder)?, clock)
            .map_err(ConfigError::from)?;
        let timing = zk_source::initial_timing(&settings);
        let reason = match settings.fixed {
            Some(id) => format!("registering machine {id} in ZooKeeper"),
            None => "claiming a machine ID from ZooKeeper".to_owned(),
        };
        let counted_in = crate::lease::counted_in::CountedIn::of(generator.layout());
        let source = ZkSource::new(settings, generator.clock().now_ms(), counted_in)?;
        Self::start_lease(config, generator, reason, timing, source)
    }

    /// Leases the machine ID from the SQL database's `vesta_machine` table.
    #[cfg(feature = "sql")]
    fn start_sql(config: IssuerConfig, clock: C) -> Result<Self, StartError> {
        use crate::lease::sql_source::{self, SqlSource};
        let settings = config.sql_lease()?;
        let placeholder = settings.fixed.unwrap_or(*settings.pool.start());
        let generator = Generator::new(config.generator_config(placeholder)?, clock)
            .map_err(ConfigError::from)?;
        let timing = sql_source::timing(&settings);
        let reason = match settings.fixed {
            Some(id) => format!("registering machine {id} in the SQL database"),
            None => "claiming a machine ID from the SQL database".to_owned(),
        };
        let counted_in = crate::lease::counted_in::CountedIn::of(generator.layout());
        let source = SqlSource::new(settings, generator.clock().now_ms(), counted_in);

        Self::start_lease(config, generator, reason, timing, source)
    }

    #[cfg(not(feature = "sql"))]
    fn start_sql(config: IssuerConfig, _clock: C) -> Result<Self, StartError> {
        config.validate()?;
        Err(StartError::Lease(
            "machine.source = \"sql\" needs vesta-embed built with its feature `sql`".into(),
        ))
    }

    #[cfg(not(feature = "zookeeper"))]
    fn start_leased(config: IssuerConfig, _clock: C) -> Result<Self, StartError> {
        config.validate()?;
        Err(StartError::Lease(
            "machine.source = \"zookeeper\" needs vesta-embed built with its feature \
             `zookeeper`"
                .into(),
        ))
    }

    /// Leases the machine ID from etcd v3.
    #[cfg(feature = "etcd")]
    fn start_etcd(config: IssuerConfig, clock: C) -> Result<Self, StartError> {
        use crate::lease::etcd_source::{self, EtcdSource};
        let settings = crate::lease::EtcdSettings::from_config(&config)?;
        let placeholder = settings.fixed.unwrap_or(*settings.pool.start());
        let generator = Generator::new(config.generator_config(placeholder)?, clock)
            .map_err(ConfigError::from)?;
        let timing = etcd_source::initial_timing(&settings);
        let reason = match settings.fixed {
            Some(id) => format!("registering machine {id} in etcd"),
            None => "claiming a machine ID from etcd".to_owned(),
        };
        let counted_in = crate::lease::counted_in::CountedIn::of(generator.layout());
        let source = EtcdSource::new(settings, generator.clock().now_ms(), counted_in);
        Self::start_lease(config, generator, reason, timing, source)
    }

    #[cfg(not(feature = "etcd"))]
    fn start_etcd(config: IssuerConfig, _clock: C) -> Result<Self, StartError> {
        config.validate()?;
        Err(StartError::Lease(
            "machine.source = \"etcd\" needs vesta-embed built with its feature `etcd`".into(),
        ))
    }

    /// Runs `source` on a lease thread for `generator`, which stays fenced (`reason` says why)
    /// until the source holds the machine ID; `timing` is the first (window, beat).
    #[cfg(feature = "tokio")]
    #[cfg_attr(
        not(any(feature = "state-file", feature = "sql", feature = "etcd")),
        allow(dead_code)
    )]
    fn start_lease<S: LeaseSource<C>>(
        config: IssuerConfig,
        generator: Generator<C>,
        reason: String,
        (window, beat): (std::time::Duration, std::time::Duration),
        source: S,
    ) -> Result<Self, StartError> {
        generator.fence();
        let info = LeaseInfo {
            state: LeaseState::Acquiring,
            reason: Some(reason),
            ..LeaseInfo::fixed()
        };
        let leased = Arc::new(LeasedGenerator::new(generator, info));
        let thread = LeaseThread::spawn(Lease::new(leased.clone(), window, beat), source)?;
        Ok(Issuer {
            leased,
            config,
            lease_thread: Mutex::new(Some(thread)),
        })
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

/// `clock.require_sync`: asks the kernel (through the clock) whether the clock is synchronised
/// before anything is issued. An unsynchronised clock may be far ahead (a hardware clock set
/// wrong at boot): IDs issued then sit in the future, and once a time service steps the clock
/// back the issuer refuses for as long as the offset.
fn check_clock_sync<C: Clock>(config: &IssuerConfig, clock: &C) -> Result<(), StartError> {
    let policy = config.clock.require_sync;
    if policy == RequireSync::Off {
        return Ok(());
    }
    let began = std::time::Instant::now();
    let limit = std::time::Duration::from_millis(config.clock.sync_wait_ms);
    loop {
        let Some(sync) = clock.sync() else {
            return Ok(()); // unknown here: nothing to go by
        };
        if sync.synchronised {
            return Ok(());
        }
        let max_error_ms = sync.max_error_us / 1000;
        match policy {
            RequireSync::Wait if began.elapsed() < limit => {
                std::thread::sleep(std::time::Duration::from_millis(200).min(limit));
            }
            RequireSync::Wait => {
                return Err(StartError::ClockUnsynchronised {
                    max_error_ms,
                    waited_ms: began.elapsed().as_millis() as u64,
                });
            }
            _ => {
                tracing::warn!(
                    max_error_ms,
                    "the kernel reports the system clock unsynchronised (STA_UNSYNC): IDs carry \
                     its time; start a time service (clock.require_sync = \"wait\" waits for it)"
                );
                return Ok(());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vesta_core::{GenMethod, ManualClock};

    const T0: u64 = 1_700_000_000_000;

    /// `clock.require_sync` with an injected kernel status: `warn` starts and shows it, `wait`
    /// refuses after `sync_wait_ms` with one line naming the key, `off` does not ask, and a
    /// synchronised or unknown clock starts under every policy.
    #[test]
    fn an_unsynchronised_clock_is_shown_waited_for_or_refused() {
        let unsynced = vesta_core::ClockSync {
            synchronised: false,
            max_error_us: 16_000_000,
        };
        let with = |policy: RequireSync| {
            let mut c = IssuerConfig::default();
            c.clock.require_sync = policy;
            c.clock.sync_wait_ms = 300;
            c
        };
        let clock = Arc::new(ManualClock::new(T0));
        clock.set_sync(Some(unsynced));
        let issuer = Issuer::start_with_clock(with(RequireSync::Warn), clock.clone()).unwrap();
        assert_eq!(issuer.status().clock_sync, Some(unsynced));
        issuer.next_id().unwrap();
        let started = std::time::Instant::now();
        let Err(err) = Issuer::start_with_clock(with(RequireSync::Wait), clock.clone()) else {
            panic!("started on an unsynchronised clock with require_sync = wait");
        };
        let err = err.to_string();
        assert!(
            started.elapsed() >= std::time::Duration::from_millis(300),
            "waited"
        );
        assert!(
            err.contains("unsynchronised") && err.contains("max error 16000 ms"),
            "{err}"
        );
        assert!(
            err.contains("clock.sync_wait_ms") && err.contains("require_sync"),
            "{err}"
        );
        let issuer = Issuer::start_with_clock(with(RequireSync::Off), clock.clone()).unwrap();
        assert_eq!(issuer.status().clock_sync, None, "not asked");
        clock.set_sync(Some(vesta_core::ClockSync {
            synchronised: true,
            max_error_us: 1_000,
        }));
        Issuer::start_with_clock(with(RequireSync::Wait), clock.clone()).unwrap();
        clock.set_sync(None);
        Issuer::start_with_clock(with(RequireSync::Wait), clock).unwrap();
    }

    #[test]
    fn static_issuer_issues_explains_and_makes() {
        let clock = Arc::new(ManualClock::new(T0));
        let issuer = Issuer::start_with_clock(IssuerConfig::default(), clock.clone()).unwrap();
        let id = issuer.next_id().unwrap();
        let x = issuer.explain(id);
        assert_eq!(x.node(), 0);
        assert_eq!(x.gen_method(), Some(GenMethod::Embed));
        let values = issuer
            .own_values()
            .with("time", x.time())
            .with("seq", x.seq());
        assert_eq!(issuer.make(&values), Ok(id));
        assert_eq!(
            issuer.trans_time(x.time()).unwrap().timestamp_millis() as u64 / 1000,
            clock.now_ms() / 1000
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
        config.id.epoch = Some("1994-01-01T00:00:00Z".parse().unwrap());
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
        issuer.fence_for_test(LeaseState::Fenced, "lease lost");
        assert_eq!(
            issuer.next_id(),
            Err(IssueError::Unavailable("lease lost".into()))
        );
        assert!(!issuer.status().can_issue());
        assert_eq!(issuer.status().lease.fence_events, 1);
        issuer.resume_for_test(LeaseState::Held);
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
    /// Configs of every unit size: Vesta's seconds and milliseconds, Sonyflake's 10 ms.
    fn static_configs() -> Vec<IssuerConfig> {
        let mut seconds = IssuerConfig::default();
        seconds.id.id_type = Some(vesta_core::IdType::MaxPeak);
        let mut millis = IssuerConfig::default();
        millis.id.id_type = Some(vesta_core::IdType::MinGranularity);
        let mut sonyflake = IssuerConfig::default();
        sonyflake.id.layout = crate::config::LayoutChoice::Preset(vesta_core::Preset::Sonyflake);
        sonyflake.machine.id = Some(7);
        vec![seconds, millis, sonyflake]
    }

    /// A static ID with no mark knows nothing of an earlier run: a restart in the same unit, or
    /// with the clock stepped back within the rollback tolerance (before or after the start),
    /// must not issue what the earlier run did. The start waits at most the tolerance plus one
    /// unit. Without a state file, and with one not written yet (the lease thread's path).
    #[test]
    fn a_static_restart_without_a_mark_never_reissues() {
        let dir = tempfile::tempdir().unwrap();
        let mut configs = static_configs();
        for (k, mut config) in static_configs().into_iter().enumerate() {
            config.machine.state_file = Some(dir.path().join(format!("{k}.state")));
            configs.push(config);
        }
        for mut config in configs {
            let layout = config.layout().unwrap();
            let tolerance = layout.default_rollback_tolerance_ms();
            // Mid-unit, so a restart "in the same unit" really is one.
            let t = layout.unix_ms_of(layout.time_at(T0).unwrap()) + layout.unit_ms() / 2;
            for step_back in [0, tolerance / 2, tolerance] {
                let state_file = config.machine.state_file.take();
                let clock = Arc::new(ManualClock::new(t));
                let a = Issuer::start_with_clock(config.clone(), clock.clone()).unwrap();
                let waited = clock.now_ms() - t;
                assert!(
                    waited <= tolerance + layout.unit_ms(),
                    "{}: the start waited {waited} ms",
                    layout.full_name()
                );
                // The earlier run uses up its unit (and a few more in a ms layout).
                let a_ids = a.next_ids(layout.capacity_per_unit() + 3).unwrap().to_vec();
                let a_seen = clock.now_ms();
                drop(a);

                // Restarted at once, on a clock stepped back by `step_back`, and stepped back
                // by the whole tolerance once started.
                config.machine.state_file = state_file.clone();
                let clock = Arc::new(ManualClock::new(a_seen - step_back));
                let b = Issuer::start_with_clock(config.clone(), clock.clone()).unwrap();
                clock.rewind(tolerance);
                let b_ids = b.next_ids(10).unwrap().to_vec();
                let a_max = a_ids.iter().max().unwrap();
                assert!(
                    b_ids.iter().all(|id| id > a_max),
                    "{} stepped back {step_back} ms: {b_ids:?} overlaps up to {a_max}",
                    layout.full_name()
                );
                drop(b);
                if let Some(path) = &state_file {
                    std::fs::remove_file(path).unwrap();
                }
            }
        }
    }

    /// Before the epoch nothing was issued: the start neither waits nor refuses; the first
    /// call says the clock is before the epoch, as it always did.
    #[test]
    fn a_static_start_before_the_epoch_does_not_wait() {
        let clock = Arc::new(ManualClock::new(Epoch::VESTA.unix_ms() - 60_000));
        let issuer = Issuer::start_with_clock(IssuerConfig::default(), clock.clone()).unwrap();
        assert_eq!(clock.waits(), 0);
        let err = issuer.next_id().unwrap_err().to_string();
        assert!(err.contains("epoch"), "{err}");
    }

    #[test]
    fn static_state_file_floors_a_restart_and_guards_the_clock() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("static.state");
        let mut c = IssuerConfig::default();
        // Each test holds its own machine ID on the host: the tests run at once.
        c.machine.id = Some(1);
        c.machine.state_file = Some(path.clone());
        c.machine.state_file_interval_ms = 50;
        let a_clock = Arc::new(ManualClock::new(T0));
        let a = Issuer::start_with_clock(c.clone(), a_clock.clone()).unwrap();
        let a_last = a.next_ids(1000).unwrap().to_vec()[999];
        let a_second_ends = (a_clock.now_ms() / 1000 + 1) * 1000;
        a.shutdown().unwrap();
        assert_eq!(a.status().lease.state, LeaseState::Released);
        let rec = crate::lease::state_file::read(&path).unwrap().unwrap();
        assert!(rec.clean);
        assert_eq!((rec.machine, rec.source.as_str()), (1, "static"));
        assert_eq!(
            rec.mark_ms, a_second_ends,
            "the end of the last issued second"
        );

        // The clock 2 s before the mark: the guard waits (within 5 s), then issues above A.
        let clock = Arc::new(ManualClock::new(rec.mark_ms - 2000));
        let b = Issuer::start_with_clock(c.clone(), clock.clone()).unwrap();
        assert!(clock.waits() >= 1);
        assert!(b.next_id().unwrap() > a_last);
        drop(b);

        // A minute back: refused, naming both times.
        let behind = ManualClock::new(rec.mark_ms - 60_000);
        let err = Issuer::start_with_clock(c, behind).unwrap_err();
        assert!(
            matches!(err, StartError::ClockBehindMark { machine: 1, .. }),
            "{err}"
        );
    }

    #[test]
    fn static_state_file_left_by_a_crash_covers_what_was_promised() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("static.state");
        let mut c = IssuerConfig::default();
        c.id.id_type = Some(vesta_core::IdType::MinGranularity);
        c.machine.id = Some(3);
        c.machine.state_file = Some(path.clone());
        c.machine.state_file_interval_ms = 50;
        let a = Issuer::start_with_clock(c.clone(), Arc::new(ManualClock::new(T0))).unwrap();
        let a_ids = a.next_ids(5000).unwrap().to_vec();
        // What a kill -9 would leave behind: the running issuer's last (unclean) record.
        std::thread::sleep(std::time::Duration::from_millis(120));
        let crashed = crate::lease::state_file::read(&path).unwrap().unwrap();
        assert!(!crashed.clean);
        assert!(
            crashed.mark_ms >= T0 + 150,
            "the promise reaches three intervals ahead"
        );
        drop(a);
        crate::lease::state_file::write(&path, &crashed).unwrap();

        let clock = Arc::new(ManualClock::new(T0));
        let b = Issuer::start_with_clock(c, clock.clone()).unwrap();
        assert!(clock.waits() >= 1, "waited out the promise");
        let first = b.next_id().unwrap();
        assert!(first > *a_ids.last().unwrap());
        let first_ms = Epoch::VESTA.unix_ms() + b.explain(first).time();
        assert!(
            first_ms >= crashed.mark_ms,
            "issued inside the crashed holder's promise"
        );
    }

    /// The generator's deadline ran out with no rewrite of the state file in time: the caller
    /// is told the one documented reason (the one the lease thread fences with), and no
    /// "waiting".
    #[test]
    fn a_static_term_running_out_gives_the_documented_reason() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("static.state");
        let mut c = IssuerConfig::default();
        c.machine.id = Some(2);
        c.machine.state_file = Some(path.clone());
        // No rewrite while the test runs: the term is three minutes of the manual clock.
        c.machine.state_file_interval_ms = 60_000;
        let clock = Arc::new(ManualClock::new(T0));
        let issuer = Issuer::start_with_clock(c, clock.clone()).unwrap();
        let written = clock.now_ms();
        issuer.next_id().unwrap();
        clock.advance(180_000);
        let expected = format!(
            "the state file {} was not rewritten in time (last written at {}, allowed 180000 \
             ms); not issuing until it is",
            path.display(),
            Epoch::rfc3339(written)
        );
        assert_eq!(
            issuer.next_id(),
            Err(IssueError::Unavailable(expected.clone()))
        );
        let lease = issuer.status().lease;
        assert_eq!(
            (lease.state, lease.reason),
            (LeaseState::Fenced, Some(expected))
        );
    }
}
