//! `soak`: the long-running proof of "no duplicate ID, ever; every wait bounded" (docs/soak.md).
//! Run it with `scripts/soak`.
//!
//! It starts a 3-node ZooKeeper ensemble, a PostgreSQL server, an etcd member, a pair of `vesta
//! serve tcp` and one `vesta serve rest` (all leasing machine IDs from ZooKeeper), then keeps
//! producers busy — embedded workers (`soak_worker embed`) leasing from ZooKeeper, from
//! PostgreSQL (`source = "sql"`) and from etcd, `vesta gen --server A,B` runs, REST clients
//! (`soak_worker rest`) and `vesta gen` runs on static machine IDs with state files (the static
//! group), each appending the IDs it was handed to a file, and the sequence group: a cluster of
//! `vesta serve tcp --seq-cluster` members called by `soak_worker seq` processes, every answered
//! call recorded — while it injects faults: SIGKILLs
//! of every kind of process, SIGTERM restarts of servers, the ZooKeeper leader killed,
//! PostgreSQL and etcd crashed for 5 s, in-process clock steps of 5 ms, 1 s and 1 h back, and
//! operators' mistakes on the static group (older state files copied back, an epoch flip,
//! parallel runs), sequence members SIGKILLed, stopped cleanly and cut off from PostgreSQL. Once
//! the files hold `--ids` IDs and `--seq-calls` calls (or the time limit passes) it stops
//! everything it started, by PID, checks every ID for duplicates on disk and every sequence call
//! against the history's rules, and prints IDs, calls, faults by kind, duplicates and
//! violations. Exit status: 0 clean, 1 findings (hangs, unexpected exits, malformed IDs), 2
//! duplicates or sequence history violations.
//!
//! This file holds the flags, what every part shares ([`Ctx`]) and the start; `turn.rs` runs the
//! loop, `inject.rs` applies the faults, `report.rs` stops everything and reports.

mod check;
mod faults;
mod inject;
mod producers;
mod report;
mod seq_mistakes;
mod seqs;
mod servers;
mod statics;
mod stores;
mod turn;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs::{self, File};
use std::io::Write as _;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::Context;
use clap::Parser;
use vesta_core::IdType;
use vesta_tests::soak::check::Format;
use vesta_tests::soak::child::PidFile;
use vesta_tests::soak::rng::Rng;
use vesta_tests::zk::{ZkEnsemble, free_ports};

use faults::{Fault, Schedule};
use producers::{Output, Role, Slot, Store};
use seqs::{SeqCoordination, SeqGroup};
use servers::{Kind, Server};
use statics::Statics;
use stores::{Stores, Which};

/// The znode under which every process of the soak leases its machine ID (also the etcd key
/// prefix and the SQL scope of the workers leasing there).
pub const ZK_ROOT: &str = "/vesta/soak";
/// Session timeout every issuer asks for, ms: short, so a killed holder's ID frees up soon.
pub const SESSION_MS: u64 = 5_000;
/// Mark interval of every issuer, ms.
pub const REPORT_MS: u64 = 1_000;
/// How long producers get to finish once the soak stops them.
const STOP_GRACE: Duration = Duration::from_secs(60);
/// Main loop period.
const TICK: Duration = Duration::from_millis(100);
/// Progress line period.
const PROGRESS_EVERY: Duration = Duration::from_secs(30);
/// How long ZooKeeper stays down after its leader is killed.
const ZK_DOWN_FOR: Duration = Duration::from_secs(5);

/// Soak test of vesta-rs: IDs from every kind of issuer under faults, checked for duplicates.
#[derive(Parser, Debug)]
#[command(name = "soak")]
struct Args {
    /// IDs to hand out in all; the run stops once the files hold this many
    #[arg(long, default_value_t = 100_000_000)]
    ids: u64,
    /// Planned duration in minutes: producers are paced so the IDs take about this long
    #[arg(long, default_value_t = 15.0)]
    minutes: f64,
    /// Hard limit in minutes: stop issuing then even if short of --ids [default: 2 × minutes + 5]
    #[arg(long)]
    limit_minutes: Option<f64>,
    /// Seconds between two injected faults
    #[arg(long, default_value_t = 10.0)]
    fault_every: f64,
    /// Embedded worker processes (half max-peak, half min-granularity)
    #[arg(long, default_value_t = 4)]
    embed_workers: usize,
    /// `vesta gen --server` slots
    #[arg(long, default_value_t = 2)]
    tcp_clients: usize,
    /// REST client processes
    #[arg(long, default_value_t = 2)]
    rest_clients: usize,
    /// Embedded workers leasing from PostgreSQL (`source = "sql"`); 0: no PostgreSQL
    #[arg(long, default_value_t = 2)]
    sql_workers: usize,
    /// Embedded workers leasing from etcd; 0: no etcd
    #[arg(long, default_value_t = 2)]
    etcd_workers: usize,
    /// `vesta gen` slots on static machine IDs with state files (920 up, alternately max-peak
    /// and min-granularity; at most 4), whose faults are operators' mistakes; 0: none
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u8).range(0..=4))]
    static_gens: u8,
    /// The k-ID group: machine IDs held by tcp-b, the REST server and every second embedded
    /// worker of each store (`[machine] ids`, each ID leased alone); 1: no such group
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u64).range(1..=8))]
    machine_ids: u64,
    /// Members of the sequence group: `vesta serve tcp --seq-cluster` on a database of their
    /// own on the soak's PostgreSQL, each through a proxy; 0: no sequence group
    #[arg(long, default_value_t = 3)]
    seq_members: usize,
    /// Where the sequence group's members keep their leases and sets: its PostgreSQL database,
    /// the soak's etcd (which then starts even with --etcd-workers 0) or its ZooKeeper ensemble
    #[arg(long, value_enum, default_value_t = SeqCoordination::Sql)]
    seq_coordination: SeqCoordination,
    /// `soak_worker seq` processes calling the sequence group
    #[arg(long, default_value_t = 2)]
    seq_workers: usize,
    /// Concurrent calling tasks in each `soak_worker seq`
    #[arg(long, default_value_t = 64)]
    seq_tasks: u64,
    /// Sequence calls (`seq_next_n`, 1 to 100 numbers each) to make in all, paced over
    /// --minutes; the run also waits for them before it stops
    #[arg(long, default_value_t = 10_000_000)]
    seq_calls: u64,
    /// Work dir [default: a new vesta-soak-* dir in the temp dir]
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Keep the ID files after the check (they are deleted when no duplicate was found)
    #[arg(long)]
    keep: bool,
    /// The `vesta` binary [default: next to this one]
    #[arg(long)]
    vesta: Option<PathBuf>,
    /// Seed of every random choice [default: from the clock]
    #[arg(long)]
    seed: Option<u64>,
    /// IDs per sorted run of the duplicate check (8 bytes each in memory)
    #[arg(long, default_value_t = 8 << 20)]
    run_len: usize,
}

/// What every part of the soak shares: paths, binaries, the event log and the findings.
pub struct Ctx {
    /// The work dir.
    pub dir: PathBuf,
    /// Logs of every process.
    pub logs: PathBuf,
    /// ID files.
    pub data: PathBuf,
    /// PIDs of every process started.
    pub pids: PidFile,
    /// The `vesta` binary.
    pub vesta: PathBuf,
    /// The `soak_worker` binary.
    pub worker: PathBuf,
    /// The ensemble's connect string.
    pub zk_connect: String,
    /// The PostgreSQL database's URL.
    pub sql_url: String,
    /// The etcd member's URL.
    pub etcd_url: String,
    /// The sequence group's database URL (on the same PostgreSQL).
    pub seq_url: String,
    /// PostgreSQL's port.
    pub pg_port: u16,
    start: Instant,
    events: File,
    findings: Vec<String>,
}

impl Ctx {
    /// A line on stdout and in `events.log`, stamped with the time since the start.
    pub fn event(&mut self, line: impl AsRef<str>) {
        let stamped = format!(
            "[{:>7.1}s] {}",
            self.start.elapsed().as_secs_f64(),
            line.as_ref()
        );
        println!("{stamped}");
        let _ = writeln!(self.events, "{stamped}");
    }

    /// Something that breaks a promise or needs a look: printed and kept for the report.
    pub fn finding(&mut self, what: String) {
        self.event(format!("FINDING: {what}"));
        self.findings.push(what);
    }
}

/// A command scheduled after a fault.
enum FollowUp {
    /// Start ZooKeeper node `i` again.
    RestartZk(usize),
    /// Send a line to a worker (if that incarnation still runs).
    Send {
        slot: usize,
        incarnation: u32,
        line: &'static str,
    },
}

/// Everything the soak runs.
struct Soak {
    ctx: Ctx,
    args: Args,
    rng: Rng,
    zk: Arc<Mutex<ZkEnsemble>>,
    zk_restart: Option<(usize, JoinHandle<Result<(), String>>)>,
    stores: Stores,
    tcp: Vec<Server>,
    rest: Server,
    slots: Vec<Slot>,
    statics: Statics,
    seq: Option<SeqGroup>,
    outputs: Vec<Output>,
    schedule: Schedule,
    follow_ups: Vec<(Instant, FollowUp)>,
    worker_counts: BTreeMap<String, u64>,
    summaries: u64,
    client_errors: Vec<String>,
    exits_killed: u64,
    target_rate: f64,
}

fn main() -> ExitCode {
    let args = Args::parse();
    match run(args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("soak: {e:#}");
            ExitCode::from(1)
        }
    }
}

fn run(args: Args) -> anyhow::Result<ExitCode> {
    let started_wall = unix_ms();
    let seed = args.seed.unwrap_or(started_wall);
    let dir = match &args.dir {
        Some(d) => d.clone(),
        None => std::env::temp_dir().join(format!("vesta-soak-{}", started_wall / 1000)),
    };
    let here = std::env::current_exe().context("locating the soak binary")?;
    let bin_dir = here.parent().context("the soak binary's dir")?.to_owned();
    let vesta = args.vesta.clone().unwrap_or_else(|| bin_dir.join("vesta"));
    let worker = bin_dir.join("soak_worker");
    for b in [&vesta, &worker] {
        anyhow::ensure!(
            b.exists(),
            "{} is missing: build it first (scripts/soak does)",
            b.display()
        );
    }
    let logs = dir.join("logs");
    let data = dir.join("ids");
    fs::create_dir_all(&logs).with_context(|| format!("creating {}", logs.display()))?;
    fs::create_dir_all(&data)?;
    let events = File::create(dir.join("events.log"))?;
    let stop = Arc::new(AtomicBool::new(false));
    watch_signals(stop.clone());

    let mut ctx = Ctx {
        pids: PidFile::new(dir.join("children.pids")),
        dir,
        logs,
        data,
        vesta,
        worker,
        zk_connect: String::new(),
        sql_url: String::new(),
        etcd_url: String::new(),
        seq_url: String::new(),
        pg_port: 0,
        start: Instant::now(),
        events,
        findings: Vec::new(),
    };
    ctx.event(format!(
        "soak: {} IDs planned over {} min, a fault every {} s, seed {seed}; work dir {}",
        args.ids,
        args.minutes,
        args.fault_every,
        ctx.dir.display()
    ));
    vesta_tests::zk::require_zookeeper();
    let zk = ZkEnsemble::start();
    ctx.zk_connect = zk.connect();
    for i in 0..3 {
        if let Some(pid) = zk.pid(i) {
            ctx.pids.record(pid, &format!("zookeeper-{}", i + 1));
        }
    }
    ctx.event(format!("ZooKeeper ensemble up: {}", ctx.zk_connect));
    let seq_on = args.seq_members > 0 && args.seq_workers > 0;
    let stores = Stores::start(
        args.sql_workers > 0,
        args.etcd_workers > 0 || (seq_on && args.seq_coordination == SeqCoordination::Etcd),
        seq_on,
        &mut ctx,
    );

    let mut soak = Soak::start(ctx, args, seed, zk, stores)?;
    let issuing = soak.issue(&stop);
    soak.finish();
    let took = soak.ctx.start.elapsed();
    soak.report(started_wall, issuing, took)
}

/// Sets `stop` on SIGINT or SIGTERM, so the soak still stops what it started.
fn watch_signals(stop: Arc<AtomicBool>) {
    thread::spawn(move || {
        let Ok(rt) = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        else {
            return;
        };
        rt.block_on(vesta_service::shutdown::signal());
        stop.store(true, Ordering::SeqCst);
    });
}

fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

impl Soak {
    /// Starts the servers, waits until they serve, and sets up the producer slots.
    fn start(
        mut ctx: Ctx,
        args: Args,
        seed: u64,
        zk: ZkEnsemble,
        stores: Stores,
    ) -> anyhow::Result<Soak> {
        let ports = free_ports(3);
        // The k-ID group: tcp-b, the REST server and every second embedded worker of each
        // store hold `--machine-ids` machine IDs; tcp-a and the others one.
        let k = args.machine_ids;
        let k_of = |i: usize| if i % 2 == 1 { k } else { 1 };
        let tcp = vec![
            Server::start("tcp-a", Kind::Tcp, ports[0], 1, &mut ctx)?,
            Server::start("tcp-b", Kind::Tcp, ports[1], k, &mut ctx)?,
        ];
        let rest = Server::start("rest", Kind::Rest, ports[2], k, &mut ctx)?;
        let mut rng = Rng::new(seed);
        let (a, b) = (tcp[0].addr(), tcp[1].addr());
        let url = format!("http://{}", rest.addr());
        let mut slots = Vec::new();
        for i in 0..args.embed_workers {
            let t = if i % 2 == 0 {
                IdType::MaxPeak
            } else {
                IdType::MinGranularity
            };
            slots.push(Slot::new(
                format!("embed-{}", i + 1),
                Role::Embed(t, Store::Zk, k_of(i)),
                rng.next_u64(),
            ));
        }
        // One type per store beside ZooKeeper's version bit 0 (see `Store::version`).
        for (store, t, n, name) in [
            (Store::Sql, IdType::MaxPeak, args.sql_workers, "embed-sql"),
            (
                Store::Etcd,
                IdType::MinGranularity,
                args.etcd_workers,
                "embed-etcd",
            ),
        ] {
            for i in 0..n {
                slots.push(Slot::new(
                    format!("{name}-{}", i + 1),
                    Role::Embed(t, store, k_of(i)),
                    rng.next_u64(),
                ));
            }
        }
        for i in 0..args.tcp_clients {
            let servers = if i % 2 == 0 {
                format!("{a},{b}")
            } else {
                format!("{b},{a}")
            };
            slots.push(Slot::new(
                format!("tcp-client-{}", i + 1),
                Role::TcpGen { servers },
                rng.next_u64(),
            ));
        }
        for i in 0..args.rest_clients {
            slots.push(Slot::new(
                format!("rest-client-{}", i + 1),
                Role::Rest { url: url.clone() },
                rng.next_u64(),
            ));
        }
        let (statics, static_slots) =
            Statics::new(&ctx, usize::from(args.static_gens), slots.len(), &mut rng)?;
        slots.extend(static_slots);
        let planned = Duration::from_secs_f64(args.minutes.max(0.1) * 60.0);
        let every = Duration::from_secs_f64(args.fault_every.max(0.5));
        let seq = if args.seq_members > 0 && args.seq_workers > 0 {
            Some(SeqGroup::start(
                args.seq_members,
                args.seq_coordination,
                args.seq_workers,
                args.seq_calls,
                args.seq_calls as f64 / planned.as_secs_f64(),
                args.seq_tasks,
                &mut ctx,
                &mut rng,
            )?)
        } else {
            None
        };
        let kinds: Vec<Fault> = Fault::ALL
            .into_iter()
            .filter(|f| seq.is_some() || !f.is_seq())
            .collect();
        let mut soak = Soak {
            target_rate: args.ids as f64 / planned.as_secs_f64(),
            ctx,
            args,
            rng,
            zk: Arc::new(Mutex::new(zk)),
            zk_restart: None,
            stores,
            tcp,
            rest,
            slots,
            statics,
            seq,
            outputs: Vec::new(),
            schedule: Schedule::new(every, every.max(Duration::from_secs(5)), kinds),
            follow_ups: Vec::new(),
            worker_counts: BTreeMap::new(),
            summaries: 0,
            client_errors: Vec::new(),
            exits_killed: 0,
        };
        let until = Instant::now() + Duration::from_secs(60);
        while !(soak.tcp.iter().all(Server::settled)
            && soak.rest.settled()
            && soak.seq.as_ref().is_none_or(SeqGroup::settled))
        {
            anyhow::ensure!(
                Instant::now() < until,
                "the servers did not start within 60 s"
            );
            soak.tick_servers();
            thread::sleep(TICK);
        }
        Ok(soak)
    }
}

/// A PID for the event log.
pub fn pid_text(pid: Option<u32>) -> String {
    pid.map_or_else(|| "unknown".into(), |p| p.to_string())
}
