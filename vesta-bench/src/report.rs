//! What a run measured, and its text form: one report format for both servers. IDs/s are set
//! against the cap of the servers' layouts over the whole run, and each server's time units
//! between its first and last are checked for fill, a unit in which nothing was issued counting
//! as empty.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use hdrhistogram::Histogram;
use vesta_core::{IdType, Layout};

use crate::config::Load;

/// Which server protocol a run spoke.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    /// The binary TCP protocol, pipelined.
    Tcp {
        /// Requests in flight per connection.
        pipeline: usize,
    },
    /// HTTP/1.1 keep-alive, one request in flight per connection.
    Rest {
        /// The target was a baseline server, not vesta.
        baseline: bool,
    },
    /// gRPC over HTTP/2, one call in flight per connection.
    Grpc {
        /// The target was a baseline server, not vesta.
        baseline: bool,
    },
    /// The Redis peer of the seq load: RESP, pipelined ([`crate::Peer::Redis`]).
    Redis {
        /// Commands in flight per connection.
        pipeline: usize,
    },
    /// The PostgreSQL peer of the seq load: one query in flight per connection
    /// ([`crate::Peer::Postgres`]).
    Postgres,
}

/// A server as it described itself before the run (TCP `INFO`, REST `/healthz`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    /// `host:port`.
    pub address: String,
    /// Its machine ID; `None` for a baseline server.
    pub machine: Option<u64>,
    /// Its layout; `None` for a baseline server (or a custom layout over REST, which
    /// `/healthz` only names).
    pub layout: Option<Layout>,
    /// Its lease state (`static`, `held`, ...); `None` for a baseline server.
    pub lease: Option<String>,
}

impl Target {
    /// A server known only by its address: a baseline, which is not asked what it is.
    pub(crate) fn unknown(address: &str) -> Self {
        Target {
            address: address.to_owned(),
            machine: None,
            layout: None,
            lease: None,
        }
    }
}

/// One server time unit: a machine ID's unit of one layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Unit {
    /// The machine ID.
    pub machine: u64,
    /// Vesta's type, from the ID's own type bit; `None` in the other layouts.
    pub id_type: Option<IdType>,
    /// The time value: whole units since the epoch.
    pub time: u64,
}

/// How full the servers' units were between the first and the last unit each one issued in.
#[derive(Clone, Debug, PartialEq)]
pub struct UnitFill {
    /// IDs issued in those units as a fraction of their capacity.
    pub fill: f64,
    /// How many units.
    pub units: u64,
    /// How many of them had no ID at all (skipped units).
    pub empty: u64,
    /// How many machine IDs the units are of (a server of several counts each: the fill is
    /// per machine ID, its units' IDs against its own cap).
    pub machines: u64,
    /// The layout, when every server had the same.
    pub layout: Option<Layout>,
}

/// What a run measured.
#[derive(Debug)]
pub struct Report {
    /// The protocol spoken.
    pub protocol: Protocol,
    /// The settings.
    pub load: Load,
    /// The servers, as they described themselves.
    pub targets: Vec<Target>,
    /// Answers received (IDs or errors).
    pub requests: u64,
    /// IDs received.
    pub ids: u64,
    /// Error answers.
    pub errors: u64,
    /// Error answers by kind: a protocol error code name, or an HTTP status.
    pub errors_by_kind: BTreeMap<String, u64>,
    /// The first error answer, as the server worded it.
    pub first_error: Option<String>,
    /// From the start to the last answer.
    pub elapsed: Duration,
    /// Latency of every answer in nanoseconds: from the intended send in the open loop, from
    /// the send in the closed loop.
    pub latency: Histogram<u64>,
    /// Open loop: the same answers timed from the actual send, in nanoseconds. The difference
    /// to `latency` is the tool's own lateness (pacing, a full pipeline, a busy connection).
    pub service: Option<Histogram<u64>>,
    /// IDs received per server time unit.
    pub per_unit: BTreeMap<Unit, u64>,
    /// The tag, when the run asked for segment numbers (counted in `ids`, no layout cap).
    pub segment: Option<String>,
    /// What each request asked for, when the protocol's run says it (a REST path).
    pub request: Option<String>,
    /// The number of keys, when the run asked for per-key sequence numbers (counted in `ids`,
    /// no layout cap): each request a key of `0..N` ([`crate::seq`]).
    pub seq_keys: Option<u64>,
    /// What a seq run's keys look like.
    pub seq_shape: crate::seq::KeyShape,
    /// A seq run on a cluster (more than one server): `SEQ_MOVED` answers followed to the
    /// member they named, each request resent there (not counted in `requests` or `errors`).
    pub moves: u64,
    /// A seq run on a cluster: `SEQ_MOVING` answers, each request sent again after a pause
    /// (not counted in `requests` or `errors`).
    pub moving: u64,
    /// A seq run on a cluster: the answers counted in `requests`, per server address (the
    /// servers given and any member a move named). Empty in other runs.
    pub served: BTreeMap<String, u64>,
}

impl Report {
    fn per_sec(&self, n: u64) -> f64 {
        n as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    /// Answers per second over the whole run.
    pub fn requests_per_sec(&self) -> f64 {
        self.per_sec(self.requests)
    }

    /// IDs per second over the whole run.
    pub fn ids_per_sec(&self) -> f64 {
        self.per_sec(self.ids)
    }

    /// IDs per second the machine IDs that issued can issue together: each distinct machine
    /// ID's layout cap, those the IDs received explain to (a server of several machine IDs
    /// names only its first, and a load that keeps some of them idle is measured against the
    /// ones it used), else the servers' own. `None` when no server told its layout (a
    /// baseline), or for segment numbers.
    pub fn cap_per_sec(&self) -> Option<u64> {
        if self.segment.is_some() || self.seq_keys.is_some() {
            return None;
        }
        let mut machines: BTreeMap<u64, Layout> = self
            .targets
            .iter()
            .filter_map(|t| Some((t.machine?, t.layout.clone()?)))
            .collect();
        if machines.is_empty() {
            return None;
        }
        let seen: BTreeMap<u64, Layout> = self
            .per_unit
            .keys()
            .filter_map(|u| Some((u.machine, self.unit_layout(u.id_type)?)))
            .collect();
        if !seen.is_empty() {
            machines = seen;
        }
        (!machines.is_empty()).then(|| machines.values().map(|l| l.capacity_per_second()).sum())
    }

    /// IDs/s over the whole run as a fraction of [`cap_per_sec`](Self::cap_per_sec). A run
    /// shorter than a few units can read above 1 by up to a unit's capacity: its first unit is
    /// whole however late in that unit the run starts.
    pub fn cap_share(&self) -> Option<f64> {
        self.cap_per_sec()
            .map(|cap| self.ids_per_sec() / cap.max(1) as f64)
    }

    /// Fill of every unit strictly between each server's first and last unit with IDs (those
    /// two are partial by construction). A unit inside that span in which no ID was issued
    /// counts as empty. `None` when no server spans three units or more.
    pub fn unit_fill(&self) -> Option<UnitFill> {
        // Per machine ID and Vesta type: (time, IDs) of each unit, in time order.
        type Units = Vec<(u64, u64)>;
        let mut groups: BTreeMap<(u64, Option<IdType>), Units> = BTreeMap::new();
        for (u, &n) in &self.per_unit {
            groups
                .entry((u.machine, u.id_type))
                .or_default()
                .push((u.time, n));
        }
        let (mut ids, mut capacity, mut units, mut present) = (0u64, 0u64, 0u64, 0u64);
        let mut layouts = BTreeMap::new();
        let mut machines = std::collections::BTreeSet::new();
        for ((machine, id_type), seen) in &groups {
            // Sorted by time: the map's key order.
            let (first, last) = (seen[0].0, seen[seen.len() - 1].0);
            let inner = last.saturating_sub(first).saturating_sub(1);
            if inner == 0 {
                continue;
            }
            let Some(layout) = self.unit_layout(*id_type) else {
                continue;
            };
            units += inner;
            machines.insert(*machine);
            capacity += inner * layout.capacity_per_unit();
            layouts.insert(*id_type, layout);
            for &(_, n) in &seen[1..seen.len() - 1] {
                ids += n;
                present += 1;
            }
        }
        (units > 0).then(|| UnitFill {
            fill: ids as f64 / capacity as f64,
            units,
            empty: units - present,
            machines: machines.len() as u64,
            layout: (layouts.len() == 1)
                .then(|| layouts.into_values().next())
                .flatten(),
        })
    }

    /// Units holding more IDs than a unit can: only duplicate IDs (two servers on one machine
    /// ID) can do that.
    pub fn overfull_units(&self) -> Vec<(Unit, u64)> {
        self.per_unit
            .iter()
            .filter(|(u, n)| {
                self.unit_layout(u.id_type)
                    .is_some_and(|l| **n > l.capacity_per_unit())
            })
            .map(|(u, n)| (*u, *n))
            .collect()
    }

    /// The layout of a unit: Vesta's type names it; otherwise the servers' layout.
    fn unit_layout(&self, id_type: Option<IdType>) -> Option<Layout> {
        match id_type {
            Some(t) => Some(t.layout().clone()),
            None => self.targets.iter().find_map(|t| t.layout.clone()),
        }
    }

    /// Latency at quantile `q`, in microseconds.
    pub fn quantile_us(&self, q: f64) -> f64 {
        self.latency.value_at_quantile(q) as f64 / 1000.0
    }

    /// What each request asked for, as the protocol says it.
    pub fn request_name(&self) -> String {
        if let Some(request) = &self.request {
            return request.clone();
        }
        if let Some(n) = self.seq_keys {
            let keys = crate::seq::key_range(n, self.seq_shape);
            let count = self.load.batch.unwrap_or(1);
            return match (self.protocol, self.load.batch) {
                (Protocol::Redis { .. }, Some(b)) => format!("INCRBY key {b}, {keys}"),
                (Protocol::Redis { .. }, None) => format!("INCR key, {keys}"),
                (Protocol::Postgres, _) => format!(
                    "UPDATE seq SET cur = cur + {count} WHERE key = $1 RETURNING cur, {keys}"
                ),
                (_, Some(b)) => format!("SEQ_NEXT count={b}, {keys}"),
                (_, None) => format!("SEQ_NEXT, {keys}"),
            };
        }
        if let Some(tag) = &self.segment {
            return match self.load.batch {
                Some(b) => format!("GET /segments/{tag}?count={b}"),
                None => format!("GET /segment/{tag}"),
            };
        }
        match (self.protocol, self.load.batch) {
            (Protocol::Tcp { .. }, Some(b)) => format!("NEXT_IDS {b}"),
            (Protocol::Tcp { .. }, None) => "NEXT_ID".to_owned(),
            (Protocol::Rest { .. }, Some(b)) => format!("GET /genids?count={b}"),
            (Protocol::Rest { .. }, None) => "GET /genid".to_owned(),
            (Protocol::Grpc { .. }, Some(b)) => format!("vesta.v1.Vesta/NextIds count={b}"),
            (Protocol::Grpc { .. }, None) => "vesta.v1.Vesta/NextId".to_owned(),
            (Protocol::Redis { .. }, _) => "INCR".to_owned(),
            (Protocol::Postgres, _) => "UPDATE".to_owned(),
        }
    }
}

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
                    writeln!(
                        f,
                        "{label:<10} {} (machine {machine}, {layout}, lease {lease})",
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tally::histogram;

    fn target(machine: u64, id_type: IdType) -> Target {
        Target {
            address: format!("127.0.0.1:{machine}"),
            machine: Some(machine),
            layout: Some(id_type.layout().clone()),
            lease: Some("static".into()),
        }
    }

    fn report(targets: Vec<Target>, per_unit: &[(u64, IdType, u64, u64)]) -> Report {
        let per_unit: BTreeMap<Unit, u64> = per_unit
            .iter()
            .map(|&(machine, id_type, time, n)| {
                (
                    Unit {
                        machine,
                        id_type: Some(id_type),
                        time,
                    },
                    n,
                )
            })
            .collect();
        Report {
            protocol: Protocol::Tcp { pipeline: 8 },
            load: Load {
                targets: targets.iter().map(|t| t.address.clone()).collect(),
                connections: 2,
                duration: Duration::from_secs(5),
                batch: Some(1000),
                rate: None,
            },
            targets,
            requests: 0,
            ids: per_unit.values().sum(),
            errors: 0,
            errors_by_kind: BTreeMap::new(),
            first_error: None,
            elapsed: Duration::from_secs(5),
            latency: histogram(),
            service: None,
            per_unit,
            segment: None,
            request: None,
            seq_keys: None,
            seq_shape: crate::seq::KeyShape::Dense,
            moves: 0,
            moving: 0,
            served: BTreeMap::new(),
        }
    }

    const MS: IdType = IdType::MinGranularity;
    const S: IdType = IdType::MaxPeak;

    #[test]
    fn skipped_units_count_as_empty() {
        // Issue 13: IDs in every other millisecond is half the cap, not 100 %.
        let mut units = vec![(924, MS, 100, 7)];
        units.extend((101..=199).step_by(2).map(|t| (924, MS, t, 1024)));
        units.push((924, MS, 200, 3));
        let r = report(vec![target(924, MS)], &units);
        let u = r.unit_fill().unwrap();
        assert_eq!((u.units, u.empty), (99, 49));
        assert!((u.fill - 50.0 / 99.0).abs() < 1e-12, "{}", u.fill);
        assert_eq!(u.layout.as_ref(), Some(MS.layout()));
        let text = r.to_string();
        assert!(
            text.contains(
                "unit fill  50.51 % of 1,024 IDs per millisecond over the 99 whole milliseconds \
                 inside the run, 49 of them empty"
            ),
            "{text}"
        );
    }

    #[test]
    fn ids_per_second_are_set_against_the_cap_of_the_whole_run() {
        // 5 s at 1,024,000/s would be 5,120,000 IDs; 2,793,000 is 54.6 % of it.
        let r = report(vec![target(924, MS)], &[(924, MS, 1, 2_793_000)]);
        assert_eq!(r.cap_per_sec(), Some(1_024_000));
        assert!((r.cap_share().unwrap() - 0.545_507_8).abs() < 1e-6);
        let text = r.to_string();
        assert!(
            text.contains(
                "ids        2,793,000 = 558,600 IDs/s = 54.6 % of the cap 1,024,000/s over the \
                 whole run"
            ),
            "{text}"
        );
        // Above the cap (a short run of second units): the line says why.
        let r = report(vec![target(924, S)], &[(924, S, 1, 6_000_000)]);
        assert!(
            r.to_string()
                .contains("114.4 % of the cap 1,048,576/s over the whole run (the first unit"),
            "{r}"
        );
        // Two servers: their caps add up; the same machine behind two addresses counts once.
        let mut twice = target(924, MS);
        twice.address = "other:1".into();
        let r = report(vec![target(924, MS), twice, target(925, S)], &[]);
        assert_eq!(r.cap_per_sec(), Some(1_024_000 + 1_048_576));
    }

    #[test]
    fn each_server_spans_its_own_units() {
        let cap = 1 << 20;
        let r = report(
            vec![target(924, S), target(925, S)],
            &[
                (924, S, 10, 5),
                (924, S, 11, cap),
                (924, S, 12, cap / 2),
                (924, S, 13, 7),
                (925, S, 11, 3),
                (925, S, 12, cap),
                (925, S, 13, 9),
                // Two units only: nothing strictly inside.
                (926, S, 1, 1),
                (926, S, 2, 2),
            ],
        );
        let u = r.unit_fill().unwrap();
        assert_eq!((u.units, u.empty), (3, 0));
        assert!((u.fill - 2.5 / 3.0).abs() < 1e-12, "{}", u.fill);
        assert!(r.overfull_units().is_empty());
        let one = report(vec![target(924, S)], &[(924, S, 1, 1), (924, S, 2, 2)]);
        assert_eq!(one.unit_fill(), None);
    }

    #[test]
    fn a_unit_over_its_capacity_is_reported_as_duplicates() {
        let r = report(vec![target(924, MS)], &[(924, MS, 5, 1025)]);
        assert_eq!(r.overfull_units().len(), 1);
        assert!(r.to_string().contains("DUPLICATES 1 units"), "{r}");
    }

    #[test]
    fn a_baseline_has_no_cap_and_errors_are_listed_by_kind() {
        let mut r = report(
            vec![Target {
                address: "127.0.0.1:18081".into(),
                machine: None,
                layout: None,
                lease: None,
            }],
            &[],
        );
        r.protocol = Protocol::Rest { baseline: true };
        r.requests = 10;
        r.errors = 3;
        r.errors_by_kind = BTreeMap::from([("503".into(), 2), ("429".into(), 1)]);
        r.first_error = Some("503: not issuing".into());
        assert_eq!(r.cap_per_sec(), None);
        let text = r.to_string();
        assert!(!text.contains("ids "), "{text}");
        assert!(
            text.contains("errors     3: 429 1, 503 2 (first: 503: not issuing)"),
            "{text}"
        );
        assert!(text.contains("GET /genids?count=1000"), "{text}");
    }

    #[test]
    fn a_seq_run_counts_numbers_over_its_keys() {
        let mut r = report(vec![target(924, S)], &[]);
        r.seq_keys = Some(1000);
        r.ids = 5_000;
        r.requests = 5_000;
        r.load.batch = None;
        assert_eq!(r.cap_per_sec(), None);
        let text = r.to_string();
        assert!(
            text.contains("x pipeline 8, SEQ_NEXT, random keys 0..1,000,"),
            "{text}"
        );
        assert!(
            text.contains(
                "numbers    5,000 = 1,000 numbers/s over 1,000 keys (1 per answer, every \
                 answer checked)"
            ),
            "{text}"
        );
        assert!(!text.contains("ids "), "{text}");
        r.protocol = Protocol::Redis { pipeline: 8 };
        r.load.batch = Some(10);
        r.targets = vec![Target::unknown("127.0.0.1:6379")];
        let text = r.to_string();
        assert!(
            text.contains("127.0.0.1:6379 (peer: Redis, not vesta)"),
            "{text}"
        );
        assert!(
            text.contains("redis, 2 connections x pipeline 8, INCRBY key 10, random keys"),
            "{text}"
        );
        r.protocol = Protocol::Postgres;
        let text = r.to_string();
        assert!(
            text.contains(
                "postgres, 2 connections (1 query in flight each), UPDATE seq SET cur = cur + 10 \
                 WHERE key = $1 RETURNING cur, random keys 0..1,000"
            ),
            "{text}"
        );
    }

    #[test]
    fn numbers_are_grouped_and_latencies_scaled() {
        assert_eq!(group(1_048_576.0), "1,048,576");
        assert_eq!(group(999.4), "999");
        assert_eq!(group(0.0), "0");
        assert_eq!(micros(850.2), "850 µs");
        assert_eq!(micros(1250.0), "1.25 ms");
    }
}
