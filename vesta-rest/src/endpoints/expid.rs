//! `/expid?id=ID`: an ID explained as JSON with Vesta's keys (`version`, `type`, `genMethod`,
//! `time`, `seq`, `machine`) plus `id` as a string and `timestamp` in RFC 3339 UTC.

use hyper::Response;
use vesta_core::Clock;

use crate::app::App;
use crate::error::ApiError;
use crate::query::Query;
use crate::response::{self, Body};

/// `GET /expid?id=ID`; the ID in any form the CLI accepts (decimal, negative Java long, 0x
/// hex, base32, base62).
pub fn expid<C: Clock + 'static>(
    app: &App<C>,
    query: Option<&str>,
) -> Result<Response<Body>, ApiError> {
    let q = Query::parse(query, "/expid", &["id"])?;
    let text = q.required("id")?;
    let id = vesta_service::query::parse_id_param("id", text)?;
    let body = serde_json::to_vec(&app.issuer.explain(id))
        .map_err(|e| ApiError::internal(format!("cannot write the explanation: {e}")))?;
    Ok(response::json(body))
}
