//! The state every request handler shares: the issuer, the segments (segment mode), the
//! metrics, the request limits and the unsent-bytes budget.

use std::sync::Arc;

use vesta_core::Clock;
use vesta_embed::{AsyncIssuer, Issuer, SystemClock};
use vesta_service::Segments;

use crate::budget::UnsentBudget;
use crate::config::RestSection;
use crate::metrics::Metrics;

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
    /// Request, issuer and segment metrics.
    pub metrics: Metrics,
    /// Longest accepted request target in bytes.
    pub max_uri_bytes: usize,
    /// Largest `/genids` (and `/segments`) count.
    pub max_batch: u64,
    /// Response bytes that may wait for clients, across all connections.
    pub budget: UnsentBudget,
    /// `/makeid` answers (`[server] make`).
    pub make: bool,
    /// The bearer token requests must carry (`[server] auth_token_file`), if any.
    pub auth_token: Option<Arc<[u8]>>,
}

impl<C: Clock + 'static> App<C> {
    /// The state for `ids` (and `segments`, if on) under `limits`.
    pub fn new(ids: AsyncIssuer<C>, segments: Option<Arc<Segments>>, limits: &RestSection) -> Self {
        let issuer = Arc::clone(ids.issuer());
        let budget = UnsentBudget::new(limits.max_unsent_bytes);
        App {
            metrics: Metrics::new(&ids, segments.as_ref(), &budget, limits.max_connections),
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
