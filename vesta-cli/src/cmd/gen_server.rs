//! `vesta gen --server HOST:PORT[,...]`: N IDs fetched from central TCP servers (genMethod
//! server) with the failover client, one per line, in batches of the servers' `max_batch`.
//!
//! Printing runs on a thread of its own, so the next batch is asked for while the last one is
//! written: a gap between requests is a time unit the server may leave unused.

use std::io::{self, BufWriter, Write};
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use anyhow::Context;
use vesta_core::{Form, IdBatch};
use vesta_server::{Client, ClientConfig};

/// IDs asked of the client per call; the client splits them into the servers' batch size.
const CHUNK: u64 = 1 << 16;

/// Batches fetched but not yet printed: enough to ride out a slow reader for a moment, few
/// enough that memory stays small (a batch is a handful of runs).
const QUEUED: usize = 16;

/// The client of `--server` (and `--tls-ca`), as a command line wants it: failing within
/// seconds when no server answers.
pub fn client_config(
    servers: &str,
    tls_ca: Option<&std::path::Path>,
) -> anyhow::Result<ClientConfig> {
    let mut config = ClientConfig::from_list(servers).context("--server")?;
    if let Some(ca) = tls_ca {
        config.tls = Some(vesta_server::ClientTls::with_ca("--tls-ca", ca)?);
    }
    config.retry_budget = Duration::from_secs(3);
    Ok(config)
}

/// Fetches `count` IDs from `servers` and prints them.
/// With `tls_ca`, over TLS trusting that CA.
pub fn run(
    servers: &str,
    tls_ca: Option<&std::path::Path>,
    count: u64,
    form: Form,
) -> anyhow::Result<()> {
    let config = client_config(servers, tls_ca)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let (batches, printed) = mpsc::sync_channel::<IdBatch>(QUEUED);
    let printer = thread::spawn(move || -> io::Result<()> {
        let mut out = BufWriter::with_capacity(1 << 16, io::stdout().lock());
        for batch in printed {
            for id in batch.iter() {
                writeln!(out, "{}", form.encode(id))?;
            }
        }
        out.flush()
    });
    let fetched = runtime.block_on(async {
        let client = Client::connect(config).await?;
        let mut left = count;
        while left > 0 {
            let batch = client.next_ids(left.min(CHUNK)).await?;
            left -= batch.len();
            if batches.send(batch).is_err() {
                break; // the printer stopped: its error says why
            }
        }
        anyhow::Ok(())
    });
    drop(batches);
    let printed = printer
        .join()
        .map_err(|_| anyhow::anyhow!("the output thread panicked"))?;
    fetched?;
    printed?;
    Ok(())
}
