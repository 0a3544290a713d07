//! `/makeid?time=&seq=[&machine=&genMethod=&type=&version=]`: an ID made from chosen fields, to
//! repair data. Fields not given take the server's own values (its machine, genMethod rest, its
//! type, its version); every field is range-checked and an error names it.

use hyper::Response;
use vesta_core::{Clock, FieldError, GenMethod, IdFields, IdType};

use crate::app::App;
use crate::error::ApiError;
use crate::query::Query;
use crate::response::{self, Body};

/// The parameters `/makeid` accepts (Vesta's names).
pub const PARAMS: [&str; 6] = ["time", "seq", "machine", "genMethod", "type", "version"];

/// `GET /makeid`: the decimal ID.
pub fn makeid<C: Clock + 'static>(
    app: &App<C>,
    query: Option<&str>,
) -> Result<Response<Body>, ApiError> {
    let q = Query::parse(query, "/makeid", &PARAMS)?;
    let time = q.required_u64("time")?;
    let seq = q.required_u64("seq")?;
    let mut fields: IdFields = app.issuer.own_fields(time, seq);
    if let Some(machine) = q.u64("machine")? {
        fields.machine = machine;
    }
    if let Some(text) = q.get("genMethod") {
        fields.gen_method = text
            .parse::<GenMethod>()
            .map_err(|e| ApiError::invalid_param("genMethod", e))?;
    }
    if let Some(text) = q.get("type") {
        fields.id_type = text
            .parse::<IdType>()
            .map_err(|e| ApiError::invalid_param("type", e))?;
    }
    if let Some(version) = q.u64("version")? {
        fields.version = u8::try_from(version)
            .ok()
            .filter(|&v| v <= IdFields::MAX_VERSION)
            .ok_or_else(|| {
                let e = FieldError::OutOfRange {
                    field: "version",
                    value: version,
                    min: 0,
                    max: u64::from(IdFields::MAX_VERSION),
                    context: "",
                };
                ApiError::invalid_param("version", e)
            })?;
    }
    let id = app
        .issuer
        .make(&fields)
        .map_err(|e| ApiError::invalid_param(e.field(), &e))?;
    Ok(response::decimal(id))
}
