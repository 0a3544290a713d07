//! `vesta serve tcp`: the central TCP issuer (genMethod server, protocol in docs/protocol.md).
//! With no flags it runs on the built-in defaults, equal to `conf/server.toml`: 127.0.0.1:7654,
//! static machine 924 (the first of the server pool), max-peak.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context;

use super::common::{apply_machine_flags, run_server};
use vesta_server::{Server, ServerConfig, shutdown};

/// Arguments of `vesta serve tcp`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// A server.toml (see conf/server.toml) [default: built-in defaults, the same as that file]
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Address to listen on (port 0 picks a free port) [default: from the config, 127.0.0.1:7654]
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<SocketAddr>,
    /// Static machine ID from the server pool (924..=1023 by default)
    #[arg(long, value_name = "N", conflicts_with = "zk")]
    pub machine: Option<u64>,
    /// Lease the machine ID from ZooKeeper at HOST:PORT[,HOST:PORT...]
    #[arg(long, value_name = "CONNECT")]
    pub zk: Option<String>,
}

impl Args {
    /// The config file (or the defaults) with the flags applied on top, checked.
    pub fn config(&self) -> anyhow::Result<ServerConfig> {
        let mut config = match &self.config {
            Some(path) => ServerConfig::from_file(path).context("--config")?,
            None => ServerConfig::default(),
        };
        if let Some(addr) = self.listen {
            config.server.listen = addr;
        }
        let (machine, zk) = (self.machine, self.zk.as_deref());
        apply_machine_flags(machine, zk, &mut config.machine, &mut config.zookeeper);
        config.validate()?;
        Ok(config)
    }
}

/// Serves until SIGTERM or Ctrl-C, answers what is in flight, releases the machine ID, exits 0.
pub fn run(args: Args) -> anyhow::Result<()> {
    let config = args.config()?;
    run_server(async {
        let server = Server::start(config).await?;
        let info = server.info();
        // One stable line for people and scripts (the port is real even with --listen :0).
        eprintln!(
            "vesta-tcp listening on {} (machine {}, genMethod server, type {}, lease {})",
            server.local_addr(),
            info.machine,
            server.issuer().status().id_type,
            info.lease_state_name(),
        );
        server.run(shutdown::signal()).await?;
        eprintln!("vesta-tcp stopped; machine {} released", info.machine);
        anyhow::Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use vesta_embed::MachineSource;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: Args,
    }

    fn config(argv: &[&str]) -> anyhow::Result<ServerConfig> {
        let cli = Cli::try_parse_from(std::iter::once("tcp").chain(argv.iter().copied()))?;
        cli.args.config()
    }

    #[test]
    fn no_flags_means_the_shipped_conf_file() {
        let shipped = concat!(env!("CARGO_MANIFEST_DIR"), "/../conf/server.toml");
        assert_eq!(config(&[]).unwrap(), ServerConfig::default());
        assert_eq!(
            config(&["--config", shipped]).unwrap(),
            ServerConfig::default()
        );
    }

    #[test]
    fn flags_override_the_file_and_are_checked() {
        let c = config(&["--listen", "127.0.0.1:0", "--machine", "1000"]).unwrap();
        assert_eq!(c.server.listen.port(), 0);
        assert_eq!(c.machine.id, Some(1000));
        let c = config(&["--zk", "127.0.0.1:2182"]).unwrap();
        assert_eq!(c.machine.source, MachineSource::Zookeeper);
        assert_eq!(c.zookeeper.connect, "127.0.0.1:2182");
        assert!(config(&["--zk", "x", "--machine", "930"]).is_err());
        let err = config(&["--machine", "5"]).unwrap_err().to_string();
        assert_eq!(
            err,
            "invalid config: machine 5 is outside the server pool 924..=1023 (genMethod server)"
        );
    }
}
