//! The soak's servers: `vesta serve tcp` (a pair), `vesta serve rest` and the sequence group's
//! members (`vesta serve tcp --seq-cluster`, see `seqs.rs`), each on a fixed loopback port so clients keep their address lists across restarts, each leasing its machine ID
//! from the ensemble. A small state machine per server: starting (until it prints its
//! "listening on" line), up, stopping (after SIGTERM), down (until it is started again).

use std::fs;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use vesta_tests::soak::child::Proc;

use crate::Ctx;

/// How long a server may take to start serving.
const START_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a server may take to stop after SIGTERM (its drain grace is 5 s).
const STOP_TIMEOUT: Duration = Duration::from_secs(20);
/// Pause between a crash and the next start.
const RESTART_PAUSE: Duration = Duration::from_secs(1);

/// Which server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `vesta serve tcp`.
    Tcp,
    /// `vesta serve rest`.
    Rest,
}

impl Kind {
    fn command(self) -> &'static str {
        match self {
            Kind::Tcp => "tcp",
            Kind::Rest => "rest",
        }
    }

    fn ready_line(self) -> &'static str {
        match self {
            Kind::Tcp => "vesta-tcp listening on",
            Kind::Rest => "vesta-rest listening on",
        }
    }
}

enum State {
    Starting { proc: Proc, deadline: Instant },
    Up(Proc),
    Stopping { proc: Proc, deadline: Instant },
    Down { restart_at: Instant },
    Retired,
}

/// One server and its incarnations.
pub struct Server {
    /// `tcp-a`, `tcp-b`, `rest`.
    pub name: String,
    kind: Kind,
    /// Its loopback port.
    pub port: u16,
    conf: PathBuf,
    /// Arguments after `--config FILE --listen ADDR`.
    args: Vec<String>,
    /// Environment set for it.
    envs: Vec<(String, PathBuf)>,
    incarnation: u32,
    state: State,
    /// How long it stays down after a SIGKILL or a failed start before it is started again.
    pub restart_pause: Duration,
}

impl Server {
    /// Writes its config (`ids` machine IDs, each a ZooKeeper lease under the soak's root)
    /// and starts it.
    pub fn start(
        name: &str,
        kind: Kind,
        port: u16,
        ids: u64,
        ctx: &mut Ctx,
    ) -> anyhow::Result<Server> {
        let conf = format!(
            "[machine]\nsource = \"zookeeper\"\nids = {ids}\n\n[zookeeper]\nconnect = \"{}\"\n\
                 root = \"{}\"\nsession_timeout_ms = {}\nreport_interval_ms = {}\n\
                 instance = \"{name}\"\n",
            ctx.zk_connect,
            crate::ZK_ROOT,
            crate::SESSION_MS,
            crate::REPORT_MS
        );
        Server::start_with(name, kind, port, &conf, Vec::new(), Vec::new(), ctx)
    }

    /// Writes `conf` as its config and starts it with `args` after the config and listen
    /// address, and `envs` set.
    pub fn start_with(
        name: &str,
        kind: Kind,
        port: u16,
        conf_text: &str,
        args: Vec<String>,
        envs: Vec<(String, PathBuf)>,
        ctx: &mut Ctx,
    ) -> anyhow::Result<Server> {
        let conf = ctx.dir.join(format!("{name}.toml"));
        fs::write(&conf, conf_text)?;
        let mut server = Server {
            name: name.to_owned(),
            kind,
            port,
            conf,
            args,
            envs,
            incarnation: 0,
            state: State::Down {
                restart_at: Instant::now(),
            },
            restart_pause: RESTART_PAUSE,
        };
        server.state = server.spawn(ctx);
        Ok(server)
    }

    /// `127.0.0.1:PORT`.
    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// True while it serves.
    pub fn is_up(&self) -> bool {
        matches!(self.state, State::Up(_))
    }

    /// True once it is up or given up on (for the start-up wait).
    pub fn settled(&self) -> bool {
        matches!(self.state, State::Up(_) | State::Retired)
    }

    fn spawn(&mut self, ctx: &mut Ctx) -> State {
        self.incarnation += 1;
        let label = format!("{}.{}", self.name, self.incarnation);
        let log = ctx.logs.join(format!("{label}.log"));
        let mut cmd = Command::new(&ctx.vesta);
        cmd.args(["serve", self.kind.command(), "--config"])
            .arg(&self.conf)
            .args(["--listen", &self.addr()])
            .args(&self.args)
            .envs(self.envs.iter().map(|(k, v)| (k, v)));
        match Proc::spawn(label.clone(), cmd, &log, None, false, &ctx.pids) {
            Ok(proc) => State::Starting {
                proc,
                deadline: Instant::now() + START_TIMEOUT,
            },
            Err(e) => {
                ctx.finding(format!("{label} could not be spawned: {e}"));
                State::Down {
                    restart_at: Instant::now() + self.restart_pause,
                }
            }
        }
    }

    /// Moves the state machine on: notices start-up, exits and timeouts; restarts when due.
    pub fn tick(&mut self, ctx: &mut Ctx) {
        let now = Instant::now();
        let down_for_a_while = State::Down {
            restart_at: now + self.restart_pause,
        };
        self.state = match std::mem::replace(&mut self.state, State::Retired) {
            State::Starting { mut proc, deadline } => {
                if let Some(status) = proc.try_wait() {
                    ctx.finding(format!(
                        "{} exited ({status}) while starting; its log ends:\n{}",
                        proc.name(),
                        proc.log_tail(8)
                    ));
                    down_for_a_while
                } else if let Some(line) = ready_line(&proc, self.kind) {
                    ctx.event(format!("{} up, pid {}: {line}", proc.name(), proc.pid()));
                    State::Up(proc)
                } else if now >= deadline {
                    ctx.finding(format!(
                        "{} did not start serving within {START_TIMEOUT:?}; its log ends:\n{}",
                        proc.name(),
                        proc.log_tail(8)
                    ));
                    proc.kill();
                    down_for_a_while
                } else {
                    State::Starting { proc, deadline }
                }
            }
            State::Up(mut proc) => match proc.try_wait() {
                Some(status) => {
                    ctx.finding(format!(
                        "{} exited unexpectedly ({status}); its log ends:\n{}",
                        proc.name(),
                        proc.log_tail(8)
                    ));
                    down_for_a_while
                }
                None => State::Up(proc),
            },
            State::Stopping { mut proc, deadline } => match proc.try_wait() {
                Some(status) => {
                    if status.success() {
                        ctx.event(format!("{} stopped cleanly", proc.name()));
                    } else {
                        ctx.finding(format!(
                            "{} exited with {status} after SIGTERM; its log ends:\n{}",
                            proc.name(),
                            proc.log_tail(8)
                        ));
                    }
                    State::Down { restart_at: now }
                }
                None if now >= deadline => {
                    ctx.finding(format!(
                        "{} still ran {STOP_TIMEOUT:?} after SIGTERM (killed); its log ends:\n{}",
                        proc.name(),
                        proc.log_tail(8)
                    ));
                    proc.kill();
                    State::Down { restart_at: now }
                }
                None => State::Stopping { proc, deadline },
            },
            State::Down { restart_at } if now >= restart_at => self.spawn(ctx),
            other => other,
        };
    }

    /// The fault: SIGKILL, started again a second later. False if it is not up.
    pub fn crash(&mut self, ctx: &mut Ctx) -> bool {
        let State::Up(proc) = &mut self.state else {
            return false;
        };
        ctx.event(format!("SIGKILL {} (pid {})", proc.name(), proc.pid()));
        proc.kill();
        self.state = State::Down {
            restart_at: Instant::now() + self.restart_pause,
        };
        true
    }

    /// The fault: SIGTERM (drain, release), started again once it has exited. False if it is
    /// not up.
    pub fn restart(&mut self, ctx: &mut Ctx) -> bool {
        let State::Up(proc) = &mut self.state else {
            return false;
        };
        ctx.event(format!("SIGTERM {} (pid {})", proc.name(), proc.pid()));
        if let Err(e) = proc.terminate() {
            ctx.finding(format!("SIGTERM to {} failed: {e}", proc.name()));
        }
        let State::Up(proc) = std::mem::replace(&mut self.state, State::Retired) else {
            unreachable!("checked above")
        };
        self.state = State::Stopping {
            proc,
            deadline: Instant::now() + STOP_TIMEOUT,
        };
        true
    }

    /// The end of the soak: SIGTERM and wait for a clean exit; no more restarts.
    pub fn retire(&mut self, ctx: &mut Ctx) {
        let proc = match std::mem::replace(&mut self.state, State::Retired) {
            State::Starting { proc, .. } | State::Up(proc) | State::Stopping { proc, .. } => proc,
            State::Down { .. } | State::Retired => return,
        };
        let mut proc = proc;
        if let Err(e) = proc.terminate() {
            ctx.finding(format!("SIGTERM to {} failed: {e}", proc.name()));
        }
        match proc.wait_timeout(STOP_TIMEOUT) {
            Some(status) if status.success() => {
                ctx.event(format!("{} stopped cleanly", proc.name()));
            }
            Some(status) => ctx.finding(format!(
                "{} exited with {status} after the final SIGTERM; its log ends:\n{}",
                proc.name(),
                proc.log_tail(8)
            )),
            None => {
                ctx.finding(format!(
                    "{} still ran {STOP_TIMEOUT:?} after the final SIGTERM (killed); its log \
                     ends:\n{}",
                    proc.name(),
                    proc.log_tail(8)
                ));
                proc.kill();
            }
        }
    }
}

/// The server's "listening on" line, once it is in its log.
fn ready_line(proc: &Proc, kind: Kind) -> Option<String> {
    let text = fs::read_to_string(proc.log()).ok()?;
    text.lines()
        .find(|l| l.starts_with(kind.ready_line()))
        .map(str::to_owned)
}
