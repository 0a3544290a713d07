//! `vesta bench`: load tools for the servers.

/// Arguments of `vesta bench`.
#[derive(clap::Subcommand, Debug)]
pub enum Args {
    /// Load-test TCP servers: throughput and latency percentiles (closed loop, or a fixed rate).
    Tcp(super::bench_tcp::Args),
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<()> {
    match args {
        Args::Tcp(a) => super::bench_tcp::run(a),
    }
}
