//! `vesta bench tcp`: a bounded load test of `vesta serve tcp` servers with the TCP engine of
//! `vesta-bench`; progress on stderr, the report on stdout. With `--seq-keys N` it asks for
//! per-key sequence numbers, and with `--peer` it puts the same seq load on Redis or
//! PostgreSQL.

use std::time::Duration;

use vesta_bench::{Peer, TcpLoad, tcp};

use super::bench::{Pace, ShapeArg, run_and_report};

/// Arguments of `vesta bench tcp`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Servers to load, HOST:PORT[,HOST:PORT...]; connections are spread over them (with
    /// --peer postgres: a postgres:// URL). With --seq-keys and more than one server, the
    /// servers are members of a cluster: every connection reaches each, and sends a key to its
    /// set's owner (learned from SEQ_MOVED, followed and counted apart from errors)
    #[arg(long, value_name = "HOST:PORT[,...]", default_value = "127.0.0.1:7654")]
    server: String,
    /// Connections in total
    #[arg(long, short = 'c', default_value_t = 4)]
    connections: usize,
    /// Requests in flight per connection
    #[arg(long, short = 'p', default_value_t = 64)]
    pipeline: usize,
    /// IDs per request (NEXT_IDS); without it every request is one NEXT_ID. With --seq-keys:
    /// numbers per call of a key (SEQ_NEXT count; INCRBY B; cur + B)
    #[arg(long, short = 'b', value_name = "B")]
    batch: Option<u32>,
    #[command(flatten)]
    pace: Pace,
    /// Ask for per-key sequence numbers instead of IDs: each request SEQ_NEXT of a key drawn
    /// uniformly from 0..N, sent as decimal text (the server needs --seq-db)
    #[arg(long, value_name = "N")]
    seq_keys: Option<u64>,
    /// Put the same --seq-keys load on a peer instead of vesta: redis (INCR, pipelined like
    /// vesta's; --server HOST:PORT; closed loop) or postgres (UPDATE seq SET cur = cur + 1
    /// WHERE key = $1 RETURNING cur, one query in flight per connection; --server
    /// postgres://USER@HOST:PORT/DB; the table and its rows are made when missing)
    #[arg(long, value_enum, value_name = "PEER", requires = "seq_keys")]
    peer: Option<PeerArg>,
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

/// The peers `--peer` names.
#[derive(clap::ValueEnum, Clone, Copy, Debug)]
enum PeerArg {
    /// Redis INCR, pipelined
    Redis,
    /// PostgreSQL UPDATE ... RETURNING, one per call
    Postgres,
}

/// Runs the load and prints the report.
pub fn run(args: Args) -> anyhow::Result<()> {
    let config = TcpLoad {
        load: args.pace.load(&args.server, args.connections, args.batch),
        pipeline: args.pipeline,
        seq_keys: args.seq_keys,
        seq_shape: args.seq_shape.into(),
        peer: args.peer.map(|p| match p {
            PeerArg::Redis => Peer::Redis,
            PeerArg::Postgres => Peer::Postgres,
        }),
    };
    run_and_report(
        "bench tcp",
        if config.seq_keys.is_some() {
            "numbers/s"
        } else {
            "IDs/s"
        },
        config.load.duration,
        |progress| tcp::run(config, Duration::from_secs(1), progress),
    )
}
