//! The report as text, one labelled line per figure (what `vesta bench` prints), and the number
//! formats (microseconds, grouped thousands) other outputs share.

use std::fmt;

use super::*;

/// The report as text, one labelled line per figure (the `vesta bench` output).
impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, t) in self.targets.iter().enumerate() {
            let label = if i == 0 { "target" } else { "" };
            match (t.machine, &t.lease) {
                (Some(machine), Some(lease)) => {
                    let layout = t.layout.as_ref().map_or_else(
                        || "a custom layout".to_owned(),
                        |l| match l.id_type() {
                            Some(t) => t.to_string(),
                            None => l.name().to_owned(),
                        },
                    );
                    let machine = match t.machines.as_slice() {
                        [] => format!("machine {machine}"),
                        all => format!("machines {}", machine_list(all)),
                    };
                    writeln!(
                        f,
                        "{label:<10} {} ({machine}, {layout}, lease {lease})",
                        t.address,
                    )?
                }
                _ => match self.protocol {
                    Protocol::Redis { .. } => {
                        writeln!(f, "{label:<10} {} (peer: Redis, not vesta)", t.address)?
                    }
                    Protocol::Postgres => {
                        writeln!(f, "{label:<10} {} (peer: PostgreSQL, not vesta)", t.address)?
                    }
                    _ => writeln!(
                        f,
                        "{label:<10} {} (baseline, not vesta: answers are not read as IDs)",
                        t.address
                    )?,
                },
            }
        }
        let l = &self.load;
        let connections = match self.protocol {
            Protocol::Tcp { pipeline } => {
                format!("tcp, {} connections x pipeline {pipeline}", l.connections)
            }
            Protocol::Rest { .. } => format!(
                "rest, {} connections (HTTP/1.1 keep-alive, 1 request in flight each)",
                l.connections
            ),
            Protocol::Grpc { .. } => format!(
                "grpc, {} connections (HTTP/2, 1 call in flight each)",
                l.connections
            ),
            Protocol::Redis { pipeline } => {
                format!("redis, {} connections x pipeline {pipeline}", l.connections)
            }
            Protocol::Postgres => format!(
                "postgres, {} connections (1 query in flight each)",
                l.connections
            ),
        };
        let mode = match l.rate {
            Some(rate) => format!("open loop at {} req/s", group(rate as f64)),
            None => "closed loop".to_owned(),
        };
        writeln!(
            f,
            "load       {connections}, {}, {mode}, {:.1} s",
            self.request_name(),
            l.duration.as_secs_f64()
        )?;
        writeln!(
            f,
            "requests   {} in {:.2} s = {} req/s",
            group(self.requests as f64),
            self.elapsed.as_secs_f64(),
            group(self.requests_per_sec())
        )?;
        if let Some(tag) = &self.segment {
            writeln!(
                f,
                "numbers    {} = {} segment numbers/s of tag {tag} (increasing on every connection)",
                group(self.ids as f64),
                group(self.ids_per_sec()),
            )?;
        }
        if let Some(n) = self.seq_keys {
            writeln!(
                f,
                "numbers    {} = {} numbers/s over {} keys ({} per answer, every answer checked)",
                group(self.ids as f64),
                group(self.ids_per_sec()),
                group(n as f64),
                self.load.batch.unwrap_or(1),
            )?;
        }
        if !self.served.is_empty() {
            let shares: Vec<String> = self
                .served
                .iter()
                .map(|(a, n)| {
                    let share = 100.0 * *n as f64 / self.requests.max(1) as f64;
                    format!("{a} {} ({share:.1} %)", group(*n as f64))
                })
                .collect();
            writeln!(
                f,
                "routing    {} moves followed (SEQ_MOVED), {} retries (SEQ_MOVING); answered by {}",
                group(self.moves as f64),
                group(self.moving as f64),
                shares.join(", "),
            )?;
        }
        if let (Some(cap), Some(share)) = (self.cap_per_sec(), self.cap_share()) {
            let note = if share > 1.0 {
                " (the first unit is whole however late in it the run starts: see unit fill)"
            } else {
                ""
            };
            writeln!(
                f,
                "ids        {} = {} IDs/s = {:.1} % of the cap {}/s over the whole run{note}",
                group(self.ids as f64),
                group(self.ids_per_sec()),
                100.0 * share,
                group(cap as f64),
            )?;
        }
        if let Some(u) = self.unit_fill() {
            let (per, unit) = match &u.layout {
                Some(l) => (
                    format!(
                        "of {} IDs per {}",
                        group(l.capacity_per_unit() as f64),
                        l.unit_name()
                    ),
                    l.unit_name(),
                ),
                None => ("of the capacity".to_owned(), "unit"),
            };
            let each = match u.machines {
                1 => String::new(),
                k => format!(" ({k} machine IDs, each against its own cap)"),
            };
            writeln!(
                f,
                "unit fill  {:.2} % {per} over the {} whole {unit}s inside the run, {} of them \
                 empty{each}",
                100.0 * u.fill,
                group(u.units as f64),
                group(u.empty as f64),
            )?;
        }
        let overfull = self.overfull_units();
        if !overfull.is_empty() {
            writeln!(
                f,
                "DUPLICATES {} units hold more IDs than a unit can (first: machine {} time {}: {})",
                overfull.len(),
                overfull[0].0.machine,
                overfull[0].0.time,
                overfull[0].1,
            )?;
        }
        if self.errors == 0 {
            writeln!(f, "errors     0")?;
        } else {
            let kinds: Vec<String> = self
                .errors_by_kind
                .iter()
                .map(|(k, n)| format!("{k} {}", group(*n as f64)))
                .collect();
            writeln!(
                f,
                "errors     {}: {} (first: {})",
                group(self.errors as f64),
                kinds.join(", "),
                self.first_error.as_deref().unwrap_or("-"),
            )?;
        }
        let from = if l.rate.is_some() {
            "from the intended send time"
        } else {
            "from the send time"
        };
        write_quantiles(f, "latency", &self.latency, from)?;
        if let Some(h) = &self.service {
            write_quantiles(f, "service", h, "from the actual send time")?;
        }
        Ok(())
    }
}

fn write_quantiles(
    f: &mut fmt::Formatter<'_>,
    label: &str,
    h: &Histogram<u64>,
    from: &str,
) -> fmt::Result {
    let q = |x: f64| micros(h.value_at_quantile(x) as f64 / 1000.0);
    writeln!(
        f,
        "{label:<10} p50 {}  p99 {}  p99.9 {}  max {}  ({from})",
        q(0.50),
        q(0.99),
        q(0.999),
        micros(h.max() as f64 / 1000.0),
    )
}

/// Microseconds as `850 µs` or `1.25 ms`.
pub fn micros(us: f64) -> String {
    if us < 1000.0 {
        format!("{us:.0} µs")
    } else {
        format!("{:.2} ms", us / 1000.0)
    }
}

/// A number rounded, with thousands separators: `1,048,576`.
pub fn group(x: f64) -> String {
    let n = x.round().max(0.0) as u64;
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, ch) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(ch);
    }
    out
}

/// Machine IDs as a server listed them: a run of consecutive ones as `first..=last`, the
/// others one by one (`930..=937`, `5, 9, 12..=13`).
fn machine_list(all: &[u64]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < all.len() {
        let mut j = i;
        while j + 1 < all.len() && all[j + 1] == all[j] + 1 {
            j += 1;
        }
        parts.push(match j - i {
            0 => all[i].to_string(),
            1 => format!("{}, {}", all[i], all[j]),
            _ => format!("{}..={}", all[i], all[j]),
        });
        i = j + 1;
    }
    parts.join(", ")
}
