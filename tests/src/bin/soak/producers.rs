//! The soak's producers: slots that each keep one process handing out IDs into a file of its
//! own — an embedded worker, a `vesta gen --server` run, or a REST client — and start the next
//! one when it ends. Each slot watches its file grow: a process that writes nothing for
//! [`STALL`] is reported as a hang.

use std::fs;
use std::path::PathBuf;
use std::process::{Command, ExitStatus};
use std::time::{Duration, Instant};

use vesta_core::{GenMethod, IdType};
use vesta_tests::soak::check::{Format, IdFile};
use vesta_tests::soak::child::Proc;

use crate::Ctx;

/// A producer that writes nothing for this long is reported as stalled.
const STALL: Duration = Duration::from_secs(30);

/// Where an embedded worker leases its machine ID.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Store {
    /// The ZooKeeper ensemble.
    Zk,
    /// The PostgreSQL database (`[machine] source = "sql"`).
    Sql,
    /// The etcd member (`[machine] source = "etcd"`).
    Etcd,
}

impl Store {
    /// Vesta's version bit of its workers' IDs: each store hands out machine IDs from the same
    /// pool, so stores whose workers share a type use different version bits (ZooKeeper 0, SQL
    /// and etcd 1) and their ID spaces never meet, as two deployments with their own epochs.
    pub fn version(self) -> u8 {
        match self {
            Store::Zk => 0,
            Store::Sql | Store::Etcd => 1,
        }
    }
}

/// What a slot runs.
#[derive(Clone, Debug)]
pub enum Role {
    /// `soak_worker embed` with this layout, leasing from this store.
    /// An embedded issuer of a layout, leasing from a store, holding this many machine IDs.
    Embed(IdType, Store, u64),
    /// `vesta gen --server LIST`.
    TcpGen {
        /// The server list, in this slot's order of preference.
        servers: String,
    },
    /// `soak_worker rest`.
    Rest {
        /// The server's base URL.
        url: String,
    },
    /// `vesta gen --config CONF`: a static machine ID with a state file (the static group,
    /// `statics`).
    StaticGen {
        /// Vesta's type of its IDs.
        id_type: IdType,
        /// Its config.
        conf: PathBuf,
    },
    /// `vesta gen --config CONF` in Leaf's ID space under one of its names (`leaf`,
    /// `twitter`) on a static machine ID that another slot holds under the other name (the
    /// static group's alias pair, `statics`).
    AliasGen {
        /// The layout's name in its config.
        layout: &'static str,
        /// The machine ID (Leaf's worker field).
        machine: u64,
        /// Its config.
        conf: PathBuf,
    },
}

impl Role {
    /// The class in the report: `embed` (ZooKeeper), `embed-sql`, `embed-etcd`, `tcp`,
    /// `rest` or `static`.
    pub fn class(&self) -> &'static str {
        match self {
            Role::Embed(_, Store::Zk, _) => "embed",
            Role::Embed(_, Store::Sql, _) => "embed-sql",
            Role::Embed(_, Store::Etcd, _) => "embed-etcd",
            Role::TcpGen { .. } => "tcp",
            Role::Rest { .. } => "rest",
            Role::StaticGen { .. } => "static",
            Role::AliasGen { .. } => "alias",
        }
    }

    /// True for `vesta gen` runs (paced chunks, IDs as decimal text).
    pub fn is_gen(&self) -> bool {
        matches!(
            self,
            Role::TcpGen { .. } | Role::StaticGen { .. } | Role::AliasGen { .. }
        )
    }

    /// True for embedded workers (of any store).
    pub fn is_embed(&self) -> bool {
        matches!(self, Role::Embed(..))
    }

    /// The genMethod its IDs must carry.
    pub fn gen_method(&self) -> GenMethod {
        match self {
            Role::Embed(..) | Role::StaticGen { .. } | Role::AliasGen { .. } => GenMethod::Embed,
            Role::TcpGen { .. } => GenMethod::Server,
            Role::Rest { .. } => GenMethod::Rest,
        }
    }

    /// The version bit its IDs must carry.
    pub fn version(&self) -> u8 {
        match self {
            Role::Embed(_, store, _) => store.version(),
            _ => 0,
        }
    }
}

/// One file of IDs and who wrote it.
#[derive(Clone, Debug)]
pub struct Output {
    /// The file.
    pub file: IdFile,
    /// The writer's role.
    pub role: Role,
}

/// A process of a slot.
pub struct Running {
    /// The process.
    pub proc: Proc,
    /// Which slot incarnation it is.
    pub incarnation: u32,
    output: usize,
    summary: Option<PathBuf>,
    len: u64,
    grew: Instant,
    stalled: bool,
    killed: bool,
    stopping: bool,
}

/// A slot that keeps one producer running.
pub struct Slot {
    /// `embed-1`, `tcp-2`, `rest-1`...
    pub name: String,
    /// What it runs.
    pub role: Role,
    /// Its process, if one runs.
    pub run: Option<Running>,
    incarnation: u32,
    next_start: Instant,
    seed: u64,
}

impl Slot {
    /// A slot whose first process starts at the next tick.
    pub fn new(name: String, role: Role, seed: u64) -> Self {
        Slot {
            name,
            role,
            run: None,
            incarnation: 0,
            next_start: Instant::now(),
            seed,
        }
    }

    /// True if its process runs.
    pub fn running(&self) -> bool {
        self.run.is_some()
    }

    /// Bytes its process has written so far (0 if none runs).
    pub fn output_len(&self, outputs: &[Output]) -> u64 {
        self.run.as_ref().map_or(0, |r| {
            fs::metadata(&outputs[r.output].file.path).map_or(0, |m| m.len())
        })
    }

    /// True if its process has not exited (checked now).
    pub fn alive(&mut self) -> bool {
        self.run.as_mut().is_some_and(|r| r.proc.running())
    }

    /// True if its process runs and has written IDs.
    pub fn writing(&self) -> bool {
        self.run.as_ref().is_some_and(|r| r.len > 0 && !r.killed)
    }

    /// Starts the next process now: `count` IDs at `rate` per second.
    pub fn spawn(&mut self, ctx: &mut Ctx, outputs: &mut Vec<Output>, count: u64, rate: f64) {
        self.incarnation += 1;
        let label = format!("{}.{}", self.name, self.incarnation);
        let log = ctx.logs.join(format!("{label}.log"));
        let (format, ext) = if self.role.is_gen() {
            (Format::Text, "txt")
        } else {
            (Format::Binary, "bin")
        };
        let path = ctx.data.join(format!("{label}.{ext}"));
        let summary = ctx.logs.join(format!("{label}.summary.json"));
        let worker = |mode: &[&str]| {
            let mut c = Command::new(&ctx.worker);
            c.arg("--out")
                .arg(&path)
                .arg("--summary")
                .arg(&summary)
                .args(["--count", &count.to_string()])
                .args(["--rate", &format!("{rate:.1}")])
                .args([
                    "--seed",
                    &(self.seed ^ u64::from(self.incarnation)).to_string(),
                ])
                .args(mode);
            c
        };
        let (cmd, stdout, summary) = match &self.role {
            Role::Embed(t, store, ids) => {
                let t = t.to_string();
                let ids = ids.to_string();
                let version = store.version().to_string();
                let session = crate::SESSION_MS.to_string();
                let report = crate::REPORT_MS.to_string();
                let (flag, at) = match store {
                    Store::Zk => ("--zk", ctx.zk_connect.as_str()),
                    Store::Sql => ("--machine-db", ctx.sql_url.as_str()),
                    Store::Etcd => ("--etcd", ctx.etcd_url.as_str()),
                };
                let mode = [
                    "embed",
                    flag,
                    at,
                    "--root",
                    crate::ZK_ROOT,
                    "--type",
                    &t,
                    "--id-version",
                    &version,
                    "--session-ms",
                    &session,
                    "--report-ms",
                    &report,
                    "--instance",
                    &label,
                    "--machine-ids",
                    &ids,
                ];
                (worker(&mode), None, Some(summary))
            }
            Role::Rest { url } => (worker(&["rest", "--url", url]), None, Some(summary)),
            Role::TcpGen { .. } | Role::StaticGen { .. } | Role::AliasGen { .. } => {
                let mut c = Command::new(&ctx.vesta);
                match &self.role {
                    Role::TcpGen { servers } => c.args(["gen", "--server", servers]),
                    Role::StaticGen { conf, .. } | Role::AliasGen { conf, .. } => {
                        crate::statics::prepare(&mut c, ctx, 0);
                        c.arg("gen").arg("--config").arg(conf)
                    }
                    _ => unreachable!("matched above"),
                };
                c.args(["-n", &count.to_string()]);
                match fs::File::create(&path) {
                    Ok(f) => (c, Some(f), None),
                    Err(e) => {
                        ctx.finding(format!("cannot create {}: {e}", path.display()));
                        return;
                    }
                }
            }
        };
        let piped = !self.role.is_gen();
        match Proc::spawn(label.clone(), cmd, &log, stdout, piped, &ctx.pids) {
            Ok(proc) => {
                outputs.push(Output {
                    file: IdFile {
                        path,
                        format,
                        process: label,
                    },
                    role: self.role.clone(),
                });
                self.run = Some(Running {
                    proc,
                    incarnation: self.incarnation,
                    output: outputs.len() - 1,
                    summary,
                    len: 0,
                    grew: Instant::now(),
                    stalled: false,
                    killed: false,
                    stopping: false,
                });
            }
            Err(e) => ctx.finding(format!("{label} could not be spawned: {e}")),
        }
    }

    /// The next process may start at `at` (pacing of `vesta gen` runs).
    pub fn start_not_before(&mut self, at: Instant) {
        self.next_start = at;
    }

    /// True if a new process is due.
    pub fn due(&self) -> bool {
        self.run.is_none() && Instant::now() >= self.next_start
    }

    /// The fault: SIGKILL its process. False if none runs.
    pub fn kill(&mut self, ctx: &mut Ctx) -> bool {
        let Some(run) = &mut self.run else {
            return false;
        };
        ctx.event(format!(
            "SIGKILL {} (pid {})",
            run.proc.name(),
            run.proc.pid()
        ));
        run.proc.kill();
        run.killed = true;
        true
    }

    /// Sends a command to its worker; false if it has none or it cannot take it.
    pub fn send(&mut self, incarnation: u32, line: &str) -> bool {
        match &mut self.run {
            Some(run) if run.incarnation == incarnation => run.proc.send(line),
            _ => false,
        }
    }

    /// Asks its process to finish (workers: `stop`; `vesta gen` ends on its own).
    pub fn stop(&mut self) {
        if let Some(run) = &mut self.run {
            run.stopping = true;
            if run.proc.send("stop") {
                run.proc.close_stdin();
            }
        }
    }

    /// Watches the process: growth of its file, stalls, its exit. Returns when it ended.
    pub fn tick(&mut self, ctx: &mut Ctx, outputs: &[Output]) -> Option<Ended> {
        let run = self.run.as_mut()?;
        let len = fs::metadata(&outputs[run.output].file.path).map_or(0, |m| m.len());
        if len > run.len {
            if run.stalled {
                ctx.finding(format!(
                    "{} wrote again after a stall of {} s",
                    run.proc.name(),
                    run.grew.elapsed().as_secs()
                ));
                run.stalled = false;
            }
            run.len = len;
            run.grew = Instant::now();
        } else if !run.stalled && !run.stopping && run.grew.elapsed() >= STALL && run.proc.running()
        {
            run.stalled = true;
            ctx.finding(format!(
                "{} (pid {}) wrote no ID for {} s; its log ends:\n{}",
                run.proc.name(),
                run.proc.pid(),
                STALL.as_secs(),
                run.proc.log_tail(12)
            ));
        }
        let status = run.proc.try_wait()?;
        let run = self.run.take()?;
        Some(Ended {
            started: run.proc.started(),
            status,
            killed: run.killed,
            summary: run.summary.clone(),
            name: run.proc.name().to_owned(),
            log_tail: run.proc.log_tail(3),
        })
    }
}

/// A process of a slot that has exited.
pub struct Ended {
    /// When it started.
    pub started: Instant,
    /// Its exit status.
    pub status: ExitStatus,
    /// True if the soak killed it.
    pub killed: bool,
    /// Its summary file (workers).
    pub summary: Option<PathBuf>,
    /// Its label.
    pub name: String,
    /// The end of its log.
    pub log_tail: String,
}
