//! What the REST transport adds to the [`Service`] its connections share: the unsent-bytes
//! budget, the URI limit, the HTTP metrics and the web console (`/ui`).

use std::sync::Arc;

use vesta_core::Clock;
use vesta_embed::SystemClock;
use vesta_service::Service;
use vesta_service::console::{Console, Refusals};

use crate::budget::UnsentBudget;
use crate::config::RestSection;
use crate::metrics::{Metrics, STATUSES};

/// Shared by all connections through an `Arc`.
#[derive(Debug)]
pub struct Rest<C: Clock + 'static = SystemClock> {
    /// The state and ops every transport shares.
    pub service: Arc<Service<C>>,
    /// Request metrics and the shared ones (the console reads them too).
    pub metrics: Arc<Metrics>,
    /// Longest accepted request target in bytes.
    pub max_uri_bytes: usize,
    /// Response bytes that may wait for clients, across all connections.
    pub budget: UnsentBudget,
    /// The web console, when `[server] console` is on.
    pub console: Option<Console<C>>,
    /// The gRPC services answered on this port (`application/grpc` requests over HTTP/2).
    #[cfg(feature = "grpc")]
    pub grpc: Arc<vesta_grpc::Grpc<C>>,
}

impl<C: Clock + 'static> Rest<C> {
    /// The REST side of `service` under `section`, its request metrics labelled by endpoint
    /// with `labels` (the route table's, by index).
    pub fn new(
        service: Arc<Service<C>>,
        section: &RestSection,
        labels: &'static [&'static str],
    ) -> Self {
        let budget = UnsentBudget::new(section.max_unsent_bytes);
        #[cfg(feature = "grpc")]
        let grpc = vesta_grpc::Grpc::new(Arc::clone(&service));
        let metrics = Arc::new(Metrics::new(&service, &budget, labels, |_registry| {
            #[cfg(feature = "grpc")]
            grpc.register_metrics(_registry);
        }));
        let console = service.limits().console.then(|| {
            let refusals = RestRefusals(Arc::clone(&metrics));
            Console::new("REST", Arc::clone(&service), Box::new(refusals))
        });
        Rest {
            #[cfg(feature = "grpc")]
            grpc,
            service,
            metrics,
            max_uri_bytes: usize::try_from(section.max_uri_bytes).unwrap_or(usize::MAX),
            budget,
            console,
        }
    }
}

/// What the console reads of the REST server's refusals.
struct RestRefusals(Arc<Metrics>);

impl Refusals for RestRefusals {
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
                (format!("{s} {reason}"), self.0.answers_with(s))
            })
            .collect()
    }
}
