//! `vesta seq`: per-key sequences (WeChat seqsvr's model) — a key's next numbers, or its
//! current number — straight from the table `vesta_seq`, or from a server (`--server`, the TCP
//! protocol's `SEQ_NEXT`/`SEQ_CURRENT`). The database is `--db`, else the config's `[seq] db`,
//! else `sqlite://vesta-seq.db` in the working directory; the table is created on first use.
//! One owner per table: a run straight from the table holds the table's lease for its run, so
//! it is refused (naming the server) while a server or a cluster serves the table, which is
//! then asked through `--server`; and a server starting meanwhile is refused. `vesta seq mode`
//! and `vesta seq raise` (`seq_admin.rs`) show who serves a table and raise one that went back.

use std::collections::HashMap;
use std::io::{self, BufWriter, Write};
use std::path::PathBuf;

use anyhow::Context;
use serde::Deserialize;
use serde::de::IgnoredAny;
use std::sync::Arc;

use vesta_embed::config::{EtcdSection, ZooKeeperSection};
use vesta_seq::cluster::Coordinator;
use vesta_seq::{DEFAULT_SEQ_DB, DbUrl, Owner, SeqError, SeqKey, SeqSection, Sequences};

use super::seq_admin::{self, ModeArgs, RaiseArgs};

/// Arguments of `vesta seq`.
#[derive(clap::Subcommand, Debug)]
pub enum Args {
    /// Print a key's next N numbers, one per line: each above every number the key was
    /// handed before, by this process or an earlier one on the same table
    Next(NextArgs),
    /// Print a key's current number without moving it (in a fresh process: its section's
    /// stored maximum, above every number handed out)
    Show(ShowArgs),
    /// Print the cluster of servers on the database: its members (live or not, their
    /// addresses, lease) and which member owns which sets (docs/seq-cluster.md)
    Ls(LsArgs),
    /// Print how the table is served (standalone or a cluster, as it records it) and who holds
    /// it now; --set records another way while nothing serves it
    Mode(ModeArgs),
    /// Raise the table's rows back above every number handed out, after a restore: to what
    /// this host remembers raising them to (docs/seq.md, "A restored table"), or by N. Never
    /// lowers a row
    Raise(RaiseArgs),
}

/// Arguments of `vesta seq ls`.
#[derive(clap::Args, Debug)]
pub struct LsArgs {
    /// sqlite://PATH, postgres://... or mysql://... [default: the config's [seq] db, else
    /// sqlite://vesta-seq.db]
    #[arg(long, value_name = "URL")]
    db: Option<String>,
    /// A TOML file whose [seq] section to use
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
}

/// Where the table is, or the server that serves it.
#[derive(clap::Args, Debug)]
pub struct DbArgs {
    /// sqlite://PATH, postgres://USER[:PASS]@HOST:PORT/DB or mysql://USER[:PASS]@HOST:PORT/DB
    /// [default: the config's [seq] db, else sqlite://vesta-seq.db]
    #[arg(long, value_name = "URL")]
    db: Option<String>,
    /// A TOML file whose [seq] section to use (database, step, timeouts)
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Ask these TCP servers (HOST:PORT[,...], `vesta serve tcp` with [seq] db) instead of
    /// opening the table
    #[arg(long, value_name = "ADDRS", conflicts_with_all = ["db", "config"])]
    server: Option<String>,
    /// With --server: speak TLS, trusting the CA certificate(s) in this PEM file
    #[arg(long, value_name = "FILE", requires = "server")]
    tls_ca: Option<PathBuf>,
}

/// Numbers asked of a server per client call while printing (the client splits them into
/// calls of at most the server's step): the ranges held at once stay few.
#[cfg(feature = "client")]
const SERVER_CHUNK: u64 = 1 << 20;

/// Arguments of `vesta seq next`.
#[derive(clap::Args, Debug)]
pub struct NextArgs {
    /// The key: a number (0..=18446744073709551615) or UTF-8 text of 1-128 bytes
    key: String,
    /// How many numbers
    #[arg(short = 'n', long = "count", value_name = "N", default_value_t = 1)]
    count: u64,
    #[command(flatten)]
    db: DbArgs,
}

/// Arguments of `vesta seq show`.
#[derive(clap::Args, Debug)]
pub struct ShowArgs {
    /// The key
    key: String,
    #[command(flatten)]
    db: DbArgs,
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<()> {
    super::db_runtime()?.block_on(async {
        match args {
            Args::Next(a) => next(a).await,
            Args::Show(a) => show(a).await,
            Args::Mode(a) => seq_admin::mode(a).await,
            Args::Raise(a) => seq_admin::raise(a).await,
            Args::Ls(a) => {
                let db = DbArgs {
                    db: a.db,
                    config: a.config,
                    server: None,
                    tls_ca: None,
                };
                let (seqs, section, reach) = db.open_with(Owner::inspect()).await?;
                let coord = match coordinator(&section, &reach, &seqs).await {
                    Ok(coord) => coord,
                    Err(e) => {
                        seqs.close().await;
                        return Err(e);
                    }
                };
                ls(&seqs, coord.as_ref()).await
            }
        }
    })
}

/// A config file: its `[seq]` section and the `[etcd]` and `[zookeeper]` ones a cluster may be
/// coordinated through, other sections ignored (so a server's file works).
#[derive(Deserialize)]
struct ConfigFile {
    #[serde(default)]
    seq: SeqSection,
    #[serde(default)]
    etcd: EtcdSection,
    #[serde(default)]
    zookeeper: ZooKeeperSection,
    #[serde(flatten)]
    _other: HashMap<String, IgnoredAny>,
}

/// The sections a cluster coordinated outside the database is reached through.
#[derive(Default)]
pub struct Reach {
    etcd: EtcdSection,
    zookeeper: ZooKeeperSection,
}

impl Reach {
    pub(crate) fn sections(&self) -> vesta_seq::coordination::Reach<'_> {
        vesta_seq::coordination::Reach {
            etcd: &self.etcd,
            zookeeper: &self.zookeeper,
        }
    }
}

impl DbArgs {
    /// Opens the sequences the flags and config name as `owner` (the table's lease taken for
    /// the run with the config's `seq.cluster_ttl_ms`); the `[seq]`, `[etcd]` and `[zookeeper]`
    /// sections read.
    pub(crate) async fn open_with(
        &self,
        owner: Owner,
    ) -> anyhow::Result<(Sequences, SeqSection, Reach)> {
        let (mut section, reach) = match &self.config {
            Some(path) => {
                let file =
                    vesta_embed::config::load_toml::<ConfigFile>(path).context("--config")?;
                let reach = Reach {
                    etcd: file.etcd,
                    zookeeper: file.zookeeper,
                };
                (file.seq, reach)
            }
            None => (SeqSection::default(), Reach::default()),
        };
        if let Some(db) = &self.db {
            DbUrl::parse(db).context("--db")?;
            section.db = Some(db.clone());
        }
        let url = section
            .db_url()?
            .map_or_else(|| DbUrl::parse(DEFAULT_SEQ_DB), Ok)?;
        let owner = owner.lease(std::time::Duration::from_millis(section.cluster_ttl_ms));
        let seqs = Sequences::open_as(&url, section.options(), owner)
            .await
            .map_err(|e| seq_admin::explained(e, &url.to_string()))?;
        Ok((seqs, section, reach))
    }

    /// [`DbArgs::open_with`] for a command that hands out or reads numbers: the table's lease
    /// held for the run, refused while a server or a cluster serves the table (ask them with
    /// --server instead); a cluster coordinated in etcd or ZooKeeper is looked for there, the
    /// config naming it.
    pub(crate) async fn open_unserved(&self) -> anyhow::Result<Sequences> {
        let (seqs, _, reach) = self.open_with(Owner::tool()).await?;
        let refused = vesta_seq::coordination::refuse_if_served(reach.sections(), &seqs).await;
        if let Err(e) = refused {
            seqs.close().await;
            let db = seqs.url().to_string();
            return Err(match e {
                e @ SeqError::Held { .. } => seq_admin::explained(e, &db),
                e => coordination_error(e).context(
                    "the table is served by a cluster coordinated outside the database: give \
                     --config naming it, so its members are looked for there",
                ),
            });
        }
        Ok(seqs)
    }
}

/// The coordinator of the cluster on `seqs`' table that `[seq] coordination` names: the
/// database itself, etcd through `[etcd]` or ZooKeeper through `[zookeeper]`.
async fn coordinator(
    section: &SeqSection,
    reach: &Reach,
    seqs: &Sequences,
) -> anyhow::Result<Arc<dyn Coordinator>> {
    vesta_seq::coordination::coordinator(section.coordination, reach.sections(), seqs)
        .await
        .map_err(coordination_error)
}

/// A coordination's error as one line: a config it refuses says so, as a server's does.
pub(crate) fn coordination_error(e: SeqError) -> anyhow::Error {
    match e {
        SeqError::Config(e) => anyhow::anyhow!("invalid config: {e}"),
        e => e.into(),
    }
}

/// `vesta seq ls`: the members, then the sets as runs of one owner.
async fn ls(seqs: &Sequences, coord: &dyn Coordinator) -> anyhow::Result<()> {
    use vesta_seq::cluster::{is_live, read_rows};
    let rows = read_rows(coord).await;
    seqs.close().await;
    let rows = rows?;
    let mut out = BufWriter::new(io::stdout().lock());
    writeln!(
        out,
        "member  state   lease_left_ms  tcp                    rest                   holder"
    )?;
    for m in &rows.members {
        let live = is_live(m, rows.now_ms);
        writeln!(
            out,
            "{:<7} {:<7} {:<14} {:<22} {:<22} {}",
            m.member,
            if live {
                "live"
            } else if m.holder.is_empty() {
                "left"
            } else {
                "expired"
            },
            if live {
                (m.expires_ms - rows.now_ms).to_string()
            } else {
                "-".into()
            },
            if m.tcp.is_empty() { "-" } else { &m.tcp },
            if m.rest.is_empty() { "-" } else { &m.rest },
            if m.holder.is_empty() { "-" } else { &m.holder },
        )?;
    }
    writeln!(out, "\nowner   sets  which")?;
    let mut owners: Vec<Option<u64>> = rows.sets.iter().map(|s| s.owner).collect();
    owners.sort_unstable();
    owners.dedup();
    for owner in owners {
        let sets: Vec<u32> = rows
            .sets
            .iter()
            .filter(|s| s.owner == owner)
            .map(|s| s.set)
            .collect();
        writeln!(
            out,
            "{:<7} {:<5} {}",
            owner.map_or_else(|| "none".into(), |o| o.to_string()),
            sets.len(),
            runs(&sets)
        )?;
    }
    out.flush()?;
    Ok(())
}

/// `0-2,4,8-9`: sorted numbers as runs.
fn runs(numbers: &[u32]) -> String {
    let mut parts = Vec::new();
    let mut i = 0;
    while i < numbers.len() {
        let mut j = i;
        while j + 1 < numbers.len() && numbers[j + 1] == numbers[j] + 1 {
            j += 1;
        }
        parts.push(if i == j {
            numbers[i].to_string()
        } else {
            format!("{}-{}", numbers[i], numbers[j])
        });
        i = j + 1;
    }
    parts.join(",")
}

fn key(text: &str) -> anyhow::Result<SeqKey> {
    Ok(SeqKey::parse(text.as_bytes())?)
}

/// How long `vesta seq --server` keeps trying: a default lease (`seq.cluster_ttl_ms`), a beat
/// and a margin.
#[cfg(feature = "client")]
const SEQ_RETRY_BUDGET: std::time::Duration = std::time::Duration::from_secs(10);

/// The client of `--server`, or the refusal of a build without one.
#[cfg(feature = "client")]
async fn client(args: &DbArgs, servers: &str) -> anyhow::Result<vesta_server::Client> {
    let mut config = super::gen_server::client_config(servers, args.tls_ca.as_deref())?;
    // In a sequences cluster a killed member's keys wait for its lease to expire (6 s by
    // default) before another member serves them: wait that out rather than fail.
    config.retry_budget = config.retry_budget.max(SEQ_RETRY_BUDGET);
    Ok(vesta_server::Client::connect(config).await?)
}

#[cfg(not(feature = "client"))]
async fn client(_: &DbArgs, _: &str) -> anyhow::Result<std::convert::Infallible> {
    Err(super::absent::refused("vesta seq --server", "client"))
}

async fn next(args: NextArgs) -> anyhow::Result<()> {
    let key = key(&args.key)?;
    if args.count == 0 {
        anyhow::bail!("--count 0 is out of range: allowed 1..=18446744073709551615");
    }
    if let Some(servers) = &args.db.server {
        #[cfg_attr(not(feature = "client"), allow(unused_variables, unreachable_code))]
        let client = client(&args.db, servers).await?;
        #[cfg(feature = "client")]
        {
            let mut out = BufWriter::with_capacity(1 << 16, io::stdout().lock());
            let mut left = args.count;
            while left > 0 {
                for r in client
                    .seq_next_n(args.key.as_bytes(), left.min(SERVER_CHUNK))
                    .await?
                {
                    left -= r.end - r.start;
                    for n in r {
                        writeln!(out, "{n}")?;
                    }
                }
            }
            out.flush()?;
        }
        return Ok(());
    }
    let seqs = args.db.open_unserved().await?;
    let mut out = BufWriter::with_capacity(1 << 16, io::stdout().lock());
    let mut result: anyhow::Result<()> = Ok(());
    for _ in 0..args.count {
        match seqs.next(&key).await {
            Ok(n) => {
                if let Err(e) = writeln!(out, "{n}") {
                    result = Err(e.into());
                    break;
                }
            }
            Err(e) => {
                result = Err(seq_admin::explained(e, &seqs.url().to_string()));
                break;
            }
        }
    }
    let flushed = out.flush();
    seqs.close().await;
    result?;
    flushed?;
    Ok(())
}

async fn show(args: ShowArgs) -> anyhow::Result<()> {
    let key = key(&args.key)?;
    if let Some(servers) = &args.db.server {
        #[cfg_attr(not(feature = "client"), allow(unused_variables, unreachable_code))]
        let client = client(&args.db, servers).await?;
        #[cfg(feature = "client")]
        println!("{}", client.seq_current(args.key.as_bytes()).await?);
        return Ok(());
    }
    let seqs = args.db.open_unserved().await?;
    let current = seqs.current(&key).await;
    seqs.close().await;
    let current = current.map_err(|e| seq_admin::explained(e, &seqs.url().to_string()))?;
    println!("{current}");
    Ok(())
}
