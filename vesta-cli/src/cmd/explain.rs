//! `vesta explain`: IDs from the arguments, or one per line from stdin, explained as a table or
//! as one JSON object per line.

use std::io::{self, BufRead, BufWriter, Write};

use anyhow::{Context, bail};
use vesta_core::{Explanation, parse_id};

use super::common::EpochArgs;

/// Arguments of `vesta explain`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// IDs: unsigned decimal, negative decimal (Java long) or 0x hex; none: read stdin, one per line
    #[arg(value_name = "ID", allow_negative_numbers = true)]
    ids: Vec<String>,
    /// One JSON object per line, with Vesta's keys
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    epoch: EpochArgs,
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<()> {
    let epoch = args.epoch.epoch()?;
    let mut out = BufWriter::new(io::stdout().lock());
    let mut first = true;
    let mut explain = |token: &str, out: &mut BufWriter<_>| -> anyhow::Result<()> {
        let id = parse_id(token)?;
        let x = Explanation::new(id, epoch);
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
