//! `vesta bench rest`: a bounded load test of `vesta serve rest` servers (or, with
//! `--baseline`, of a plain HTTP server such as `bare-hyper`) with the REST engine of
//! `vesta-bench`: the same method and report as `vesta bench tcp`.

use std::time::Duration;

use vesta_bench::{RestLoad, rest};

use super::bench::{Pace, ShapeArg, run_and_report};

/// Arguments of `vesta bench rest`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Servers to load, HOST:PORT[,HOST:PORT...]; connections are spread over them
    #[arg(long, value_name = "HOST:PORT[,...]", default_value = "127.0.0.1:8080")]
    server: String,
    /// HTTP/1.1 keep-alive connections in total, one request in flight on each
    #[arg(long, short = 'c', default_value_t = 16)]
    connections: usize,
    /// IDs per request: GET /genids?count=B; without it every request is GET /genid
    #[arg(long, short = 'b', value_name = "B")]
    batch: Option<u32>,
    #[command(flatten)]
    pace: Pace,
    /// The server is a baseline, not vesta (e.g. bare-hyper): time and count its answers,
    /// without asking /healthz or reading the bodies as IDs
    #[arg(long, conflicts_with = "segment")]
    baseline: bool,
    /// Ask for segment numbers of TAG instead of IDs: GET /segment/TAG, or
    /// /segments/TAG?count=B with --batch (the server needs --segment-db)
    #[arg(long, value_name = "TAG")]
    segment: Option<String>,
    /// Ask on Leaf's path: GET /api/segment/get/TAG (with --segment, without --batch)
    #[arg(long, requires = "segment", conflicts_with = "batch")]
    leaf: bool,
    /// Ask for per-key sequence numbers instead of IDs: each request GET /seq/KEY of a key drawn
    /// uniformly from 0..N (/seq/KEY?count=B&format=json with --batch; the server needs
    /// --seq-db)
    #[arg(long, value_name = "N", conflicts_with_all = ["segment", "baseline"])]
    seq_keys: Option<u64>,
    /// What the --seq-keys keys look like: dense (key i is i), sparse (snowflake-sized
    /// numbers, about 4e17, one to a range of 100,000) or string (16-24 bytes, user:...)
    #[arg(
        long,
        value_enum,
        value_name = "SHAPE",
        default_value = "dense",
        requires = "seq_keys"
    )]
    seq_shape: ShapeArg,
}

/// Runs the load and prints the report.
pub fn run(args: Args) -> anyhow::Result<()> {
    let config = RestLoad {
        load: args.pace.load(&args.server, args.connections, args.batch),
        baseline: args.baseline,
        segment: args.segment,
        leaf: args.leaf,
        seq_keys: args.seq_keys,
        seq_shape: args.seq_shape.into(),
    };
    run_and_report(
        "bench rest",
        // Segment and sequence runs answer numbers, not IDs.
        if config.seq_keys.is_some() || config.segment.is_some() {
            "numbers/s"
        } else {
            "IDs/s"
        },
        config.load.duration,
        |progress| rest::run(config, Duration::from_secs(1), progress),
    )
}
