//! `vesta machine ls --machine-db URL | --etcd URL | --zk CONNECT`: the machine-ID leases of
//! every leasing source — an SQL database's `vesta_machine` table (who holds which ID, how much
//! lease is left by the database's clock, each ID's mark), an etcd root (holder, mark), or a
//! ZooKeeper root (as `vesta zk ls`) — as a table or one JSON object per line; and
//! `vesta machine retire`: a state file or a store's mark retired after a layout or epoch
//! change. The lease stores' side is [`super::machine_store`] (feature `leases`).

use std::path::PathBuf;

/// Arguments of `vesta machine`.
#[derive(clap::Subcommand, Debug)]
pub enum Args {
    /// List the SQL leases of a scope (holder, lease left, mark), or with --etcd the etcd
    /// leases under a root
    Ls(LsArgs),
    /// Retire a machine ID's mark (a state file, or a lease store's record) so that its next
    /// holder starts as if none had been left: after a layout or epoch change, once IDs issued
    /// under the old mark can never meet the new ones. Refused while the ID is held
    Retire(RetireArgs),
}

/// Which lease store: `--machine-db` (with `--scope`), `--etcd` or `--zk` (with `--root`), and
/// the config they default from. Shared by `ls` and `retire`.
#[derive(clap::Args, Debug)]
pub struct StoreArgs {
    /// The etcd v3 leases at these client URLs (http://HOST:PORT[,...])
    #[arg(long, value_name = "URL[,URL...]", conflicts_with_all = ["machine_db", "zk"])]
    pub(super) etcd: Option<String>,
    /// The ZooKeeper leases (as `vesta zk ls`)
    #[arg(long, value_name = "HOST:PORT[,...]", conflicts_with = "machine_db")]
    pub(super) zk: Option<String>,
    /// etcd or ZooKeeper: the root of the leases [default: the config's, else /vesta/default]
    #[arg(long, value_name = "PREFIX")]
    pub(super) root: Option<String>,
    /// The SQL database holding vesta_machine [default: the config's machine.db]
    #[arg(long, value_name = "URL")]
    pub(super) machine_db: Option<String>,
    /// SQL: the leases' scope [default: the config's machine.scope, else "default"]
    #[arg(long, value_name = "SCOPE")]
    pub(super) scope: Option<String>,
    /// A vesta.toml whose [machine], [etcd] and [zookeeper] sections to use
    #[arg(long, value_name = "FILE")]
    pub(super) config: Option<PathBuf>,
}

/// Arguments of `vesta machine retire`.
#[derive(clap::Args, Debug)]
pub struct RetireArgs {
    /// The machine ID whose mark a lease store keeps (not with --state-file)
    #[arg(value_name = "MACHINE", required_unless_present_any = ["state_file", "host_hold"])]
    pub(super) machine: Option<u64>,
    /// Retire this state file: it is renamed to `FILE.retired-<ms>` (kept for the record)
    #[arg(long, value_name = "FILE", conflicts_with_all = ["machine", "machine_db", "etcd", "zk", "root", "scope", "host_hold"])]
    state_file: Option<PathBuf>,
    /// Retire this host's hold record of a static machine ID (the file a refusal names, under
    /// /var/lib/vesta/holds or /var/tmp/vesta-rs): what its last holders counted in is
    /// forgotten (refused while a process holds the machine ID on this host)
    #[arg(long, value_name = "FILE", conflicts_with_all = ["machine", "machine_db", "etcd", "zk", "root", "scope"])]
    host_hold: Option<PathBuf>,
    #[command(flatten)]
    pub(super) store: StoreArgs,
}

/// Arguments of `vesta machine ls`.
#[derive(clap::Args, Debug)]
pub struct LsArgs {
    #[command(flatten)]
    pub(super) store: StoreArgs,
    /// One JSON object per line
    #[arg(long)]
    pub(super) json: bool,
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<()> {
    match args {
        Args::Ls(ls) => stores::list(ls),
        Args::Retire(retire) => self::retire(retire),
    }
}

/// What a retired mark means for the machine ID's next holder.
const AFTER: &str = "its next holder starts after now + the rollback tolerance, as if no mark \
                     had been left";

/// What `retire` found and did, said in one line.
fn retire(args: RetireArgs) -> anyhow::Result<()> {
    let after = AFTER;
    if let Some(path) = &args.state_file {
        match vesta_embed::lease::retire_state_file(path)? {
            Some(kept) => println!(
                "retired the state file {}: kept as {}; {after}",
                path.display(),
                kept.display()
            ),
            None => println!("no state file {}: nothing to retire", path.display()),
        }
        return Ok(());
    }
    if let Some(path) = &args.host_hold {
        if vesta_embed::lease::retire_host_hold(path)? {
            println!(
                "retired the host hold record {}: a start in another layout or epoch is no longer \
                 refused by it",
                path.display()
            );
        } else {
            println!("no host hold record {}: nothing to retire", path.display());
        }
        return Ok(());
    }
    stores::retire(args.machine, args.store, AFTER)
}

/// The lease stores' side, or what a build without them says.
#[cfg(feature = "leases")]
use super::machine_store as stores;

#[cfg(not(feature = "leases"))]
mod stores {
    use super::{LsArgs, StoreArgs};

    pub fn list(_: LsArgs) -> anyhow::Result<()> {
        Err(super::super::absent::refused("vesta machine ls", "leases"))
    }

    pub fn retire(_: Option<u64>, _: StoreArgs, _: &str) -> anyhow::Result<()> {
        Err(super::super::absent::refused(
            "vesta machine retire MACHINE (a lease store's mark)",
            "leases",
        ))
    }
}
