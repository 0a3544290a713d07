//! The state every request handler shares: the issuer, the segments (segment mode), the
//! metrics, the request limits and the unsent-bytes budget.

use std::sync::Arc;

use vesta_core::Clock;
use vesta_embed::{AsyncIssuer, Issuer, SystemClock};
use vesta_service::Segments;
use vesta_service::auth::BearerToken;
use vesta_service::console::{Console, Traffic};

use crate::budget::UnsentBudget;
use crate::config::RestSection;
use crate::metrics::{Metrics, STATUSES};

/// Shared by all connections through an `Arc`.
#[derive(Debug)]
pub struct App<C: Clock + 'static = SystemClock> {
    /// The issuer (genMethod rest): explain, make, status.
    pub issuer: Arc<Issuer<C>>,
    /// The same issuer behind its waiting list: every ID request goes through a [`Flow`] of it.
    ///
    /// [`Flow`]: vesta_embed::Flow
    pub ids: AsyncIssuer<C>,
    /// The segment store, when segment mode is on (`[segment] db`).
    pub segments: Option<Arc<Segments>>,
    /// Request, issuer and segment metrics (shared with the console, which reads them).
    pub metrics: Arc<Metrics>,
    /// Longest accepted request target in bytes.
    pub max_uri_bytes: usize,
    /// Largest `/genids` (and `/segments`) count.
    pub max_batch: u64,
    /// Response bytes that may wait for clients, across all connections.
    pub budget: UnsentBudget,
    /// `/makeid` answers (`[server] make`).
    pub make: bool,
    /// The bearer token requests must carry (`[server] auth_token_file`), if any.
    pub auth_token: Option<BearerToken>,
    /// The web console, when `[server] console` is on.
    pub console: Option<Console<C>>,
}

impl<C: Clock + 'static> App<C> {
    /// The state for `ids` (and `segments`, if on) under `limits`.
    pub fn new(ids: AsyncIssuer<C>, segments: Option<Arc<Segments>>, limits: &RestSection) -> Self {
        let issuer = Arc::clone(ids.issuer());
        let budget = UnsentBudget::new(limits.max_unsent_bytes);
        let metrics = Arc::new(Metrics::new(
            &ids,
            segments.as_ref(),
            &budget,
            limits.max_connections,
        ));
        let console = limits.console.then(|| {
            let traffic = RestTraffic {
                metrics: Arc::clone(&metrics),
                max_connections: limits.max_connections,
            };
            Console::new(
                "REST",
                ids.clone(),
                segments.clone(),
                Box::new(traffic),
                limits.make,
            )
        });
        App {
            metrics,
            console,
            budget,
            issuer,
            ids,
            segments,
            max_uri_bytes: usize::try_from(limits.max_uri_bytes).unwrap_or(usize::MAX),
            max_batch: limits.max_batch,
            make: limits.make,
            auth_token: None,
        }
    }
}

/// What the console reads of the REST server's counters.
struct RestTraffic {
    metrics: Arc<Metrics>,
    max_connections: u64,
}

impl Traffic for RestTraffic {
    fn issued(&self) -> u64 {
        self.metrics.issued_total()
    }

    /// Answers by error status, all endpoints together (the console's own pages included).
    fn refusals(&self) -> Vec<(String, u64)> {
        STATUSES
            .iter()
            .filter(|&&s| s != 200)
            .map(|&s| {
                let reason = hyper::StatusCode::from_u16(s)
                    .ok()
                    .and_then(|c| c.canonical_reason())
                    .unwrap_or("");
                (format!("{s} {reason}"), self.metrics.answers_with(s))
            })
            .collect()
    }

    fn connections(&self) -> (u64, u64) {
        let open = u64::try_from(self.metrics.connections.get()).unwrap_or(0);
        (open, self.max_connections)
    }
}
