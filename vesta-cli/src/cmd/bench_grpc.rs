//! `vesta bench grpc`: a bounded load test of the gRPC service of `vesta serve rest` servers
//! (on their REST port; or, with `--baseline`, of `bare-tonic`) with the gRPC engine of
//! `vesta-bench`: the same method and report as `vesta bench rest`.

use std::time::Duration;

use vesta_bench::{GrpcLoad, grpc};

use super::bench::{Pace, run_and_report};

/// Arguments of `vesta bench grpc`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Servers to load (their REST port), HOST:PORT[,HOST:PORT...]; connections are spread
    /// over them
    #[arg(long, value_name = "HOST:PORT[,...]", default_value = "127.0.0.1:8080")]
    server: String,
    /// HTTP/2 connections in total, one call in flight on each
    #[arg(long, short = 'c', default_value_t = 16)]
    connections: usize,
    /// IDs per call: NextIds with count B (StreamIds with --stream); without it every call
    /// is NextId
    #[arg(long, short = 'b', value_name = "B")]
    batch: Option<u32>,
    /// Ask for each batch as a StreamIds call, read chunk by chunk (needs --batch)
    #[arg(long, requires = "batch")]
    stream: bool,
    #[command(flatten)]
    pace: Pace,
    /// The server is a baseline, not vesta (e.g. bare-tonic): time and count its answers,
    /// without asking /healthz
    #[arg(long)]
    baseline: bool,
}

/// Runs the load and prints the report.
pub fn run(args: Args) -> anyhow::Result<()> {
    let config = GrpcLoad {
        load: args.pace.load(&args.server, args.connections, args.batch),
        stream: args.stream,
        baseline: args.baseline,
    };
    run_and_report("bench grpc", "IDs/s", config.load.duration, |progress| {
        grpc::run(config, Duration::from_secs(1), progress)
    })
}
