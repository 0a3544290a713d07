//! The state every request handler shares: the issuer, the metrics and the request limits.

use std::sync::Arc;

use vesta_core::Clock;
use vesta_embed::{Issuer, SystemClock};

use crate::config::RestSection;
use crate::metrics::Metrics;

/// Shared by all connections through an `Arc`; dropped (releasing the issuer's lease) only
/// after the last connection has ended.
#[derive(Debug)]
pub struct App<C: Clock + 'static = SystemClock> {
    /// The issuer (genMethod rest).
    pub issuer: Arc<Issuer<C>>,
    /// Request and issuer metrics.
    pub metrics: Metrics,
    /// Longest accepted request target in bytes.
    pub max_uri_bytes: usize,
    /// Largest `/genids` count.
    pub max_count: u64,
}

impl<C: Clock + 'static> App<C> {
    /// The state for `issuer` under `limits`.
    pub fn new(issuer: Arc<Issuer<C>>, limits: &RestSection) -> Self {
        App {
            metrics: Metrics::new(Arc::clone(&issuer)),
            issuer,
            max_uri_bytes: limits.max_uri_bytes,
            max_count: limits.max_count,
        }
    }
}
