//! `/transtime?time=T`: the instant a time value of the server's layout starts, as RFC 3339 UTC
//! text (seconds for max-peak, milliseconds for min-granularity: the server's type decides).

use chrono::SecondsFormat;
use hyper::Response;
use vesta_core::Clock;

use crate::ctx::{Ctx, Reply};
use crate::error::ApiError;
use crate::query::Query;
use crate::response::{self, Body};

/// `GET /transtime?time=T`.
pub fn transtime<C: Clock + 'static>(cx: Ctx<'_, C>) -> Reply {
    let r = trans_time(&cx);
    cx.now(r)
}

fn trans_time<C: Clock + 'static>(cx: &Ctx<'_, C>) -> Result<Response<Body>, ApiError> {
    let q = Query::parse(cx.query, "/transtime", &["time"])?;
    let at = cx.service().trans_time(q.required_u64("time")?)?;
    Ok(response::text(
        at.to_rfc3339_opts(SecondsFormat::Millis, true),
    ))
}
