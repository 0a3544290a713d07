//! `vesta zk ls`: the machine-ID leases in ZooKeeper — who holds which ID, since when, and each
//! ID's high-water mark — as a table or one JSON object per line.

use std::io::{self, BufWriter, Write};
use std::path::PathBuf;

use anyhow::Context;
use vesta_core::Epoch;
use vesta_embed::IssuerConfig;
use vesta_embed::lease::{LeaseRow, ZkSettings, inspect};

/// Arguments of `vesta zk`.
#[derive(clap::Subcommand, Debug)]
pub enum Args {
    /// List the leases under a root: holder, since when, mark
    Ls(LsArgs),
}

/// Arguments of `vesta zk ls`.
#[derive(clap::Args, Debug)]
pub struct LsArgs {
    /// ZooKeeper to read [default: the config's zookeeper.connect]
    #[arg(long, value_name = "HOST:PORT[,...]")]
    zk: Option<String>,
    /// Root znode of the deployment [default: the config's, else /vesta/default]
    #[arg(long, value_name = "ZNODE")]
    root: Option<String>,
    /// user:password for digest auth [default: the config's]
    #[arg(long, value_name = "USER:PASSWORD")]
    auth: Option<String>,
    /// A vesta.toml whose zookeeper section to use
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// One JSON object per line
    #[arg(long)]
    json: bool,
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<()> {
    match args {
        Args::Ls(ls) => list(ls),
    }
}

fn list(args: LsArgs) -> anyhow::Result<()> {
    let config = match &args.config {
        Some(path) => IssuerConfig::from_toml_file(path).context("--config")?,
        None => IssuerConfig::default(),
    };
    list_leases(config, args.zk, args.root, args.auth, args.json)
}

/// The ZooKeeper leases of `config` (with the flags' connect string, root and auth) on stdout;
/// also `vesta machine ls --zk`.
pub fn list_leases(
    mut config: IssuerConfig,
    zk: Option<String>,
    root: Option<String>,
    auth: Option<String>,
    json: bool,
) -> anyhow::Result<()> {
    if let Some(zk) = zk {
        config.zookeeper.connect = zk;
    }
    if let Some(root) = root {
        config.zookeeper.root = root;
    }
    if auth.is_some() {
        config.zookeeper.auth = auth;
    }
    if config.zookeeper.connect.trim().is_empty() {
        anyhow::bail!("no ZooKeeper to read: pass --zk HOST:PORT or set zookeeper.connect");
    }
    // Listing reads every lease under the root, whatever this config's own machine ID is.
    config.machine.source = vesta_embed::MachineSource::Zookeeper;
    config.machine.id = None;
    config.machine.ordinal_offset = 0;
    let settings = ZkSettings::from_config(&config)?;
    let rows = inspect(&settings)?;
    let now = vesta_embed::SystemClock::precise();
    let now = vesta_core::Clock::now_ms(&now);
    let mut out = BufWriter::new(io::stdout().lock());
    if json {
        for row in &rows {
            serde_json::to_writer(&mut out, &json_row(row))?;
            writeln!(out)?;
        }
    } else {
        write_table(&mut out, &settings, &rows, now)?;
    }
    out.flush()?;
    Ok(())
}

fn json_row(row: &LeaseRow) -> serde_json::Value {
    serde_json::json!({
        "machine": row.machine,
        "held": row.held,
        "holder": row.claim,
        "session": row.session,
        "claimed_ms": row.claimed_ms,
        "mark": row.mark,
    })
}

fn write_table(
    out: &mut impl Write,
    settings: &ZkSettings,
    rows: &[LeaseRow],
    now_ms: u64,
) -> io::Result<()> {
    let held = rows.iter().filter(|r| r.held).count();
    writeln!(
        out,
        "{} at {}: {held} held, {} with a mark",
        settings.root,
        settings.connect,
        rows.iter().filter(|r| r.mark.is_some()).count()
    )?;
    if rows.is_empty() {
        return Ok(());
    }
    writeln!(
        out,
        "{:<8} {:<6} {:<32} {:<34} {:<25} HOLDER STATUS",
        "MACHINE", "STATE", "HOLDER", "SINCE", "MARK"
    )?;
    for row in rows {
        let holder = match &row.claim {
            Some(c) => match &c.instance {
                Some(i) => format!("{}:{} ({i})", c.host, c.pid),
                None => format!("{}:{}", c.host, c.pid),
            },
            None if row.held => "?".into(),
            None => "-".into(),
        };
        let since = match row.claimed_ms.or(row.claim.as_ref().map(|c| c.claimed_ms)) {
            Some(ms) if row.held => format!(
                "{} ({})",
                Epoch::rfc3339(ms),
                age(now_ms.saturating_sub(ms))
            ),
            _ => "-".into(),
        };
        let (mark, shutdown) = match &row.mark {
            Some(m) => (
                Epoch::rfc3339(m.mark_ms),
                match (row.held, m.clean) {
                    (true, _) => "running",
                    (false, true) => "clean",
                    (false, false) => "unclean (session expired)",
                }
                .to_owned(),
            ),
            None => ("-".into(), "-".into()),
        };
        writeln!(
            out,
            "{:<8} {:<6} {:<32} {:<34} {:<25} {}",
            row.machine,
            if row.held { "held" } else { "free" },
            holder,
            since,
            mark,
            shutdown
        )?;
    }
    Ok(())
}

/// A short human age: `42s`, `3m12s`, `5h03m`, `2d04h`.
fn age(ms: u64) -> String {
    let s = ms / 1000;
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m{:02}s", s / 60, s % 60),
        3600..86_400 => format!("{}h{:02}m", s / 3600, s % 3600 / 60),
        _ => format!("{}d{:02}h", s / 86_400, s % 86_400 / 3600),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_are_short() {
        assert_eq!(age(999), "0s");
        assert_eq!(age(61_000), "1m01s");
        assert_eq!(age(3_723_000), "1h02m");
        assert_eq!(age(90_000_000), "1d01h");
    }
}
