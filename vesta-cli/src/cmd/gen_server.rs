//! `vesta gen --server HOST:PORT[,...]`: N IDs fetched from central TCP servers (genMethod
//! server) with the failover client, one per line, in batches of the servers' `max_batch`.

use std::io::{self, BufWriter, Write};
use std::time::Duration;

use anyhow::Context;
use vesta_server::{Client, ClientConfig};

/// IDs asked of the client per call; the client splits them into the servers' batch size.
const CHUNK: u64 = 1 << 20;

/// Fetches `count` IDs from `servers` and prints them.
pub fn run(servers: &str, count: u64) -> anyhow::Result<()> {
    let mut config = ClientConfig::from_list(servers).context("--server")?;
    // A command line should fail fast when no server answers.
    config.retry_budget = Duration::from_secs(3);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(async {
        let client = Client::connect(config).await?;
        let mut out = BufWriter::with_capacity(1 << 16, io::stdout().lock());
        let mut left = count;
        while left > 0 {
            let batch = client.next_ids(left.min(CHUNK)).await?;
            for id in batch.iter() {
                writeln!(out, "{id}")?;
            }
            left -= batch.len();
        }
        out.flush()?;
        anyhow::Ok(())
    })
}
