//! What a run measured, and its text form: one report format for both servers. IDs/s are set
//! against the cap of the servers' layouts over the whole run, and each server's time units
//! between its first and last are checked for fill, a unit in which nothing was issued counting
//! as empty.
//!
//! This file holds what was measured; `text.rs` writes it out (`Display`) with the number
//! formats `vesta bench` shares.

use std::collections::BTreeMap;
use std::time::Duration;

use hdrhistogram::Histogram;
use vesta_core::{IdType, Layout};

use crate::config::Load;

#[cfg(test)]
mod tests;
mod text;

pub use text::{group, micros};

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
    /// Every machine ID it holds when it holds several (`machine.ids`; `machine` is the
    /// first), as it listed them; empty for one, for a baseline, or for a server too old to
    /// list them (TCP protocol version 2).
    pub machines: Vec<u64>,
}

impl Target {
    /// A server known only by its address: a baseline, which is not asked what it is.
    pub(crate) fn unknown(address: &str) -> Self {
        Target {
            address: address.to_owned(),
            machine: None,
            layout: None,
            lease: None,
            machines: Vec::new(),
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
