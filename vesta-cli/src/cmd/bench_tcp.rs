//! `vesta bench tcp`: a bounded load test of TCP servers. Prints progress on stderr while it runs
//! and a report on stdout: throughput, IDs/s against the layout's cap, how full the time units
//! were, and latency percentiles from an HDR histogram.

use std::io::{self, IsTerminal, Write};
use std::time::Duration;

use anyhow::Context;
use indicatif::{ProgressBar, ProgressStyle};
use vesta_server::loadgen::{self, LoadConfig, LoadReport, Progress};

/// Arguments of `vesta bench tcp`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Servers to load, HOST:PORT[,HOST:PORT...]; connections are spread over them
    #[arg(long, value_name = "HOST:PORT[,...]", default_value = "127.0.0.1:7654")]
    server: String,
    /// Connections in total
    #[arg(long, short = 'c', default_value_t = 4)]
    connections: usize,
    /// Requests in flight per connection
    #[arg(long, short = 'p', default_value_t = 64)]
    pipeline: usize,
    /// How long to send: 10s, 500ms, 2m or plain seconds (100ms..=1h)
    #[arg(long, short = 'd', value_name = "DURATION", default_value = "10s", value_parser = parse_duration)]
    duration: Duration,
    /// IDs per request (NEXT_IDS); without it every request is one NEXT_ID
    #[arg(long, short = 'b', value_name = "B")]
    batch: Option<u32>,
    /// Fixed total rate in requests/s (open loop, latency from the intended send time);
    /// without it each connection sends as fast as answers come back
    #[arg(long, short = 'r', value_name = "R")]
    rate: Option<u64>,
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

/// Runs the load and prints the report.
pub fn run(args: Args) -> anyhow::Result<()> {
    let endpoints: Vec<String> = args
        .server
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect();
    let config = LoadConfig {
        endpoints,
        connections: args.connections,
        pipeline: args.pipeline,
        duration: args.duration,
        batch: args.batch,
        rate: args.rate,
    };
    config.validate()?;
    let bar = io::stderr().is_terminal().then(|| {
        let bar = ProgressBar::new(config.duration.as_millis() as u64);
        let style = ProgressStyle::with_template("{bar:30} {elapsed:>4} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar());
        bar.set_style(style);
        bar
    });
    let mut last = Progress::default();
    let report = loadgen::run(config, Duration::from_secs(1), |p| {
        let dt = (p.elapsed - last.elapsed).as_secs_f64().max(1e-9);
        let line = format!(
            "{:>12} req/s {:>12} IDs/s  {} errors",
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
    })
    .context("bench tcp")?;
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    print_report(&report)?;
    Ok(())
}

fn print_report(r: &LoadReport) -> io::Result<()> {
    let mut out = io::stdout().lock();
    let c = &r.config;
    let s = &r.server;
    let op = match c.batch {
        Some(b) => format!("NEXT_IDS {b}"),
        None => "NEXT_ID".to_owned(),
    };
    let mode = match c.rate {
        Some(rate) => format!("open loop at {} req/s", group(rate as f64)),
        None => "closed loop".to_owned(),
    };
    let layout = r.layout();
    writeln!(
        out,
        "target     {} (machine {}, {}, lease {})",
        c.endpoints.join(","),
        s.machine,
        layout.id_type,
        s.lease_state_name()
    )?;
    writeln!(
        out,
        "load       {} connections x pipeline {}, {op}, {mode}, {:.1} s",
        c.connections,
        c.pipeline,
        c.duration.as_secs_f64()
    )?;
    writeln!(
        out,
        "requests   {} in {:.2} s = {} req/s",
        group(r.requests as f64),
        r.elapsed.as_secs_f64(),
        group(r.requests_per_sec())
    )?;
    // Over a short run IDs/s can exceed the cap: the first second's unit is whole however late
    // in that second the run starts. The unit fill below is the exact measure.
    writeln!(
        out,
        "ids        {} = {} IDs/s (layout cap {}/s per server)",
        group(r.ids as f64),
        group(r.ids_per_sec()),
        group(layout.capacity_per_second() as f64),
    )?;
    if let Some((fill, units)) = r.unit_fill() {
        writeln!(
            out,
            "unit fill  {:.2}% of the {} IDs per {} over the {units} whole {}s inside the run",
            100.0 * fill,
            group(layout.capacity_per_unit() as f64),
            layout.unit_name,
            layout.unit_name
        )?;
    }
    writeln!(out, "errors     {}", r.errors)?;
    let from = if c.rate.is_some() {
        "from the intended send time"
    } else {
        "from the send time"
    };
    writeln!(
        out,
        "latency    p50 {}  p99 {}  p99.9 {}  max {}  ({from})",
        micros(r.quantile_us(0.50)),
        micros(r.quantile_us(0.99)),
        micros(r.quantile_us(0.999)),
        micros(r.latency.max() as f64 / 1000.0),
    )?;
    if let Some(h) = &r.service {
        // The same answers timed from the actual write: what the generator's own lateness
        // (pacing wake-ups, a full pipeline) added to the line above.
        let q = |x: f64| micros(h.value_at_quantile(x) as f64 / 1000.0);
        writeln!(
            out,
            "service    p50 {}  p99 {}  p99.9 {}  max {}  (from the actual send time)",
            q(0.50),
            q(0.99),
            q(0.999),
            micros(h.max() as f64 / 1000.0),
        )?;
    }
    Ok(())
}

/// Microseconds as `850 µs` or `1.25 ms`.
fn micros(us: f64) -> String {
    if us < 1000.0 {
        format!("{us:.0} µs")
    } else {
        format!("{:.2} ms", us / 1000.0)
    }
}

/// A number with thousands separators, rounded.
fn group(x: f64) -> String {
    let n = x.round().max(0.0) as u64;
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, ch) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(ch);
    }
    out
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
    fn numbers_are_grouped() {
        assert_eq!(group(1_048_576.0), "1,048,576");
        assert_eq!(group(999.4), "999");
        assert_eq!(group(0.0), "0");
    }
}
