//! `vesta explain`: IDs from the arguments, or one per line from stdin, explained in the layout
//! in force (or a server's, with `--server`) as a table or as one JSON object per line.

use std::io::{self, BufRead, BufWriter, Write};
#[cfg(feature = "client")]
use std::time::Duration;

use anyhow::{Context, bail};
use vesta_core::{Explanation, Layout, parse_id};
#[cfg(feature = "client")]
use vesta_server::{Client, ClientConfig};

use super::common::LayoutArgs;

/// Arguments of `vesta explain`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// IDs: unsigned decimal, negative decimal (Java long) or 0x hex; none: read stdin, one per line
    #[arg(value_name = "ID", allow_negative_numbers = true)]
    ids: Vec<String>,
    /// One JSON object per line (Vesta's keys for Vesta's layouts, the layout's own field names
    /// for the others)
    #[arg(long)]
    json: bool,
    /// Explain with a TCP server's layout and epoch, as the server explains them
    #[arg(long, value_name = "HOST:PORT[,...]", conflicts_with_all = ["layout", "epoch", "config"])]
    server: Option<String>,
    #[command(flatten)]
    layout: LayoutArgs,
}

/// Who explains: the layout in force, or a server.
enum Explainer {
    Local(Layout),
    #[cfg(feature = "client")]
    Server(tokio::runtime::Runtime, Client),
}

impl Explainer {
    fn explain(&self, id: u64) -> anyhow::Result<Explanation> {
        match self {
            Explainer::Local(layout) => Ok(Explanation::new(id, layout)),
            #[cfg(feature = "client")]
            Explainer::Server(runtime, client) => Ok(runtime.block_on(client.explain(id))?),
        }
    }
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<()> {
    let explainer = match &args.server {
        Some(servers) => connect(servers)?,
        None => Explainer::Local(args.layout.layout()?),
    };
    let mut out = BufWriter::new(io::stdout().lock());
    let mut first = true;
    let mut explain = |token: &str, out: &mut BufWriter<_>| -> anyhow::Result<()> {
        let x = explainer.explain(parse_id(token)?)?;
        if args.json {
            serde_json::to_writer(&mut *out, &x)?;
            writeln!(out)?;
        } else {
            if !first {
                writeln!(out)?;
            }
            writeln!(out, "{x}")?;
        }
        first = false;
        Ok(())
    };
    if args.ids.is_empty() {
        for (n, line) in io::stdin().lock().lines().enumerate() {
            let line = line.context("reading stdin")?;
            if line.trim().is_empty() {
                continue;
            }
            explain(&line, &mut out).with_context(|| format!("stdin line {}", n + 1))?;
        }
    } else {
        for token in &args.ids {
            explain(token, &mut out)?;
        }
    }
    if first && args.ids.is_empty() {
        bail!("no ID given: pass IDs as arguments or one per line on stdin");
    }
    out.flush()?;
    Ok(())
}

/// A client of `servers` that fails fast when none answers.
#[cfg(feature = "client")]
fn connect(servers: &str) -> anyhow::Result<Explainer> {
    let mut config = ClientConfig::from_list(servers).context("--server")?;
    config.retry_budget = Duration::from_secs(3);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let client = runtime.block_on(Client::connect(config))?;
    Ok(Explainer::Server(runtime, client))
}

#[cfg(not(feature = "client"))]
fn connect(_: &str) -> anyhow::Result<Explainer> {
    Err(super::absent::refused("vesta explain --server", "client"))
}
