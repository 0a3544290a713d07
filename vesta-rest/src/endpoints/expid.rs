//! `/expid?id=ID`: an ID explained as JSON with Vesta's keys (`version`, `type`, `genMethod`,
//! `time`, `seq`, `machine`) plus `id` as a string and `timestamp` in RFC 3339 UTC.

use hyper::Response;
use vesta_core::Clock;

use crate::ctx::{Ctx, Reply};
use crate::error::ApiError;
use crate::query::Query;
use crate::response::{self, Body};

/// `GET /expid?id=ID`; the ID in any form the CLI accepts (decimal, negative Java long, 0x
/// hex, base32, base62).
pub fn expid<C: Clock + 'static>(cx: Ctx<'_, C>) -> Reply {
    let r = explain(&cx);
    cx.now(r)
}

fn explain<C: Clock + 'static>(cx: &Ctx<'_, C>) -> Result<Response<Body>, ApiError> {
    let q = Query::parse(cx.query, "/expid", &["id"])?;
    let id = vesta_service::query::parse_id_param("id", q.required("id")?)?;
    let body = serde_json::to_vec(&cx.service().explain(id))
        .map_err(|e| ApiError::internal(format!("cannot write the explanation: {e}")))?;
    Ok(response::json(body))
}
