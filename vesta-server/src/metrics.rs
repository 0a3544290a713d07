//! The TCP server's metrics (prometheus-client, names prefixed `vesta_`), served by the metrics
//! listener (`server.metrics_listen`): the issuer's and the segments' metrics shared with the
//! REST server (`vesta_service::metrics`), IDs issued, connections open and their limit, requests by op, and
//! refusals and bad requests by error code. Counters are resolved to handles up front, so the
//! hot path does an atomic add and no label lookup.

use std::sync::Arc;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;
use vesta_core::Clock;
use vesta_embed::AsyncIssuer;
use vesta_service::Segments;
use vesta_service::auth::BearerToken;
use vesta_service::console::{Console, Pages, Traffic};
use vesta_service::health::Health;
use vesta_service::metrics::Connections;
use vesta_service::metrics_http::Exposition;

use crate::proto::{ErrorCode, op};

/// The ops, in the order of [`TcpMetrics::request`]'s handles, with their label.
const OPS: [(u8, &str); 10] = [
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
    ids_issued: Counter,
    /// Open connections (shared with the REST server: `vesta_connections`).
    pub connections: Connections,
    requests: Vec<Counter>,
    errors: Family<Labels, Counter>,
    tls_handshake_failures: Counter,
}

impl TcpMetrics {
    /// Registers every metric for a server issuing through `ids` (and serving `segments`, if
    /// on) with `max_connections`.
    pub(crate) fn new<C: Clock + 'static>(
        ids: &AsyncIssuer<C>,
        segments: Option<&Arc<Segments>>,
        max_connections: u64,
    ) -> Self {
        let mut registry = Registry::with_prefix("vesta");
        vesta_service::metrics::register_issuer(&mut registry, ids);
        if let Some(segments) = segments {
            vesta_service::metrics::register_segments(&mut registry, Arc::clone(segments));
        }
        let ids_issued = Counter::default();
        registry.register(
            "ids_issued",
            "IDs handed out by NEXT_ID and NEXT_IDS",
            ids_issued.clone(),
        );
        let connections =
            vesta_service::metrics::register_connections(&mut registry, max_connections);
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
            ids_issued,
            connections,
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

    /// Counts `n` IDs handed out.
    #[inline]
    pub(crate) fn issued(&self, n: u64) {
        self.ids_issued.inc_by(n);
    }

    /// IDs handed out since start.
    pub(crate) fn issued_total(&self) -> u64 {
        self.ids_issued.get()
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
    /// The issuer, for `/healthz`.
    pub ids: AsyncIssuer<C>,
    /// The segments, for `/healthz`.
    pub segments: Option<Arc<Segments>>,
    /// The web console, when `[server] console` is on.
    pub console: Option<Console<C>>,
    /// The bearer token the console asks for (`[server] auth_token_file`), if set.
    pub auth_token: Option<BearerToken>,
}

impl<C: Clock + 'static> Exposition for TcpExposition<C> {
    fn metrics(&self) -> String {
        self.metrics.encode()
    }

    fn health(&self) -> (bool, String) {
        let issuer = self.ids.issuer();
        Health::of(&issuer.status(), issuer.clock().now_ms())
            .with_segments(self.segments.as_deref())
            .to_http()
    }

    fn console(&self) -> Option<&dyn Pages> {
        self.console.as_ref().map(|c| c as &dyn Pages)
    }

    fn console_token(&self) -> Option<&BearerToken> {
        self.auth_token.as_ref()
    }
}

/// What the console reads of the TCP server's counters.
pub(crate) struct TcpTraffic {
    /// The server's metrics.
    pub metrics: Arc<TcpMetrics>,
    /// `server.max_connections`.
    pub max_connections: u64,
}

impl Traffic for TcpTraffic {
    fn issued(&self) -> u64 {
        self.metrics.issued_total()
    }

    fn refusals(&self) -> Vec<(String, u64)> {
        self.metrics.errors_by_code()
    }

    fn connections(&self) -> (u64, u64) {
        let open = u64::try_from(self.metrics.connections.get()).unwrap_or(0);
        (open, self.max_connections)
    }
}
