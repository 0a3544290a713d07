//! `/metrics`: every metric in the OpenMetrics text format (Prometheus scrapes it as is). Its
//! text (a few KiB) is charged to the unsent-bytes budget until sent, like `/genids`, but ID
//! batches leave [`METRICS_HEADROOM_BYTES`] of the budget to it: clients that hoard batches
//! cannot stop the scrapes that would show them.

use hyper::Response;
use vesta_core::Clock;

use crate::ctx::{Ctx, Reply};
use crate::error::ApiError;
use crate::query::Query;
use crate::response::{self, Body};

/// Budget that ID batches leave free for metrics scrapes.
pub const METRICS_HEADROOM_BYTES: usize = 256 * 1024;

/// `GET /metrics`.
pub fn metrics<C: Clock + 'static>(cx: Ctx<'_, C>) -> Reply {
    let r = scrape(&cx);
    cx.now(r)
}

fn scrape<C: Clock + 'static>(cx: &Ctx<'_, C>) -> Result<Response<Body>, ApiError> {
    Query::parse(cx.query, "/metrics", &[])?;
    let text = cx
        .rest
        .metrics
        .encode()
        .map_err(|_| ApiError::internal("cannot write the metrics"))?;
    response::sized(&cx.rest.budget, response::OPENMETRICS, text)
}
