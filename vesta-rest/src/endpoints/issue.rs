//! `/genid` and `/genids`: IDs through the connection's [`Flow`](vesta_embed::Flow) of the async
//! issuer. Answered at once while the time unit has sequence left; otherwise the request waits,
//! without blocking a worker, for a later unit boundary where waiting requests are served in
//! turns across connections, or answers 503 after `server.max_wait_ms`.

use hyper::Response;
use vesta_core::{Clock, IdBatch, IdRun};
use vesta_embed::IssueError;

use crate::app::App;
use crate::error::ApiError;
use crate::query::Query;
use crate::response::{self, Body};
use crate::router::Endpoint;

/// A checked ID request: how many IDs, and which endpoint's answer shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IdRequest {
    /// `/genid` (one ID as text) or `/genids` (a JSON list).
    pub endpoint: Endpoint,
    /// How many IDs.
    pub count: u64,
}

/// Checks the query of `/genid` (none) or `/genids` (`count`, 1..=`server.max_batch`).
pub fn parse<C: Clock + 'static>(
    app: &App<C>,
    endpoint: Endpoint,
    query: Option<&str>,
) -> Result<IdRequest, ApiError> {
    let count = if endpoint == Endpoint::Genids {
        let q = Query::parse(query, "/genids", &["count"])?;
        parse_count(q.required("count")?, app.max_batch)?
    } else {
        if query.is_some_and(|q| !q.is_empty()) {
            Query::parse(query, "/genid", &[])?;
        }
        1
    };
    Ok(IdRequest { endpoint, count })
}

/// The response to `request` once its IDs (or the issuer's refusal) are there: the ID as
/// decimal text for `/genid`, `{"ids": ["…", …]}` for `/genids` (strings: JavaScript numbers
/// lose precision above 2^53), in issue order.
pub fn answer<C: Clock + 'static>(
    app: &App<C>,
    request: IdRequest,
    ids: Result<IdBatch, IssueError>,
) -> Result<Response<Body>, ApiError> {
    let ids = ids?;
    app.metrics.issued(ids.len());
    if request.endpoint == Endpoint::Genids {
        return Ok(response::json(ids_json(ids.runs(), ids.len())));
    }
    let id = ids
        .iter()
        .next()
        .ok_or_else(|| ApiError::internal("the issuer answered no ID"))?;
    Ok(response::decimal(id))
}

/// `count` as 1..=max; the error names the parameter and the allowed range.
fn parse_count(text: &str, max: u64) -> Result<u64, ApiError> {
    let digits = text.strip_prefix('-').unwrap_or(text);
    let numeric = !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit());
    match text.parse::<u64>() {
        Ok(n) if (1..=max).contains(&n) => Ok(n),
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

/// The JSON body, written directly: 10,000 IDs take ~230 KB and no per-ID allocation.
fn ids_json(runs: &[IdRun], count: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(10 + usize::try_from(count).unwrap_or(0) * 23);
    out.extend_from_slice(b"{\"ids\":[");
    let mut buf = itoa::Buffer::new();
    let mut first = true;
    for id in runs.iter().flat_map(IdRun::iter) {
        if !first {
            out.push(b',');
        }
        first = false;
        out.push(b'"');
        out.extend_from_slice(buf.format(id).as_bytes());
        out.push(b'"');
    }
    out.extend_from_slice(b"]}");
    out
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
        ] {
            assert_eq!(parse_count(bad, 10).unwrap_err().message, msg);
        }
    }

    #[test]
    fn ids_are_json_strings_in_order() {
        let runs = [
            IdRun { first: 5, count: 2 },
            IdRun {
                first: u64::MAX,
                count: 1,
            },
        ];
        let v: serde_json::Value = serde_json::from_slice(&ids_json(&runs, 3)).unwrap();
        let step = IdRun::STEP;
        assert_eq!(
            v,
            serde_json::json!({"ids": ["5", (5 + step).to_string(), u64::MAX.to_string()]})
        );
    }
}
