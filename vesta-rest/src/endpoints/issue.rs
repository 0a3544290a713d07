//! `/genid` and `/genids`: IDs through the connection's [`Flow`](vesta_embed::Flow) of the async
//! issuer. Answered at once while the time unit has sequence left; otherwise the request waits,
//! without blocking a worker, for a later unit boundary where waiting requests are served in
//! turns across connections, or answers 503 after `server.max_wait_ms`. A `/genids` answer
//! reserves its share of the unsent-bytes budget before any ID is issued and is written in
//! chunks as the client takes it ([`Body::ids_in`]).

use hyper::Response;
use vesta_core::{Clock, Form, IdBatch};
use vesta_embed::IssueError;

use crate::app::App;
use crate::budget::Reservation;
use crate::endpoints::metrics::METRICS_HEADROOM_BYTES;
use crate::error::ApiError;
use crate::query::Query;
use crate::response::{self, Body};
use crate::router::Endpoint;

/// A checked ID request: how many IDs and, for `/genids` (a JSON list, where `/genid` answers
/// one ID as text), the budget its answer may use.
#[derive(Debug)]
pub struct IdRequest {
    /// How many IDs.
    pub count: u64,
    /// What the `/genids` answer holds of the unsent-bytes budget.
    pub reservation: Option<Reservation>,
    /// Leaf's snowflake path (shortened), when the answer is Leaf's.
    pub leaf_path: Option<String>,
    /// How each ID is written (`?format=`, default decimal).
    pub form: Form,
}

/// `?format=`: decimal (default), base32, base62 or hex.
fn form_of(q: &Query<'_>) -> Result<Form, ApiError> {
    match q.get("format") {
        None => Ok(Form::Decimal),
        Some(text) => text
            .parse::<Form>()
            .map_err(|e| ApiError::invalid_param("format", e)),
    }
}

/// Checks the query of `/genid` (none) or `/genids` (`count`, 1..=`server.max_batch`), and
/// reserves the budget of a `/genids` answer (503 when it is used up).
pub fn parse<C: Clock + 'static>(
    app: &App<C>,
    endpoint: Endpoint,
    query: Option<&str>,
    path: &str,
) -> Result<IdRequest, ApiError> {
    if endpoint == Endpoint::LeafSnowflake {
        // Leaf ignores the key and any query string (cache busters).
        let layout = app.issuer.layout();
        if !crate::endpoints::leaf::serves(layout) {
            return Err(crate::endpoints::leaf::not_served(
                layout,
                "/api/snowflake/get/{key}",
            ));
        }
        return Ok(IdRequest {
            count: 1,
            reservation: None,
            leaf_path: Some(crate::query::shorten(path).into_owned()),
            form: Form::Decimal,
        });
    }
    if endpoint == Endpoint::Genids {
        let q = Query::parse(query, "/genids", &["count", "format"])?;
        let count = parse_count(q.required("count")?, app.max_batch)?;
        let form = form_of(&q)?;
        let reservation = app
            .budget
            .reserve_leaving(Body::ids_reservation(count), METRICS_HEADROOM_BYTES)?;
        return Ok(IdRequest {
            count,
            reservation: Some(reservation),
            leaf_path: None,
            form,
        });
    }
    let form = match query.filter(|q| !q.is_empty()) {
        Some(_) => form_of(&Query::parse(query, "/genid", &["format"])?)?,
        None => Form::Decimal,
    };
    Ok(IdRequest {
        count: 1,
        reservation: None,
        leaf_path: None,
        form,
    })
}

/// The response to `request` once its IDs (or the issuer's refusal) are there: the ID as
/// decimal text for `/genid`, `{"ids": ["…", …]}` for `/genids` (strings: JavaScript numbers
/// lose precision above 2^53), in issue order.
pub fn answer<C: Clock + 'static>(
    app: &App<C>,
    request: IdRequest,
    ids: Result<IdBatch, IssueError>,
) -> Result<Response<Body>, ApiError> {
    if let Some(path) = &request.leaf_path {
        let id = ids.map(|b| b.iter().next());
        if let Ok(Some(_)) = id {
            app.metrics.issued(1);
        }
        let id =
            id.and_then(|id| id.ok_or_else(|| IssueError::Unavailable("no ID came back".into())));
        return Ok(crate::endpoints::leaf::snowflake_answer(id, path));
    }
    let ids = ids?;
    app.metrics.issued(ids.len());
    if let Some(reservation) = request.reservation {
        let body = Body::ids_in(&ids, reservation, request.form);
        return Ok(response::with_body(response::APPLICATION_JSON, body));
    }
    let id = ids
        .iter()
        .next()
        .ok_or_else(|| ApiError::internal("the issuer answered no ID"))?;
    Ok(response::in_form(id, request.form))
}

/// `count` as 1..=max, in plain decimal digits (no sign, as every integer parameter); the error
/// names the parameter and the allowed range.
pub(crate) fn parse_count(text: &str, max: u64) -> Result<u64, ApiError> {
    let digits = text.strip_prefix('-').unwrap_or(text);
    let numeric = !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit());
    match text.parse::<u64>() {
        Ok(n) if numeric && (1..=max).contains(&n) => Ok(n),
        _ if numeric => Err(ApiError::invalid_param(
            "count",
            format_args!(
                "count {} is out of range: allowed 1..={max}",
                crate::query::shorten(text)
            ),
        )),
        _ => Err(ApiError::invalid_param(
            "count",
            format_args!(
                "`{}` is not an integer: expected 1..={max}",
                crate::query::shorten(text)
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn count_is_checked_with_a_clear_message() {
        assert_eq!(parse_count("1", 10), Ok(1));
        assert_eq!(parse_count("10", 10), Ok(10));
        for (bad, msg) in [
            (
                "0",
                "invalid parameter count: count 0 is out of range: allowed 1..=10",
            ),
            (
                "11",
                "invalid parameter count: count 11 is out of range: allowed 1..=10",
            ),
            (
                "-3",
                "invalid parameter count: count -3 is out of range: allowed 1..=10",
            ),
            (
                "99999999999999999999999",
                "invalid parameter count: count 99999999999999999999999 is out of range: allowed 1..=10",
            ),
            (
                "ten",
                "invalid parameter count: `ten` is not an integer: expected 1..=10",
            ),
            (
                "",
                "invalid parameter count: `` is not an integer: expected 1..=10",
            ),
            (
                "+5",
                "invalid parameter count: `+5` is not an integer: expected 1..=10",
            ),
        ] {
            assert_eq!(parse_count(bad, 10).unwrap_err().message, msg);
        }
    }
}
