//! `/makeid?time=&seq=[&<field>=...]`: an ID of the server's layout made from chosen fields, to
//! repair data. The query is read by `vesta_service::make` (shared with the console's make
//! form), the ID made by the service's `make` op (range checks, `[server] make`).

use hyper::Response;
use vesta_core::Clock;
use vesta_service::make::values_from_query;

use crate::ctx::{Ctx, Reply};
use crate::error::ApiError;
use crate::response::{self, Body};

/// `GET /makeid`: the decimal ID.
pub fn makeid<C: Clock + 'static>(cx: Ctx<'_, C>) -> Reply {
    let r = make(&cx);
    cx.now(r)
}

fn make<C: Clock + 'static>(cx: &Ctx<'_, C>) -> Result<Response<Body>, ApiError> {
    let issuer = cx.service().issuer();
    let values = values_from_query(issuer.layout(), cx.query, &issuer.own_values())?;
    Ok(response::decimal(cx.service().make(&values)?))
}
