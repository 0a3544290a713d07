//! Prometheus metrics (names prefixed `vesta_`), kept with the official `prometheus-client`.
//!
//! Per-request metrics (requests by endpoint and status, latency) are resolved into arrays of
//! handles (the request counter of a pair on its first use), so the hot path does no label
//! hashing or map lookup, and only pairs that occurred (plus each endpoint's 200) are exported.
//! The metrics every server exports alike are the service's (`Service::register_metrics`: the
//! issuer's lease, clock rollbacks, waits and end of life, IDs issued, open connections and
//! their limit, the segments' `vesta_segment_*` per tag). Connections closed for holding a
//! slot without using it, and the unsent-bytes budget in use, show what slow or hostile clients
//! cost.

use std::fmt;
use std::sync::OnceLock;
use std::time::Duration;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use vesta_core::Clock;
use vesta_service::Service;

use crate::activity::CloseReason;
use crate::budget::UnsentBudget;

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
    request_family: Family<Labels2, Counter>,
    /// The `endpoint` label of each endpoint index (the route table's order; unknown paths
    /// last), handed in by the server so the metrics need not know the routes.
    labels: &'static [&'static str],
    requests: Vec<[OnceLock<Counter>; STATUSES.len()]>,
    latency: Vec<Histogram>,
    closed: [Counter; CloseReason::ALL.len()],
}

impl Metrics {
    /// Registers every metric: the service's, the requests' of each endpoint (its `labels`,
    /// by index, unknown paths last), the budget's use, and what `more` adds (the gRPC calls).
    pub fn new<C: Clock + 'static>(
        service: &Service<C>,
        budget: &UnsentBudget,
        labels: &'static [&'static str],
        more: impl FnOnce(&mut Registry),
    ) -> Self {
        let mut registry = Registry::with_prefix("vesta");
        service.register_metrics(&mut registry);
        more(&mut registry);
        let request_family = Family::<Labels2, Counter>::default();
        let latency_family =
            Family::<Labels1, Histogram>::new_with_constructor(|| Histogram::new(LATENCY_BUCKETS));
        let mut requests = Vec::with_capacity(labels.len());
        let mut latency = Vec::with_capacity(labels.len());
        for label in labels {
            requests.push(std::array::from_fn(|_| OnceLock::new()));
            latency.push(
                latency_family
                    .get_or_create(&[("endpoint", *label)])
                    .clone(),
            );
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
        let closed_family = Family::<Labels1, Counter>::default();
        let closed = CloseReason::ALL.map(|r| {
            closed_family
                .get_or_create(&[("reason", r.label())])
                .clone()
        });
        registry.register(
            "http_connections_closed",
            "Connections the server closed for holding a slot without using it: idle (no \
             request for header_read_timeout_ms), stalled (responses not taken for \
             send_timeout_ms) or aged (max_connection_age_ms)",
            closed_family,
        );
        registry.register_collector(Box::new(BudgetCollector(budget.clone())));
        let metrics = Metrics {
            registry,
            labels,
            request_family,
            requests,
            latency,
            closed,
        };
        // Export the usual outcomes from the start, so rates work before the first request.
        for endpoint in 0..labels.len() {
            let status = if endpoint + 1 == labels.len() {
                404
            } else {
                200
            };
            let _ = metrics.request_counter(endpoint, status);
        }
        metrics
    }

    /// The counter of (`endpoint`, `status`), registered on first use.
    fn request_counter(&self, endpoint: usize, status: u16) -> Option<&Counter> {
        let s = status_index(status)?;
        let cell = self.requests.get(endpoint)?.get(s)?;
        Some(cell.get_or_init(|| {
            let labels = [
                ("endpoint", self.labels[endpoint]),
                ("status", status_label(status)),
            ];
            self.request_family.get_or_create(&labels).clone()
        }))
    }

    /// Records one finished request of the endpoint of index `endpoint`.
    #[inline]
    pub fn observe(&self, endpoint: usize, status: u16, elapsed: Duration) {
        if let Some(c) = self.request_counter(endpoint, status) {
            c.inc();
        }
        if let Some(h) = self.latency.get(endpoint) {
            h.observe(elapsed.as_secs_f64());
        }
    }

    /// Requests answered with `status` since start, all endpoints together.
    pub fn answers_with(&self, status: u16) -> u64 {
        let Some(s) = status_index(status) else {
            return 0;
        };
        self.requests
            .iter()
            .filter_map(|cells| cells[s].get())
            .map(Counter::get)
            .sum()
    }

    /// Counts a connection closed by its watcher.
    pub fn closed(&self, reason: CloseReason) {
        self.closed[reason as usize].inc();
    }

    /// The OpenMetrics text of every metric.
    pub fn encode(&self) -> Result<String, fmt::Error> {
        let mut out = String::with_capacity(16 * 1024);
        prometheus_client::encoding::text::encode(&mut out, &self.registry)?;
        Ok(out)
    }
}

/// Reads the budget's use at each scrape.
#[derive(Debug)]
struct BudgetCollector(UnsentBudget);

impl Collector for BudgetCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), fmt::Error> {
        let gauge = |e: &mut DescriptorEncoder, name: &str, help: &str, v: usize| {
            let m = ConstGauge::new(i64::try_from(v).unwrap_or(i64::MAX));
            m.encode(e.encode_descriptor(name, help, None, m.metric_type())?)
        };
        gauge(
            &mut encoder,
            "http_unsent_bytes",
            "Response bytes held for clients that have not taken them yet (ID batches and \
             metrics; at most max_unsent_bytes)",
            self.0.in_use(),
        )?;
        gauge(
            &mut encoder,
            "http_unsent_bytes_max",
            "server.max_unsent_bytes",
            self.0.max(),
        )
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
