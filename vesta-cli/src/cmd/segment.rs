//! `vesta segment`: Leaf's segment mode from the command line — create `leaf_alloc` and tags,
//! list them, raise them past a restored backup, and take numbers from an in-process store
//! that gives its unused tail back on exit. The database is `--db`, else the config's `[segment] db`, else
//! `sqlite://vesta-segments.db` in the working directory.

use std::collections::HashMap;
use std::io::{self, BufWriter, Write};
use std::path::PathBuf;

use anyhow::Context;
use serde::Deserialize;
use serde::de::IgnoredAny;
use vesta_segment::{
    DEFAULT_CLI_DB, Database, DbUrl, Raise, Raised, SegmentSection, Store, TagRow,
};

/// Numbers asked of the store per call while printing.
const CHUNK: u64 = 65_536;

/// Arguments of `vesta segment`.
#[derive(clap::Subcommand, Debug)]
pub enum Args {
    /// Create the leaf_alloc table if it is absent (Leaf's DDL for the database)
    Init(InitArgs),
    /// Add a tag: its first number is --start, reserved in segments of --step
    Create(CreateArgs),
    /// List the tags: max_id, step, last update, description
    Ls(LsArgs),
    /// Print N numbers of a tag, one per line (the unused tail is given back on exit)
    Get(GetArgs),
    /// Move a tag's max_id up, never down: after restoring a backup or failing over to a
    /// replica, past every number issued before
    Raise(RaiseArgs),
}

/// Where the database is.
#[derive(clap::Args, Debug)]
pub struct DbArgs {
    /// sqlite://PATH, postgres://USER[:PASS]@HOST:PORT/DB or mysql://USER[:PASS]@HOST:PORT/DB
    /// [default: the config's [segment] db, else sqlite://vesta-segments.db]
    #[arg(long, value_name = "URL")]
    db: Option<String>,
    /// A TOML file whose [segment] section to use (database, prefetch, step policy, wait)
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
}

/// Arguments of `vesta segment init`.
#[derive(clap::Args, Debug)]
pub struct InitArgs {
    #[command(flatten)]
    db: DbArgs,
}

/// Arguments of `vesta segment create`.
#[derive(clap::Args, Debug)]
pub struct CreateArgs {
    /// The tag (biz_tag): 1-128 characters of A-Z a-z 0-9 . _ : -
    tag: String,
    /// Numbers reserved per segment (Leaf's step), 1..=2147483647
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    step: i64,
    /// The first number ever issued
    #[arg(
        long,
        value_name = "S",
        default_value_t = 1,
        allow_negative_numbers = true
    )]
    start: i64,
    /// What the numbers are for (up to 256 characters)
    #[arg(long, value_name = "TEXT")]
    description: Option<String>,
    #[command(flatten)]
    db: DbArgs,
}

/// Arguments of `vesta segment ls`.
#[derive(clap::Args, Debug)]
pub struct LsArgs {
    /// One JSON object per line
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    db: DbArgs,
}

/// Arguments of `vesta segment get`.
#[derive(clap::Args, Debug)]
pub struct GetArgs {
    /// The tag
    tag: String,
    /// How many numbers
    #[arg(
        short = 'n',
        long = "count",
        value_name = "N",
        default_value_t = 1,
        allow_negative_numbers = true
    )]
    count: u64,
    #[command(flatten)]
    db: DbArgs,
}

/// Arguments of `vesta segment raise`.
#[derive(clap::Args, Debug)]
pub struct RaiseArgs {
    /// The tag
    #[arg(required_unless_present = "all", conflicts_with = "all")]
    tag: Option<String>,
    /// Every tag in the table
    #[arg(long)]
    all: bool,
    /// The new max_id (the next number a fetch hands out); a tag already at or above it is
    /// left alone
    #[arg(
        long,
        value_name = "N",
        allow_negative_numbers = true,
        required_unless_present = "by",
        conflicts_with = "by"
    )]
    to: Option<i64>,
    /// Raise max_id by N (at least 1)
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    by: Option<i64>,
    /// One JSON object per tag and line
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    db: DbArgs,
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<()> {
    super::db_runtime()?.block_on(async {
        match args {
            Args::Init(a) => init(a).await,
            Args::Create(a) => create(a).await,
            Args::Ls(a) => list(a).await,
            Args::Get(a) => get(a).await,
            Args::Raise(a) => raise(a).await,
        }
    })
}

/// A config file: its `[segment]` section, other sections ignored (so a server's file works).
#[derive(Deserialize)]
struct ConfigFile {
    #[serde(default)]
    segment: SegmentSection,
    #[serde(flatten)]
    _other: HashMap<String, IgnoredAny>,
}

impl DbArgs {
    /// The `[segment]` settings in force, with the database URL resolved.
    fn section(&self) -> anyhow::Result<SegmentSection> {
        let mut section = match &self.config {
            Some(path) => {
                vesta_embed::config::load_toml::<ConfigFile>(path)
                    .context("--config")?
                    .segment
            }
            None => SegmentSection::default(),
        };
        if let Some(db) = &self.db {
            DbUrl::parse(db).context("--db")?;
            section.db = Some(db.clone());
        }
        section.db.get_or_insert_with(|| DEFAULT_CLI_DB.to_owned());
        section.validate()?;
        Ok(section)
    }

    async fn connect(&self) -> anyhow::Result<Database> {
        let section = self.section()?;
        Ok(Database::connect(&section.db_url()?, section.fetch_timeout()).await?)
    }
}

async fn init(args: InitArgs) -> anyhow::Result<()> {
    let section = args.db.section()?;
    let url = section.db_url()?;
    let db = Database::connect_or_create(&url, section.fetch_timeout()).await?;
    let created = db.init().await;
    db.close().await;
    if created? {
        println!("created table leaf_alloc in {url}");
    } else {
        println!("table leaf_alloc already exists in {url}");
    }
    Ok(())
}

async fn create(args: CreateArgs) -> anyhow::Result<()> {
    let db = args.db.connect().await?;
    let result = db
        .create_tag(
            &args.tag,
            args.step,
            args.start,
            args.description.as_deref(),
        )
        .await;
    db.close().await;
    result?;
    println!(
        "created tag {} in {}: first number {}, step {}",
        args.tag,
        db.url(),
        args.start,
        args.step
    );
    Ok(())
}

async fn list(args: LsArgs) -> anyhow::Result<()> {
    let db = args.db.connect().await?;
    let rows = db.list().await;
    db.close().await;
    let rows = rows?;
    let mut out = BufWriter::new(io::stdout().lock());
    if args.json {
        for row in &rows {
            serde_json::to_writer(&mut out, row)?;
            writeln!(out)?;
        }
    } else {
        write_table(&mut out, &db.url().to_string(), &rows)?;
    }
    out.flush()?;
    Ok(())
}

fn write_table(out: &mut impl Write, db: &str, rows: &[TagRow]) -> io::Result<()> {
    let tags = if rows.len() == 1 { "tag" } else { "tags" };
    writeln!(out, "{db}: {} {tags}", rows.len())?;
    if rows.is_empty() {
        return Ok(());
    }
    let width = |f: &dyn Fn(&TagRow) -> usize, title: &str| {
        rows.iter().map(f).max().unwrap_or(0).max(title.len())
    };
    let tag_w = width(&|r| r.tag.chars().count(), "TAG");
    let max_w = width(&|r| r.max_id.to_string().len(), "MAX_ID");
    let step_w = width(&|r| r.step.to_string().len(), "STEP");
    let upd_w = width(&|r| r.updated.as_deref().map_or(1, str::len), "UPDATED");
    writeln!(
        out,
        "{:<tag_w$}  {:>max_w$}  {:>step_w$}  {:<upd_w$}  DESCRIPTION",
        "TAG", "MAX_ID", "STEP", "UPDATED"
    )?;
    for r in rows {
        writeln!(
            out,
            "{:<tag_w$}  {:>max_w$}  {:>step_w$}  {:<upd_w$}  {}",
            r.tag,
            r.max_id,
            r.step,
            r.updated.as_deref().unwrap_or("-"),
            r.description.as_deref().unwrap_or("-").replace('\n', " ")
        )?;
    }
    Ok(())
}

async fn raise(args: RaiseArgs) -> anyhow::Result<()> {
    let how = match (args.to, args.by) {
        (Some(n), _) => Raise::To(n),
        (None, Some(n)) => Raise::By(n),
        (None, None) => unreachable!("clap requires --to or --by"),
    };
    let db = args.db.connect().await?;
    let raised = raise_tags(&db, args.tag.as_deref(), how).await;
    db.close().await;
    let mut out = BufWriter::new(io::stdout().lock());
    // What was done is printed even when a later tag failed.
    let (done, failure) = raised;
    for r in &done {
        if args.json {
            serde_json::to_writer(&mut out, r)?;
            writeln!(out)?;
        } else {
            writeln!(out, "{}", raised_line(r, how))?;
        }
    }
    out.flush()?;
    match failure {
        Some(e) => Err(e.into()),
        None => Ok(()),
    }
}

/// Raises one tag, or every tag (each in its own transaction), stopping at the first failure.
async fn raise_tags(
    db: &Database,
    tag: Option<&str>,
    how: Raise,
) -> (Vec<Raised>, Option<vesta_segment::SegmentError>) {
    let tags = match tag {
        Some(t) => vec![t.to_owned()],
        None => match db.tags().await {
            Ok(mut tags) => {
                tags.sort();
                tags
            }
            Err(e) => return (Vec::new(), Some(e)),
        },
    };
    let mut done = Vec::with_capacity(tags.len());
    for t in &tags {
        match db.raise(t, how).await {
            Ok(r) => done.push(r),
            Err(e) => return (done, Some(e)),
        }
    }
    (done, None)
}

fn raised_line(r: &Raised, how: Raise) -> String {
    match how {
        Raise::To(n) if r.from == r.to => format!(
            "{}: max_id {} is already at or above {n}: left alone",
            r.tag, r.from
        ),
        _ => format!("{}: max_id {} -> {}", r.tag, r.from, r.to),
    }
}

async fn get(args: GetArgs) -> anyhow::Result<()> {
    if args.count == 0 {
        anyhow::bail!("count 0 is out of range: allowed 1..={}", u64::MAX);
    }
    let section = args.db.section()?;
    let store = Store::open(&section).await?;
    let printed = print_numbers(&store, &args.tag, args.count).await;
    // Stop issuing and give the unused tail back, whether printing succeeded or not.
    store.shutdown().await;
    printed
}

async fn print_numbers(store: &Store, tag: &str, count: u64) -> anyhow::Result<()> {
    let tag = store.tag(tag).await?;
    let mut out = BufWriter::with_capacity(1 << 16, io::stdout().lock());
    let mut left = count;
    while left > 0 {
        let ranges = tag.next_n(left.min(CHUNK)).await?;
        for range in ranges {
            left -= range.end - range.start;
            for n in range {
                writeln!(out, "{n}")?;
            }
        }
    }
    out.flush()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_aligns_its_columns() {
        let rows = vec![
            TagRow {
                tag: "orders".into(),
                max_id: 2001,
                step: 1000,
                updated: Some("2026-11-21T20:08:23Z".into()),
                description: Some("order numbers".into()),
            },
            TagRow {
                tag: "i".into(),
                max_id: 1,
                step: 10,
                updated: None,
                description: None,
            },
        ];
        let mut out = Vec::new();
        write_table(&mut out, "sqlite://x.db", &rows).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert_eq!(
            text,
            "sqlite://x.db: 2 tags\n\
             TAG     MAX_ID  STEP  UPDATED               DESCRIPTION\n\
             orders    2001  1000  2026-11-21T20:08:23Z  order numbers\n\
             i            1    10  -                     -\n"
        );
    }

    #[test]
    fn the_database_comes_from_the_flag_then_the_config_then_the_default() {
        let none = DbArgs {
            db: None,
            config: None,
        };
        assert_eq!(none.section().unwrap().db.as_deref(), Some(DEFAULT_CLI_DB));
        let dir = tempfile::tempdir().unwrap();
        let conf = dir.path().join("rest.toml");
        std::fs::write(
            &conf,
            "[rest]\nlisten = \"x\"\n[segment]\ndb = \"sqlite://from-config.db\"\nwait_ms = 5\n",
        )
        .unwrap();
        let from_config = DbArgs {
            db: None,
            config: Some(conf.clone()),
        };
        let s = from_config.section().unwrap();
        assert_eq!(
            (s.db.as_deref(), s.wait_ms),
            (Some("sqlite://from-config.db"), 5)
        );
        let flag = DbArgs {
            db: Some("sqlite://flag.db".into()),
            config: Some(conf),
        };
        assert_eq!(
            flag.section().unwrap().db.as_deref(),
            Some("sqlite://flag.db")
        );
        let bad = DbArgs {
            db: Some("postgres://u:pw@h/db".into()),
            config: None,
        };
        let err = format!("{:#}", bad.section().unwrap_err());
        assert!(
            err.starts_with("--db: invalid database URL") && err.contains("port is missing"),
            "{err}"
        );
        assert!(!err.contains("pw@"), "{err}");
    }
}
