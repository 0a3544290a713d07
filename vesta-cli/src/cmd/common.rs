//! Arguments shared by several subcommands: the layout and epoch, the config file, the machine
//! ID, and running a server.

use std::path::PathBuf;

use anyhow::Context;
use vesta_core::{Epoch, Layout, Preset};
use vesta_embed::config::{LayoutChoice, MachineSection, ZooKeeperSection};
use vesta_embed::{IssuerConfig, MachineSource};

/// Where the layout and epoch come from: `--layout` and `--epoch`, else `--config`, else
/// Vesta's.
#[derive(clap::Args, Debug, Clone)]
pub struct LayoutArgs {
    /// Layout of the IDs: vesta, leaf, twitter, sonyflake or uid-generator (a custom layout
    /// comes from --config's [id.layout]) [default: the config's, else vesta]
    #[arg(long, value_name = "NAME")]
    pub layout: Option<Preset>,
    /// Epoch: ms since 1970 or an RFC 3339 date-time [default: the layout's own; Vesta's is
    /// 2015-01-01T00:00:00+08:00]
    #[arg(long, value_name = "MS|RFC3339")]
    pub epoch: Option<Epoch>,
    /// A vesta.toml whose [id] section (layout, type, epoch, version) to use
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

    /// The layout in force, with its epoch.
    pub fn layout(&self) -> anyhow::Result<Layout> {
        Ok(self.issuer_config()?.layout()?)
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

/// Applies `--machine N` (a static ID) or `--zk CONNECT` (a leased one, dropping any static
/// `machine.id`) to a config's sections.
pub fn apply_machine_flags(
    machine: Option<u64>,
    zk: Option<&str>,
    section: &mut MachineSection,
    zookeeper: &mut ZooKeeperSection,
) {
    if let Some(id) = machine {
        section.source = MachineSource::Static;
        section.id = Some(id);
    }
    if let Some(connect) = zk {
        // A lease replaces the file's static machine ID, which a leased config may not keep.
        section.source = MachineSource::Zookeeper;
        section.id = None;
        zookeeper.connect = connect.to_owned();
    }
}

/// Runs a server's future on a multi-threaded runtime, library warnings logged to stderr
/// (`RUST_LOG` overrides).
pub fn run_server(server: impl Future<Output = anyhow::Result<()>>) -> anyhow::Result<()> {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?
        .block_on(server)
}
