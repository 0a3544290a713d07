//! `soak_worker`: one producer process of `scripts/soak` (docs/soak.md). It issues or fetches
//! IDs at a paced average rate and appends every ID it was handed to a file, 8 bytes each,
//! little-endian, until it has `--count` of them or is told to stop.
//!
//! - `embed`: an embedded `Issuer` leasing its machine ID from ZooKeeper, on a clock whose
//!   offset the orchestrator steps (`vesta_embed::ShiftedClock`), as NTP or a VM restore would.
//! - `rest`: an HTTP client of `vesta serve rest` (`/genids` and `/genid`).
//! - `seq`: many concurrent callers of a sequences cluster's `seq_next_n`; `--out` gets one
//!   binary record per answered range (`vesta_tests::soak::seq`), `--count` and `--rate` are
//!   calls, and its summary counts calls, numbers and failed calls by kind.
//!
//! Commands arrive on stdin, one per line: `step <ms>` (move the clock by a signed offset),
//! `restart` (shut the issuer down and start a new one, as an operator would), `stop`. End of
//! stdin means stop too, so a worker never outlives its orchestrator. On a clean stop it writes
//! a JSON summary (IDs, refusals by kind, steps, restarts, machine IDs) to `--summary`.

mod embed;
mod rest;
mod seq;

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, BufRead, BufWriter, Write};
use std::path::PathBuf;
use std::sync::mpsc::{self, Receiver};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::{Parser, Subcommand};
use vesta_tests::soak::rng::Rng;

/// One producer of the soak.
#[derive(Parser, Debug)]
#[command(name = "soak_worker")]
struct Args {
    /// Where the IDs go (appended, 8 bytes little-endian each)
    #[arg(long)]
    out: PathBuf,
    /// Where the JSON summary goes on a clean stop
    #[arg(long)]
    summary: PathBuf,
    /// IDs to hand out before exiting
    #[arg(long)]
    count: u64,
    /// Average IDs per second (batches are paced to it)
    #[arg(long)]
    rate: f64,
    /// Seed of the batch sizes
    #[arg(long, default_value_t = 1)]
    seed: u64,
    #[command(subcommand)]
    mode: Mode,
}

#[derive(Subcommand, Debug)]
enum Mode {
    /// An embedded issuer with a ZooKeeper lease and a steppable clock
    Embed(embed::Args),
    /// An HTTP client of the REST server
    Rest(rest::Args),
    /// Concurrent callers of a sequences cluster (`seq_next_n`), every answer recorded
    Seq(seq::Args),
}

/// What the orchestrator asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    /// Move the clock by this many ms (negative: back).
    Step(i64),
    /// Shut the issuer down and start a new one.
    Restart,
    /// Finish: flush, shut down, write the summary.
    Stop,
}

/// Reads commands from stdin on a thread of its own; end of stdin is [`Command::Stop`].
fn commands() -> Receiver<Command> {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        for line in io::stdin().lock().lines() {
            let Ok(line) = line else { break };
            let mut words = line.split_whitespace();
            let cmd = match (words.next(), words.next().map(str::parse::<i64>)) {
                (Some("step"), Some(Ok(ms))) => Command::Step(ms),
                (Some("restart"), None) => Command::Restart,
                (Some("stop"), None) => Command::Stop,
                _ => {
                    log(&format!("ignoring unknown command `{line}`"));
                    continue;
                }
            };
            if tx.send(cmd).is_err() {
                return;
            }
        }
        let _ = tx.send(Command::Stop);
    });
    rx
}

/// Appends IDs to the output file, flushed every 100 ms so progress is visible and a SIGKILL
/// loses little.
pub struct Sink {
    out: BufWriter<File>,
    written: u64,
    flushed: Instant,
}

impl Sink {
    fn create(path: &std::path::Path) -> anyhow::Result<Sink> {
        let file = File::options()
            .create(true)
            .append(true)
            .open(path)
            .with_context(|| format!("opening {}", path.display()))?;
        Ok(Sink {
            out: BufWriter::with_capacity(1 << 20, file),
            written: 0,
            flushed: Instant::now(),
        })
    }

    /// Appends one ID.
    pub fn push(&mut self, id: u64) -> io::Result<()> {
        self.written += 1;
        self.out.write_all(&id.to_le_bytes())
    }

    /// Flushes if the last flush is 100 ms old.
    pub fn tick(&mut self) -> io::Result<()> {
        if self.flushed.elapsed() >= Duration::from_millis(100) {
            self.flushed = Instant::now();
            self.out.flush()?;
        }
        Ok(())
    }

    /// IDs appended so far.
    pub fn written(&self) -> u64 {
        self.written
    }

    fn finish(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}

/// Keeps the average rate: after `done` IDs, how long to wait before the next batch.
pub struct Pace {
    start: Instant,
    rate: f64,
}

impl Pace {
    fn new(rate: f64) -> Self {
        Pace {
            start: Instant::now(),
            rate: rate.max(1.0),
        }
    }

    /// The largest batch worth at most two seconds of the rate (at least 1, at most `cap`), so
    /// pacing never leaves the worker idle for long.
    pub fn max_batch(&self, cap: u64) -> u64 {
        ((self.rate * 2.0) as u64).clamp(1, cap)
    }

    /// How long until `done` IDs are due (zero when behind).
    pub fn ahead_by(&self, done: u64) -> Duration {
        let due = Duration::from_secs_f64(done as f64 / self.rate);
        due.saturating_sub(self.start.elapsed())
    }
}

/// Batch sizes: mostly small, some medium, a few up to `max` (which may span time units).
pub fn batch_size(rng: &mut Rng, max: u64) -> u64 {
    let roll = rng.range(0, 99);
    let n = match roll {
        0..=29 => 1,
        30..=79 => rng.range(2, 1_000),
        80..=97 => rng.range(1_000, 20_000),
        _ => rng.range(20_000, 100_000),
    };
    n.min(max).max(1)
}

/// What a worker saw, written as its summary.
#[derive(Debug, Default)]
pub struct Stats {
    /// Counters by name (refusals, errors, steps, restarts...).
    pub counts: BTreeMap<String, u64>,
    /// Machine IDs held, in order.
    pub machines: Vec<u64>,
}

impl Stats {
    /// Adds one to `name`; true the first time (to log only the first of a kind).
    pub fn bump(&mut self, name: impl Into<String>) -> bool {
        let c = self.counts.entry(name.into()).or_insert(0);
        *c += 1;
        *c == 1
    }
}

/// One line on stderr (the orchestrator keeps it in the worker's log), with a wall-clock stamp.
pub fn log(line: &str) {
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    eprintln!("{} {line}", vesta_core::Epoch::rfc3339(ms));
}

fn write_summary(path: &std::path::Path, written: u64, stats: &Stats) -> anyhow::Result<()> {
    let summary = serde_json::json!({
        "ids": written,
        "counts": stats.counts,
        "machines": stats.machines,
    });
    std::fs::write(path, summary.to_string() + "\n")
        .with_context(|| format!("writing {}", path.display()))
}

fn main() -> std::process::ExitCode {
    let args = Args::parse();
    match run(args) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            log(&format!("error: {e:#}"));
            std::process::ExitCode::FAILURE
        }
    }
}

fn run(args: Args) -> anyhow::Result<()> {
    if let Mode::Seq(a) = &args.mode {
        return seq::run(
            a,
            &args.out,
            &args.summary,
            args.count,
            args.rate,
            args.seed,
            commands(),
        );
    }
    let mut sink = Sink::create(&args.out)?;
    let rx = commands();
    let pace = Pace::new(args.rate);
    let mut rng = Rng::new(args.seed);
    let job = Job {
        count: args.count,
        pace: &pace,
        rng: &mut rng,
        commands: &rx,
    };
    let stats = match args.mode {
        Mode::Embed(a) => embed::run(&a, job, &mut sink)?,
        Mode::Rest(a) => rest::run(&a, job, &mut sink)?,
        Mode::Seq(_) => unreachable!("handled above"),
    };
    sink.finish()?;
    log(&format!("stopped after {} IDs", sink.written()));
    write_summary(&args.summary, sink.written(), &stats)
}

/// What every mode gets: the target, the pace, the random source and the command channel.
pub struct Job<'a> {
    /// IDs to hand out.
    pub count: u64,
    /// The average rate.
    pub pace: &'a Pace,
    /// Batch sizes.
    pub rng: &'a mut Rng,
    /// Commands from the orchestrator.
    pub commands: &'a Receiver<Command>,
}
