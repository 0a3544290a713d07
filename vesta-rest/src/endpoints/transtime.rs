//! `/transtime?time=T`: the instant a time value of the server's layout starts, as RFC 3339 UTC
//! text (seconds for max-peak, milliseconds for min-granularity: the server's type decides).

use chrono::SecondsFormat;
use hyper::Response;
use vesta_core::Clock;

use crate::app::App;
use crate::error::ApiError;
use crate::query::Query;
use crate::response::{self, Body};

/// `GET /transtime?time=T`.
pub fn transtime<C: Clock + 'static>(
    app: &App<C>,
    query: Option<&str>,
) -> Result<Response<Body>, ApiError> {
    let q = Query::parse(query, "/transtime", &["time"])?;
    let time = q.required_u64("time")?;
    let at = app
        .issuer
        .trans_time(time)
        .map_err(|e| ApiError::invalid_param("time", e))?;
    Ok(response::text(
        at.to_rfc3339_opts(SecondsFormat::Millis, true),
    ))
}
