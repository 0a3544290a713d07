//! `vesta serve tcp|rest`: run the central TCP issuer or the REST issuer. Both take the same
//! flags and print the same lines; with no flags each runs on its built-in defaults, equal to its
//! shipped conf file (conf/server.toml: 127.0.0.1:7654; conf/rest.toml: 127.0.0.1:8080), static
//! machine 924 (the first of the server pool), max-peak. `--segment-db URL` (or `[segment] db`)
//! turns on segment mode: Leaf-compatible numbers per tag beside the IDs.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context;
use vesta_core::{Epoch, IdType, Preset};
use vesta_embed::Status;
use vesta_embed::config::{FixedFrom, MachineChoice, MachinePlan, MachineSections};
use vesta_rest::{RestSection, RestServer};
use vesta_segment::GiveBackOutcome;
use vesta_server::{TcpSection, TcpServer};
use vesta_service::{Segments, ServeReport, ServerSection, ServiceConfig, shutdown};

use super::common::{apply_layout_flags, apply_machine_flags};
use super::serve_log::{LogFormat, run_server, say, set_log_format};
use crate::notify::{notify, spawn_watchdog, watchdog_interval};

/// `eprintln!` in the log format (`--log-format`).
macro_rules! say {
    ($($arg:tt)*) => { say(&format!($($arg)*)) };
}

/// Arguments of `vesta serve`.
#[derive(clap::Subcommand, Debug)]
pub enum Args {
    /// The central TCP issuer (genMethod server, protocol in docs/protocol.md)
    Tcp(ServerArgs),
    /// The REST issuer (genMethod rest, API in docs/openapi.yaml)
    Rest(ServerArgs),
}

/// The flags both servers take.
#[derive(clap::Args, Debug)]
pub struct ServerArgs {
    /// The server's config file (see conf/server.toml or conf/rest.toml) [default: built-in
    /// defaults, the same as that file]
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Address to listen on (port 0 picks a free port) [default: from the config]
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<SocketAddr>,
    /// Layout of the IDs: vesta, leaf, twitter, sonyflake, sonyflake-v2 or uid-generator (a custom layout
    /// comes from --config's [id.layout]) [default: the config's, else vesta]
    #[arg(long, value_name = "NAME")]
    pub layout: Option<Preset>,
    /// Vesta's type: max-peak, min-granularity, 0 or 1 [default: the config's, else max-peak]
    #[arg(long = "type", value_name = "TYPE")]
    pub id_type: Option<IdType>,
    /// Epoch: ms since 1970 or an RFC 3339 date-time [default: the layout's own]
    #[arg(long, value_name = "MS|RFC3339")]
    pub epoch: Option<Epoch>,
    /// Static machine ID (the whole node field) from the server pool (924..=1023 in Vesta's
    /// layout)
    #[arg(long, value_name = "N")]
    pub machine: Option<u64>,
    /// Hold K machine IDs, each with its own lease, mark and hold, calls spread over them:
    /// K times the layout's cap (static: --machine N..=N+K-1; a registry: K leases)
    /// [default: [machine] ids, else 1]
    #[arg(long, value_name = "K")]
    pub machine_ids: Option<u64>,
    /// Lease the machine ID from ZooKeeper at HOST:PORT[,HOST:PORT...]; with --machine N,
    /// register N there (refused while another live issuer holds it)
    #[arg(long, value_name = "CONNECT")]
    pub zk: Option<String>,
    /// Lease the machine ID from this SQL database's vesta_machine table (sqlite://PATH,
    /// postgres://..., mysql://...); with --machine N, register N there (refused while another
    /// live issuer holds it)
    #[arg(long, value_name = "URL", conflicts_with = "zk")]
    pub machine_db: Option<String>,
    /// Lease the machine ID from etcd v3 at these client URLs (http://HOST:PORT[,...]); with
    /// --machine N, register N there (refused while another live issuer holds it)
    #[arg(long, value_name = "URL[,URL...]", conflicts_with_all = ["zk", "machine_db"])]
    pub etcd: Option<String>,
    /// Serve segment numbers (Leaf's segment mode) from this database's leaf_alloc table:
    /// sqlite://PATH, postgres://USER[:PASS]@HOST:PORT/DB or mysql://USER[:PASS]@HOST:PORT/DB
    /// [default: [segment] db of the config; off when unset]
    #[arg(long, value_name = "URL")]
    pub segment_db: Option<String>,
    /// Serve per-key sequences (GET /seq/KEY on REST) from this database's vesta_seq table,
    /// created on first use: sqlite://PATH, postgres://... or mysql://... [default: [seq] db
    /// of the config; off when unset]
    #[arg(long, value_name = "URL")]
    pub seq_db: Option<String>,
    /// Serve the per-key sequences as a member of the cluster of servers on the same sequences
    /// database: the keys' sets are dealt among them, the others answered with their owner
    /// (docs/seq-cluster.md) [default: [seq] cluster]
    #[arg(long)]
    pub seq_cluster: bool,
    /// With --seq-cluster: the host:port other members send clients to for this server's keys
    /// [default: [seq] advertise, else the listen address]
    #[arg(long, value_name = "HOST:PORT", requires = "seq_cluster")]
    pub seq_advertise: Option<String>,
    /// Where the sequences cluster keeps its leases and sets: `sql` (the sequences' database),
    /// `etcd` (through --etcd / the [etcd] section) or `zookeeper` (through --zk / the
    /// [zookeeper] section) [default: [seq] coordination, else sql]
    #[arg(long, value_name = "STORE")]
    pub seq_coordination: Option<String>,
    /// Log lines as text (colours only on a terminal) or one JSON object per line
    #[arg(long, value_enum, value_name = "FORMAT", default_value_t)]
    pub log_format: LogFormat,
    /// Speak TLS with this PEM certificate chain (with --tls-key; read again on SIGHUP)
    /// [default: [server] tls_cert]
    #[arg(long, value_name = "FILE")]
    pub tls_cert: Option<PathBuf>,
    /// The PEM private key of --tls-cert [default: [server] tls_key]
    #[arg(long, value_name = "FILE")]
    pub tls_key: Option<PathBuf>,
    /// Serve the web console under /ui (read-only pages: explain and make IDs, status,
    /// segments, per-key sequences): REST on its own port, TCP on [server] metrics_listen
    /// [default: [server] console]
    #[arg(long)]
    pub console: bool,
}

impl ServerArgs {
    /// The config file (or the defaults) with the flags applied on top, checked; renamed keys
    /// in the file are printed as warnings.
    pub fn config<S: ServerSection>(&self) -> anyhow::Result<ServiceConfig<S>> {
        let mut config = match &self.config {
            // Checked once the flags are applied (a flag may complete the file).
            Some(path) => ServiceConfig::<S>::from_toml_file_unchecked(path).context("--config")?,
            None => ServiceConfig::default(),
        };
        if let Some(addr) = self.listen {
            config.server.set_listen(addr);
        }
        apply_layout_flags(self.layout, self.epoch, &mut config.id);
        if let Some(t) = self.id_type {
            config.id.id_type = Some(t);
        }
        let (machine, zk) = (self.machine, self.zk.as_deref());
        let machine_db = self.machine_db.as_deref();
        apply_machine_flags(
            machine,
            self.machine_ids,
            zk,
            machine_db,
            self.etcd.as_deref(),
            MachineSections {
                machine: &mut config.machine,
                zookeeper: &mut config.zookeeper,
                etcd: &mut config.etcd,
            },
        )?;
        if let Some(url) = &self.segment_db {
            config.segment.db = Some(url.clone());
        }
        if let Some(url) = &self.seq_db {
            config.seq.db = Some(url.clone());
        }
        if self.seq_cluster {
            config.seq.cluster = true;
        }
        if let Some(addr) = &self.seq_advertise {
            config.seq.advertise = Some(addr.clone());
        }
        if let Some(store) = &self.seq_coordination {
            config.seq.coordination =
                vesta_seq::Coordination::parse(store).context("--seq-coordination")?;
        }
        config
            .server
            .set_tls(self.tls_cert.clone(), self.tls_key.clone());
        // Every `vesta` process with a static machine ID holds it on its host, state file or
        // not: a second server (or `vesta gen`) on this host in the same ID space is refused.
        config.hold_on_host = true;
        if self.console {
            config.server.set_console();
        }
        config.validate()?;
        // A config file is copied from host to host: one whose plan falls back on the pool's
        // default ID would make every copy issue the same IDs, silently. Refuse it. (Without a
        // file: the quickstart's default, warned about once listening.)
        let plan = config.plan()?;
        if let Some(path) = &self.config
            && falls_back_on_the_pool(&plan)
        {
            anyhow::bail!(
                "--config {}: machine.id is not set: choose a static machine ID for each \
                 server, unique across every server issuing with this epoch ({}..={}): set \
                 [machine] id = N or pass --machine N, take it from the host name \
                 (machine.source = \"ordinal\"), or lease one (machine.source = \"zookeeper\", \
                 \"etcd\" or \"sql\")",
                path.display(),
                plan.pool.start(),
                plan.pool.end()
            );
        }
        for warning in &config.warnings {
            say!("warning: {warning}");
        }
        Ok(config)
    }
}

/// True when the plan's machine ID is the pool's default, none chosen.
fn falls_back_on_the_pool(plan: &MachinePlan) -> bool {
    matches!(
        plan.choice,
        MachineChoice::Fixed {
            from: FixedFrom::PoolDefault,
            ..
        }
    )
}

/// Warns, after the start lines, when the plan the server started on falls back on the pool's
/// first ID (no config file, no `--machine`, no registry): fine for a try, a duplicate on a
/// second such server.
fn warn_default_machine(plan: &MachinePlan) {
    if let (true, Some(machine)) = (falls_back_on_the_pool(plan), plan.fixed()) {
        say!(
            "warning: no machine ID chosen: using {machine}, the first of the {} pool; a \
             second server started this way issues the same IDs (choose one with --machine N \
             or [machine] id)",
            plan.pool_name
        );
    }
}

/// Runs the server until SIGTERM or Ctrl-C, then answers what is in flight, releases the
/// machine ID and exits 0.
pub fn run(args: Args) -> anyhow::Result<()> {
    match args {
        Args::Tcp(a) => {
            set_log_format(a.log_format);
            let config = a.config::<TcpSection>()?;
            let console = config.server.console;
            run_server(a.log_format, async {
                let stop = stop_signal();
                let server = TcpServer::start(config)
                    .await
                    .map_err(super::seq_admin::explained_serve)?;
                let status = server.issuer().status();
                let scheme = if server.is_tls() { "tls://" } else { "" };
                announce(
                    "vesta-tcp",
                    &format!("{scheme}{}", server.local_addr()),
                    &status,
                );
                announce_segments("vesta-tcp", server.segments().map(|s| &**s));
                if let (true, Some(addr)) = (console, server.metrics_addr()) {
                    say!("vesta-tcp console at http://{addr}/ui");
                }
                warn_default_machine(server.issuer().plan());
                stopped("vesta-tcp", server.serve(stop).await, &status)
            })
        }
        Args::Rest(a) => {
            set_log_format(a.log_format);
            let config = a.config::<RestSection>()?;
            let console = config.server.console;
            run_server(a.log_format, async {
                let stop = stop_signal();
                let server = RestServer::start(config)
                    .await
                    .map_err(super::seq_admin::explained_serve)?;
                let status = server.issuer().status();
                let scheme = if server.is_tls() { "https" } else { "http" };
                announce(
                    "vesta-rest",
                    &format!("{scheme}://{}", server.local_addr()),
                    &status,
                );
                announce_segments("vesta-rest", server.segments().map(|s| &**s));
                if console {
                    say!(
                        "vesta-rest console at {scheme}://{}/ui",
                        server.local_addr()
                    );
                }
                warn_default_machine(server.issuer().plan());
                stopped("vesta-rest", server.serve(stop).await, &status)
            })
        }
    }
}

/// SIGTERM or Ctrl-C, told to the service manager (`STOPPING=1`) as the drain begins. The
/// handlers are installed here, before the server starts: a SIGTERM right after `READY=1` (or
/// during the start) stops it gracefully, never by the default action.
fn stop_signal() -> impl Future<Output = ()> {
    let signal = shutdown::installed();
    async move {
        signal.await;
        notify("STOPPING=1");
    }
}

/// One stable line for people and scripts (the port is real even with `--listen` port 0).
fn announce(name: &str, addr: &str, s: &Status) {
    let layout = match s.layout.id_type() {
        Some(t) => format!("type {t}"),
        None => format!("layout {}", s.layout.name()),
    };
    say!(
        "{name} listening on {addr} ({}, genMethod {}, {layout}, lease {})",
        s.machines_in_words(),
        s.gen_method,
        s.lease.state
    );
    // Listening, with the machine ID held: what `Type=notify` units wait for.
    notify(&format!(
        "READY=1\nSTATUS=listening on {addr}, {}",
        s.machines_in_words()
    ));
    if let Some(interval) = watchdog_interval() {
        // Runs for the life of the runtime (the process).
        drop(spawn_watchdog(interval));
    }
}

/// With segment mode on: where the numbers come from, and whether they are available yet.
fn announce_segments(name: &str, segments: Option<&Segments>) {
    let Some(segments) = segments else {
        return;
    };
    if segments.is_up() {
        say!("{name} serves segment numbers from {}", segments.db());
    } else {
        let why = segments.status().error.unwrap_or_default();
        say!("{name} serves no segment numbers yet (retrying in the background): {why}");
    }
}

fn stopped(name: &str, report: ServeReport, s: &Status) -> anyhow::Result<()> {
    for g in &report.give_back {
        match &g.outcome {
            GiveBackOutcome::Returned { max_id, numbers } => say!(
                "{name} gave {numbers} unused numbers of tag {} back (max_id {max_id})",
                g.tag
            ),
            GiveBackOutcome::NothingUnused => {}
            GiveBackOutcome::Moved => say!(
                "{name} kept the unused numbers of tag {} as a gap: another allocator took a \
                 segment after ours",
                g.tag
            ),
            GiveBackOutcome::Failed { error } => say!(
                "{name} could not give the unused numbers of tag {} back (a gap): {error}",
                g.tag
            ),
        }
    }
    if report.forced_closed > 0 {
        say!(
            "{name} closed {} connections still busy after server.shutdown_grace_ms",
            report.forced_closed
        );
    }
    let machines = s.machines_in_words();
    match report.release_error {
        None => {
            say!(
                "{name} stopped after {} connections; {machines} released",
                report.connections
            );
            Ok(())
        }
        Some(e) => anyhow::bail!("stopped, but {machines} not released cleanly: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use vesta_embed::MachineSource;
    use vesta_rest::RestConfig;
    use vesta_server::TcpConfig;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: ServerArgs,
    }

    fn config<S: ServerSection>(argv: &[&str]) -> anyhow::Result<ServiceConfig<S>> {
        let cli = Cli::try_parse_from(std::iter::once("serve").chain(argv.iter().copied()))?;
        cli.args.config()
    }

    #[test]
    fn no_flags_means_the_shipped_conf_file() {
        let conf = concat!(env!("CARGO_MANIFEST_DIR"), "/../conf/");
        let tcp = format!("{conf}server.toml");
        // But for the host hold, which every `vesta serve` takes (the library's default is off).
        let held = |mut c: TcpConfig| {
            c.hold_on_host = true;
            c
        };
        assert_eq!(
            config::<vesta_server::TcpSection>(&[]).unwrap(),
            held(TcpConfig::default())
        );
        let rest = format!("{conf}rest.toml");
        let rest_default = RestConfig {
            hold_on_host: true,
            ..RestConfig::default()
        };
        assert_eq!(
            config::<vesta_rest::RestSection>(&[]).unwrap(),
            rest_default
        );
        // The shipped files equal the defaults but choose no machine ID: with a file, one must
        // be chosen (a copied file would issue the same IDs on every host).
        let errors = [
            config::<vesta_server::TcpSection>(&["--config", &tcp]).unwrap_err(),
            config::<vesta_rest::RestSection>(&["--config", &rest]).unwrap_err(),
        ];
        for err in errors.map(|e| format!("{e:#}")) {
            assert!(
                err.contains("machine.id is not set") && err.contains("(924..=1023)"),
                "{err}"
            );
        }
        let mut chosen = held(TcpConfig::default());
        chosen.machine.id = Some(930);
        assert_eq!(
            config(&["--config", &tcp, "--machine", "930"]).unwrap(),
            chosen
        );
        let mut chosen = rest_default;
        chosen.machine.id = Some(931);
        assert_eq!(
            config(&["--config", &rest, "--machine", "931"]).unwrap(),
            chosen
        );
    }

    #[test]
    fn flags_override_the_file_and_are_checked() {
        let c: TcpConfig = config(&["--listen", "127.0.0.1:0", "--machine", "1000"]).unwrap();
        assert_eq!(c.server.listen.port(), 0);
        assert_eq!(c.machine.id, Some(1000));
        assert_eq!(c.machine.source, MachineSource::Static);
        let c: RestConfig = config(&["--segment-db", "sqlite://segs.db"]).unwrap();
        assert_eq!(c.segment.db.as_deref(), Some("sqlite://segs.db"));
        let err = config::<vesta_server::TcpSection>(&["--segment-db", "mysql://h/db"])
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("invalid config: segment.db: invalid database URL mysql://h/db"),
            "{err}"
        );
        let c: RestConfig = config(&["--seq-db", "sqlite://seq.db"]).unwrap();
        assert_eq!(c.seq.db.as_deref(), Some("sqlite://seq.db"));
        let err = config::<RestSection>(&["--seq-db", "redis://x"])
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("invalid config: seq.db: invalid database URL redis://x"),
            "{err}"
        );
        let c: RestConfig = config(&["--zk", "127.0.0.1:2182"]).unwrap();
        assert_eq!(c.machine.source, MachineSource::Zookeeper);
        assert_eq!(c.zookeeper.connect, "127.0.0.1:2182");
        let c: RestConfig = config(&["--zk", "127.0.0.1:2182", "--machine", "930"]).unwrap();
        assert_eq!(
            c.machine.source,
            MachineSource::Static,
            "--machine N --zk registers N"
        );
        assert_eq!(
            (c.machine.id, c.zookeeper.connect.as_str()),
            (Some(930), "127.0.0.1:2182")
        );
        let err = config::<vesta_server::TcpSection>(&["--machine", "5"])
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "invalid config: machine 5 is outside the server pool 924..=1023 (genMethod server)"
        );
    }
}
