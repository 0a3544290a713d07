//! `vesta serve rest`: the REST issuer. With no flags it runs on the built-in defaults (equal to
//! `conf/rest.toml`): 127.0.0.1:8080, static machine 924 from the server pool, max-peak.

use std::net::SocketAddr;
use std::path::PathBuf;

use std::sync::Arc;

use anyhow::Context;

use super::common::{apply_machine_flags, run_server};
use vesta_embed::Status;
use vesta_rest::{RestConfig, RestServer};
use vesta_service::shutdown;

/// Arguments of `vesta serve rest`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// A rest.toml (see conf/rest.toml) [default: built-in defaults, the same as that file]
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Address to listen on, e.g. 127.0.0.1:8080 (port 0 picks a free port) [default: from the
    /// config, 127.0.0.1:8080]
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
    /// The config file (or the defaults) with the flags applied on top.
    pub fn config(&self) -> anyhow::Result<RestConfig> {
        let mut config = match &self.config {
            Some(path) => RestConfig::from_file(path).context("--config")?,
            None => RestConfig::default(),
        };
        if let Some(addr) = self.listen {
            config.server.listen = addr;
        }
        let (machine, zk) = (self.machine, self.zk.as_deref());
        apply_machine_flags(machine, zk, &mut config.machine, &mut config.zookeeper);
        Ok(config)
    }
}

/// Runs the server until SIGTERM or ctrl-c, then releases the machine ID and exits 0.
pub fn run(args: Args) -> anyhow::Result<()> {
    let config = args.config()?;
    for warning in &config.warnings {
        eprintln!("warning: {warning}");
    }
    run_server(async {
        let server = RestServer::start(config).await?;
        let issuer = Arc::clone(server.issuer());
        // One stable line for people and scripts (the port is real even with --listen :0).
        eprintln!(
            "vesta-rest listening on http://{} ({})",
            server.local_addr(),
            describe(&issuer.status())
        );
        let report = server.serve(shutdown::signal()).await;
        if report.forced_closed > 0 {
            eprintln!(
                "vesta-rest closed {} connections still busy after server.shutdown_grace_ms",
                report.forced_closed
            );
        }
        let machine = issuer.status().machine;
        match report.release_error {
            None => {
                eprintln!(
                    "vesta-rest stopped after {} connections; machine {machine} released",
                    report.connections
                );
                anyhow::Ok(())
            }
            Some(e) => {
                anyhow::bail!("stopped, but machine {machine} was not released cleanly: {e}")
            }
        }
    })
}

/// `machine 924, genMethod rest, type max-peak, lease static`; while a lease is being acquired
/// the machine ID is not known yet and is not printed.
fn describe(s: &Status) -> String {
    let machine = if s.can_issue() {
        format!("machine {}, ", s.machine)
    } else {
        String::new()
    };
    format!(
        "{machine}genMethod {}, type {}, lease {}",
        s.gen_method, s.id_type, s.lease.state
    )
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

    fn config(argv: &[&str]) -> anyhow::Result<RestConfig> {
        let cli = Cli::try_parse_from(std::iter::once("rest").chain(argv.iter().copied()))?;
        cli.args.config()
    }

    #[test]
    fn no_flags_means_the_shipped_conf_file() {
        let shipped = concat!(env!("CARGO_MANIFEST_DIR"), "/../conf/rest.toml");
        assert_eq!(config(&[]).unwrap(), RestConfig::default());
        assert_eq!(
            config(&["--config", shipped]).unwrap(),
            RestConfig::default()
        );
    }

    #[test]
    fn flags_override_the_file() {
        let c = config(&["--listen", "127.0.0.1:0", "--machine", "1000"]).unwrap();
        assert_eq!(c.server.listen.port(), 0);
        assert_eq!(c.machine.id, Some(1000));
        assert_eq!(c.machine.source, MachineSource::Static);
        let c = config(&["--zk", "127.0.0.1:2182"]).unwrap();
        assert_eq!(c.machine.source, MachineSource::Zookeeper);
        assert_eq!(c.zookeeper.connect, "127.0.0.1:2182");
        assert!(config(&["--zk", "x", "--machine", "930"]).is_err());
    }
}
