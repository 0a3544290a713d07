//! The sequence group: `--seq-members` `vesta serve tcp --seq-cluster` members on a database of
//! their own on the soak's PostgreSQL, coordinated there or (`--seq-coordination`) through the
//! soak's etcd or ZooKeeper ensemble, each reaching every one of those servers through a proxy
//! of its own (`vesta_tests::proxy::Proxy`) that a fault turns into a blackhole, and
//! `--seq-workers` `soak_worker seq` processes calling them (every member listed: members
//! restart on the same fixed ports). Its faults: a member SIGKILLed (started again a second
//! later), stopped cleanly (SIGTERM: it hands its sets off) and started again, and cut off from
//! the database and the coordination service (blackhole for [`PARTITION_FOR`], then healed);
//! with ZooKeeper coordination the soak's own faults (the leader killed) hit the members too;
//! and two operators' mistakes (`seq_mistakes.rs`): a second server on the table, and the
//! table backed up then put back under the members. At the end every call file is loaded and the history
//! checker runs over all calls: no number twice per key, and a call that began after another
//! ended answered above it.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use clap::ValueEnum as _;
use vesta_tests::history::{self, RecViolation};
use vesta_tests::proxy::Proxy;
use vesta_tests::soak::child::Proc;
use vesta_tests::soak::rng::Rng;
use vesta_tests::soak::seq::{self, Loaded, RECORD_BYTES};
use vesta_tests::zk::free_ports;

use crate::Ctx;
use crate::servers::{Kind, Server};

/// The members' lease (`[seq] cluster_ttl_ms`): short, so a killed member's keys move soon.
pub const TTL_MS: u64 = 2_000;
/// The members' `[seq] store_timeout_ms`.
const STORE_TIMEOUT_MS: u64 = 1_000;
/// The members' `[seq] max_memory_mb`: every key of the run in memory at once with room (the
/// default, 256, would do; a smaller bound would evict, which the library's tests cover).
const MAX_MEMORY_MB: u64 = 128;
/// How long a partitioned member stays cut off: its lease expires and its sets move meanwhile.
pub const PARTITION_FOR: Duration = Duration::from_millis(3 * TTL_MS);
/// The first member's machine ID (the server pool's top: the leasing servers, lowest free ID
/// first, never get there).
pub(crate) const FIRST_MACHINE: u64 = 1010;
/// With etcd or ZooKeeper coordination a member's static machine ID is registered there too,
/// under a lease or session of this length: a SIGKILLed member's registration outlives it by
/// up to that long.
const REGISTRATION_MS: u64 = 2_000;
/// How long a SIGKILLed member stays down when its machine ID is registered in etcd or
/// ZooKeeper: until its registration expired (an earlier start is refused in one line, "another
/// issuer runs with this static machine ID", which the soak would count as a finding), with
/// room for a ZooKeeper leader election, which restarts every session's timeout.
const REGISTERED_RESTART_PAUSE: Duration = Duration::from_millis(3 * REGISTRATION_MS);
/// A worker whose file does not grow this long is stalled (a finding).
const STALL: Duration = Duration::from_secs(30);
/// How long workers get to stop.
const STOP_GRACE: Duration = Duration::from_secs(60);
/// Violations kept for the report.
const MAX_VIOLATIONS: usize = 20;

/// Where the members keep their leases and the sets' owners (`[seq] coordination`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum SeqCoordination {
    /// The sequences' own PostgreSQL database.
    Sql,
    /// The soak's etcd member.
    Etcd,
    /// The soak's ZooKeeper ensemble.
    Zookeeper,
}

impl SeqCoordination {
    /// What a member is cut off from in a partition, for the event log.
    fn links(self) -> &'static str {
        match self {
            SeqCoordination::Sql => "PostgreSQL",
            SeqCoordination::Etcd => "PostgreSQL and etcd",
            SeqCoordination::Zookeeper => "PostgreSQL and ZooKeeper",
        }
    }
}

/// The port of `host:port` or `http://host:port`.
fn port_of(addr: &str) -> anyhow::Result<u16> {
    let port = addr.rsplit(':').next().unwrap_or_default();
    port.trim_end_matches('/')
        .parse()
        .with_context(|| format!("no port in {addr}"))
}

/// A proxy to `127.0.0.1:port`.
fn proxy_to(port: u16) -> Proxy {
    Proxy::start(([127, 0, 0, 1], port).into())
}

/// One `soak_worker seq` slot and its incarnations.
struct Worker {
    name: String,
    incarnation: u32,
    proc: Option<Proc>,
    file: PathBuf,
    summary: PathBuf,
    /// Calls left for this slot (its next incarnation gets what the last did not call).
    count: u64,
    len: u64,
    grew_at: Instant,
    stalled: bool,
    done: bool,
}

/// The group.
pub struct SeqGroup {
    /// The members.
    pub members: Vec<Server>,
    /// Each member's proxies: to PostgreSQL first, then to the coordination service's servers.
    proxies: Vec<Vec<Proxy>>,
    coordination: SeqCoordination,
    workers: Vec<Worker>,
    files: Vec<PathBuf>,
    dir: PathBuf,
    servers: String,
    tasks: u64,
    rate: f64,
    seed: u64,
    /// The member cut off and when it heals.
    partitioned: Option<(usize, Instant)>,
    /// A config reaching the table and its coordination directly, for `vesta seq` runs.
    pub(crate) tool_conf: PathBuf,
    /// The table's backup, once taken (`seq_mistakes.rs`).
    pub(crate) backup: Option<PathBuf>,
    /// When to raise the table back after a restore.
    pub(crate) raise_at: Option<Instant>,
    /// Calls and numbers the workers that stopped cleanly said they made.
    calls_said: u64,
    numbers_said: u64,
    /// Their counters (failed calls by kind, client retries, bad answers).
    counts: BTreeMap<String, u64>,
    worker_runs: u64,
}

/// What the check found.
pub struct Checked {
    /// The report's lines.
    pub text: String,
    /// Violations of the history's rules.
    pub violations: usize,
    /// Findings besides (bad records, bad answers).
    pub findings: Vec<String>,
}

impl SeqGroup {
    /// Starts `members` members (through their proxies), coordinated through `coordination`,
    /// and notes `workers` worker slots, each to make `calls / workers` calls at `rate /
    /// workers` calls per second with `tasks` tasks. Workers start with `tick_workers` once the
    /// members serve.
    #[allow(clippy::too_many_arguments)]
    pub fn start(
        members: usize,
        coordination: SeqCoordination,
        workers: usize,
        calls: u64,
        rate: f64,
        tasks: u64,
        ctx: &mut Ctx,
        rng: &mut Rng,
    ) -> anyhow::Result<SeqGroup> {
        let dir = ctx.dir.join("seq");
        fs::create_dir_all(&dir)?;
        let ports = free_ports(members);
        let conf = format!(
            "[seq]\nstore_timeout_ms = {STORE_TIMEOUT_MS}\ncluster_ttl_ms = {TTL_MS}\n\
             max_memory_mb = {MAX_MEMORY_MB}\ncoordination = \"{}\"\n",
            coordination
                .to_possible_value()
                .map_or("sql".into(), |v| v.get_name().to_owned())
        );
        // The coordination service's servers, each reached through a proxy per member.
        let coord_ports = match coordination {
            SeqCoordination::Sql => Vec::new(),
            SeqCoordination::Etcd => vec![port_of(&ctx.etcd_url)?],
            SeqCoordination::Zookeeper => ctx
                .zk_connect
                .split(',')
                .map(port_of)
                .collect::<anyhow::Result<_>>()?,
        };
        let mut group = SeqGroup {
            members: Vec::new(),
            proxies: Vec::new(),
            coordination,
            workers: Vec::new(),
            files: Vec::new(),
            servers: ports
                .iter()
                .map(|p| format!("127.0.0.1:{p}"))
                .collect::<Vec<_>>()
                .join(","),
            dir,
            tasks,
            rate: rate / workers.max(1) as f64,
            seed: rng.next_u64(),
            partitioned: None,
            tool_conf: PathBuf::new(),
            backup: None,
            raise_at: None,
            calls_said: 0,
            numbers_said: 0,
            counts: BTreeMap::new(),
            worker_runs: 0,
        };
        group.tool_conf = group.write_tool_conf(&conf, ctx)?;
        for (i, port) in ports.iter().enumerate() {
            let proxy = proxy_to(ctx.pg_port);
            let url = ctx.seq_url.replace(
                &format!(":{}/", ctx.pg_port),
                &format!(":{}/", proxy.port()),
            );
            anyhow::ensure!(url != ctx.seq_url, "no port to replace in {}", ctx.seq_url);
            let name = format!("seq-{}", i + 1);
            let coord: Vec<Proxy> = coord_ports.iter().map(|&p| proxy_to(p)).collect();
            let through: Vec<String> = coord
                .iter()
                .map(|p| format!("127.0.0.1:{}", p.port()))
                .collect();
            let mut conf = conf.clone();
            match coordination {
                SeqCoordination::Sql => {}
                SeqCoordination::Etcd => {
                    let _ = write!(
                        conf,
                        "[etcd]\nendpoints = [\"http://{}\"]\nroot = \"/vesta/soak-seq\"\n\
                         timeout_ms = {STORE_TIMEOUT_MS}\nttl_ms = {REGISTRATION_MS}\n",
                        through[0]
                    );
                }
                SeqCoordination::Zookeeper => {
                    let _ = write!(
                        conf,
                        "[zookeeper]\nconnect = \"{}\"\nroot = \"/vesta/soak-seq\"\n\
                         session_timeout_ms = {REGISTRATION_MS}\n",
                        through.join(",")
                    );
                }
            }
            ctx.event(format!(
                "{name}: machine {}, port {port}, the database through proxy port {}{}",
                FIRST_MACHINE + i as u64,
                proxy.port(),
                if through.is_empty() {
                    String::new()
                } else {
                    format!(", {coordination:?} through {}", through.join(","))
                }
            ));
            let args = vec![
                "--machine".into(),
                (FIRST_MACHINE + i as u64).to_string(),
                "--seq-db".into(),
                url,
                "--seq-cluster".into(),
            ];
            let envs = vec![("VESTA_HOLD_DIR".to_owned(), ctx.dir.join("hold"))];
            let mut member = Server::start_with(&name, Kind::Tcp, *port, &conf, args, envs, ctx)?;
            if coordination != SeqCoordination::Sql {
                member.restart_pause = REGISTERED_RESTART_PAUSE;
            }
            group.members.push(member);
            group
                .proxies
                .push(std::iter::once(proxy).chain(coord).collect());
        }
        let per = calls.div_ceil(workers.max(1) as u64);
        for i in 0..workers {
            group.workers.push(Worker {
                name: format!("seq-worker-{}", i + 1),
                incarnation: 0,
                proc: None,
                file: PathBuf::new(),
                summary: PathBuf::new(),
                count: per,
                len: 0,
                grew_at: Instant::now(),
                stalled: false,
                done: per == 0,
            });
        }
        Ok(group)
    }

    /// The group's directory (call files, the tool's config, the table's backup).
    pub(crate) fn dir(&self) -> &std::path::Path {
        &self.dir
    }

    /// True once every member serves (or was given up on).
    pub fn settled(&self) -> bool {
        self.members.iter().all(Server::settled)
    }

    /// Moves the members' state machines on (and a restored table's raise, when due).
    pub fn tick_members(&mut self, ctx: &mut Ctx) {
        for m in &mut self.members {
            m.tick(ctx);
        }
        self.raise_when_due(ctx);
        if let Some((i, at)) = self.partitioned
            && Instant::now() >= at
        {
            self.proxies[i].iter().for_each(Proxy::heal);
            self.partitioned = None;
            ctx.event(format!(
                "healed {}'s links to {}",
                self.members[i].name,
                self.coordination.links()
            ));
        }
    }

    /// Reaps ended workers, notices stalls, and (while `spawn` holds) starts the workers that
    /// have calls left.
    pub fn tick_workers(&mut self, ctx: &mut Ctx, spawn: bool) {
        let now = Instant::now();
        for w in &mut self.workers {
            if let Some(proc) = &mut w.proc {
                let len = fs::metadata(&w.file).map_or(0, |m| m.len());
                if len > w.len {
                    w.len = len;
                    w.grew_at = now;
                    w.stalled = false;
                } else if now - w.grew_at >= STALL && !w.stalled && spawn {
                    w.stalled = true;
                    ctx.finding(format!(
                        "{} (pid {}) answered no call for {} s; its log ends:\n{}",
                        proc.name(),
                        proc.pid(),
                        STALL.as_secs(),
                        proc.log_tail(12)
                    ));
                }
                let Some(status) = proc.try_wait() else {
                    continue;
                };
                let name = proc.name().to_owned();
                let tail = proc.log_tail(12);
                w.proc = None;
                let summary: Option<serde_json::Value> = fs::read_to_string(&w.summary)
                    .ok()
                    .and_then(|t| serde_json::from_str(&t).ok());
                let calls = summary
                    .as_ref()
                    .and_then(|v| v.get("calls")?.as_u64())
                    .unwrap_or(0);
                if let Some(v) = &summary {
                    self.calls_said += calls;
                    self.numbers_said += v.get("numbers").and_then(|n| n.as_u64()).unwrap_or(0);
                    if let Some(counts) = v.get("counts").and_then(|c| c.as_object()) {
                        for (k, n) in counts {
                            *self.counts.entry(k.clone()).or_insert(0) += n.as_u64().unwrap_or(0);
                        }
                    }
                }
                // A clean stop ends the slot (it began its calls, or the soak asked it to stop);
                // after a failure the next incarnation makes the calls still missing.
                w.count = w.count.saturating_sub(calls);
                if status.success() && summary.is_some() {
                    ctx.event(format!("{name} stopped cleanly after {calls} calls"));
                    w.done = true;
                } else {
                    ctx.finding(format!(
                        "{name} exited with {status} (summary {}); its log ends:\n{tail}",
                        if summary.is_some() {
                            "written"
                        } else {
                            "missing"
                        }
                    ));
                }
            } else if spawn && !w.done && w.count > 0 {
                w.incarnation += 1;
                let label = format!("{}.{}", w.name, w.incarnation);
                w.file = self.dir.join(format!("{label}.calls"));
                w.summary = self.dir.join(format!("{label}.json"));
                w.len = 0;
                w.grew_at = now;
                let mut cmd = Command::new(&ctx.worker);
                cmd.arg("--out")
                    .arg(&w.file)
                    .arg("--summary")
                    .arg(&w.summary)
                    .args(["--count", &w.count.to_string()])
                    .args(["--rate", &format!("{:.1}", self.rate)])
                    .args([
                        "--seed",
                        &(self.seed
                            ^ (u64::from(w.incarnation) << 32)
                            ^ w.name.len() as u64
                            ^ self.files.len() as u64)
                            .to_string(),
                    ])
                    .args(["seq", "--servers", &self.servers])
                    .args(["--tasks", &self.tasks.to_string()])
                    .args([
                        "--retry-budget-ms",
                        &(4 * TTL_MS + 2 * STORE_TIMEOUT_MS).to_string(),
                    ]);
                let log = ctx.logs.join(format!("{label}.log"));
                match Proc::spawn(label.clone(), cmd, &log, None, true, &ctx.pids) {
                    Ok(proc) => {
                        ctx.event(format!(
                            "{label} started, pid {}: {} calls at {:.0}/s",
                            proc.pid(),
                            w.count,
                            self.rate
                        ));
                        self.files.push(w.file.clone());
                        self.worker_runs += 1;
                        w.proc = Some(proc);
                    }
                    Err(e) => {
                        ctx.finding(format!("{label} could not be spawned: {e}"));
                        w.done = true;
                    }
                }
            }
        }
    }

    /// Calls in the files now (records, from their sizes: a call answered in two ranges counts
    /// twice here, exactly in the check).
    pub fn calls_estimate(&self) -> u64 {
        self.files
            .iter()
            .map(|f| fs::metadata(f).map_or(0, |m| m.len()) / RECORD_BYTES as u64)
            .sum()
    }

    /// True once every worker slot has made its calls.
    pub fn done(&self) -> bool {
        self.workers.iter().all(|w| w.done && w.proc.is_none())
    }

    /// The fault: SIGKILL a random member that serves (started again a second later).
    pub fn kill(&mut self, ctx: &mut Ctx, rng: &mut Rng) -> bool {
        match self.pick_up(rng) {
            Some(i) => self.members[i].crash(ctx),
            None => false,
        }
    }

    /// The fault: SIGTERM a random member that serves (it hands its sets off), started again
    /// once it has exited.
    pub fn restart(&mut self, ctx: &mut Ctx, rng: &mut Rng) -> bool {
        match self.pick_up(rng) {
            Some(i) => self.members[i].restart(ctx),
            None => false,
        }
    }

    /// The fault: cut a random member that serves off from PostgreSQL and the coordination
    /// service (its proxies drop every byte, connections stay open) for [`PARTITION_FOR`]. False while another is cut off.
    pub fn partition(&mut self, ctx: &mut Ctx, rng: &mut Rng) -> bool {
        if self.partitioned.is_some() {
            return false;
        }
        let Some(i) = self.pick_up(rng) else {
            return false;
        };
        self.proxies[i].iter().for_each(Proxy::blackhole);
        self.partitioned = Some((i, Instant::now() + PARTITION_FOR));
        ctx.event(format!(
            "cut {} off from {} (blackhole) for {} s",
            self.members[i].name,
            self.coordination.links(),
            PARTITION_FOR.as_secs()
        ));
        true
    }

    fn pick_up(&self, rng: &mut Rng) -> Option<usize> {
        let up: Vec<usize> = (0..self.members.len())
            .filter(|&i| self.members[i].is_up())
            .collect();
        (!up.is_empty()).then(|| up[rng.index(up.len())])
    }

    /// The end: the workers stop (bounded), a partition heals, the members stop cleanly.
    pub fn finish(&mut self, ctx: &mut Ctx) {
        for w in &mut self.workers {
            if let Some(p) = &mut w.proc {
                p.send("stop");
                p.close_stdin();
            }
        }
        let until = Instant::now() + STOP_GRACE;
        while self.workers.iter().any(|w| w.proc.is_some()) {
            if Instant::now() >= until {
                for w in &mut self.workers {
                    if let Some(p) = &mut w.proc {
                        let what = format!(
                            "{} (pid {}) still ran {} s after it was told to stop (killed); its \
                             log ends:\n{}",
                            p.name(),
                            p.pid(),
                            STOP_GRACE.as_secs(),
                            p.log_tail(12)
                        );
                        ctx.finding(what);
                        p.kill();
                    }
                }
            }
            self.tick_members(ctx);
            self.tick_workers(ctx, false);
            std::thread::sleep(Duration::from_millis(100));
        }
        if let Some((i, _)) = self.partitioned.take() {
            self.proxies[i].iter().for_each(Proxy::heal);
            ctx.event(format!(
                "healed {}'s links to {}",
                self.members[i].name,
                self.coordination.links()
            ));
        }
        for m in &mut self.members {
            m.retire(ctx);
        }
        self.proxies.clear();
    }

    /// Loads every call file and runs the history checker over all calls.
    pub fn check(&self, keep: bool) -> anyhow::Result<Checked> {
        let began = Instant::now();
        let mut recs = Vec::new();
        let mut loaded = Loaded::default();
        for f in &self.files {
            if f.exists() {
                seq::load(f, &mut recs, &mut loaded)?;
            }
        }
        let load_took = began.elapsed();
        let (summary, violations) = history::check_recs(&mut recs, MAX_VIOLATIONS);
        let check_took = began.elapsed() - load_took;
        drop(recs);
        let mut text = String::new();
        let mut findings = Vec::new();
        let _ = writeln!(
            text,
            "sequence group: {} members, {} worker runs; calls checked {} ({} answered ranges), \
             numbers {} over {} keys; loaded in {:.1} s, checked in {:.1} s",
            self.members.len(),
            self.worker_runs,
            loaded.calls,
            summary.calls,
            summary.numbers,
            summary.keys,
            load_took.as_secs_f64(),
            check_took.as_secs_f64()
        );
        let _ = writeln!(
            text,
            "  said by workers that stopped cleanly: {} calls, {} numbers",
            self.calls_said, self.numbers_said
        );
        for (k, n) in &self.counts {
            let _ = writeln!(text, "  {k}: {n}");
        }
        let _ = writeln!(
            text,
            "  call files cut by a kill mid-write: {}; malformed records: {}",
            loaded.cut, loaded.bad
        );
        if loaded.bad > 0 {
            findings.push(format!("{} malformed sequence call records", loaded.bad));
        }
        let bad_answers = self.counts.get("bad answer").copied().unwrap_or(0);
        if bad_answers > 0 {
            findings.push(format!(
                "{bad_answers} sequence answers were not the numbers asked (see the workers' logs)"
            ));
        }
        let _ = writeln!(text, "  history violations: {}", violations.len());
        for v in &violations {
            let _ = writeln!(text, "    {}", describe(v));
        }
        if !keep && violations.is_empty() {
            let _ = fs::remove_dir_all(&self.dir);
        }
        Ok(Checked {
            text,
            violations: violations.len(),
            findings,
        })
    }
}

/// A violation with its key spelled out.
fn describe(v: &RecViolation) -> String {
    format!("{v} (key {:?})", seq::key(v.a.key))
}
