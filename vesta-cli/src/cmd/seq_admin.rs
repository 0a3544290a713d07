//! `vesta seq mode` and `vesta seq raise`: who serves a table and how it records being served,
//! and the recovery of a table that went back (restored from a backup); and the command lines
//! every refusal of a table's ownership or of the restore guard names (here, since only
//! vesta-cli spells `vesta ...`), for `vesta seq` and `vesta serve` alike.

use std::io::{self, BufWriter, Write};

use anyhow::Context;
use vesta_seq::{Mode, Owner, RaiseTo, RaisedRow, SeqError, SeqKey, Sequences};

use super::seq::{DbArgs, coordination_error};

/// Arguments of `vesta seq mode`.
#[derive(clap::Args, Debug)]
pub struct ModeArgs {
    /// Record this way of serving the table instead (refused while anything serves it):
    /// `standalone`, `cluster sql`, `cluster etcd` or `cluster zookeeper`
    #[arg(long, value_name = "MODE")]
    set: Option<String>,
    #[command(flatten)]
    db: DbArgs,
}

/// Arguments of `vesta seq raise`.
#[derive(clap::Args, Debug)]
pub struct RaiseArgs {
    /// Only the section of this key [default: every row]
    #[arg(long, value_name = "KEY")]
    key: Option<String>,
    /// Raise every row by N: after a restore nothing remembers (N above the numbers handed out
    /// since the backup) [default: each row below what this host (and, with --config, the
    /// cluster's etcd or ZooKeeper) remembers raising it to, up to that]
    #[arg(long, value_name = "N", conflicts_with = "to")]
    by: Option<u64>,
    /// Raise every row below N to N
    #[arg(long, value_name = "N")]
    to: Option<u64>,
    /// One JSON object per row raised
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    db: DbArgs,
}

/// `vesta seq mode`: the recorded mode, the table's lease, the live members; or `--set`.
pub async fn mode(args: ModeArgs) -> anyhow::Result<()> {
    let Some(set) = &args.set else {
        let (seqs, _, _) = args.db.open_with(Owner::inspect()).await?;
        let served = seqs.served().await;
        seqs.close().await;
        let served = served?;
        let mut out = BufWriter::new(io::stdout().lock());
        writeln!(
            out,
            "mode     {}",
            served
                .mode
                .map_or("none recorded (no server yet)", Mode::as_str)
        )?;
        writeln!(
            out,
            "lease    {}",
            served.lease.as_deref().unwrap_or("free")
        )?;
        let members: Vec<String> = served
            .members
            .iter()
            .map(|m| m.member.to_string())
            .collect();
        writeln!(
            out,
            "members  {}",
            if members.is_empty() {
                "none live in the database".into()
            } else {
                members.join(", ")
            }
        )?;
        out.flush()?;
        return Ok(());
    };
    let to =
        Mode::parse(set).with_context(|| format!("--set {set:?} is not one of {}", Mode::NAMES))?;
    let seqs = args.db.open_unserved().await?;
    let before = seqs.set_mode(to).await;
    seqs.close().await;
    let before = before?;
    println!(
        "mode {} -> {}",
        before.map_or("none", Mode::as_str),
        to.as_str()
    );
    Ok(())
}

/// `vesta seq raise`: the rows moved back up, one line each (`--json`: an object each).
pub async fn raise(args: RaiseArgs) -> anyhow::Result<()> {
    let key = match &args.key {
        Some(k) => Some(SeqKey::parse(k.as_bytes())?),
        None => None,
    };
    let how = match (args.by, args.to) {
        (Some(n), _) => RaiseTo::By(n),
        (None, Some(n)) => RaiseTo::To(n),
        (None, None) => RaiseTo::Floors,
    };
    let (seqs, _, reach) = args.db.open_with(Owner::inspect()).await?;
    let raised = raise_on(&seqs, &reach, how, key.as_ref()).await;
    seqs.close().await;
    let raised = raised?;
    let mut out = BufWriter::new(io::stdout().lock());
    for r in &raised {
        if args.json {
            serde_json::to_writer(&mut out, r)?;
            writeln!(out)?;
        } else {
            writeln!(out, "{}", raised_line(r))?;
        }
    }
    if raised.is_empty() && !args.json {
        writeln!(out, "nothing to raise: no row is below its target")?;
    }
    out.flush()?;
    Ok(())
}

/// Raises `seqs`' rows, with the floors of the cluster's coordinator outside the database when
/// the table is recorded as served by one and the config reaches it.
async fn raise_on(
    seqs: &Sequences,
    reach: &super::seq::Reach,
    how: RaiseTo,
    key: Option<&SeqKey>,
) -> anyhow::Result<Vec<RaisedRow>> {
    let served = seqs.served().await?;
    if let Some(Mode::Cluster(c)) = served.mode
        && c != vesta_seq::Coordination::Sql
        && how == RaiseTo::Floors
    {
        let coord = vesta_seq::coordination::coordinator(c, reach.sections(), seqs)
            .await
            .map_err(coordination_error)
            .context(
                "the table is served by a cluster coordinated outside the database, whose \
                      floors this raise reads: give --config naming it",
            )?;
        seqs.with_floors_of(coord);
    }
    Ok(seqs.raise_table(how, key).await?)
}

fn raised_line(r: &RaisedRow) -> String {
    let what = match r.kind {
        0 => "numeric section",
        3 => "spread bucket",
        _ => "string bucket",
    };
    match r.from {
        Some(from) => format!("{what} {}: max_seq {from} -> {}", r.section, r.to),
        None => format!("{what} {}: no row -> max_seq {}", r.section, r.to),
    }
}

/// `e` as one line, with the command that resolves it when it is a table's ownership or the
/// restore guard (`db`: the database, password hidden).
pub fn explained(e: SeqError, db: &str) -> anyhow::Error {
    match remedy(&e, db) {
        Some(hint) => anyhow::anyhow!("{e}; {hint}"),
        None => e.into(),
    }
}

/// The command line that resolves a refusal, if there is one.
pub fn remedy(e: &SeqError, db: &str) -> Option<String> {
    match e {
        SeqError::Held { .. } => Some(format!(
            "ask it instead (vesta seq next KEY --server HOST:PORT for a TCP server, GET \
             /seq/KEY for a REST one) or stop it first; vesta seq mode --db {db} shows who serves \
             the table"
        )),
        SeqError::Mode { .. } => Some(format!(
            "if nothing serves it that way any more, record this one: vesta seq mode --db {db} \
             --set MODE (one of {})",
            Mode::NAMES
        )),
        SeqError::WentBack { .. } => Some(format!(
            "to recover: vesta seq raise --db {db} (to what this host remembers; add --config \
             FILE for a cluster in etcd or ZooKeeper), or vesta seq raise --db {db} --by N where \
             nothing remembers it (docs/seq.md, \"A restored table\")"
        )),
        _ => None,
    }
}

/// A server's start error, with the command that resolves a refusal of its table.
#[cfg(feature = "serve")]
pub fn explained_serve(e: vesta_service::ServeError, db: Option<&str>) -> anyhow::Error {
    if let (vesta_service::ServeError::Seq(se), Some(db)) = (&e, db)
        && let Some(hint) = remedy(se, db)
    {
        return anyhow::anyhow!("{e}; {hint}");
    }
    e.into()
}
