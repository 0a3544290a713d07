//! The TCP server's metrics (prometheus-client, names prefixed `vesta_`), served by the metrics
//! listener (`server.metrics_listen`): the metrics every server exports alike (the service's:
//! the issuer's, IDs issued, connections open and their limit, the segments'), then requests by
//! op, and refusals and bad requests by error code. Counters are resolved to handles up front,
//! so the hot path does an atomic add and no label lookup.

use std::sync::Arc;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;
use vesta_core::Clock;
use vesta_service::Service;
use vesta_service::console::{Console, Pages, Refusals};
use vesta_service::metrics_http::Exposition;
use vesta_service::ops::Limits;

use crate::proto::{ErrorCode, op};

/// The ops, in the order of [`TcpMetrics::request`]'s handles, with their label.
const OPS: [(u8, &str); 12] = [
    (op::HELLO, "hello"),
    (op::PING, "ping"),
    (op::INFO, "info"),
    (op::NEXT_ID, "next_id"),
    (op::NEXT_IDS, "next_ids"),
    (op::EXPLAIN, "explain"),
    (op::MAKE, "make"),
    (op::TRANS_TIME, "trans_time"),
    (op::SEGMENT, "segment"),
    (op::SEGMENTS, "segments"),
    (op::SEQ_NEXT, "seq_next"),
    (op::SEQ_CURRENT, "seq_current"),
];

type Labels = [(&'static str, &'static str); 1];

/// The errors that are the server's or the issuer's doing, not the client's: what the
/// error-rate alert counts (deploy/prometheus/vesta.rules.yml).
const SERVER_ERRORS: [ErrorCode; 7] = [
    ErrorCode::Unavailable,
    ErrorCode::ClockBehind,
    ErrorCode::TimeExhausted,
    ErrorCode::Saturated,
    ErrorCode::TooManyConnections,
    ErrorCode::ShuttingDown,
    ErrorCode::Internal,
];

/// The TCP server's metrics.
#[derive(Debug)]
pub(crate) struct TcpMetrics {
    registry: Registry,
    requests: Vec<Counter>,
    errors: Family<Labels, Counter>,
    tls_handshake_failures: Counter,
}

impl TcpMetrics {
    /// Registers every metric of a server of `service`.
    pub(crate) fn new<C: Clock + 'static>(service: &Service<C>) -> Self {
        let mut registry = Registry::with_prefix("vesta");
        service.register_metrics(&mut registry);
        let family = Family::<Labels, Counter>::default();
        registry.register(
            "tcp_requests",
            "Requests received, by protocol op",
            family.clone(),
        );
        let requests = OPS
            .iter()
            .map(|(_, name)| family.get_or_create(&[("op", *name)]).clone())
            .collect();
        let errors = Family::<Labels, Counter>::default();
        registry.register(
            "tcp_errors",
            "ERROR answers sent, by error code (refusals by the issuer and bad requests)",
            errors.clone(),
        );
        // Export the refusals from the start, so error-rate alerts have a series before the
        // first one.
        for code in SERVER_ERRORS {
            let _ = errors.get_or_create(&[("code", code.name())]);
        }
        let tls_handshake_failures = Counter::default();
        registry.register(
            "tcp_tls_handshake_failures",
            "Connections closed because their TLS handshake failed or did not finish within \
             idle_timeout_ms",
            tls_handshake_failures.clone(),
        );
        TcpMetrics {
            registry,
            requests,
            errors,
            tls_handshake_failures,
        }
    }

    /// Counts a request of op `code`.
    #[inline]
    pub(crate) fn request(&self, code: u8) {
        if let Some(i) = OPS.iter().position(|(c, _)| *c == code) {
            self.requests[i].inc();
        }
    }

    /// `ERROR` answers since start by code: the server's refusals always (zeros too), the
    /// client's mistakes once one occurred.
    pub(crate) fn errors_by_code(&self) -> Vec<(String, u64)> {
        // Every code the protocol defines: the numbers that map to themselves.
        (1..=u16::from(u8::MAX))
            .map(ErrorCode::from_u16)
            .enumerate()
            .filter(|&(i, code)| usize::from(code.code()) == i + 1)
            .filter_map(|(_, code)| {
                let n = self.errors.get(&[("code", code.name())]).map(|c| c.get());
                match n {
                    Some(n) => Some((code.name().to_owned(), n)),
                    None if SERVER_ERRORS.contains(&code) => Some((code.name().to_owned(), 0)),
                    None => None,
                }
            })
            .collect()
    }

    /// Counts a connection whose TLS handshake failed.
    pub(crate) fn tls_handshake_failed(&self) {
        self.tls_handshake_failures.inc();
    }

    /// Counts an `ERROR` answer.
    pub(crate) fn error(&self, code: ErrorCode) {
        self.errors.get_or_create(&[("code", code.name())]).inc();
    }

    /// The OpenMetrics text.
    pub(crate) fn encode(&self) -> String {
        let mut out = String::with_capacity(8 * 1024);
        // Writing to a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

/// What the metrics listener answers for a TCP server.
pub(crate) struct TcpExposition<C: Clock + 'static> {
    /// The metrics.
    pub metrics: Arc<TcpMetrics>,
    /// The service, for `/healthz` and the console's token.
    pub service: Arc<Service<C>>,
    /// The web console, when `[server] console` is on.
    pub console: Option<Console<C>>,
    /// Longest request target accepted (`server.max_uri_bytes`).
    pub max_uri_bytes: usize,
}

impl<C: Clock + 'static> Exposition for TcpExposition<C> {
    fn metrics(&self) -> String {
        self.metrics.encode()
    }

    fn health(&self) -> (bool, String) {
        self.service.health().to_http()
    }

    fn console(&self) -> Option<&dyn Pages> {
        self.console.as_ref().map(|c| c as &dyn Pages)
    }

    fn limits(&self) -> &Limits {
        self.service.limits()
    }

    fn max_target_bytes(&self) -> usize {
        self.max_uri_bytes
    }
}

/// What the console reads of the TCP server's refusals: `ERROR` answers by code.
pub(crate) struct TcpRefusals(pub Arc<TcpMetrics>);

impl Refusals for TcpRefusals {
    fn refusals(&self) -> Vec<(String, u64)> {
        self.0.errors_by_code()
    }
}
