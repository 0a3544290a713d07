//! `/healthz`: 200 while the issuer may issue, 503 with the reason while it is fenced or waiting
//! on its start guard, so a load balancer takes a fenced instance out of rotation. Inside the
//! end-of-life margin it still answers 200, with `"status":"degraded"` and the warning, so the
//! instance keeps serving while monitoring sees the layout's end coming. With segment mode on,
//! each tag's state is under `segments` (and `degraded` when a tag or the store is); an answer
//! over a small body is charged to the unsent-bytes budget until sent, as `/metrics` is.

use hyper::Response;
use vesta_core::Clock;
use vesta_service::health::Health;

use crate::body::SMALL_BODY_BYTES;
use crate::ctx::{Ctx, Reply};
use crate::error::ApiError;
use crate::query::Query;
use crate::response::{self, Body};

/// `GET /healthz`: the service's health (`vesta_service::health`) or a 503 error.
pub fn healthz<C: Clock + 'static>(cx: Ctx<'_, C>) -> Reply {
    let r = health(&cx);
    cx.now(r)
}

fn health<C: Clock + 'static>(cx: &Ctx<'_, C>) -> Result<Response<Body>, ApiError> {
    Query::parse(cx.query, "/healthz", &[])?;
    match cx.service().health() {
        Health::Issuing(body) => {
            let text = body.to_string();
            if text.len() <= SMALL_BODY_BYTES {
                return Ok(response::json(text));
            }
            // With segments and sequences the answer outgrows a small body (a tag's state
            // each): charged to the unsent-bytes budget until sent, as /metrics is.
            let reservation = cx.rest.budget.reserve(text.len())?;
            let body = Body::charged(text.into(), reservation);
            Ok(response::with_body(response::APPLICATION_JSON, body))
        }
        Health::NotIssuing(why) => Err(ApiError::unavailable(why, Some(1))),
    }
}
