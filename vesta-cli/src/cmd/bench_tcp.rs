//! `vesta bench tcp`: a bounded load test of `vesta serve tcp` servers with the TCP engine of
//! `vesta-bench`; progress on stderr, the report on stdout.

use std::time::Duration;

use vesta_bench::{TcpLoad, tcp};

use super::bench::{Pace, run_and_report};

/// Arguments of `vesta bench tcp`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Servers to load, HOST:PORT[,HOST:PORT...]; connections are spread over them
    #[arg(long, value_name = "HOST:PORT[,...]", default_value = "127.0.0.1:7654")]
    server: String,
    /// Connections in total
    #[arg(long, short = 'c', default_value_t = 4)]
    connections: usize,
    /// Requests in flight per connection
    #[arg(long, short = 'p', default_value_t = 64)]
    pipeline: usize,
    /// IDs per request (NEXT_IDS); without it every request is one NEXT_ID
    #[arg(long, short = 'b', value_name = "B")]
    batch: Option<u32>,
    #[command(flatten)]
    pace: Pace,
}

/// Runs the load and prints the report.
pub fn run(args: Args) -> anyhow::Result<()> {
    let config = TcpLoad {
        load: args.pace.load(&args.server, args.connections, args.batch),
        pipeline: args.pipeline,
    };
    run_and_report("bench tcp", config.load.duration, |progress| {
        tcp::run(config, Duration::from_secs(1), progress)
    })
}
