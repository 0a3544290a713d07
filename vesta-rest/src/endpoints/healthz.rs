//! `/healthz`: 200 while the issuer may issue, 503 with the reason while it is fenced or waiting
//! on its start guard, so a load balancer takes a fenced instance out of rotation. Inside the
//! end-of-life margin it still answers 200, with `"status":"degraded"` and the warning, so the
//! instance keeps serving while monitoring sees the layout's end coming. With segment mode on,
//! each tag's state is under `segments` (and `degraded` when a tag or the store is); an answer
//! over a small body is charged to the unsent-bytes budget until sent, as `/metrics` is.

use hyper::Response;
use vesta_core::Clock;
use vesta_service::health::Health;

use crate::ctx::{Ctx, Reply};
use crate::error::ApiError;
use crate::query::Query;
use crate::response::{APPLICATION_JSON, Body, sized};

/// `GET /healthz`: the service's health (`vesta_service::health`) or a 503 error.
pub fn healthz<C: Clock + 'static>(cx: Ctx<'_, C>) -> Reply {
    let r = health(&cx);
    cx.now(r)
}

fn health<C: Clock + 'static>(cx: &Ctx<'_, C>) -> Result<Response<Body>, ApiError> {
    Query::parse(cx.query, "/healthz", &[])?;
    match cx.service().health() {
        // With segments and sequences the answer outgrows a small body (a tag's state each):
        // charged to the unsent-bytes budget until sent, as /metrics is.
        Health::Issuing(body) => sized(&cx.rest.budget, APPLICATION_JSON, body.to_string()),
        Health::NotIssuing(why) => Err(ApiError::unavailable(why, Some(1))),
    }
}
