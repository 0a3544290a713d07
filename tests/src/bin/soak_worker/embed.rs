//! `soak_worker embed`: an embedded issuer leasing its machine ID from ZooKeeper, an SQL
//! database or etcd, on a
//! [`ShiftedClock`] the orchestrator steps. It keeps issuing through every fault: a refused call
//! is counted and retried a moment later, an issuer that cannot start is started again, and one
//! that gave no ID for [`SUPERVISOR_RESTART`] is replaced, as a supervisor would.

use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use vesta_core::{GenError, IdType};
use vesta_embed::{
    IssueError, Issuer, IssuerConfig, MachineSource, ShiftedClock, StartError, SystemClock,
};

use crate::{Command, Job, Sink, Stats, batch_size, log};

/// How long an issuer may refuse every call before the worker replaces it.
const SUPERVISOR_RESTART: Duration = Duration::from_secs(10);
/// Pause after a refused call.
const RETRY_PAUSE: Duration = Duration::from_millis(5);
/// Pause after a failed start.
const START_PAUSE: Duration = Duration::from_millis(200);

/// Arguments of `soak_worker embed`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Lease from ZooKeeper (connect string)
    #[arg(long, conflicts_with_all = ["machine_db", "etcd"], required_unless_present_any = ["machine_db", "etcd"])]
    zk: Option<String>,
    /// Lease from this SQL database instead (`[machine] source = "sql"`)
    #[arg(long, conflicts_with = "etcd")]
    machine_db: Option<String>,
    /// Lease from this etcd instead (`[machine] source = "etcd"`)
    #[arg(long)]
    etcd: Option<String>,
    /// Root znode, etcd key prefix or SQL scope of the leases
    #[arg(long, default_value = "/vesta/soak")]
    root: String,
    /// max-peak or min-granularity
    #[arg(long = "type", default_value = "max-peak")]
    id_type: IdType,
    /// Vesta's version bit (0 or 1): workers of different lease stores use different bits,
    /// so their ID spaces cannot meet
    #[arg(long = "id-version", default_value_t = 0)]
    version: u8,
    /// Session timeout asked of ZooKeeper, or the SQL lease / etcd TTL, ms
    #[arg(long, default_value_t = 5000)]
    session_ms: u64,
    /// How often the mark is written (ZooKeeper), ms
    #[arg(long, default_value_t = 1000)]
    report_ms: u64,
    /// Name shown in the claim node
    #[arg(long)]
    instance: String,
    /// Machine IDs held at once (`[machine] ids`), each leased alone
    #[arg(long, default_value_t = 1)]
    machine_ids: u64,
}

/// The issuer's config: the layout and the lease store named by the arguments.
fn config(args: &Args) -> IssuerConfig {
    let mut config = IssuerConfig::default();
    config.id.id_type = Some(args.id_type);
    config.id.version = Some(args.version);
    config.machine.ids = args.machine_ids;
    if let Some(db) = &args.machine_db {
        config.machine.source = MachineSource::Sql;
        config.machine.db = Some(db.clone());
        config.machine.scope = args.root.clone();
        config.machine.lease_ms = args.session_ms;
        config.machine.db_timeout_ms = 2_000;
    } else if let Some(url) = &args.etcd {
        config.machine.source = MachineSource::Etcd;
        config.etcd.endpoints = vec![url.clone()];
        config.etcd.root = args.root.clone();
        config.etcd.ttl_ms = args.session_ms;
        config.etcd.timeout_ms = 2_000;
    } else {
        config.machine.source = MachineSource::Zookeeper;
        let z = &mut config.zookeeper;
        z.connect = args.zk.clone().unwrap_or_default();
        z.root = args.root.clone();
        z.session_timeout_ms = args.session_ms;
        z.report_interval_ms = args.report_ms;
        z.connect_timeout_ms = 5_000;
        z.instance = Some(args.instance.clone());
    }
    config
}

type SoakIssuer = Issuer<Arc<ShiftedClock>>;

/// A run of refused calls, logged once when it ends.
struct Streak {
    since: Instant,
    calls: u64,
    first: String,
}

/// Issues until the job is done or stopped; returns what it saw.
pub fn run(args: &Args, job: Job<'_>, sink: &mut Sink) -> anyhow::Result<Stats> {
    let config = config(args);
    let clock = Arc::new(ShiftedClock::new(SystemClock::for_layout(
        args.id_type.layout(),
    )));
    let max_batch = job.pace.max_batch(100_000);
    let mut stats = Stats::default();
    let mut issuer: Option<SoakIssuer> = None;
    let mut streak: Option<Streak> = None;
    let mut machine_checked = Instant::now();
    'work: while sink.written() < job.count {
        for cmd in job.commands.try_iter() {
            match cmd {
                Command::Step(ms) => {
                    clock.step_ms(ms);
                    stats.bump(format!("clock steps {ms} ms"));
                    log(&format!(
                        "clock stepped by {ms} ms (offset now {} ms)",
                        clock.offset_ms()
                    ));
                }
                Command::Restart => {
                    log("restart asked");
                    stats.bump("restarts asked");
                    if let Some(i) = issuer.take() {
                        shut(i, &mut stats);
                    }
                }
                Command::Stop => break 'work,
            }
        }
        sink.tick()?;
        let Some(iss) = &issuer else {
            match Issuer::start_with_clock(config.clone(), clock.clone()) {
                Ok(i) => {
                    let m = i.status().machine;
                    log(&format!(
                        "started on machine {m} ({}, clock offset {} ms)",
                        args.id_type,
                        clock.offset_ms()
                    ));
                    stats.machines.push(m);
                    issuer = Some(i);
                    streak = None;
                }
                Err(e) => {
                    stats.bump(format!("start refused: {}", start_error_kind(&e)));
                    log(&format!("start refused: {e}"));
                    thread::sleep(START_PAUSE);
                }
            }
            continue;
        };
        let wait = job.pace.ahead_by(sink.written());
        if !wait.is_zero() {
            thread::sleep(wait.min(Duration::from_millis(20)));
            continue;
        }
        let n = batch_size(job.rng, max_batch).min(job.count - sink.written());
        let issued = if n == 1 {
            iss.next_id().map(|id| vec![id])
        } else {
            iss.next_ids(n).map(|b| b.to_vec())
        };
        match issued {
            Ok(ids) => {
                for id in ids {
                    sink.push(id)?;
                }
                if let Some(s) = streak.take() {
                    log(&format!(
                        "issuing again after {} refused calls over {} ms (first: {})",
                        s.calls,
                        s.since.elapsed().as_millis(),
                        s.first
                    ));
                }
            }
            Err(e) => {
                stats.bump(format!("refused: {}", issue_error_kind(&e)));
                let s = streak.get_or_insert_with(|| Streak {
                    since: Instant::now(),
                    calls: 0,
                    first: e.to_string(),
                });
                s.calls += 1;
                if s.since.elapsed() >= SUPERVISOR_RESTART {
                    log(&format!(
                        "no ID for {} ms ({} refused calls, first: {}; last: {e}): replacing \
                         the issuer",
                        s.since.elapsed().as_millis(),
                        s.calls,
                        s.first
                    ));
                    stats.bump("supervisor restarts");
                    streak = None;
                    if let Some(i) = issuer.take() {
                        shut(i, &mut stats);
                    }
                }
                thread::sleep(RETRY_PAUSE);
            }
        }
        if machine_checked.elapsed() >= Duration::from_millis(250) {
            machine_checked = Instant::now();
            if let Some(iss) = &issuer {
                let m = iss.status().machine;
                if stats.machines.last() != Some(&m) {
                    log(&format!("now on machine {m}"));
                    stats.machines.push(m);
                }
            }
        }
    }
    if let Some(i) = issuer.take() {
        shut(i, &mut stats);
    }
    Ok(stats)
}

/// Shuts an issuer down (final mark, release), counting an unclean one.
fn shut(issuer: SoakIssuer, stats: &mut Stats) {
    if let Err(e) = issuer.shutdown() {
        stats.bump("unclean shutdowns");
        log(&format!("shutdown: {e}"));
    }
}

fn start_error_kind(e: &StartError) -> &'static str {
    match e {
        StartError::Config(_) => "config",
        StartError::StateFile { .. } | StartError::HoldRecord { .. } => "state file",
        StartError::ClockBehindMark { .. } => "clock behind mark",
        StartError::ClockUnsynchronised { .. } => "clock unsynchronised",
        StartError::Lease(_) | StartError::Taken { .. } => "lease",
        StartError::ZooKeeper(_) => "zookeeper",
        StartError::Thread { .. } => "thread",
        _ => "other",
    }
}

fn issue_error_kind(e: &IssueError) -> &'static str {
    match e {
        IssueError::Unavailable(_) => "unavailable",
        IssueError::Saturated { .. } => "saturated",
        IssueError::Refused(g) => match g {
            GenError::ClockBehind { .. } => "clock behind",
            GenError::WouldBlock { .. } => "would block",
            GenError::TimeOverflow { .. } => "time overflow",
            GenError::BeforeEpoch { .. } => "before epoch",
            GenError::Fenced { .. } => "fenced",
            _ => "other refusal",
        },
        _ => "other",
    }
}
