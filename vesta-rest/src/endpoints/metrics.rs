//! `/metrics`: every metric in the OpenMetrics text format (Prometheus scrapes it as is).

use hyper::Response;
use vesta_core::Clock;

use crate::app::App;
use crate::error::ApiError;
use crate::query::Query;
use crate::response::{self, Body};

/// `GET /metrics`.
pub fn metrics<C: Clock + 'static>(
    app: &App<C>,
    query: Option<&str>,
) -> Result<Response<Body>, ApiError> {
    Query::parse(query, "/metrics", &[])?;
    let text = app
        .metrics
        .encode()
        .map_err(|_| ApiError::internal("cannot write the metrics"))?;
    Ok(response::ok(response::OPENMETRICS, text))
}
