//! `vesta bench tcp|rest|grpc`: load tools for the servers. The engines live in `vesta-bench`;
//! this module shares what both commands add: the duration and server-list flags, the progress
//! display, the report on stdout, and the mapping of the engine's setting names to our flags.

use std::io::{self, IsTerminal, Write};
use std::time::Duration;

use anyhow::anyhow;
use indicatif::{ProgressBar, ProgressStyle};
use vesta_bench::report::group;
use vesta_bench::{BenchError, Field, Load, Progress, Report};

/// The key shapes `--seq-shape` names.
#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum ShapeArg {
    /// Key i is i
    Dense,
    /// Snowflake-sized numbers (about 4e17)
    Sparse,
    /// Strings of 16-24 bytes
    String,
}

impl From<ShapeArg> for vesta_bench::KeyShape {
    fn from(s: ShapeArg) -> Self {
        match s {
            ShapeArg::Dense => vesta_bench::KeyShape::Dense,
            ShapeArg::Sparse => vesta_bench::KeyShape::Sparse,
            ShapeArg::String => vesta_bench::KeyShape::Text,
        }
    }
}

/// Arguments of `vesta bench`.
#[derive(clap::Subcommand, Debug)]
pub enum Args {
    /// Load-test TCP servers: throughput, IDs/s against the layout's cap and latency
    /// percentiles (closed loop, or a fixed rate timed from the intended send).
    Tcp(super::bench_tcp::Args),
    /// Load-test REST servers the same way over HTTP/1.1 keep-alive connections.
    Rest(super::bench_rest::Args),
    /// Load-test the gRPC service of REST servers (on their port) the same way, over HTTP/2
    Grpc(super::bench_grpc::Args),
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<()> {
    match args {
        Args::Tcp(a) => super::bench_tcp::run(a),
        Args::Rest(a) => super::bench_rest::run(a),
        Args::Grpc(a) => super::bench_grpc::run(a),
    }
}

/// How long and how fast: the same flags for both commands.
#[derive(clap::Args, Debug)]
pub struct Pace {
    /// How long to send: 10s, 500ms, 2m or plain seconds (100ms..=1h)
    #[arg(long, short = 'd', value_name = "DURATION", default_value = "10s", value_parser = parse_duration)]
    duration: Duration,
    /// Fixed total rate in requests/s (open loop, latency from the intended send time);
    /// without it each connection sends as fast as answers come back
    #[arg(long, short = 'r', value_name = "R")]
    rate: Option<u64>,
}

impl Pace {
    /// The engine settings, with the flags of the command.
    pub fn load(&self, server: &str, connections: usize, batch: Option<u32>) -> Load {
        Load {
            targets: server_list(server),
            connections,
            duration: self.duration,
            batch,
            rate: self.rate,
        }
    }
}

/// The flag that sets an engine setting.
pub fn flag(field: Field) -> &'static str {
    match field {
        Field::Targets => "--server",
        Field::Connections => "--connections",
        Field::Pipeline => "--pipeline",
        Field::Duration => "--duration",
        Field::Batch => "--batch",
        Field::Rate => "--rate",
        Field::Leaf => "--leaf",
        Field::Stream => "--stream",
        Field::SeqKeys => "--seq-keys",
        Field::Peer => "--peer",
    }
}

/// An engine error as the user should read it: a setting named by its flag; anything else under
/// `what` (the command).
pub fn cli_error(what: &str, e: BenchError) -> anyhow::Error {
    match e {
        BenchError::OutOfRange {
            field,
            value,
            allowed,
        } => anyhow!("{} {value} is out of range: allowed {allowed}", flag(field)),
        BenchError::NoTarget => {
            anyhow!("{}: at least one HOST:PORT is needed", flag(Field::Targets))
        }
        BenchError::Invalid { field, message } => anyhow!("{}: {message}", flag(field)),
        other => anyhow::Error::new(other).context(what.to_owned()),
    }
}

/// `HOST:PORT[,HOST:PORT...]` as a list (empty entries dropped).
fn server_list(text: &str) -> Vec<String> {
    text.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

/// `10s`, `500ms`, `2m`, `1.5s` or plain seconds.
fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let (num, unit) = match t.find(|c: char| c.is_ascii_alphabetic()) {
        Some(i) => t.split_at(i),
        None => (t, "s"),
    };
    let value: f64 = num
        .parse()
        .map_err(|_| format!("`{t}` is not a duration: expected e.g. 10s, 500ms or 2m"))?;
    let secs = match unit {
        "ms" => value / 1000.0,
        "s" => value,
        "m" => value * 60.0,
        _ => return Err(format!("`{t}` has an unknown unit: use ms, s or m")),
    };
    if !secs.is_finite() || secs < 0.0 {
        return Err(format!("`{t}` is not a duration"));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// Runs `engine` with a progress line on stderr every second (a bar on a terminal), then prints
/// the report on stdout. `unit`: what the answers carry, per second (`IDs/s`, `numbers/s`).
pub fn run_and_report(
    what: &str,
    unit: &str,
    duration: Duration,
    engine: impl FnOnce(&mut dyn FnMut(Progress)) -> Result<Report, BenchError>,
) -> anyhow::Result<()> {
    let bar = io::stderr().is_terminal().then(|| {
        let bar = ProgressBar::new(duration.as_millis() as u64);
        let style = ProgressStyle::with_template("{bar:30} {elapsed:>4} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar());
        bar.set_style(style);
        bar
    });
    let mut last = Progress::default();
    let mut show = |p: Progress| {
        let dt = (p.elapsed - last.elapsed).as_secs_f64().max(1e-9);
        let line = format!(
            "{:>12} req/s {:>12} {unit}  {} errors",
            group((p.requests - last.requests) as f64 / dt),
            group((p.ids - last.ids) as f64 / dt),
            p.errors
        );
        match &bar {
            Some(b) => {
                b.set_position(p.elapsed.as_millis() as u64);
                b.set_message(line);
            }
            None => eprintln!("{:>6.1}s {line}", p.elapsed.as_secs_f64()),
        }
        last = p;
    };
    let report = engine(&mut show);
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    let report = report.map_err(|e| cli_error(what, e))?;
    write!(io::stdout().lock(), "{report}")?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_in_the_usual_units() {
        assert_eq!(parse_duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("3"), Ok(Duration::from_secs(3)));
        assert!(parse_duration("1h").is_err());
        assert!(parse_duration("fast").is_err());
        assert!(parse_duration("-1s").is_err());
    }

    #[test]
    fn engine_settings_are_named_by_our_flags() {
        let e = BenchError::OutOfRange {
            field: Field::Pipeline,
            value: "0".into(),
            allowed: "1..=65536".into(),
        };
        assert_eq!(
            cli_error("bench tcp", e).to_string(),
            "--pipeline 0 is out of range: allowed 1..=65536"
        );
        let e = BenchError::OutOfRange {
            field: Field::SeqKeys,
            value: "0".into(),
            allowed: "1..=18446744073709551615 keys".into(),
        };
        assert_eq!(
            cli_error("bench tcp", e).to_string(),
            "--seq-keys 0 is out of range: allowed 1..=18446744073709551615 keys"
        );
        assert_eq!(
            cli_error("bench tcp", BenchError::NoTarget).to_string(),
            "--server: at least one HOST:PORT is needed"
        );
        let e = BenchError::Target {
            target: "127.0.0.1:1".into(),
            message: "connect: refused".into(),
        };
        assert_eq!(
            format!("{:#}", cli_error("bench rest", e)),
            "bench rest: 127.0.0.1:1: connect: refused"
        );
        assert_eq!(server_list(" a:1, ,b:2 "), ["a:1", "b:2"]);
    }
}
