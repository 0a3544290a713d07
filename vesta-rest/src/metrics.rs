//! Prometheus metrics (names prefixed `vesta_`), kept with the official `prometheus-client`.
//!
//! Per-request metrics (requests by endpoint and status, latency) are resolved into arrays of
//! handles (the request counter of a pair on its first use), so the hot path does no label
//! hashing or map lookup, and only pairs that occurred (plus each endpoint's 200) are exported. Issuer state
//! (lease, clock rollbacks, end of life) is read from `Issuer::status()` at scrape time by a
//! collector, so it is never stale and costs nothing between scrapes.

use std::fmt;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::metrics::info::Info;
use prometheus_client::registry::Registry;
use vesta_core::Clock;
use vesta_embed::{Issuer, LeaseState};

use crate::router::Endpoint;

/// The outcomes a request can have, by status code; the second label of the request counter.
pub const STATUSES: [u16; 7] = [200, 400, 404, 405, 414, 500, 503];

/// Upper bounds (seconds) of the latency histogram: 10 µs to 2.5 s.
const LATENCY_BUCKETS: [f64; 17] = [
    0.000_01, 0.000_025, 0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025,
    0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
];

type Labels2 = [(&'static str, &'static str); 2];
type Labels1 = [(&'static str, &'static str); 1];

/// The server's metrics and the registry that writes them out.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    ids_issued: Counter,
    sequence_waits: Counter,
    request_family: Family<Labels2, Counter>,
    requests: Vec<[OnceLock<Counter>; STATUSES.len()]>,
    latency: Vec<Histogram>,
}

impl Metrics {
    /// Registers every metric, including the collector reading `issuer`'s status.
    pub fn new<C: Clock + 'static>(issuer: Arc<Issuer<C>>) -> Self {
        let mut registry = Registry::with_prefix("vesta");
        let ids_issued = Counter::default();
        registry.register(
            "ids_issued",
            "IDs handed out by /genid and /genids",
            ids_issued.clone(),
        );
        let sequence_waits = Counter::default();
        registry.register(
            "sequence_waits",
            "Times a request waited for the next time unit because the sequence was used up",
            sequence_waits.clone(),
        );
        let request_family = Family::<Labels2, Counter>::default();
        let latency_family =
            Family::<Labels1, Histogram>::new_with_constructor(|| Histogram::new(LATENCY_BUCKETS));
        let mut requests = Vec::with_capacity(Endpoint::ALL.len());
        let mut latency = Vec::with_capacity(Endpoint::ALL.len());
        for endpoint in Endpoint::ALL {
            requests.push(std::array::from_fn(|_| OnceLock::new()));
            let labels = [("endpoint", endpoint.label())];
            latency.push(latency_family.get_or_create(&labels).clone());
        }
        registry.register(
            "http_requests",
            "HTTP requests by endpoint and status code",
            request_family.clone(),
        );
        registry.register(
            "http_request_duration_seconds",
            "Time from receiving a request's head to having its response ready",
            latency_family,
        );
        let status = issuer.status();
        registry.register(
            "issuer",
            "The issuer's fixed identity",
            Info::new(vec![
                ("gen_method", status.gen_method.name().to_owned()),
                ("type", status.id_type.name().to_owned()),
                ("epoch_ms", status.epoch.unix_ms().to_string()),
            ]),
        );
        registry.register_collector(Box::new(IssuerCollector { issuer }));
        let metrics = Metrics {
            registry,
            ids_issued,
            sequence_waits,
            request_family,
            requests,
            latency,
        };
        // Export the usual outcomes from the start, so rates work before the first request.
        for endpoint in Endpoint::ALL {
            let status = if endpoint == Endpoint::Other {
                404
            } else {
                200
            };
            let _ = metrics.request_counter(endpoint, status);
        }
        metrics
    }

    /// The counter of (`endpoint`, `status`), registered on first use.
    fn request_counter(&self, endpoint: Endpoint, status: u16) -> Option<&Counter> {
        let s = status_index(status)?;
        let cell = self.requests.get(endpoint as usize)?.get(s)?;
        Some(cell.get_or_init(|| {
            let labels = [
                ("endpoint", endpoint.label()),
                ("status", status_label(status)),
            ];
            self.request_family.get_or_create(&labels).clone()
        }))
    }

    /// Records one finished request.
    #[inline]
    pub fn observe(&self, endpoint: Endpoint, status: u16, elapsed: Duration) {
        if let Some(c) = self.request_counter(endpoint, status) {
            c.inc();
        }
        if let Some(h) = self.latency.get(endpoint as usize) {
            h.observe(elapsed.as_secs_f64());
        }
    }

    /// Counts `n` IDs handed out.
    #[inline]
    pub fn issued(&self, n: u64) {
        self.ids_issued.inc_by(n);
    }

    /// Counts one wait for the next time unit.
    pub fn waited(&self) {
        self.sequence_waits.inc();
    }

    /// The OpenMetrics text of every metric.
    pub fn encode(&self) -> Result<String, fmt::Error> {
        let mut out = String::with_capacity(16 * 1024);
        prometheus_client::encoding::text::encode(&mut out, &self.registry)?;
        Ok(out)
    }
}

fn status_index(status: u16) -> Option<usize> {
    STATUSES.iter().position(|&s| s == status)
}

const fn status_label(status: u16) -> &'static str {
    match status {
        200 => "200",
        400 => "400",
        404 => "404",
        405 => "405",
        414 => "414",
        500 => "500",
        503 => "503",
        _ => "other",
    }
}

/// Reads the issuer's status at each scrape.
struct IssuerCollector<C: Clock + 'static> {
    issuer: Arc<Issuer<C>>,
}

impl<C: Clock + 'static> fmt::Debug for IssuerCollector<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("IssuerCollector")
    }
}

const LEASE_STATES: [LeaseState; 5] = [
    LeaseState::Static,
    LeaseState::Acquiring,
    LeaseState::Held,
    LeaseState::Fenced,
    LeaseState::Released,
];

impl<C: Clock + 'static> Collector for IssuerCollector<C> {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), fmt::Error> {
        let s = self.issuer.status();
        let now_ms = self.issuer.clock().now_ms();
        let counter = |e: &mut DescriptorEncoder, name: &str, help: &str, v: u64| {
            let m = ConstCounter::new(v);
            m.encode(e.encode_descriptor(name, help, None, m.metric_type())?)
        };
        let gauge = |e: &mut DescriptorEncoder, name: &str, help: &str, v: i64| {
            let m = ConstGauge::new(v);
            m.encode(e.encode_descriptor(name, help, None, m.metric_type())?)
        };
        counter(
            &mut encoder,
            "clock_rollbacks",
            "Clock steps backwards ridden out within the tolerance",
            s.generator.clock_rollbacks,
        )?;
        counter(
            &mut encoder,
            "clock_rollback_refusals",
            "Requests refused because the clock was behind by more than the tolerance",
            s.generator.clock_rollback_refusals,
        )?;
        counter(
            &mut encoder,
            "lease_fence_events",
            "Times issuing was fenced because the machine-ID lease could not be confirmed",
            s.lease.fence_events,
        )?;
        counter(
            &mut encoder,
            "lease_reconnects",
            "ZooKeeper sessions re-established after a loss",
            s.lease.reconnects,
        )?;
        gauge(
            &mut encoder,
            "machine_id",
            "The machine ID in use",
            i64::try_from(s.machine).unwrap_or(i64::MAX),
        )?;
        gauge(
            &mut encoder,
            "issuing",
            "1 while the issuer may issue IDs, 0 while fenced or waiting on its start guard",
            i64::from(s.can_issue()),
        )?;
        let remaining_s = s.end_of_life_ms.saturating_sub(now_ms) / 1000;
        gauge(
            &mut encoder,
            "end_of_life_remaining_seconds",
            "Seconds until the layout's time field is full (no IDs after that)",
            i64::try_from(remaining_s).unwrap_or(i64::MAX),
        )?;
        let mut family = encoder.encode_descriptor(
            "lease_state",
            "1 for the current state of the machine-ID lease, 0 for the others",
            None,
            MetricType::Gauge,
        )?;
        for state in LEASE_STATES {
            let labels = [("state", state.name())];
            ConstGauge::new(i64::from(s.lease.state == state))
                .encode(family.encode_family(&labels)?)?;
        }
        Ok(())
    }
}
