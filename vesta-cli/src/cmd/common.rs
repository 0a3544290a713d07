//! Arguments shared by several subcommands: the epoch, the config file and field values.

use std::path::PathBuf;

use anyhow::Context;
use vesta_core::Epoch;
use vesta_embed::config::{MachineSection, ZooKeeperSection};
use vesta_embed::{IssuerConfig, MachineSource};

/// Where the epoch comes from: `--epoch`, else `--config`, else Vesta's.
#[derive(clap::Args, Debug, Clone)]
pub struct EpochArgs {
    /// Epoch: ms since 1970 or an RFC 3339 date-time [default: 2015-01-01T00:00:00+08:00]
    #[arg(long, value_name = "MS|RFC3339")]
    pub epoch: Option<Epoch>,
    /// A vesta.toml whose id.epoch (and id.type) to use
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
}

impl EpochArgs {
    /// The config file's contents (or the defaults) with `--epoch` applied: the one place where
    /// flag > config > default is decided for the epoch.
    pub fn issuer_config(&self) -> anyhow::Result<IssuerConfig> {
        let mut config = match &self.config {
            Some(path) => IssuerConfig::from_toml_file(path).context("--config")?,
            None => IssuerConfig::default(),
        };
        if let Some(epoch) = self.epoch {
            config.id.epoch = epoch;
        }
        Ok(config)
    }

    /// The epoch in force.
    pub fn epoch(&self) -> anyhow::Result<Epoch> {
        Ok(self.issuer_config()?.id.epoch)
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
