//! `/makeid?time=&seq=[&<field>=...]`: an ID of the server's layout made from chosen fields, to
//! repair data. The parameters, checks and messages are `vesta_service::make`'s, shared with
//! the console's make form.

use hyper::Response;
use vesta_core::Clock;

use crate::app::App;
use crate::error::ApiError;
use crate::response::{self, Body};

use vesta_service::make::make_from_query;

/// `GET /makeid`: the decimal ID.
pub fn makeid<C: Clock + 'static>(
    app: &App<C>,
    query: Option<&str>,
) -> Result<Response<Body>, ApiError> {
    let id = make_from_query(app.issuer.layout(), query, &app.issuer.own_values())?;
    Ok(response::decimal(id))
}
