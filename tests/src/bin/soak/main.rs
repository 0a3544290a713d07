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

mod check;
mod faults;
mod producers;
mod seq_mistakes;
mod seqs;
mod servers;
mod statics;
mod stores;

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

    /// Issues and injects faults until the files hold `--ids` IDs, the time limit passes or a
    /// signal arrives. Returns how long it issued.
    fn issue(&mut self, stop: &AtomicBool) -> Duration {
        let limit = Duration::from_secs_f64(
            self.args
                .limit_minutes
                .unwrap_or(self.args.minutes * 2.0 + 5.0)
                * 60.0,
        );
        let began = Instant::now();
        let mut progress_at = Instant::now() + PROGRESS_EVERY;
        loop {
            let written = self.written_estimate();
            let seq_done = self.seq.as_ref().is_none_or(SeqGroup::done);
            if written >= self.args.ids && seq_done {
                let calls = self.seq.as_ref().map_or(0, SeqGroup::calls_estimate);
                self.ctx.event(format!(
                    "target reached: about {written} IDs written, {calls} sequence calls"
                ));
                break;
            }
            if began.elapsed() >= limit {
                let calls = self.seq.as_ref().map_or(0, SeqGroup::calls_estimate);
                self.ctx.finding(format!(
                    "time limit of {} min reached with about {written} of {} IDs, {calls} of {} \
                     sequence calls",
                    limit.as_secs() / 60,
                    self.args.ids,
                    self.args.seq_calls
                ));
                break;
            }
            if stop.load(Ordering::SeqCst) {
                self.ctx.event("signal received: stopping early");
                break;
            }
            self.tick_servers();
            self.tick_zk();
            self.stores.tick(&mut self.ctx);
            self.run_follow_ups();
            self.tick_producers(written < self.args.ids, written);
            if let Some(seq) = &mut self.seq {
                seq.tick_workers(&mut self.ctx, true);
            }
            self.inject();
            if Instant::now() >= progress_at {
                progress_at += PROGRESS_EVERY;
                let up = self.slots.iter().filter(|s| s.running()).count();
                let calls = self.seq.as_ref().map_or(0, SeqGroup::calls_estimate);
                let msg = format!(
                    "progress: about {:.1}M IDs, {:.2}M sequence calls, {} faults, {up} \
                     producers running",
                    written as f64 / 1e6,
                    calls as f64 / 1e6,
                    self.schedule.total()
                );
                self.ctx.event(msg);
            }
            thread::sleep(TICK);
        }
        began.elapsed()
    }

    /// IDs in the files now, from their sizes.
    fn written_estimate(&self) -> u64 {
        self.outputs
            .iter()
            .map(|o| {
                fs::metadata(&o.file.path).map_or(0, |m| m.len()) / o.file.format.bytes_per_id()
            })
            .sum()
    }

    fn tick_servers(&mut self) {
        for s in &mut self.tcp {
            s.tick(&mut self.ctx);
        }
        self.rest.tick(&mut self.ctx);
        if let Some(seq) = &mut self.seq {
            seq.tick_members(&mut self.ctx);
        }
    }

    /// Notices the end of a ZooKeeper node's restart.
    fn tick_zk(&mut self) {
        let finished = self
            .zk_restart
            .as_ref()
            .is_some_and(|(_, h)| h.is_finished());
        if !finished {
            return;
        }
        let Some((i, handle)) = self.zk_restart.take() else {
            return;
        };
        match handle.join() {
            Ok(Ok(())) => {
                let pid = self
                    .zk
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .pid(i);
                if let Some(pid) = pid {
                    self.ctx.pids.record(pid, &format!("zookeeper-{}", i + 1));
                }
                self.ctx.event(format!(
                    "ZooKeeper node {} serving again (pid {})",
                    i + 1,
                    pid_text(pid)
                ));
            }
            Ok(Err(e)) => self
                .ctx
                .finding(format!("ZooKeeper node {} did not restart: {e}", i + 1)),
            Err(_) => self
                .ctx
                .finding(format!("the restart of ZooKeeper node {} panicked", i + 1)),
        }
    }

    fn run_follow_ups(&mut self) {
        let now = Instant::now();
        let (due, later): (Vec<_>, Vec<_>) = std::mem::take(&mut self.follow_ups)
            .into_iter()
            .partition(|(at, _)| *at <= now);
        self.follow_ups = later;
        for (_, f) in due {
            match f {
                FollowUp::RestartZk(i) => {
                    let zk = self.zk.clone();
                    let handle = thread::spawn(move || {
                        catch_unwind(AssertUnwindSafe(|| {
                            zk.lock().unwrap_or_else(PoisonError::into_inner).restart(i);
                        }))
                        .map_err(|p| {
                            p.downcast_ref::<String>()
                                .cloned()
                                .or_else(|| p.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                                .unwrap_or_else(|| "panicked".into())
                        })
                    });
                    self.ctx
                        .event(format!("starting ZooKeeper node {} again", i + 1));
                    self.zk_restart = Some((i, handle));
                }
                FollowUp::Send {
                    slot,
                    incarnation,
                    line,
                } => {
                    if self.slots[slot].send(incarnation, line) {
                        let name = self.slots[slot].name.clone();
                        self.ctx.event(format!("{name}.{incarnation}: {line}"));
                    }
                }
            }
        }
    }

    /// Reaps ended producers and, while `spawn` holds, starts the next ones when due.
    fn tick_producers(&mut self, spawn: bool, written: u64) {
        for i in 0..self.slots.len() {
            if let Some(ended) = self.slots[i].tick(&mut self.ctx, &self.outputs) {
                self.ended(i, ended);
            }
            // A static slot waits while a burst of parallel runs goes on its machine ID.
            if spawn && self.slots[i].due() && !self.statics.busy(i) {
                let (count, rate) = self.plan(i, written);
                if matches!(self.slots[i].role, Role::StaticGen { .. }) {
                    self.statics.before_spawn(i);
                }
                let slot = &mut self.slots[i];
                slot.spawn(&mut self.ctx, &mut self.outputs, count, rate);
                if slot.role.is_gen() {
                    let paced = Duration::from_secs_f64(count as f64 / rate.max(1.0));
                    slot.start_not_before(Instant::now() + paced);
                }
            }
        }
        self.statics.tick(&mut self.ctx, &self.slots);
    }

    /// The chunk and rate of the next process of slot `i`: the IDs still missing, shared by
    /// class (embedded 55 %: ZooKeeper-leased 45 %, SQL- and etcd-leased 5 % each; tcp 27 %,
    /// rest 18 %; the static group 5 % and its alias pair 2 % over them) over the planned time
    /// still left. A static (or alias) slot's run is 3 s of its rate (at least 1,000 IDs): it
    /// restarts every few seconds.
    fn plan(&self, i: usize, written: u64) -> (u64, f64) {
        let class = self.slots[i].role.class();
        let shares = [
            ("embed", 0.45),
            ("embed-sql", 0.05),
            ("embed-etcd", 0.05),
            ("tcp", 0.27),
            ("rest", 0.18),
            ("static", 0.05),
            ("alias", 0.02),
        ];
        let present: f64 = shares
            .iter()
            .filter(|(c, _)| self.slots.iter().any(|s| s.role.class() == *c))
            .map(|(_, s)| s)
            .sum();
        let share = shares
            .iter()
            .find(|(c, _)| *c == class)
            .map_or(0.0, |s| s.1)
            / present;
        let peers = self
            .slots
            .iter()
            .filter(|s| s.role.class() == class)
            .count() as f64;
        let planned = self.args.minutes * 60.0;
        let left_s = (planned - self.ctx.start.elapsed().as_secs_f64()).max(60.0);
        let missing = self.args.ids.saturating_sub(written) as f64;
        let rate = (missing / left_s).max(self.target_rate * 0.25) * share / peers;
        let slot_total = self.args.ids as f64 * share / peers;
        let count = match self.slots[i].role {
            Role::Embed(..) => slot_total / 4.0,
            Role::Rest { .. } => slot_total / 3.0,
            Role::TcpGen { .. } => (slot_total / 25.0).min(2e6),
            Role::StaticGen { .. } | Role::AliasGen { .. } => {
                return ((rate * 3.0).max(1000.0) as u64, rate.max(100.0));
            }
        };
        (count.max(20_000.0) as u64, rate.max(100.0))
    }

    /// Books an ended producer: summaries of workers, errors of `vesta gen` runs.
    fn ended(&mut self, i: usize, ended: producers::Ended) {
        let class = self.slots[i].role.class();
        if ended.killed {
            self.exits_killed += 1;
            return;
        }
        if !ended.status.success() {
            let line = format!(
                "{} exited with {} after {:.1} s: {}",
                ended.name,
                ended.status,
                ended.started.elapsed().as_secs_f64(),
                ended.log_tail.lines().last().unwrap_or("")
            );
            self.ctx.event(format!("client error: {line}"));
            self.client_errors.push(line);
            return;
        }
        let Some(path) = ended.summary else { return };
        let summary: Option<serde_json::Value> = fs::read_to_string(&path)
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok());
        match summary {
            Some(v) => {
                self.summaries += 1;
                if let Some(counts) = v.get("counts").and_then(|c| c.as_object()) {
                    for (k, n) in counts {
                        *self
                            .worker_counts
                            .entry(format!("{class}: {k}"))
                            .or_insert(0) += n.as_u64().unwrap_or(0);
                    }
                }
            }
            None => self.ctx.finding(format!(
                "{} exited 0 without a readable summary at {}",
                ended.name,
                path.display()
            )),
        }
    }

    /// Applies the due fault, if its target is there.
    fn inject(&mut self) {
        let Some(fault) = self.schedule.due(&mut self.rng) else {
            return;
        };
        if self.apply(fault) {
            self.schedule.applied();
        } else if let Some(f) = self.schedule.not_now() {
            self.ctx
                .event(format!("skipped `{}`: no target for 20 s", f.name()));
        }
    }

    /// A random slot of a class (`embed`: every embedded worker, whatever its store) that runs
    /// (or not).
    fn pick(&mut self, class: &str, running: bool) -> Option<usize> {
        let candidates: Vec<usize> = (0..self.slots.len())
            .filter(|&i| {
                let role = &self.slots[i].role;
                let of_class = role.class() == class || (class == "embed" && role.is_embed());
                of_class && self.slots[i].running() == running
            })
            .collect();
        (!candidates.is_empty()).then(|| candidates[self.rng.index(candidates.len())])
    }

    fn apply(&mut self, fault: Fault) -> bool {
        let now = Instant::now();
        let all_tcp_up = self.tcp.iter().all(Server::is_up);
        match fault {
            Fault::KillEmbedWorker | Fault::KillRestClient => {
                let class = if fault == Fault::KillEmbedWorker {
                    "embed"
                } else {
                    "rest"
                };
                match self.pick(class, true) {
                    Some(i) => self.slots[i].kill(&mut self.ctx),
                    None => false,
                }
            }
            Fault::KillTcpClient => {
                // A `vesta gen` run killed mid-stream: a paced run that is writing, else one
                // started now (2M IDs, more than it writes before the kill) and killed after a
                // random 1 to 100,000 IDs — polled every 2 ms, since a run writes a second's
                // whole unit (2^20 IDs) in a fraction of a second.
                let writing: Vec<usize> = (0..self.slots.len())
                    .filter(|&i| self.slots[i].role.class() == "tcp" && self.slots[i].writing())
                    .collect();
                if !writing.is_empty() {
                    let i = writing[self.rng.index(writing.len())];
                    return self.slots[i].kill(&mut self.ctx);
                }
                if self.pick("tcp", true).is_some() {
                    return false;
                }
                let Some(i) = self.pick("tcp", false) else {
                    return false;
                };
                let (count, rate) = self.plan(i, self.written_estimate());
                let count = count.max(2_000_000);
                self.slots[i].spawn(&mut self.ctx, &mut self.outputs, count, rate);
                let bytes = self.rng.range(1, 100_000) * Format::Text.bytes_per_id();
                let until = Instant::now() + Duration::from_secs(5);
                while Instant::now() < until {
                    if self.slots[i].output_len(&self.outputs) >= bytes {
                        break;
                    }
                    if !self.slots[i].alive() {
                        return false;
                    }
                    thread::sleep(Duration::from_millis(2));
                }
                self.slots[i].kill(&mut self.ctx)
            }
            Fault::KillTcpServer | Fault::RestartTcpServer if all_tcp_up => {
                let s = self.rng.index(self.tcp.len());
                if fault == Fault::KillTcpServer {
                    self.tcp[s].crash(&mut self.ctx)
                } else {
                    self.tcp[s].restart(&mut self.ctx)
                }
            }
            Fault::KillRestServer => self.rest.crash(&mut self.ctx),
            Fault::RestartRestServer => self.rest.restart(&mut self.ctx),
            Fault::KillZkLeader if self.zk_restart.is_none() && !self.zk_restart_pending() => {
                let mut zk = self.zk.lock().unwrap_or_else(PoisonError::into_inner);
                let Some(leader) = zk.leader() else {
                    return false;
                };
                let pid = zk.pid(leader);
                zk.kill(leader);
                drop(zk);
                self.ctx.event(format!(
                    "SIGKILL ZooKeeper leader, node {} (pid {})",
                    leader + 1,
                    pid_text(pid)
                ));
                self.follow_ups
                    .push((now + ZK_DOWN_FOR, FollowUp::RestartZk(leader)));
                true
            }
            Fault::CrashPostgres => self.stores.crash(Which::Postgres, &mut self.ctx),
            Fault::KillEtcd => self.stores.crash(Which::Etcd, &mut self.ctx),
            Fault::RestoreStateFile => self.statics.restore(
                &mut self.ctx,
                &mut self.slots,
                &mut self.outputs,
                &mut self.rng,
            ),
            Fault::EpochFlip => {
                self.statics
                    .flip(&mut self.ctx, &self.slots, &mut self.outputs, &mut self.rng)
            }
            Fault::ParallelGen => {
                self.statics
                    .burst(&mut self.ctx, &self.slots, &mut self.outputs, &mut self.rng)
            }
            Fault::DeleteHold => self.statics.delete_hold(
                &mut self.ctx,
                &mut self.slots,
                &mut self.outputs,
                &mut self.rng,
            ),
            Fault::KillSeqMember
            | Fault::RestartSeqMember
            | Fault::PartitionSeqMember
            | Fault::SecondSeqServer
            | Fault::RestoreSeqTable => {
                let Some(seq) = &mut self.seq else {
                    return false;
                };
                match fault {
                    Fault::KillSeqMember => seq.kill(&mut self.ctx, &mut self.rng),
                    Fault::RestartSeqMember => seq.restart(&mut self.ctx, &mut self.rng),
                    Fault::SecondSeqServer => seq.second_server(&mut self.ctx),
                    Fault::RestoreSeqTable => seq.backup_or_put_back(&mut self.ctx),
                    _ => seq.partition(&mut self.ctx, &mut self.rng),
                }
            }
            Fault::ClockBack5ms | Fault::ClockBack1s | Fault::ClockBack1h => {
                let Some(i) = self.pick("embed", true) else {
                    return false;
                };
                let Some(incarnation) = self.slots[i].run.as_ref().map(|r| r.incarnation) else {
                    return false;
                };
                let line = match fault {
                    Fault::ClockBack5ms => "step -5",
                    Fault::ClockBack1s => "step -1000",
                    _ => "step -3600000",
                };
                if !self.slots[i].send(incarnation, line) {
                    return false;
                }
                let name = self.slots[i].name.clone();
                self.ctx.event(format!("{name}.{incarnation}: {line}"));
                if fault == Fault::ClockBack1h {
                    let slot = i;
                    self.follow_ups.push((
                        now + Duration::from_secs(3),
                        FollowUp::Send {
                            slot,
                            incarnation,
                            line: "restart",
                        },
                    ));
                    self.follow_ups.push((
                        now + Duration::from_secs(6),
                        FollowUp::Send {
                            slot,
                            incarnation,
                            line: "step 3600000",
                        },
                    ));
                }
                true
            }
            _ => false,
        }
    }

    fn zk_restart_pending(&self) -> bool {
        self.follow_ups
            .iter()
            .any(|(_, f)| matches!(f, FollowUp::RestartZk(_)))
    }

    /// Stops the producers (bounded), then the servers, then ZooKeeper and the other stores.
    fn finish(&mut self) {
        // A store that is down comes back first, so the workers leasing there stop cleanly.
        self.stores.settle(&mut self.ctx);
        self.ctx.event("stopping the producers");
        for s in &mut self.slots {
            s.stop();
        }
        let until = Instant::now() + STOP_GRACE;
        while self.slots.iter().any(Slot::running) {
            if Instant::now() >= until {
                for s in &mut self.slots {
                    if let Some(run) = &mut s.run {
                        let what = format!(
                            "{} (pid {}) still ran {} s after it was told to stop (killed); its \
                             log ends:\n{}",
                            run.proc.name(),
                            run.proc.pid(),
                            STOP_GRACE.as_secs(),
                            run.proc.log_tail(12)
                        );
                        self.ctx.finding(what);
                        run.proc.kill();
                    }
                }
            }
            self.tick_servers();
            self.tick_zk();
            self.run_follow_ups();
            self.tick_producers(false, 0);
            thread::sleep(TICK);
        }
        self.statics.finish(&mut self.ctx, &self.slots);
        if let Some(seq) = &mut self.seq {
            self.ctx.event("stopping the sequence group");
            seq.finish(&mut self.ctx);
        }
        if let Some((i, handle)) = self.zk_restart.take() {
            let _ = handle.join();
            self.ctx
                .event(format!("ZooKeeper node {} restart finished", i + 1));
        }
        self.ctx.event("stopping the servers (SIGTERM)");
        for s in &mut self.tcp {
            s.retire(&mut self.ctx);
        }
        self.rest.retire(&mut self.ctx);
        let mut zk = self.zk.lock().unwrap_or_else(PoisonError::into_inner);
        for i in 0..3 {
            zk.kill(i);
        }
        drop(zk);
        self.stores.stop();
        self.ctx.event("every process stopped");
    }

    /// Checks every ID on disk and prints the report; the exit status says what it found.
    fn report(
        mut self,
        started_wall: u64,
        issuing: Duration,
        took: Duration,
    ) -> anyhow::Result<ExitCode> {
        self.ctx.event(format!(
            "checking {} ID files for duplicates on disk",
            self.outputs.len()
        ));
        let check_began = Instant::now();
        let tmp = self.ctx.dir.join("sort");
        let checked = check::check(&self.outputs, &tmp, self.args.run_len, started_wall)
            .context("checking the ID files")?;
        let _ = fs::remove_dir(&tmp);
        let check_took = check_began.elapsed();
        let o = &checked.outcome;
        let mut text = String::new();
        let _ = writeln!(text, "vesta-rs soak report");
        let _ = writeln!(text, "date: {}", vesta_core::Epoch::rfc3339(started_wall));
        let _ = writeln!(text, "machine: {}", machine());
        let _ = writeln!(
            text,
            "duration: {} (issuing {}, stopping {}), check {} ({} sorted runs on disk)",
            hms(took),
            hms(issuing),
            hms(took.saturating_sub(issuing)),
            hms(check_took),
            o.runs
        );
        let _ = writeln!(text, "IDs handed out and checked: {}", o.total);
        for (class, c) in &checked.classes {
            let _ = writeln!(
                text,
                "  {class}: {} IDs from {} machine IDs, unit starts {} .. {}{}",
                c.ids,
                c.machine_count(),
                vesta_core::Epoch::rfc3339(c.earliest_ms),
                vesta_core::Epoch::rfc3339(c.latest_ms),
                if c.before_start > 0 {
                    format!(
                        ", {} IDs dated before the soak (issued on a clock stepped back)",
                        c.before_start
                    )
                } else {
                    String::new()
                }
            );
        }
        let _ = writeln!(
            text,
            "processes: {} ID files, {} producers killed by the soak, {} clean worker summaries",
            self.outputs.len(),
            self.exits_killed,
            self.summaries
        );
        let _ = writeln!(text, "faults injected: {}", self.schedule.total());
        for f in Fault::ALL {
            let n = self.schedule.injected.get(&f).copied().unwrap_or(0);
            let skipped = self.schedule.skipped.get(&f).copied().unwrap_or(0);
            let _ = writeln!(
                text,
                "  {:<32} {n}{}",
                f.name(),
                if skipped > 0 {
                    format!(" ({skipped} skipped: no target)")
                } else {
                    String::new()
                }
            );
        }
        let _ = writeln!(
            text,
            "seen by workers that stopped cleanly (killed ones took their counts with them):"
        );
        for (k, n) in &self.worker_counts {
            let _ = writeln!(text, "  {k}: {n}");
        }
        let _ = writeln!(text, "{}", self.statics.report());
        let _ = writeln!(
            text,
            "client errors (`vesta gen` runs that exited non-zero): {}",
            self.client_errors.len()
        );
        for e in &self.client_errors {
            let _ = writeln!(text, "  {e}");
        }
        let partial: u64 = o.files.iter().filter(|f| f.partial_tail_bytes > 0).count() as u64;
        let bad: u64 = o.files.iter().map(|f| f.bad_lines).sum();
        let wrong: u64 = checked.classes.values().map(|c| c.wrong).sum();
        let _ = writeln!(
            text,
            "files cut by a kill mid-write: {partial}; malformed lines: {bad}; IDs with a wrong \
             genMethod, pool, type or version: {wrong}"
        );
        if bad > 0 || wrong > 0 {
            self.ctx.finding(format!(
                "{bad} malformed lines and {wrong} IDs with wrong fields"
            ));
        }
        let _ = writeln!(text, "duplicates: {}", o.duplicates);
        let mut violations = 0;
        if let Some(seq) = &self.seq {
            self.ctx.event("checking the sequence calls' history");
            let checked = seq
                .check(self.args.keep)
                .context("checking the sequence calls")?;
            let _ = write!(text, "{}", checked.text);
            for f in checked.findings {
                self.ctx.finding(f);
            }
            violations = checked.violations;
            if violations > 0 {
                self.ctx.finding(format!(
                    "{violations} sequence history violations (kept in {})",
                    self.ctx.dir.join("seq").display()
                ));
            }
        }
        if o.duplicates > 0 {
            let evidence = check::evidence(
                &self.outputs,
                &o.examples,
                &self.ctx.vesta,
                &self.ctx.dir.join("duplicates.txt"),
            );
            let _ = writeln!(text, "{evidence}");
        }
        let _ = writeln!(text, "findings: {}", self.ctx.findings.len());
        for f in &self.ctx.findings {
            let _ = writeln!(text, "  - {}", f.replace('\n', "\n    "));
        }
        let keep = self.args.keep || o.duplicates > 0;
        if !keep {
            let _ = fs::remove_dir_all(&self.ctx.data);
        }
        let _ = writeln!(
            text,
            "work dir: {} (logs, events.log, report.txt{})",
            self.ctx.dir.display(),
            if keep { ", ids/" } else { "" }
        );
        println!("\n{text}");
        fs::write(self.ctx.dir.join("report.txt"), &text)?;
        Ok(if o.duplicates > 0 || violations > 0 {
            ExitCode::from(2)
        } else if self.ctx.findings.is_empty() {
            ExitCode::SUCCESS
        } else {
            ExitCode::from(1)
        })
    }
}

/// Host name, CPUs and load, for the report.
fn machine() -> String {
    let host = fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let cpus = thread::available_parallelism().map_or(0, |n| n.get());
    let load = fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let load: Vec<&str> = load.split_whitespace().take(3).collect();
    format!(
        "{} ({cpus} CPUs, load average at the end {})",
        host.trim(),
        load.join(" ")
    )
}

/// A PID for the event log.
pub fn pid_text(pid: Option<u32>) -> String {
    pid.map_or_else(|| "unknown".into(), |p| p.to_string())
}

fn hms(d: Duration) -> String {
    let s = d.as_secs();
    format!("{}m{:02}s", s / 60, s % 60)
}
