//! `/healthz`: 200 while the issuer may issue, 503 with the reason while it is fenced or waiting
//! on its start guard, so a load balancer takes a fenced instance out of rotation. Inside the
//! end-of-life margin it still answers 200, with `"status":"degraded"` and the warning, so the
//! instance keeps serving while monitoring sees the layout's end coming.

use hyper::Response;
use vesta_core::Clock;

use crate::app::App;
use crate::error::ApiError;
use crate::query::Query;
use crate::response::{self, Body};

/// `GET /healthz`: `{"status":"ok"|"degraded","lease":…,"machine":…,"genMethod":…,"type":…,
/// "endOfLife":…,"endOfLifeSecondsLeft":…}` (with `"warning"` when degraded) or a 503 error.
pub fn healthz<C: Clock + 'static>(
    app: &App<C>,
    query: Option<&str>,
) -> Result<Response<Body>, ApiError> {
    Query::parse(query, "/healthz", &[])?;
    let s = app.issuer.status();
    if !s.can_issue() {
        let reason = s
            .lease
            .reason
            .unwrap_or_else(|| format!("the machine-ID lease is {}", s.lease.state));
        return Err(ApiError::unavailable(
            format!("not issuing: {reason}"),
            Some(1),
        ));
    }
    let now = app.issuer.clock().now_ms();
    let mut body = serde_json::json!({
        "status": "ok",
        "lease": s.lease.state.name(),
        "machine": s.machine,
        "genMethod": s.gen_method.code(),
        "type": s.id_type.code(),
        "endOfLife": vesta_core::Epoch::rfc3339(s.end_of_life_ms),
        "endOfLifeSecondsLeft": vesta_core::time_left_ms(s.end_of_life_ms, now) / 1000,
    });
    if let Some(warning) = s.end_of_life_warning(now) {
        body["status"] = "degraded".into();
        body["warning"] = warning.into();
    }
    Ok(response::json(body.to_string()))
}
