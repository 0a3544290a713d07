//! How an issuer starts: a member per machine ID of its plan, side by side when there are
//! several, each with the keeper of its own plan, one arm each (the features stay inside
//! [`with_keeper`]), and the clock-sync check before anything is issued.

use std::sync::Arc;
use std::time::Duration;

use vesta_core::{Clock, Generator};

use super::member::Member;
use crate::config::{ConfigError, IssuerConfig, Keeper, MachinePlan, RequireSync};
use crate::error::StartError;
#[cfg(feature = "state-file")]
use crate::lease::hold::HostHold;
use crate::lease::leased_generator::LeasedGenerator;
use crate::lease::rules::guarded_floor;
use crate::status::LeaseInfo;

/// A member for each machine ID of `plan` ([`MachinePlan::members`]), each on a handle of
/// `clock`. Several start side by side (each start guard waits at most its own bound, so k of
/// them take as long as one); if one fails, the others are given back and its error (the first
/// by slot) is returned.
pub(super) fn members<C: Clock + 'static>(
    config: &IssuerConfig,
    plan: &MachinePlan,
    clock: C,
) -> Result<Box<[Member<C>]>, StartError> {
    let plans = plan.members();
    if plans.len() == 1 {
        let only = plans.into_iter().next().expect("one member");
        return Ok(Box::new([member(config, only, clock, 0)?]));
    }
    let mut clocks = Vec::with_capacity(plans.len());
    for _ in 1..plans.len() {
        clocks.push(clock.share().ok_or_else(|| {
            ConfigError::Inconsistent(format!(
                "machine.ids {} runs a generator per machine ID, each on a handle of the \
                 issuer's clock: this clock has none (Clock::share); pass it in an Arc",
                plans.len()
            ))
        })?);
    }
    clocks.push(clock);
    let started: Vec<Result<Member<C>, StartError>> = std::thread::scope(|s| {
        let starts: Vec<_> = plans
            .into_iter()
            .zip(clocks)
            .enumerate()
            .map(|(slot, (plan, clock))| s.spawn(move || member(config, plan, clock, slot)))
            .collect();
        starts
            .into_iter()
            .map(|start| {
                start.join().unwrap_or_else(|_| {
                    Err(StartError::Lease("starting a machine ID panicked".into()))
                })
            })
            .collect()
    });
    // All or none: an error drops (gives back) the members that started.
    started
        .into_iter()
        .collect::<Result<Vec<_>, _>>()
        .map(Vec::into_boxed_slice)
}

/// The member of one machine ID's `plan` (`slot` among the issuer's): its generator on `clock`,
/// started with its keeper.
fn member<C: Clock + 'static>(
    config: &IssuerConfig,
    plan: MachinePlan,
    clock: C,
    slot: usize,
) -> Result<Member<C>, StartError> {
    let generator = Generator::new(config.generator_config(plan.first_machine())?, clock)
        .map_err(ConfigError::from)?;
    with_keeper(config, plan, generator, slot)
}

/// Starts `generator` (on the plan's first machine ID, fenced until a lease holds one) with the
/// plan's keeper: nothing (the floor after an unknown past, at once), a state file, or a
/// registry, each on a lease thread that holds the ID before anything is issued. `slot` tells
/// the machine IDs of one issuer apart in a registry's holder name.
#[cfg_attr(
    not(any(feature = "sql", feature = "etcd", feature = "zookeeper")),
    allow(unused_variables)
)]
fn with_keeper<C: Clock + 'static>(
    config: &IssuerConfig,
    plan: MachinePlan,
    generator: Generator<C>,
    slot: usize,
) -> Result<Member<C>, StartError> {
    #[cfg(feature = "state-file")]
    let machine = plan.first_machine();
    // Each machine ID of one issuer holds its lease under a name of its own.
    let holder_tag = match config.machine.ids {
        0 | 1 => String::new(),
        _ => format!("#{slot}"),
    };
    match plan.keeper {
        Keeper::Nothing => unkept(config, &plan, generator),
        #[cfg(feature = "state-file")]
        Keeper::StateFile(path) => {
            use crate::lease::static_source::{StaticSource, StaticStart};
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
            let timing = (StaticSource::window(interval), interval);
            leased(generator, reason, timing, source)
        }
        #[cfg(feature = "zookeeper")]
        Keeper::ZooKeeper(settings) => {
            use crate::lease::zk_source::{self, ZkSource};
            let timing = zk_source::initial_timing(&settings);
            let reason = acquiring(settings.fixed, "ZooKeeper");
            let counted_in = counted_in(&generator);
            let now_ms = generator.clock().now_ms();
            let source = ZkSource::new(*settings, now_ms, counted_in, &holder_tag)?;
            leased(generator, reason, timing, source)
        }
        #[cfg(feature = "sql")]
        Keeper::Sql(settings) => {
            use crate::lease::sql_source::{self, SqlSource};
            let timing = sql_source::timing(&settings);
            let reason = acquiring(settings.fixed, "the SQL database");
            let counted_in = counted_in(&generator);
            let now_ms = generator.clock().now_ms();
            let source = SqlSource::new(*settings, now_ms, counted_in, &holder_tag);
            leased(generator, reason, timing, source)
        }
        #[cfg(feature = "etcd")]
        Keeper::Etcd(settings) => {
            use crate::lease::etcd_source::{self, EtcdSource};
            let timing = etcd_source::initial_timing(&settings);
            let reason = acquiring(settings.fixed, "etcd");
            let counted_in = counted_in(&generator);
            let now_ms = generator.clock().now_ms();
            let source = EtcdSource::new(*settings, now_ms, counted_in, &holder_tag);
            leased(generator, reason, timing, source)
        }
    }
}

/// What a store's marks of this generator are counted in.
#[cfg(any(feature = "zookeeper", feature = "sql", feature = "etcd"))]
fn counted_in<C: Clock>(generator: &Generator<C>) -> crate::lease::counted_in::CountedIn {
    crate::lease::counted_in::CountedIn::of(generator.layout(), generator.config().gen_method)
}

/// Why a leasing issuer is not issuing yet: a fixed ID being registered, or one being claimed.
#[cfg(any(feature = "zookeeper", feature = "sql", feature = "etcd"))]
fn acquiring(fixed: Option<u64>, store: &str) -> String {
    match fixed {
        Some(id) => format!("registering machine {id} in {store}"),
        None => format!("claiming a machine ID from {store}"),
    }
}

/// A fixed ID that nothing records: start after whatever an earlier run could have issued,
/// held on this host first if the plan says so.
fn unkept<C: Clock + 'static>(
    config: &IssuerConfig,
    plan: &MachinePlan,
    generator: Generator<C>,
) -> Result<Member<C>, StartError> {
    let machine = plan.first_machine();
    #[cfg(feature = "state-file")]
    let hold = match plan.host_hold {
        true => Some(HostHold::acquire(
            generator.layout(),
            config.gen_method,
            machine,
            config.hold_wait,
        )?),
        false => None,
    };
    #[cfg(not(feature = "state-file"))]
    let _ = config;
    let floor = guarded_floor(
        generator.clock(),
        generator.config(),
        machine,
        0,
        Duration::ZERO,
    )?;
    generator
        .raise_floor(floor.time)
        .map_err(|e| StartError::Lease(format!("cannot use machine {machine}: {e}")))?;
    #[cfg(feature = "state-file")]
    let host_hold = match hold {
        Some(mut hold) => {
            hold.begin()?;
            Some(HeldOnHost {
                hold,
                began_at: generator.position(),
            })
        }
        None => None,
    };
    Ok(Member::new(
        Arc::new(LeasedGenerator::new(generator, LeaseInfo::fixed())),
        None,
        #[cfg(feature = "state-file")]
        host_hold,
    ))
}

/// A static machine ID held on this host without a state file, and where issuing began.
#[cfg(feature = "state-file")]
#[derive(Debug)]
pub(crate) struct HeldOnHost {
    hold: HostHold,
    began_at: vesta_core::Position,
}

#[cfg(feature = "state-file")]
impl HeldOnHost {
    /// Stops `generator` and lets the machine ID go; a run that issued nothing puts the host's
    /// record back as it found it.
    pub(crate) fn release<C: Clock>(mut self, generator: &Generator<C>) -> Result<(), StartError> {
        if generator.stop() == self.began_at {
            self.hold.unused()?;
        }
        Ok(())
    }
}

/// Runs `source` on a lease thread for `generator`, which stays fenced (`reason` says why)
/// until the source holds the machine ID; `timing` is the first (window, beat).
#[cfg(any(feature = "state-file", feature = "sql", feature = "etcd"))]
fn leased<C: Clock + 'static, S: crate::lease::worker::LeaseSource<C>>(
    generator: Generator<C>,
    reason: String,
    (window, beat): (Duration, Duration),
    source: S,
) -> Result<Member<C>, StartError> {
    use crate::lease::worker::{Lease, LeaseThread};
    use crate::status::LeaseState;
    generator.fence();
    let info = LeaseInfo {
        state: LeaseState::Acquiring,
        reason: Some(reason),
        ..LeaseInfo::fixed()
    };
    let leased = Arc::new(LeasedGenerator::new(generator, info));
    let thread = LeaseThread::spawn(Lease::new(leased.clone(), window, beat), source)?;
    Ok(Member::new(
        leased,
        Some(thread),
        #[cfg(feature = "state-file")]
        None,
    ))
}

/// `clock.require_sync`: asks the kernel (through the clock) whether the clock is synchronised
/// before anything is issued. An unsynchronised clock may be far ahead (a hardware clock set
/// wrong at boot): IDs issued then sit in the future, and once a time service steps the clock
/// back the issuer refuses for as long as the offset.
pub(super) fn check_clock_sync<C: Clock>(
    config: &IssuerConfig,
    clock: &C,
) -> Result<(), StartError> {
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
