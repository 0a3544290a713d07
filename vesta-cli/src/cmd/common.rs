//! Arguments shared by several subcommands: the layout and epoch, the config file, the machine
//! ID; library warnings on stderr.

use std::path::PathBuf;

use anyhow::Context;
use vesta_core::{Epoch, Layout, Preset};
use vesta_embed::IssuerConfig;
use vesta_embed::config::{ChoiceConflict, LayoutChoice, MachineSections, Registry};

/// Where the layout and epoch come from: `--layout` and `--epoch`, else `--config`, else
/// Vesta's.
#[derive(clap::Args, Debug, Clone)]
pub struct LayoutArgs {
    /// Layout of the IDs: vesta, leaf, twitter, sonyflake, sonyflake-v2 or uid-generator (a custom layout
    /// comes from --config's [id.layout]) [default: the config's, else vesta]
    #[arg(long, value_name = "NAME")]
    pub layout: Option<Preset>,
    /// Epoch: ms since 1970 or an RFC 3339 date-time [default: the layout's own; Vesta's is
    /// 2015-01-01T00:00:00+08:00]
    #[arg(long, value_name = "MS|RFC3339")]
    pub epoch: Option<Epoch>,
    /// A vesta config (an issuer's or a server's) whose [id] section (layout, type, epoch,
    /// version) to use
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
}

impl LayoutArgs {
    /// The config file's contents (or the defaults) with `--layout` and `--epoch` applied: the
    /// one place where flag > config > default is decided for them.
    pub fn issuer_config(&self) -> anyhow::Result<IssuerConfig> {
        let mut config = match &self.config {
            Some(path) => IssuerConfig::from_toml_file(path).context("--config")?,
            None => IssuerConfig::default(),
        };
        apply_layout_flags(self.layout, self.epoch, &mut config.id);
        Ok(config)
    }

    /// For the commands that only read the layout (`layout`, `explain`, `make`): the config
    /// file's `[id]` and `[machine]` sections, from any vesta config (an issuer's, a server's:
    /// the other sections left unread), with `--layout` and `--epoch` applied.
    pub fn layout_config(&self) -> anyhow::Result<IssuerConfig> {
        let mut config = match &self.config {
            Some(path) => IssuerConfig::layout_sections_from_toml_file(path).context("--config")?,
            None => IssuerConfig::default(),
        };
        apply_layout_flags(self.layout, self.epoch, &mut config.id);
        Ok(config)
    }

    /// The layout in force, with its epoch (from [`layout_config`](Self::layout_config)).
    pub fn layout(&self) -> anyhow::Result<Layout> {
        Ok(self.layout_config()?.layout()?)
    }
}

/// Applies `--layout NAME` and `--epoch` to an `[id]` section.
pub fn apply_layout_flags(
    layout: Option<Preset>,
    epoch: Option<Epoch>,
    id: &mut vesta_embed::config::IdSection,
) {
    if let Some(preset) = layout {
        id.layout = LayoutChoice::Preset(preset);
    }
    if let Some(epoch) = epoch {
        id.epoch = Some(epoch);
    }
}

/// Applies `--machine N` (a static ID), `--machine-ids K` (`[machine] ids`: how many, checked
/// with the rest of the plan by [`IssuerConfig::plan`]) and `--zk CONNECT`, `--machine-db URL`
/// or `--etcd URL` (a registry: the IDs leased from it, or N registered there) to a config's
/// sections: the one place every command that starts an issuer takes them from.
pub fn apply_machine_flags(
    machine: Option<u64>,
    machine_ids: Option<u64>,
    zk: Option<&str>,
    machine_db: Option<&str>,
    etcd: Option<&str>,
    sections: MachineSections<'_>,
) -> anyhow::Result<()> {
    let registry = zk
        .map(|a| (Registry::ZooKeeper, a))
        .or(machine_db.map(|a| (Registry::Sql, a)))
        .or(etcd.map(|a| (Registry::Etcd, a)));
    if let Some(k) = machine_ids {
        sections.machine.ids = k;
    }
    sections
        .choose(machine, registry)
        .map_err(|conflict| match conflict {
            ChoiceConflict::FixedIdWithLease { machine, registry } => {
                let flag = registry_flag(registry);
                anyhow::anyhow!(
                    "the config's [machine] id = {machine} and {flag} disagree: {flag} without \
                 --machine leases a machine ID from the pool, which would drop {machine}; give \
                 --machine {machine} to register it there, or remove id from the config's \
                 [machine]"
                )
            }
            other => anyhow::anyhow!("{other}"),
        })
}

/// The flag that names `registry` on the command line.
pub fn registry_flag(registry: Registry) -> &'static str {
    match registry {
        Registry::ZooKeeper => "--zk",
        Registry::Sql => "--machine-db",
        Registry::Etcd => "--etcd",
        _ => "a registry flag",
    }
}

/// Library warnings to stderr as plain lines (`RUST_LOG` overrides the level), for commands
/// that run an issuer in the foreground: a start that waits says why.
pub fn log_warnings() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .without_time()
        .with_target(false)
        .try_init();
}
