//! Arguments shared by several subcommands: the epoch, the config file and field values.

use std::path::PathBuf;

use anyhow::Context;
use vesta_core::Epoch;
use vesta_embed::IssuerConfig;

/// Where the epoch comes from: `--epoch`, else `--config`, else Vesta's.
#[derive(clap::Args, Debug, Clone)]
pub struct EpochArgs {
    /// Epoch: ms since 1970 or an RFC 3339 date-time [default: 2015-01-01T00:00:00+08:00]
    #[arg(long, value_name = "MS|RFC3339")]
    pub epoch: Option<Epoch>,
    /// A vesta.toml whose [id] epoch (and type) to use
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
}

impl EpochArgs {
    /// The config file's contents, or the defaults.
    pub fn issuer_config(&self) -> anyhow::Result<IssuerConfig> {
        match &self.config {
            Some(path) => IssuerConfig::from_file(path).context("--config"),
            None => Ok(IssuerConfig::default()),
        }
    }

    /// The epoch in force.
    pub fn epoch(&self) -> anyhow::Result<Epoch> {
        match self.epoch {
            Some(e) => Ok(e),
            None => Ok(self.issuer_config()?.id.epoch),
        }
    }
}
