//! `vesta gen`: N IDs from an in-process issuer (genMethod embed), one per line, written through
//! a buffer in batches so the layout's cap, not the CLI, is the limit.
//!
//! Safe by default on one host: a static machine ID is held on the host for the run (in its ID
//! space, whatever the layout is called), its mark kept in a state file (`--state-file`, the
//! config's, else one of the user's own under `$XDG_STATE_HOME/vesta`, one per ID space and
//! machine ID), and a run that finds either held waits its turn (at most [`HOLD_WAIT`]). A
//! clean stop records exactly where it stopped, so the next run goes on at once; after a
//! crash, or another user's run, a run waits out what the ID may have issued. Without a
//! writable state directory a run goes on without a state file, saying so: still held on the
//! host, it waits out an unknown past at each start (up to two units).
//!
//! `--machine-ids K` issues from K machine IDs at once (`[machine] ids`, decided by the same
//! machine plan as `vesta serve`'s): each held and marked alone (its own state file beside
//! the first's), the batches spread over them, so a run is K times as fast as one ID's cap.

use std::io::{self, BufWriter, IsTerminal, Write};
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use indicatif::{ProgressBar, ProgressStyle};
use vesta_core::{Form, IdType};
use vesta_embed::config::{Keeper, MachineSections};
use vesta_embed::{Issuer, IssuerConfig};

use super::common::{LayoutArgs, apply_machine_flags};

/// Above this many IDs a progress bar is drawn (when stderr is a terminal).
const PROGRESS_THRESHOLD: u64 = 1_000_000;

/// The longest a run waits for another run holding its state file or machine ID on this host
/// (runs in parallel take turns; a run that waits out an unknown past takes up to two units).
pub const HOLD_WAIT: Duration = Duration::from_secs(10);

/// Arguments of `vesta gen`.
///
/// Safe on one host: a static machine ID keeps its mark in a state file (the config's, else the
/// user's own in $XDG_STATE_HOME/vesta), locked and held on the host for the run; parallel runs
/// take turns (at most 10 s each), and a run after a clean one continues at once. Across hosts
/// use a leasing source (--zk, --etcd, --machine-db) or --server.
#[derive(clap::Args, Debug)]
#[command(group(clap::ArgGroup::new("remote").args(["server", "grpc"])))]
pub struct Args {
    /// How many IDs
    #[arg(
        short = 'n',
        long = "count",
        value_name = "N",
        default_value_t = 1,
        allow_negative_numbers = true
    )]
    count: u64,
    /// Static machine ID (the whole node field) from the embed pool [default: the config's,
    /// else 0]
    #[arg(long, allow_negative_numbers = true)]
    machine: Option<u64>,
    /// Issue from K machine IDs of the embed pool at once, each with its own mark and hold,
    /// calls spread over them: K times the layout's cap (static: --machine N..=N+K-1; a
    /// registry: K leases) [default: the config's [machine] ids, else 1]
    #[arg(long, value_name = "K", allow_negative_numbers = true)]
    machine_ids: Option<u64>,
    /// Vesta's type: max-peak, min-granularity, 0 or 1 [default: the config's, else max-peak]
    #[arg(long = "type", value_name = "TYPE")]
    id_type: Option<IdType>,
    /// Lease the machine ID (embed pool) from ZooKeeper instead; released on exit. With
    /// --machine N: register N there (refused while another holds it)
    #[arg(long, value_name = "HOST:PORT[,...]")]
    zk: Option<String>,
    /// Lease the machine ID (embed pool) from this SQL database's vesta_machine table instead:
    /// sqlite://PATH, postgres://USER[:PASS]@HOST:PORT/DB or mysql://USER[:PASS]@HOST:PORT/DB;
    /// released on exit. With --machine N: register N there (refused while another holds it)
    #[arg(long, value_name = "URL", conflicts_with = "zk")]
    machine_db: Option<String>,
    /// Lease the machine ID (embed pool) from etcd v3 at these client URLs instead
    /// (http://HOST:PORT[,...]); released on exit. With --machine N: register N there (refused
    /// while another holds it)
    #[arg(long, value_name = "URL[,URL...]", conflicts_with_all = ["zk", "machine_db"])]
    etcd: Option<String>,
    /// Fetch the IDs from central TCP servers instead, in their layout (genMethod server; tried
    /// in order, with failover)
    #[arg(
        long,
        value_name = "HOST:PORT[,...]",
        conflicts_with_all = ["machine", "machine_ids", "id_type", "zk", "machine_db", "etcd", "layout", "epoch", "config"]
    )]
    server: Option<String>,
    /// Stream the IDs over gRPC from a REST server's port instead (http://HOST:PORT), in its
    /// layout (genMethod rest)
    #[arg(
        long,
        value_name = "URL",
        conflicts_with_all = ["server", "machine", "machine_ids", "id_type", "zk", "machine_db", "etcd", "layout", "epoch", "config"]
    )]
    grpc: Option<String>,
    /// With --grpc: the server's bearer token, read from this file (its first line)
    #[arg(long, value_name = "FILE", requires = "grpc")]
    token_file: Option<std::path::PathBuf>,
    /// With --server, or --grpc https://...: speak TLS, trusting the CA certificate(s) in this
    /// PEM file (each server's certificate must name its host)
    #[arg(long, value_name = "FILE", requires = "remote")]
    tls_ca: Option<std::path::PathBuf>,
    /// How each ID is written: decimal, base32 (13 characters, sorts), base62 (11, sorts) or
    /// hex (0x and 16 digits, sorts)
    #[arg(long, value_name = "FORM", default_value = "decimal")]
    format: Form,
    /// Keep the static machine ID's mark in this state file [default: the config's
    /// [machine] state_file, else $XDG_STATE_HOME/vesta/space-KEY.mN.state]
    #[arg(long, value_name = "FILE", conflicts_with_all = ["zk", "machine_db", "etcd", "server", "grpc"])]
    state_file: Option<PathBuf>,
    #[command(flatten)]
    layout: LayoutArgs,
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<()> {
    #[cfg(feature = "client")]
    if let Some(url) = &args.grpc {
        let token = match &args.token_file {
            Some(file) => Some(
                std::fs::read_to_string(file)
                    .with_context(|| format!("--token-file {}", file.display()))?
                    .lines()
                    .next()
                    .unwrap_or_default()
                    .trim()
                    .to_owned(),
            ),
            None => None,
        };
        return super::gen_grpc::run(
            url,
            token.as_deref(),
            args.tls_ca.as_deref(),
            args.count,
            args.format,
        );
    }
    #[cfg(not(feature = "client"))]
    if args.grpc.is_some() {
        return Err(super::absent::refused("vesta gen --grpc", "client"));
    }
    #[cfg(feature = "client")]
    if let Some(servers) = &args.server {
        return super::gen_server::run(servers, args.tls_ca.as_deref(), args.count, args.format);
    }
    #[cfg(not(feature = "client"))]
    if args.server.is_some() || args.tls_ca.is_some() {
        return Err(super::absent::refused("vesta gen --server", "client"));
    }
    #[cfg(not(feature = "leases"))]
    for (flag, given) in [
        ("--zk", args.zk.is_some()),
        ("--etcd", args.etcd.is_some()),
        ("--machine-db", args.machine_db.is_some()),
    ] {
        if given {
            return Err(super::absent::refused(
                &format!("vesta gen {flag}"),
                "leases",
            ));
        }
    }
    let mut config = args.layout.issuer_config()?;
    apply_overrides(&mut config, &args)?;
    config.hold_wait = HOLD_WAIT;
    // Held on the host with or without a state file: a server or another run in the same ID
    // space on this host is waited for, then refused.
    config.hold_on_host = true;
    keep_own_state(&mut config)?;
    super::common::log_warnings();
    let issuer = Issuer::start(config).context("starting the issuer")?;
    write_ids(&issuer, args.count, args.format)?;
    issuer.shutdown().context("releasing the machine ID")
}

fn apply_overrides(config: &mut IssuerConfig, args: &Args) -> anyhow::Result<()> {
    if let Some(t) = args.id_type {
        config.id.id_type = Some(t);
    }
    if let Some(path) = &args.state_file {
        config.machine.state_file = Some(path.clone());
    }
    let zk = args.zk.as_deref();
    apply_machine_flags(
        args.machine,
        args.machine_ids,
        zk,
        args.machine_db.as_deref(),
        args.etcd.as_deref(),
        MachineSections {
            machine: &mut config.machine,
            zookeeper: &mut config.zookeeper,
            etcd: &mut config.etcd,
        },
    )
}

/// A static machine ID not registered anywhere keeps its mark in a state file: `--state-file`,
/// the config's, else the user's own, one per ID space and machine ID, in
/// `$XDG_STATE_HOME/vesta` (default `~/.local/state/vesta`). Where that directory cannot be
/// made (no `HOME`, a read-only one), the run goes on without a state file, saying so.
fn keep_own_state(config: &mut IssuerConfig) -> anyhow::Result<()> {
    // Only a fixed ID the plan keeps nowhere (no registry, no state file) needs one.
    let plan = config.plan()?;
    let Some(machine) = plan.fixed().filter(|_| plan.keeper == Keeper::Nothing) else {
        return Ok(());
    };
    let name = config.state_file_name()?;
    match state_dir() {
        Ok(dir) => config.machine.state_file = Some(dir.join(name)),
        Err(why) => {
            let held = match plan.host_hold {
                true => format!("machine {machine} is still held on this host; "),
                false => String::new(),
            };
            eprintln!(
                "vesta gen: {why}; going on without a state file ({held}each run waits out up \
                 to two time units): set XDG_STATE_HOME to a writable directory, or give \
                 --state-file FILE"
            )
        }
    }
    Ok(())
}

/// `$XDG_STATE_HOME/vesta`, else `$HOME/.local/state/vesta`, made if missing.
fn state_dir() -> Result<PathBuf, String> {
    let var = |name| {
        std::env::var_os(name)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    let dir = match (var("XDG_STATE_HOME"), var("HOME")) {
        (Some(state), _) => state.join("vesta"),
        (None, Some(home)) => home.join(".local/state/vesta"),
        (None, None) => return Err("neither XDG_STATE_HOME nor HOME is set".into()),
    };
    std::fs::create_dir_all(&dir)
        .map_err(|e| format!("the state directory {} cannot be made: {e}", dir.display()))?;
    Ok(dir)
}

/// Issues `count` IDs in batches of a unit of every machine ID and prints them.
fn write_ids(issuer: &Issuer, count: u64, form: Form) -> anyhow::Result<()> {
    let chunk = issuer
        .layout()
        .capacity_per_unit()
        .saturating_mul(issuer.machine_count() as u64);
    let progress = progress_bar(count);
    let mut out = BufWriter::with_capacity(1 << 16, io::stdout().lock());
    let mut left = count;
    while left > 0 {
        let batch = issuer.next_ids(left.min(chunk))?;
        for id in batch.iter() {
            writeln!(out, "{}", form.encode(id))?;
        }
        left -= batch.len();
        if let Some(p) = &progress {
            p.inc(batch.len());
        }
    }
    out.flush()?;
    if let Some(p) = progress {
        p.finish_and_clear();
    }
    Ok(())
}

fn progress_bar(count: u64) -> Option<ProgressBar> {
    if count < PROGRESS_THRESHOLD || !io::stderr().is_terminal() {
        return None;
    }
    let bar = ProgressBar::new(count);
    let style =
        ProgressStyle::with_template("{bar:40} {human_pos}/{human_len} IDs {per_sec} eta {eta}")
            .unwrap_or_else(|_| ProgressStyle::default_bar());
    bar.set_style(style);
    Some(bar)
}
